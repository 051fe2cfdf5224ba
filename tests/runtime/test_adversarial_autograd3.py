"""Differential checks against PyTorch of autograd-API corners (each failed before its fix):
a tensor hook that changes its gradient's dtype or size, in-place writes to views of the
outputs of split / unbind (PyTorch forbids them through any further view too, naming the
view's op), .grad assignment errors, float()/int()/bool() of tensors that are not one
element, size(dim) out of range, backward() of a tensor that does not require grad,
backward(inputs=[]) and jacobian(strict=True). Compared: the exception type and the first
line of its message (llgrad names its tensor types llgrad.FloatTensor where PyTorch says
torch.FloatTensor)."""
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _error(lib, fn):
    with pytest.raises(Exception) as e:
        fn(lib)
    return type(e.value).__name__, str(e.value).splitlines()[0].replace("torch.", "llgrad.")


def same_error(fn):
    assert _error(llgrad, fn) == _error(torch, fn)


def _leaf(L):
    return L.tensor([1.0, 2.0, 3.0], requires_grad=True)


def _hooked(hook, on_leaf=False):
    def program(L):
        a = _leaf(L)
        b = a if on_leaf else a.exp()
        b.register_hook(hook)
        (b * 2).sum().backward()
    return program


def _no_grad_hook(g):
    return g[:2]


@pytest.mark.parametrize("fn", [
    _hooked(lambda g: g.double()),
    _hooked(lambda g: g.double(), on_leaf=True),
    _hooked(_no_grad_hook),
    _hooked(_no_grad_hook, on_leaf=True),
    _hooked(lambda g: g.reshape(3, 1)),
])
def test_tensor_hook_may_not_change_dtype_or_size(fn):
    same_error(fn)


def test_tensor_hook_result_still_replaces_the_gradient():
    for lib in (torch, llgrad):
        a = _leaf(lib)
        b = a * 2
        b.register_hook(lambda g: g * 3)
        b.sum().backward()
        assert a.grad.tolist() == [6.0, 6.0, 6.0]


def _split_then(write):
    def program(L):
        c = L.ones(2, 2, requires_grad=True) * 1
        write(L, c)
    return program


@pytest.mark.parametrize("fn", [
    _split_then(lambda L, c: c.split(1)[0].mul_(2)),
    _split_then(lambda L, c: c.split(1)[0][0].mul_(2)),
    _split_then(lambda L, c: c.split(1)[0].view(2).add_(1)),
    _split_then(lambda L, c: c.unbind(1)[0][1:].zero_()),
    _split_then(lambda L, c: c.chunk(2)[1].t().mul_(2)),
    _split_then(lambda L, c: c.unbind(0)[1].copy_(L.zeros(2))),
])
def test_views_of_multi_output_views_may_not_be_written(fn):
    same_error(fn)


def test_multi_output_views_that_may_be_written():
    for lib in (torch, llgrad):
        c = lib.ones(2, 2, requires_grad=True) * 1
        c.split(1)[0].detach()[0].mul_(2)          # (detached: no history to get wrong)
        with lib.no_grad():
            c.unbind(0)[1][0].mul_(3)
        d = lib.ones(2, 2)
        d.unbind(0)[0][1].add_(4)                  # (nothing requires grad)
        assert c.tolist() == [[2.0, 2.0], [3.0, 1.0]] and d.tolist() == [[1.0, 5.0], [1.0, 1.0]]


def _set_grad(value):
    def program(L):
        a = _leaf(L)
        a.grad = value(L)
    return program


@pytest.mark.parametrize("fn", [
    _set_grad(lambda L: L.ones(2)),
    _set_grad(lambda L: L.ones(3, dtype=L.float64)),
    _set_grad(lambda L: L.ones(3, dtype=L.int64)),
    lambda L: float(L.tensor([1.5, 2.5])),
    lambda L: int(L.tensor([1, 2])),
    lambda L: bool(L.tensor([])),
    lambda L: L.zeros(2, 3).size(2),
    lambda L: L.zeros(2, 3).size(-3),
    lambda L: L.tensor(1.0).size(0),
    lambda L: L.tensor([1.0, 2.0]).backward(),
    lambda L: (_leaf(L) * 2).sum().backward(inputs=[]),
    lambda L: L.autograd.functional.jacobian(lambda x: L.ones(2), L.ones(3), strict=True),
    lambda L: L.autograd.functional.jacobian(lambda x, y: x * 2, (L.ones(2), L.ones(2)),
                                             strict=True),
    lambda L: L.autograd.functional.jacobian(lambda x: (x * 2, x.detach()), L.ones(2),
                                             strict=True),
])
def test_errors(fn):
    same_error(fn)
