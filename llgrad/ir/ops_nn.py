"""Matrix products and the functional layers (layer_norm, embedding, losses).
dropout and cross_entropy are compositions (see llgrad.nn.functional), as in PyTorch."""
import math

import numpy as np

from .geometry import broadcasts_to
from .graph import Value
from .index_bounds import check_index_range
from .np_matmul import matmul
from .optable import conj, defop

_add_reduce = np.add.reduce


# (each rule reads a saved operand only where its gradient needs it: PyTorch saves
# mat2 only for self's gradient, so x @ W with W changed in place before the backward is
# no error when x wants no gradient; reading it would check its version)
def column_major(c, name):
    """Whether the 2-D operand saved under name had strides (1, rows) at the forward (a
    transposed row-major matrix: a Linear's W.t()). PyTorch's mm backward then gives its
    gradient in that layout (mm_mat1_backward / mm_mat2_backward), so W's gradient comes out
    row-major and .grad keeps it without a transposing copy. Read from the saved slot without
    unpacking it: a layout, not the values, so no version check (PyTorch saves the strides
    apart)."""
    saved = getattr(c, "_saved", None)
    t = getattr(saved.get(name), "tensor", None) if isinstance(saved, dict) else None
    if t is None or not hasattr(t, "stride") or len(t.shape) != 2:
        return False
    s = t.stride()
    return s[0] == 1 and s[1] == t.shape[0]


def _grad_mat1(c, g, names):
    """g @ mat2^H, column-major where mat1 was (see column_major)."""
    mat2 = getattr(c, names[1])
    return conj(mat2).mm(g.t()).t() if column_major(c, names[0]) else g.mm(conj(mat2.t()))


def _grad_mat2(c, g, names):
    """mat1^H @ g, column-major where mat2 was (see column_major)."""
    mat1 = getattr(c, names[0])
    return g.t().mm(conj(mat1)).t() if column_major(c, names[1]) else conj(mat1.t()).mm(g)


def _mm_vjp(c, g):
    return (_grad_mat1(c, g, ("self", "mat2")) if c.needs(0) else None,
            _grad_mat2(c, g, ("self", "mat2")) if c.needs(1) else None)


def _bmm_vjp(c, g):
    return (g.bmm(conj(c.mat2.mT)) if c.needs(0) else None,
            conj(c.self.mT).bmm(g) if c.needs(1) else None)


def _matmul_vjp(c, g):
    # both operands have >= 2 dims here; broadcast batch dims are summed by the caller
    gb = None
    if c.needs(1):
        a = c.self
        if len(c.shape(0)) > 2 and len(c.shape(1)) == 2:
            # a stack times one matrix: the matrix's gradient is one product over the stack's
            # rows (PyTorch folds the stack into a matrix), not a product per matrix summed
            # (rows counted, not -1: an empty stack with an empty last dim is ambiguous)
            rows = math.prod(c.shape(0)[:-1])
            gb = conj(a.reshape(rows, c.shape(0)[-1]).mT).matmul(g.reshape(rows, c.shape(1)[-1]))
        else:
            gb = conj(a.mT).matmul(g)
    return (g.matmul(conj(c.other.mT)) if c.needs(0) else None, gb)


defop("mm", matmul, args=("self", "mat2"), save=("self", "mat2"), grad_fn="MmBackward0",
      vjp=_mm_vjp, functions=("mm",), complex=True, autocast="lower")
defop("bmm", matmul, args=("self", "mat2"), save=("self", "mat2"), grad_fn="BmmBackward0",
      vjp=_bmm_vjp, functions=("bmm",), complex=True, autocast="lower")
def _matmul(a, b):
    # a C-contiguous stack of matrices times one matrix is one product of the stack's rows
    # (NumPy's matmul makes a BLAS call per matrix of the stack, and copies a transposed
    # operand for each: a linear layer's (batch, tokens, features) input took 2x torch's)
    if a.ndim > 2 and b.ndim == 2 and a.size and a.shape[-1] == b.shape[0] \
            and a.flags.c_contiguous:
        return matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[1:])
    return matmul(a, b)


defop("matmul", _matmul, args=("self", "other"), save=("self", "other"),
      grad_fn="UnsafeViewBackward0", vjp=_matmul_vjp, functions=("matmul",), complex=True,
      autocast="lower")


