"""torch.autograd.graph.allow_mutation_on_saved_tensors on llgrad, against PyTorch: tensors
saved for backward and then written in place (through themselves, a view, a no_grad write
to a leaf, x.mul_(x) whose operand is its own target) give the gradients of the values they
had when saved; double backward through them; what the context yields; nesting; backward
after the context exits; and a compiled function called inside it (it runs eagerly, as
under any saved-tensor hooks)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_A = np.array([0.5, 1.5, -2.0])


def _leaf(lib):
    return lib.tensor(_A, dtype=lib.float64, requires_grad=True)


def _mutations(lib):
    """Each block saves something, writes it in place, then runs backward; the gradients
    (and the written values) in order."""
    out = []
    a = _leaf(lib)
    with lib.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
        out.append(type(ctx).__name__)
        b = a.clone()
        loss = (b ** 2).sum()
        b.sin_()                            # pow saved b
        loss.backward()
        out += [a.grad.clone(), b.detach()]
        x = a * 1
        y = x.exp()
        x.mul_(3)                           # exp saved its result, not x: no copy read
        y.mul_(2)                           # the saved result written
        y.sum().backward()
        out.append(a.grad.clone())
        x = a * 1
        loss = (x * x).sum()
        x[:1].mul_(5)                       # a write through a view of what mul saved
        loss.backward()
        out.append(a.grad.clone())
        x = a * 1
        x.mul_(x)                           # the operand is the tensor written
        x.sum().backward()
        out.append(a.grad.clone())
        with lib.no_grad():
            a.mul_(2)                       # a leaf saved by mul, written under no_grad
        out.append(a.grad.clone())
    return out


def _double(lib):
    a = _leaf(lib)
    with lib.autograd.graph.allow_mutation_on_saved_tensors():
        x = a * 1
        y = (x * a).sin()
        x.zero_()
        g, = lib.autograd.grad(y.sum(), a, create_graph=True)
        h, = lib.autograd.grad(g.sum(), a)
    return [g.detach(), h]


def _leaf_written(lib):
    a = _leaf(lib)
    with lib.autograd.graph.allow_mutation_on_saved_tensors():
        loss = (a * a.exp()).sum()
        with lib.no_grad():
            a.add_(1)
        loss.backward()
    return [a.grad]


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, str):
            assert g == w
        else:
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(),
                                       rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("program", [_mutations, _double, _leaf_written])
def test_allow_mutation_on_saved_tensors_gives_torchs_gradients(program):
    _same(program(llgrad), program(torch))


def test_x_mul_x_under_allow_mutation_saves_the_operand_before_the_write():
    # (llgrad saves an in-place op's operands after the write; the operand that is the
    # target itself would hold x*x, giving 3x where the derivative is 2x)
    got, want = [], []
    for lib, res in ((llgrad, got), (torch, want)):
        a = _leaf(lib)
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            x = a * 1
            x.mul_(x)
            x.sum().backward()
        res.append(a.grad)
    _same(got, want)
    np.testing.assert_allclose(got[0].numpy(), 2 * _A)


def _error(fn):
    try:
        fn()
    except BaseException as e:      # (PyTorch raises an AssertionError)
        return type(e).__name__, str(e)
    return None


def test_backward_outside_the_context_and_nesting_raise_as_torch():
    for lib in (llgrad, torch):
        a = _leaf(lib)
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            b = a.clone()
            loss = (b ** 2).sum()
            b.sin_()
        got = _error(loss.backward)
        if lib is llgrad:
            ours = got
        else:
            assert ours == got and got[0] == "AssertionError"
    # (nesting: PyTorch's inner context also ends the outer one's state, its own quirk;
    # only the error is compared)
    for lib in (llgrad, torch):
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            got = _error(lambda: lib.autograd.graph.allow_mutation_on_saved_tensors()
                         .__enter__())
        if lib is llgrad:
            ours = got
        else:
            assert ours == got and got[0] == "RuntimeError"
    # the state is left clean: a new context works
    a = _leaf(llgrad)
    with llgrad.autograd.graph.allow_mutation_on_saved_tensors():
        b = a.clone()
        loss = (b ** 2).sum()
        b.sin_()
        loss.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * _A)


def test_without_the_context_the_write_still_raises():
    a = _leaf(llgrad)
    b = a.clone()
    loss = (b ** 2).sum()
    b.sin_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_compiled_function_inside_the_context_matches_eager():
    def f(x):
        y = x * 1
        return y, (y ** 2).sum()

    cf = llgrad.compile(f)
    want = []
    a = _leaf(torch)
    with torch.autograd.graph.allow_mutation_on_saved_tensors():
        y, loss = f(a)
        y.mul_(3)
        loss.backward()
    want.append(a.grad)
    for _ in range(2):
        a = _leaf(llgrad)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (the eager-run warning)
            with llgrad.autograd.graph.allow_mutation_on_saved_tensors():
                y, loss = cf(a)
                y.mul_(3)
                loss.backward()
        cf.wait()
        _same([a.grad], want)


def test_backward_in_another_thread_inside_the_context():
    # (PyTorch's flag is process-wide: a thread's backward reads the saved copies too)
    import threading

    got = []
    for lib in (llgrad, torch):
        a = _leaf(lib)
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            b = a * 1
            loss = (b * b).sum()
            b.add_(1)
            t = threading.Thread(target=loss.backward)
            t.start()
            t.join()
        got.append(a.grad)
    _same(got[:1], got[1:])
