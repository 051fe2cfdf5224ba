"""Ops torch gives no derivative (floor_divide, `//`): the result of a tensor that requires
grad has PyTorch's NotImplemented node, and a backward through it raises PyTorch's error,
eagerly and compiled (such a call runs eagerly, with a warning); div with
rounding_mode='floor' keeps DivBackward2 (zero gradients), as torch."""
import warnings

import numpy as np
import pytest

import llgrad

CASES = [
    ("x // 2", lambda m, x: x // 2),
    ("2 // x", lambda m, x: 2 // x),
    ("floor_divide", lambda m, x: m.floor_divide(x, m.tensor(2.0))),
    ("floor_divide_", lambda m, x: (x * 1).floor_divide_(2)),
]


def _x(m):
    return m.tensor([1.5, 2.5, -3.0], requires_grad=True)


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_no_derivative_eager(name, f):
    x = _x(llgrad)
    y = f(llgrad, x)
    assert type(y.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match=r"derivative for aten::floor_divide_? is not "
                                           r"implemented"):
        (y * 3).sum().backward()
    assert x.grad is None


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_no_derivative_matches_torch(name, f):
    torch = pytest.importorskip("torch")
    y, yt = f(llgrad, _x(llgrad)), f(torch, _x(torch))
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    assert type(y.grad_fn).__name__ == type(yt.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError) as got:
        y.sum().backward()
    with pytest.raises(RuntimeError) as want:
        yt.sum().backward()
    assert str(got.value) == str(want.value)


def test_floor_rounding_div_keeps_its_zero_gradient():
    x = _x(llgrad)
    y = llgrad.div(x, 2, rounding_mode="floor")
    assert type(y.grad_fn).__name__ == "DivBackward2"
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_integer_floor_divide_has_no_node():
    assert (llgrad.tensor([5, 7]) // 2).grad_fn is None


def test_compiled_runs_eagerly_and_raises_at_backward():
    f = llgrad.compile(lambda x: (x // 2) * 3 + x)
    x = _x(llgrad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            out = f(x)
            np.testing.assert_array_equal(out.detach().numpy(),
                                          ((x.detach() // 2) * 3 + x.detach()).numpy())
            with pytest.raises(RuntimeError, match="derivative for aten::floor_divide"):
                out.sum().backward()
    assert any("no derivative" in str(w.message) for w in caught)
    assert x.grad is None


def test_compiled_step_through_it_raises_as_eager():
    def step(x):
        loss = (x // 2).sum()
        loss.backward()
        return loss
    f = llgrad.compile(step)
    x = _x(llgrad)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="derivative for aten::floor_divide"):
            f(x)
    assert x.grad is None


def test_without_grad_the_compiled_function_stays_compiled():
    f = llgrad.compile(lambda x: (x // 2) * 3)
    x = llgrad.tensor([1.5, 2.5, -3.0])
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), [0.0, 3.0, -6.0])
    assert f.n_traces == 1 and not f.graph_breaks
