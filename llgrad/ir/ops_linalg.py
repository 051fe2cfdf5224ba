"""linalg.vector_norm (PyTorch's linalg_vector_norm, behind torch.norm, Tensor.norm and
linalg.matrix_norm('fro')): ord 2, 1, inf, -inf, 0 or any other p, over `dim` (None: all
dims, else a tuple of non-negative ints). Its gradient is PyTorch's norm_backward; native
code computes it as the primitive ops of its definition (the decomposition below)."""
import math

import numpy as np

from .np_sums import cascade_sum
from .optable import defop


def _total(v, dim, keepdim):
    """np.sum(v, axis=dim, keepdims=keepdim), in blocks along a long axis NumPy adds in
    sequence (np_sums.py; native code's sums add in float64)."""
    r = cascade_sum(v, dim, keepdim)
    # (np.add.reduce: np.sum's additions without its Python-level dispatch)
    return np.add.reduce(v, axis=dim, keepdims=keepdim) if r is None else r


def _vector_norm(x, ord=2, dim=None, keepdim=False):
    kw = {"axis": dim, "keepdims": keepdim}
    dt = x.dtype
    if dt == np.float16:    # (accumulated in float32, as PyTorch: |x|**3 overflows float16)
        x = x.astype(np.float32)
    a = np.abs(x) if ord != 2 else None     # (2: x * x, no pass for |x|)
    if ord == 2:
        r = np.sqrt(_total(x * x, dim, keepdim))
    elif ord == 1:
        r = _total(a, dim, keepdim)
    elif ord == math.inf:
        r = np.max(a, **kw)
    elif ord == -math.inf:
        r = np.min(a, **kw)
    elif ord == 0:
        r = np.sum(x != 0, dtype=x.dtype, **kw)
    else:
        r = _total(a ** ord, dim, keepdim) ** (1.0 / ord)
    return np.asarray(r, dtype=dt)


def _unreduced(t, ndim, dim, keepdim):
    if keepdim or ndim == 0:
        return t
    for d in sorted(range(ndim) if dim is None else dim):
        t = t.unsqueeze(d)
    return t


def _vector_norm_vjp(c, g):
    """PyTorch's norm_backward (torch/csrc/autograd/FunctionsManual.cpp), case by case."""
    x, p, nd = c.self, c.ord, len(c.shape(0))
    if p == 0:          # (PyTorch's: an undefined gradient, so x.grad stays None)
        return (None,)
    g = _unreduced(g, nd, c.dim, c.keepdim)
    norm = _unreduced(c.result, nd, c.dim, c.keepdim)
    if p == 1:
        return (x.sign() * g,)
    # (the zeros PyTorch masks after dividing by them are masked before here: no 0/0)
    nzero = norm == 0
    safe = norm.masked_fill(nzero, 1)
    if p == 2:
        return (g * (x / safe).masked_fill(nzero, 0),)
    if math.isinf(p):
        a = x.abs()
        mask = (a == norm).logical_or(a.isnan())
        dims = tuple(range(nd)) if c.dim is None else c.dim
        return (x.sign() * ((g / mask.sum(dims, keepdim=True)) * mask),)
    if p < 1:
        xzero = x == 0
        scaled = x.sign() * x.abs().masked_fill(xzero, 1).pow(p - 1).masked_fill(xzero, 0)
        return (scaled * g * norm.pow(1 - p),)
    scaled = x.sign() * x.abs().pow(p - 1) if p < 2 else x * x.abs().pow(p - 2)
    return (scaled * (g / safe.pow(p - 1)).masked_fill(nzero, 0),)


def _vector_norm_primitives(node, emit):
    x = node.inputs[0]
    p = node.attrs.get("ord", 2)
    kw = {"dim": node.attrs.get("dim"), "keepdim": node.attrs.get("keepdim", False)}
    if p == 2:
        return emit("sqrt", [emit("sum", [emit("mul", [x, x])], **kw)])
    if p == 0:
        nz = emit("to_dtype", [emit("ne", [x, 0])], dtype=x.type.dtype)
        return emit("sum", [nz], **kw)
    a = emit("abs", [x])
    if p == 1:
        return emit("sum", [a], **kw)
    if math.isinf(p):
        return emit("amax" if p > 0 else "amin", [a], **kw)
    return emit("pow", [emit("sum", [emit("pow", [a, p])], **kw), 1.0 / p])


defop("linalg_vector_norm", _vector_norm, kind="reduce", save=("self", "result"),
      grad_fn="LinalgVectorNormBackward0", vjp=_vector_norm_vjp,
      decompose=_vector_norm_primitives)
