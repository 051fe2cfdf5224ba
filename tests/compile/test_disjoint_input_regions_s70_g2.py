"""Inputs under Storages of their own over disjoint bytes of one buffer (the parameters
vector_to_parameters makes of one vector) are traced as separate memories
(tracer/bindings.py regions): a step writing them compiles, equal to eager across calls;
a tensor reaching the buffer under another Storage (p.data) finds its own input's memory,
and inputs that overlap still run eagerly, saying why."""
import warnings

import numpy as np
import pytest

import llgrad


def _model(lib):
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
        lin.bias.fill_(0.1)
    vec = lib.nn.utils.parameters_to_vector(lin.parameters()).detach().clone()
    lib.nn.utils.vector_to_parameters(vec, lin.parameters())
    return lin, vec


def _run(lib, compiled, by_data=False, read_vec=False):
    lin, vec = _model(lib)
    x = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])

    whole = [vec] if read_vec else []      # (captured only then: an input of the step)

    def step(x):
        for p in lin.parameters():
            p.grad = None
        loss = lin(x).pow(2).sum()
        for v in whole:
            loss = loss + v.sum()
        loss.backward()
        with lib.no_grad():
            for p in lin.parameters():
                (p.data if by_data else p).sub_(0.1 * p.grad)
        return loss.detach()
    f = llgrad.compile(step, backend="interpret") if compiled else step
    losses = [f(x).item() for _ in range(4)]
    return losses, vec.numpy().copy(), f


@pytest.mark.parametrize("by_data", [False, True])
def test_disjoint_parameters_of_one_vector_compile_equal_to_eager(by_data):
    want = _run(llgrad, False, by_data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no "inputs share memory" eager call)
        got = _run(llgrad, True, by_data)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])      # (written through the views)
    assert got[2].entries and got[2].n_traces <= 2     # (.grad None, then set)


def test_the_same_numbers_as_torch():
    torch = pytest.importorskip("torch")
    want = _run(torch, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _run(llgrad, True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-7)


def test_a_read_of_the_whole_vector_still_runs_eagerly():
    want = _run(llgrad, False, read_vec=True)
    with pytest.warns(UserWarning, match="share"):
        got = _run(llgrad, True, read_vec=True)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])


def test_overlapping_inputs_of_one_buffer_still_run_eagerly():
    buf = np.arange(6, dtype=np.float32)
    a, b = llgrad.from_numpy(buf[:4]), llgrad.from_numpy(buf[2:])

    def f(a, b):
        a.add_(1)
        return b * 2
    cf = llgrad.compile(f, backend="interpret")
    with pytest.warns(UserWarning, match="share"):
        out = cf(a, b)
    np.testing.assert_array_equal(out.numpy(), [6, 8, 8, 10])
    np.testing.assert_array_equal(buf, [1, 2, 3, 4, 4, 5])
