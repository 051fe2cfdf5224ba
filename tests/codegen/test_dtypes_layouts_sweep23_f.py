"""Gradients of compiled functions whose leaves are strided views (transposed, stepped from an
offset, expanded through a stride-0 dim, at a storage offset), float64 and float32: the
compiled forward and backward (native code, both) against eager's and torch's values and
gradients. One compiled function runs every case of a dtype and pair of layouts."""
import warnings

import numpy as np
import pytest

import llgrad
import sweep23_harness as H

torch = pytest.importorskip("torch")

CASES = {
    "exp": lambda m, x, y: m.exp(x) * y, "div": lambda m, x, y: x / (y.abs() + 1),
    "pow": lambda m, x, y: x.abs() ** y, "maximum": lambda m, x, y: m.maximum(x, y),
    "where": lambda m, x, y: m.where(x > y, x * 2, y), "sum0": lambda m, x, y: (x * y).sum(0),
    "mean": lambda m, x, y: (x + y).mean(-1), "amax": lambda m, x, y: m.amax(x * y, -1),
    "softmax": lambda m, x, y: m.softmax(x, -1) * y, "mm": lambda m, x, y: x @ y.t(),
    "cumsum": lambda m, x, y: (x * y).cumsum(-1), "sort": lambda m, x, y: x.sort(-1)[0] * y,
    "tanh": lambda m, x, y: m.tanh(x - y), "sigmoid": lambda m, x, y: m.sigmoid(x) * m.sigmoid(y),
    "norm": lambda m, x, y: m.linalg.vector_norm(x - y, dim=-1),
    "logsumexp": lambda m, x, y: m.logsumexp(x * y, -1),
    "clamp": lambda m, x, y: x.clamp(-1, 1) * y, "gelu": lambda m, x, y: m.nn.functional.gelu(x) + y,
    "var": lambda m, x, y: (x * y).var(-1), "prod": lambda m, x, y: (x * y).prod(-1),
    "flip": lambda m, x, y: x.flip(-1) * y, "index": lambda m, x, y: x[m.tensor([2, 0])] * y[:2],
    "cat": lambda m, x, y: m.cat([x, y], 0) ** 2,
    "layer_norm": lambda m, x, y: m.nn.functional.layer_norm(x, (4,)) * y,
    "mse": lambda m, x, y: m.nn.functional.mse_loss(x, y), "atan2": lambda m, x, y: m.atan2(x, y + 5),
    "lerp": lambda m, x, y: m.lerp(x, y, 0.3), "addcmul": lambda m, x, y: m.addcmul(x, x, y, value=0.5),
    "sqrt": lambda m, x, y: (x * x + 1).sqrt() * y, "min_dim": lambda m, x, y: (x * y).min(-1)[0],
    "gather": lambda m, x, y: m.gather(x, 1, m.tensor([[0, 3], [1, 1], [2, 0]])) * y[:, :2],
    "mixed_dtypes": lambda m, x, y: x * y.to(m.float32) if x.dtype == m.float64
    else x.double() * y,
}
LAYOUTS = ("contiguous", "transposed", "stepped", "expanded", "offset")
PAIRS = [(a, b) for a in LAYOUTS for b in LAYOUTS if a != "contiguous" or b != "contiguous"]
TOL = {"float64": dict(rtol=1e-9, atol=1e-11), "float32": dict(rtol=3e-5, atol=3e-5)}


def _leaves(m, dtype, lx, ly, k):
    """x, y: leaves that are strided views (detach keeps the layout)."""
    x = H.make(m, dtype, lx, H.values(dtype, H.SHAPE, 11 + k)).detach().requires_grad_()
    y = H.make(m, dtype, ly, H.values(dtype, H.SHAPE, 12 + k)).detach().requires_grad_()
    return x, y


def _cotangent(m, out, k):
    return m.tensor(np.random.default_rng(k).standard_normal(tuple(out.shape)), dtype=out.dtype)


def _np(t):
    return t.detach().numpy()


def _eager(m, dtype, cases):
    res = []
    for k, (name, f, lx, ly) in enumerate(cases):
        x, y = _leaves(m, dtype, lx, ly, k)
        out = f(m, x, y)
        gx, gy = m.autograd.grad(out, (x, y), _cotangent(m, out, k))
        res.append((_np(out), _np(gx), _np(gy)))
    return res


def check(dtype, layout_pairs):
    cases = [(name, f) + layout_pairs[k % len(layout_pairs)]
             for k, (name, f) in enumerate(CASES.items())]
    want, eager = _eager(torch, dtype, cases), _eager(llgrad, dtype, cases)

    def batch(*xs):
        return tuple(f(llgrad, xs[2 * k], xs[2 * k + 1]) for k, (_, f, _, _) in enumerate(cases))

    cf = llgrad.compile(batch)
    for _ in range(2):                  # trace, then native code
        xs = [t for k, (_, _, lx, ly) in enumerate(cases)
              for t in _leaves(llgrad, dtype, lx, ly, k)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = cf(*xs)
        cf.wait()
    grads = llgrad.autograd.grad(outs, xs, [_cotangent(llgrad, o, k) for k, o in enumerate(outs)])
    kernels = [k for e in cf.entries for k in e.kernels.values()]
    assert sorted(e for e in cf.entries[0].kernels) == ["backward", "forward"]
    assert all(isinstance(k, H.Kernel) for k in kernels), kernels
    for k, (name, _, lx, ly) in enumerate(cases):
        got = (_np(outs[k]), _np(grads[2 * k]), _np(grads[2 * k + 1]))
        for what, g, e, w in zip(("value", "grad x", "grad y"), got, eager[k], want[k]):
            label = f"{name}[{dtype},{lx},{ly}] {what}"
            np.testing.assert_allclose(g, e, err_msg=label + " compiled~eager", **TOL[dtype])
            np.testing.assert_allclose(e, w, err_msg=label + " eager~torch", **TOL[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_compiled_grads_of_strided_leaves_layouts_by_turns(dtype):
    check(dtype, PAIRS)


@pytest.mark.slow
@pytest.mark.parametrize("layouts", PAIRS, ids="-".join)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_compiled_grads_of_strided_leaves_every_layout_pair(dtype, layouts):
    check(dtype, [layouts])
