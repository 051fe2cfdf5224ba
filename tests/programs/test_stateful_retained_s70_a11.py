"""retain_grad and tensor hooks meeting in-place writes and views: a retained or hooked
tensor written in place before the backward, retain_grad on a view, a hooked tensor written
through a view, retain_grad over two backwards, autograd.grad of a non-leaf: torch, llgrad
eager and llgrad.compile over six calls (stateful_harness_s70_a11.check)."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case)


def xy(i):
    return randn(10 + i, 3, 4), randn(20 + i, 3, 2)


def _w(lib):
    return lib.tensor(randn(1, 4, 2), requires_grad=True)


def retain_then_inplace(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        h.retain_grad()
        h.mul_(2)           # (the retained gradient is the written version's)
        (h * y).sum().backward()
        return h.grad
    return dict(step=step, state=lambda: [w.grad])


def hook_then_inplace(lib):
    w = _w(lib)
    seen = []

    def step(x, y):
        h = x @ w
        h.register_hook(lambda g: seen.append(g.sum().item()))
        h.add_(1)
        (h * y).sum().backward()
        return h
    return dict(step=step, state=lambda: [w.grad, len(seen), seen[-1] if seen else 0])


def retain_on_view(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        v = h[:, 0]
        v.retain_grad()
        (h.tanh() * y).sum().backward()
        return v.grad
    return dict(step=step, state=lambda: [w.grad])


def inplace_on_view_with_hook(lib):
    w = _w(lib)

    def step(x, y):
        h = (x @ w).clone()
        h.register_hook(lambda g: g * 3)
        h[0].mul_(5)
        (h.sin() * y).sum().backward()
        return h
    return dict(step=step, state=lambda: [w.grad])


def retain_grad_twice_backward(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        h.retain_grad()
        loss = (h.exp() * y).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return h.grad
    return dict(step=step, state=lambda: [w.grad])


def grad_of_nonleaf(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        g, = lib.autograd.grad((h * y).sum(), h)
        return g, h.grad is None
    return dict(step=step, state=lambda: [w.grad])


CASES = [retain_then_inplace, hook_then_inplace, retain_on_view, inplace_on_view_with_hook,
         retain_grad_twice_backward, grad_of_nonleaf]


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_retained_and_hooked(make):
    check(make, xy, atol=1e-5)
