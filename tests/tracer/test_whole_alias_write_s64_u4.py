"""A write into an alias that covers all of its root, laid out as the root is
(`buf.data.copy_(x)`, `w.view(w.shape).mul_(2)`: MADE's set_mask), is the root's new value
in the trace: no strided_scatter / strided_put / strided_gather through a flat buffer of
the root's memory (those took ~0.7 ms a step for MADE's two 784x500 masks). Partial and
re-laid-out aliases keep that path. Compiled calls equal eager's (values, the buffer after,
gradients)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

MOVES = ("strided_scatter", "strided_put", "strided_gather")


def _run(lib, write, compiled):
    lib.manual_seed(0)
    buf = lib.ones(5, 4)
    w = lib.randn(5, 4, requires_grad=True)
    src = lib.randn(5, 4)

    def f(k):
        write(buf, src * k)
        return (buf * w).sum() + buf[1:].sum()
    g = llgrad.compile(f) if compiled else f
    out = []
    for k in (1.0, 2.0, 2.0, 3.0):
        w.grad = None
        loss = g(lib.tensor(k))
        loss.backward()
        out.append((loss.item(), buf.numpy().copy(), w.grad.numpy().copy()))
    return out, g


WRITES = {
    "data copy_": lambda buf, x: buf.data.copy_(x),
    "view of all mul_": lambda buf, x: buf.view(buf.shape).copy_(x).mul_(2),
    "part of it": lambda buf, x: buf.data[1:].copy_(x[1:]),
    "transposed": lambda buf, x: buf.t().copy_(x.t() + 1),
}


# (each case builds its native code cold: the default run keeps two)
SLOW = {"view of all mul_", "part of it"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in WRITES])
def test_alias_writes_compiled_equal_eager(name):
    want, _ = _run(torch, WRITES[name], False)
    got, g = _run(llgrad, WRITES[name], True)
    for (a, b, c), (x, y, z) in zip(got, want):
        np.testing.assert_allclose(a, x, rtol=1e-6)
        np.testing.assert_allclose(b, y, rtol=1e-6)
        np.testing.assert_allclose(c, z, rtol=1e-6)
    forward = g.dump(llgrad.tensor(3.0)).split("== backward ==")[0]
    if name in ("data copy_", "view of all mul_"):
        assert not any(m in forward for m in MOVES), forward
