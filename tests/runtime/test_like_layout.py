"""zeros_like / ones_like / empty_like / full_like keep the input's layout
(memory_format=preserve_format) as PyTorch's, eagerly and in a compiled function."""
import numpy as np
import pytest

import llgrad

INPUTS = {
    "transposed": lambda L: L.arange(12.).reshape(3, 4).t(),
    "permuted": lambda L: L.arange(24.).reshape(2, 3, 4).permute(2, 0, 1),
    "sliced": lambda L: L.arange(24.).reshape(4, 6)[:, ::2],
    "expanded": lambda L: L.arange(3.).reshape(3, 1).expand(3, 4),
    "contiguous": lambda L: L.arange(6.).reshape(2, 3),
}
MAKERS = {
    "zeros_like": lambda L, t, **kw: L.zeros_like(t, **kw),
    "ones_like": lambda L, t, **kw: L.ones_like(t, **kw),
    "empty_like": lambda L, t, **kw: L.empty_like(t, **kw).fill_(3),
    "full_like": lambda L, t, **kw: L.full_like(t, 2.5, **kw),
}


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("fmt", [None, "contiguous_format", "preserve_format"])
def test_like_layout_as_torch(maker, kind, fmt):
    torch = pytest.importorskip("torch")
    got = []
    for lib in (torch, llgrad):
        kw = {} if fmt is None else {"memory_format": getattr(lib, fmt)}
        r = MAKERS[maker](lib, INPUTS[kind](lib), **kw)
        got.append((r.stride(), r.is_contiguous(), r.is_leaf, r._base is None, r.numpy().tolist()))
    assert got[1] == got[0]


def test_like_requires_grad_is_a_leaf():
    x = llgrad.ones(3, 4).t()
    r = llgrad.zeros_like(x, requires_grad=True)
    assert r.is_leaf and r.requires_grad and r.stride() == (1, 4)
    (r * 2).sum().backward()
    assert r.grad is not None and np.array_equal(r.grad.numpy(), np.full((4, 3), 2.0))


def test_like_layout_compiled_equals_eager():
    def f(x):
        z = llgrad.zeros_like(x)
        z.add_(x * 2)
        return z, llgrad.full_like(x, 1.5) + x
    cf = llgrad.compile(f)
    for _ in range(3):
        x = llgrad.randn(5, 4).t()
        want, got = f(x), cf(x)
        for w, g in zip(want, got):
            assert g.stride() == w.stride()
            assert np.array_equal(g.numpy(), w.numpy())