def _addmm(bias, a, b, beta=1, alpha=1):
    if a.dtype == np.float16:   # (PyTorch's CPU gemm: float32 product, scales and sum, rounded
        f = np.float32          # once)
        return _addmm(np.asarray(bias, f), a.astype(f), b.astype(f), beta, alpha).astype(a.dtype)
    p = matmul(a, b)
    if alpha != 1:
        p = p * alpha
    if beta == 0:                       # the input is ignored (nan and inf in it too)
        return np.array(np.broadcast_to(p, p.shape), dtype=p.dtype)
    bias = bias if beta == 1 else bias * beta
    if broadcasts_to(np.shape(bias), p.shape):
        # p is the product's own fresh array: the bias is added into it (in the promoted
        # dtype and rounded to p's, as p + bias then the cast)
        np.add(p, bias, out=p, casting="unsafe")
        return p
    out = p + bias
    return np.array(np.broadcast_to(out, p.shape), dtype=p.dtype)


def _addmm_vjp(c, g):
    gs = None
    if c.needs(0):                      # summed to the input's shape by the caller
        gs = g if c.beta == 1 else g * conj(c.beta)
    ga = gb = None
    if c.needs(1):
        ga = _grad_mat1(c, g, ("mat1", "mat2"))
        ga = ga if c.alpha == 1 else ga * conj(c.alpha)
    if c.needs(2):
        gb = _grad_mat2(c, g, ("mat1", "mat2"))
        gb = gb if c.alpha == 1 else gb * conj(c.alpha)
    return gs, ga, gb


# beta * self + alpha * (mat1 @ mat2): F.linear with a bias on a matrix (PyTorch fuses it)
def _addmm_primitives(node, emit):
    """beta * self + alpha * (mat1 @ mat2), as the impl computes it: mm then add, so the
    scheduler fuses the bias into the elementwise group that follows (ir/decompose.py)."""
    bias, a, b = node.inputs[:3]
    beta, alpha = node.attrs.get("beta", 1), node.attrs.get("alpha", 1)
    y = emit("mm", [a, b])
    if alpha != 1:
        y = emit("mul", [y, alpha])
    if beta == 0:
        return y
    return emit("add", [y, emit("mul", [bias, beta]) if beta != 1 else bias], alpha=1)


defop("addmm", _addmm, args=("self", "mat1", "mat2"), save=("mat1", "mat2"),
      grad_fn="AddmmBackward0", vjp=_addmm_vjp, functions=("addmm",),
      decompose=_addmm_primitives, complex=True, autocast="lower")
defop("dot", lambda a, b: np.asarray(np.dot(a, b)), args=("self", "other"),
      save=("self", "other"), grad_fn="DotBackward0",
      vjp=lambda c, g: (g * conj(c.other) if c.needs(0) else None,
                        g * conj(c.self) if c.needs(1) else None),
      functions=("dot",), complex=True)
defop("mv", np.matmul, args=("self", "vec"), save=("self", "vec"), grad_fn="MvBackward0",
      vjp=lambda c, g: (g.unsqueeze(1) * conj(c.vec.unsqueeze(0)) if c.needs(0) else None,
                        conj(c.self.t()).mv(g) if c.needs(1) else None), functions=("mv",),
      complex=True)

# ---- normalisation ----------------------------------------------------------------------


def _layer_norm(x, w, b, normalized_ndim, eps):
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    dt = x.dtype
    if dt == np.float16:    # (computed in float32 and rounded once, as PyTorch's kernel)
        x, w, b = (None if a is None else a.astype(np.float32) for a in (x, w, b))
    with np.errstate(over="ignore", invalid="ignore"):   # (ndarray.mean warns as NumPy's module)
        mu = x.mean(axis=dims, keepdims=True)
        xc = x - mu
        var = (xc * xc).mean(axis=dims, keepdims=True)
    y = xc / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(dt, copy=False)


def _norm_vjp(g, x, w, dims, eps, reduce_dims):
    """layer_norm's backward (normalise over dims); training batch_norm's backward op
    runs these operations over (0, 2, ...) (ops_batch_norm.py)."""
    mu = x.mean(dims, keepdim=True)
    xc = x - mu
    rstd = ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
    xhat = xc * rstd
    gxhat = g * w if w is not None else g
    gx = rstd * (gxhat - gxhat.mean(dims, keepdim=True)
                 - xhat * (gxhat * xhat).mean(dims, keepdim=True))
    gw = (g * xhat).sum(reduce_dims) if reduce_dims else g * xhat
    gb = g.sum(reduce_dims) if reduce_dims else g
    return gx, gw, gb


def _layer_norm_vjp(c, g):
    x, w = c.self, c.weight
    k = c.normalized_ndim
    dims = tuple(range(x.ndim - k, x.ndim))
    half = x.element_size() == 2    # (float16: computed in float32, as the forward)
    if half:
        x, w, g = x.float(), None if w is None else w.float(), g.float()
    gx, gw, gb = _norm_vjp(g, x, w, dims, c.eps, tuple(range(x.ndim - k)))
    if half:
        wt = c.self if c.weight is None else c.weight
        gx, gw, gb = gx.to(c.self.dtype), gw.to(wt.dtype), gb.to(wt.dtype)
    return (gx if c.needs(0) else None, gw if c.needs(1) else None, gb if c.needs(2) else None)


def _layer_norm_primitives(node, emit):
    """The primitives of _norm_vjp's recomputation, in its order and with its attributes,
    then the affine part as the impl applies it: in native code the forward shares the
    statistics with the backward's recomputation (cse) and both run in one walk over each
    row (ir/decompose.py, codegen/schedule/rows.py)."""
    x, w, b = (list(node.inputs) + [None, None])[:3]
    dims = tuple(range(len(x.type.shape) - node.attrs["normalized_ndim"], len(x.type.shape)))
    mu = emit("mean", [x], dim=dims, keepdim=True)
    xc = emit("sub", [x, mu], alpha=1)
    var = emit("mean", [emit("mul", [xc, xc])], dim=dims, keepdim=True)
    rstd = emit("rsqrt", [emit("add", [var, node.attrs["eps"]], alpha=1)])
    y = emit("mul", [xc, rstd])
    if isinstance(w, Value):
        y = emit("mul", [y, w])
    if isinstance(b, Value):
        y = emit("add", [y, b], alpha=1)
    return y


defop("layer_norm", _layer_norm, args=("self", "weight", "bias"), save=("self", "weight"),
      grad_fn="NativeLayerNormBackward0", vjp=_layer_norm_vjp, decompose=_layer_norm_primitives,
      eager_kernel="shaped", eager_vjp="shaped")


# (batch_norm and its backward: ops_batch_norm.py)

# ---- embedding and losses -----------------------------------------------------------------


def _embedding_vjp(c, g):
    idx = c.indices
    if c.attrs.get("scale_grad_by_freq"):
        # each row's gradient over the number of times its index occurs in `indices`
        counts = g.new_zeros(c.shape(0)[:1])._op("index_put", g.new_ones(idx.shape), idx,
                                                 spec=("T",), accumulate=True)
        g = g * (1.0 / counts.index_select(0, idx.reshape(-1)).reshape(idx.shape)).unsqueeze(-1)
    pad = c.padding_idx
    looked_up = 1
    for n in idx.shape:
        looked_up *= n
    if pad is not None and looked_up < c.shape(0)[0]:
        # padding_idx's row gets no gradient: the looked-up rows masked where they are
        # fewer than the weight's rows, else the row zeroed after the scatter (cats of the
        # weight gradient's rows: a pass over the smaller of the two)
        g = g.masked_fill((idx == pad).unsqueeze(-1), 0)
        pad = None
    gw = g.new_zeros(c.shape(0))._op("index_put", g, idx, spec=("T",), accumulate=True)
    if pad is not None:
        rows = [gw[:pad], gw.new_zeros((1,) + tuple(c.shape(0)[1:])), gw[pad + 1:]]
        rows = [r for r in rows if r.shape[0]]
        gw = rows[0]
        for r in rows[1:]:
            gw = gw._op("cat", r, dim=0)
    return (gw, None)


def _embedding(w, idx, padding_idx=None, scale_grad_by_freq=False):
    check_index_range(idx, w.shape[0])
    return w[idx]


defop("embedding", _embedding,
      args=("weight", "indices"),
      save=("indices",), grad_fn="EmbeddingBackward0", vjp=_embedding_vjp, nondiff=("indices",),
      complex=True)


def _reduce(loss, reduction, denom=None):
    acc = np.float32 if loss.dtype == np.float16 else None    # (PyTorch's float16 sums)
    # (np.add.reduce: what loss.sum calls, without its Python-level wrapper)
    if reduction == "sum":
        return np.asarray(_add_reduce(loss, axis=None, dtype=acc), dtype=loss.dtype)
    if reduction == "mean":
        return np.asarray(_add_reduce(loss, axis=None, dtype=acc) /
                          (loss.size if denom is None else denom), dtype=loss.dtype)
    return loss


def _nll_parts(x, t, w, ignore_index):
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    if safe.size and np.minimum.reduce(safe, axis=None) < 0:    # (not an index from the
        # end: PyTorch's check)
        raise IndexError(f"Target {int(safe[safe < 0].flat[0])} is out of bounds.")
    if x.ndim == 2:                 # (fancy indexing: a fifth of take_along_axis's time)
        picked = x[np.arange(x.shape[0]), safe]
    else:
        picked = np.take_along_axis(x, np.expand_dims(safe, 1), axis=1).squeeze(1)
    if not keep.all():  # (an ignored target's class-0 element may be -inf: its loss is
        # 0, not -inf * 0, as PyTorch skips it)
        picked = np.where(keep, picked, x.dtype.type(0))
    if w is None:       # (ones * keep, in x's dtype: keep's 1s and 0s, cast once)
        return picked, keep.astype(x.dtype)
    return picked, (w[safe] * keep).astype(x.dtype)


def _nll_loss(x, t, w, ignore_index=-100, reduction="mean"):
    # 0 - p*w, not -p*w: an ignored target's loss is +0.0, as PyTorch gives it
    if x.ndim == 1:                     # one sample: input (C,), target (), loss ()
        picked, wt = _nll_parts(x[None], np.reshape(t, (1,)), w, ignore_index)
        loss = _reduce(0 - picked * wt, reduction, _add_reduce(wt, axis=None))
        return np.reshape(loss, ())
    picked, wt = _nll_parts(x, t, w, ignore_index)
    return _reduce(0 - picked * wt, reduction, _add_reduce(wt, axis=None))


def _nll_vjp(c, g):
    x, t, w = c.self, c.target, c.weight
    flat = x.ndim == 1
    if flat:                            # as a batch of one: (1, C) and (1,)
        t = t.reshape(1)
    keep = t != c.ignore_index
    safe = t.where(keep, 0)
    if safe.dtype.name == "uint8":      # (Byte targets: scatter / index_select take int64)
        safe = safe.long()
    wt = (w.index_select(0, safe.reshape(-1)).reshape(safe.shape) if w is not None
          else keep.to(x.dtype)) * keep
    if c.reduction == "mean":
        scale = -g / wt.sum()
    else:
        scale = -g
    # an ignored target gets no gradient, even when every target is ignored (the scale is
    # then -g / 0), as in PyTorch
    src = (wt * scale).masked_fill(keep.logical_not(), 0).unsqueeze(1)
    shape = (1,) + tuple(x.shape) if flat else x.shape
    gx = x.new_zeros(shape).scatter_add(1, safe.unsqueeze(1), src)
    return (gx.reshape(x.shape) if flat else gx, None, None)


defop("nll_loss", _nll_loss, args=("self", "target", "weight"),
      save=("self", "target", "weight"), vjp=_nll_vjp, nondiff=("target", "weight"),
      eager_vjp="shaped",
      # PyTorch runs (N, C, d1, ...) inputs through nll_loss2d
      grad_fn=lambda ins, at: "NllLoss2DBackward0" if ins[0].ndim >= 3 else "NllLossBackward0",
      autocast="fp32")


def _target_as_input(c):
    """c.target in c.self's dtype where it is a bool (or integer) tensor the forward promoted:
    Tensor subtraction refuses a bool operand, PyTorch's loss kernels take one."""
    t = c.target
    return t if t.dtype.is_floating_point or t.dtype.is_complex else t.to(c.self.dtype)


def _mse_vjp(c, g):
    d = c.self - _target_as_input(c)
    n = 1
    for s in c.shape(0):
        n *= s
    # mean over no elements: the loss is nan and the (empty) gradient needs no scale
    scale = (2.0 / n if n else math.nan) if c.reduction == "mean" else 2.0
    gd = g * d * scale
    return (gd if c.needs(0) else None, -gd if c.needs(1) else None)


defop("mse_loss", lambda x, t, reduction="mean": _reduce(((x - t) ** 2).astype(x.dtype), reduction),
      args=("self", "target"), save=("self", "target"), grad_fn="MseLossBackward0",
      promote=(0, 1), vjp=_mse_vjp, autocast="fp32")


def _softplus_neg(x):
    # log(1 + exp(-x)), computed without overflow
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)


def _bce_logits(x, t, w, pw, reduction="mean"):
    lw = 1 + (pw - 1) * t if pw is not None else 1
    loss = (1 - t) * x + lw * _softplus_neg(x)
    if w is not None:
        loss = loss * w
    return _reduce(np.asarray(loss, dtype=x.dtype), reduction)


def _bce_vjp(c, g):
    x, t, w, pw = c.self, c.target, c.weight, c.pos_weight
    n = 1
    for s in x.shape:
        n *= s
    if c.reduction == "mean":
        g = g / n
    lw = 1 + (pw - 1) * t if pw is not None else None
    sig = x.sigmoid()
    gx = (sig * lw - t * pw) if pw is not None else sig - t
    if w is not None:
        gx = gx * w
    gt = None
    if c.needs(1):
        sp = (-x.abs()).exp().log1p() + (-x).relu()
        gt = -x + (pw - 1) * sp if pw is not None else -x
        if w is not None:
            gt = gt * w
        gt = g * gt
    return (g * gx if c.needs(0) else None, gt, None, None)


defop("binary_cross_entropy_with_logits", _bce_logits,
      args=("self", "target", "weight", "pos_weight"),
      save=("self", "target", "weight", "pos_weight"),
      grad_fn="BinaryCrossEntropyWithLogitsBackward0", vjp=_bce_vjp,
      nondiff=("weight", "pos_weight"), autocast="fp32")
