"""One small function per op of the op table that has a VJP (and the comparisons and
reductions without one), with its inputs: the cases the vmap rules and the forward-mode
(double-VJP) tests run. `args` describes each input: ("f", shape) a float64 tensor,
("p", shape) a positive one, ("u", shape) one in (0.1, 0.9), ("i", shape, high) an int64
index tensor in [0, high), ("b", shape) a bool mask; ("k", shape) and ("c", shape) are a float
and a positive float the op does not differentiate (running statistics, loss weights).
`EPS` gives a finite-difference step for the cases that need a bigger one."""
import numpy as np

import llgrad
import llgrad.nn.functional as F


def f(*shape):
    return ("f", shape)


def p(*shape):
    return ("p", shape)


def u(*shape):
    return ("u", shape)


def i(high, *shape):
    return ("i", shape, high)


def b(*shape):
    return ("b", shape)


def k(*shape):
    return ("k", shape)


def c(*shape):
    return ("c", shape)


def make(spec, rng):
    kind, shape = spec[0], spec[1]
    if kind in "fk":
        return llgrad.tensor(rng.standard_normal(shape))
    if kind in "pc":
        return llgrad.tensor(rng.uniform(0.5, 2.0, shape))
    if kind == "u":
        return llgrad.tensor(rng.uniform(0.1, 0.9, shape))
    if kind == "i":
        return llgrad.tensor(rng.integers(0, spec[2], shape))
    return llgrad.tensor(rng.uniform(size=shape) > 0.5)


def _setitem(x, v):
    y = x.clone()
    y[1:3] = v
    return y


def _index_put(x, v):
    y = x * 1
    y[llgrad.tensor([0, 2])] = v
    return y


def _inplace_view(x):
    y = x * 1
    y[0].mul_(3.0)
    return y


# name: (function, input specs). The name is the op the case is about (it may issue others).
CASES = {
    "add": (lambda a, c: a + c * 2, [f(3, 4), f(4)]),
    "sub": (lambda a, c: a - c, [f(3, 4), f(3, 4)]),
    "rsub": (lambda a: 1 - a, [f(3, 4)]),
    "mul": (lambda a, c: a * c, [f(3, 4), f(3, 1)]),
    "div": (lambda a, c: a / c, [f(3, 4), p(4)]),
    "div_mode": (lambda a, c: a.div(c, rounding_mode=None), [f(3, 4), p(3, 4)]),
    "div_scalar": (lambda a: a._op("div_scalar", 4), [f(3, 4)]),
    "pow": (lambda a, c: a ** 3 + c ** a, [f(3, 4), p(3, 4)]),
    "neg": (lambda a: -a, [f(5)]),
    "exp": (lambda a: a.exp(), [f(5)]),
    "log": (lambda a: a.log(), [p(5)]),
    "log1p": (lambda a: a.log1p(), [p(5)]),
    "expm1": (lambda a: a.expm1(), [f(5)]),
    "sqrt": (lambda a: a.sqrt(), [p(5)]),
    "rsqrt": (lambda a: a.rsqrt(), [p(5)]),
    "reciprocal": (lambda a: a.reciprocal(), [p(5)]),
    "abs": (lambda a: a.abs(), [f(5)]),
    "sign": (lambda a: a.sign() * a, [f(5)]),
    "sin": (lambda a: a.sin(), [f(5)]),
    "cos": (lambda a: a.cos(), [f(5)]),
    "tanh": (lambda a: a.tanh(), [f(5)]),
    "erf": (lambda a: a.erf(), [f(5)]),
    "sigmoid": (lambda a: a.sigmoid(), [f(5)]),
    "relu": (lambda a: a.relu(), [f(5)]),
    "leaky_relu": (lambda a: F.leaky_relu(a, 0.1), [f(5)]),
    "leaky_relu_": (lambda a: F.leaky_relu(a * 1, 0.1, inplace=True), [f(5)]),
    "gelu": (lambda a: F.gelu(a) + F.gelu(a, approximate="tanh"), [f(5)]),
    "silu": (lambda a: F.silu(a), [f(5)]),
    "softplus": (lambda a: F.softplus(a), [f(5)]),
    "floor": (lambda a: a.floor() + a, [f(5)]),
    "round": (lambda a: a.round() + a, [f(5)]),
    "clamp": (lambda a: a.clamp(-0.5, 0.5) + a.clamp(min=0.1), [f(3, 4)]),
    "clamp_min": (lambda a, c: a.clamp_min(c), [f(3, 4), f(4)]),
    "clamp_max": (lambda a: a.clamp_max(0.2), [f(3, 4)]),
    "maximum": (lambda a, c: a.maximum(c), [f(3, 4), f(3, 4)]),
    "minimum": (lambda a, c: a.minimum(c), [f(3, 4), f(4)]),
    "where": (lambda a, c: llgrad.where(a > 0, a, c), [f(3, 4), f(3, 4)]),
    "addcmul": (lambda a, c, d: a.addcmul(c, d, value=0.5), [f(3, 4), f(3, 4), f(4)]),
    "addcdiv": (lambda a, c, d: a.addcdiv(c, d, value=0.5), [f(3, 4), f(3, 4), p(4)]),
    "lerp": (lambda a, c, w: a.lerp(c, w), [f(3, 4), f(3, 4), u(3, 4)]),
    "clone": (lambda a: a.clone() * 2, [f(3, 4)]),
    "to_dtype": (lambda a: a.float().double() * a, [f(3, 4)]),
    "fill": (lambda a: a * 1 + a.clone().fill_(2.0), [f(3, 4)]),
    "zero": (lambda a: a * 1 + a.clone().zero_(), [f(3, 4)]),
    "copy": (lambda a, c: a.clone().copy_(c) * a, [f(3, 4), f(4)]),
    "sum": (lambda a: a.sum() + a.sum(1).sum(), [f(3, 4)]),
    "mean": (lambda a: a.mean(0), [f(3, 4)]),
    "prod": (lambda a: a.prod(1), [f(3, 4)]),
    "amax": (lambda a: a.amax(1), [f(3, 4)]),
    "amin": (lambda a: a.amin((0, 1)), [f(3, 4)]),
    "max": (lambda a: a.max(), [f(3, 4)]),
    "min": (lambda a: a.min(), [f(3, 4)]),
    "max_dim": (lambda a: a.max(1)[0], [f(3, 4)]),
    "min_dim": (lambda a: a.min(0, keepdim=True)[0], [f(3, 4)]),
    "var": (lambda a: a.var(1), [f(3, 4)]),
    "std": (lambda a: a.std(), [f(3, 4)]),
    "logsumexp": (lambda a: a.logsumexp(1), [f(3, 4)]),
    "softmax": (lambda a: a.softmax(-1), [f(3, 4)]),
    "log_softmax": (lambda a: a.log_softmax(0), [f(3, 4)]),
    "cumsum": (lambda a: a.cumsum(1), [f(3, 4)]),
    "view": (lambda a: a.view(4, 3) * 1, [f(3, 4)]),
    "_reshape_alias": (lambda a: a.t().reshape(4, 3, 1) * 1, [f(3, 4)]),
    "_unsafe_view": (lambda a: a.t().reshape(12) * 1, [f(3, 4)]),
    "alias": (lambda a: a[...] * 1, [f(3, 4)]),
    "transpose": (lambda a: a.transpose(0, 1) * 1, [f(3, 4)]),
    "t": (lambda a: a.t() * 1, [f(3, 4)]),
    "permute": (lambda a: a.permute(2, 0, 1) * 1, [f(2, 3, 4)]),
    "expand": (lambda a: a.expand(2, 3, 4) * 1, [f(3, 1)]),
    "squeeze": (lambda a: a.squeeze() * 1 + a.squeeze(1).sum(), [f(3, 1, 4)]),
    "squeeze_": (lambda a, c: a @ c, [f(3), f(3, 4)]),
    "unsqueeze": (lambda a: a.unsqueeze(1) * 1, [f(3, 4)]),
    "slice": (lambda a: a[1:, ::2] * 1, [f(3, 4)]),
    "select": (lambda a: a[1] * a[:, 2].sum(), [f(3, 4)]),
    "diagonal": (lambda a: a.diagonal() * 1, [f(3, 4)]),
    "as_strided": (lambda a: (a * 1).as_strided((2, 2), (4, 1), 1) * 1, [f(3, 4)]),
    "unbind": (lambda a: a.unbind(1)[2] * 1, [f(3, 4)]),
    "split": (lambda a: a.split(2, 1)[1] * 1, [f(3, 4)]),
    "cat": (lambda a, c: llgrad.cat([a, c], 0), [f(3, 4), f(2, 4)]),
    "stack": (lambda a, c: llgrad.stack([a, c], 1), [f(3, 4), f(3, 4)]),
    "masked_fill": (lambda a, m: a.masked_fill(m, 0.5), [f(3, 4), b(3, 4)]),
    "gather": (lambda a, ix: a.gather(1, ix), [f(3, 4), i(4, 3, 2)]),
    "scatter_add": (lambda a, ix, s: a.scatter_add(1, ix, s), [f(3, 4), i(4, 3, 2), f(3, 2)]),
    "index_select": (lambda a, ix: a.index_select(1, ix), [f(3, 4), i(4, 5)]),
    "index_add": (lambda a, ix, s: a.index_add(0, ix, s), [f(3, 4), i(3, 2), f(2, 4)]),
    "strided_scatter": (lambda a: (a * 1).as_strided((3, 2), (4, 2)).sum() * a,
                        [f(3, 4)]),
    "strided_put": (lambda a, v: a._op("strided_put", v, geom=((3, 2), (4, 2), 1)),
                    [f(12), f(3, 2)]),
    "strided_gather": (lambda a: a._op("strided_gather", geom=((3, 2), (4, 2), 1)), [f(12)]),
    "strided_scatter_op": (lambda a: a._op("strided_scatter", geom=((3, 2), (4, 1), 2),
                                           span=14), [f(3, 2)]),
    "inplace_view": (_inplace_view, [f(3, 4)]),
    "index": (lambda a, ix: a[ix] + a[:, llgrad.tensor([1, 3])].sum(), [f(3, 4), i(3, 5)]),
    "index_put": (_index_put, [f(3, 4), f(4)]),
    "setitem": (_setitem, [f(4, 3), f(3)]),
    "mm": (lambda a, c: a.mm(c), [f(3, 4), f(4, 2)]),
    "bmm": (lambda a, c: a.bmm(c), [f(2, 3, 4), f(2, 4, 2)]),
    "matmul": (lambda a, c: a @ c + (a[0, 0] @ c).sum(), [f(2, 3, 4), f(4, 2)]),
    "addmm": (lambda s, a, c: s.addmm(a, c, beta=0.5, alpha=2), [f(3, 2), f(3, 4), f(4, 2)]),
    "dot": (lambda a, c: a.dot(c), [f(4), f(4)]),
    "mv": (lambda a, c: a.mv(c), [f(3, 4), f(4)]),
    "layer_norm": (lambda a, w, c: F.layer_norm(a, (4,), w, c), [f(3, 4), f(4), f(4)]),
    "batch_norm": (lambda a, w, c: F.batch_norm(a, None, None, w, c, training=True),
                   [f(4, 3), f(3), f(3)]),
    "batch_norm_eval": (lambda a, m, v: F.batch_norm(a, m, v), [f(4, 3), k(3), c(3)]),
    # (its statistics, results 1 and 2, are for the running ones' update: no gradient)
    "batch_norm_with_stats": (lambda a, w, c: a._op("batch_norm_with_stats", w, c,
                                                    eps=1e-5)[0], [f(4, 3), f(3), f(3)]),
    "batch_norm_backward": (lambda g, a, w: (lambda r: r[0] * 1.5 + r[1] - r[2])(
        g._op("batch_norm_backward", a, w, eps=1e-5)), [f(4, 3), f(4, 3), f(3)]),
    "embedding": (lambda w, ix: F.embedding(ix, w), [f(5, 3), i(5, 4)]),
    "nll_loss": (lambda a, t: F.cross_entropy(a, t), [f(4, 5), i(5, 4)]),
    "nll_loss_1d": (lambda a, t: F.cross_entropy(a, t, reduction="sum"), [f(5), i(5)]),
    "nll_loss_none": (lambda a, t: F.nll_loss(a.log_softmax(1), t, reduction="none"),
                      [f(4, 5), i(5, 4)]),
    "mse_loss": (lambda a, c: F.mse_loss(a, c), [f(3, 4), f(3, 4)]),
    "binary_cross_entropy_with_logits": (
        lambda a, t, w: F.binary_cross_entropy_with_logits(a, t, w, pos_weight=w + 1),
        [f(3, 4), u(3, 4), c(4)]),
    "elu": (lambda a: F.elu(a) + F.selu(a), [f(5)]),
    "elu_": (lambda a: F.elu(a * 1, inplace=True), [f(5)]),
    "celu": (lambda a: F.celu(a, 0.5), [f(5)]),
    "celu_": (lambda a: F.celu(a * 1, 0.5, inplace=True), [f(5)]),
    "hardtanh": (lambda a: F.hardtanh(a * 2), [f(5)]),
    "hardsigmoid": (lambda a: F.hardsigmoid(a * 4), [f(5)]),
    "hardswish": (lambda a: F.hardswish(a * 4), [f(5)]),
    "threshold": (lambda a: F.threshold(a, 0.1, -1.0), [f(5)]),
    "threshold_": (lambda a: F.threshold(a * 1, 0.1, -1.0, inplace=True), [f(5)]),
    "logsigmoid": (lambda a: F.logsigmoid(a), [f(5)]),
    "mish": (lambda a: F.mish(a), [f(5)]),
    "glu": (lambda a: F.glu(a, 0), [f(4, 3)]),
    "smooth_l1_loss": (lambda a, c: F.smooth_l1_loss(a, c, reduction="sum"), [f(3, 4), f(3, 4)]),
    "huber_loss": (lambda a, c: F.huber_loss(a, c, delta=0.5), [f(3, 4), f(3, 4)]),
    "binary_cross_entropy": (lambda a, t: F.binary_cross_entropy(a, t), [u(3, 4), u(3, 4)]),
    "constant_pad_nd": (lambda a: F.pad(a, (1, 2, 0, 1), value=0.5), [f(3, 4)]),
    "reflection_pad": (lambda a: F.pad(a, (2, 1), mode="reflect"), [f(2, 3, 4)]),
    "replication_pad": (lambda a: F.pad(a, (1, 1, 2, 0), mode="replicate"), [f(1, 3, 4)]),
    "avg_pool2d": (lambda a: F.avg_pool2d(a, 2), [f(2, 4, 4)]),
    "avg_pool2d_backward": (lambda g, a: g._op(
        "avg_pool2d_backward", a, kernel_size=(3, 2), stride=(2, 1), padding=(1, 1),
        ceil_mode=True, count_include_pad=False, divisor_override=None), [f(2, 3, 7), f(2, 5, 6)]),
    "group_norm": (lambda a, w, c: F.group_norm(a, 2, w, c), [f(2, 4, 3), f(4), f(4)]),
    "tril": (lambda a: a.tril(), [f(3, 4)]),
    "triu": (lambda a: a.triu(1), [f(3, 4)]),
    "flip": (lambda a: a.flip(0, 1), [f(3, 4)]),
    "roll": (lambda a: a.roll(1) + a.roll(2, 1), [f(3, 4)]),
    "repeat": (lambda a: a.repeat(2, 1, 2), [f(3, 4)]),
    "diag_embed": (lambda a: llgrad.diag_embed(a), [f(3, 4)]),
    "diagonal_copy": (lambda a: llgrad.diag(a), [f(3, 4)]),
    "unfold": (lambda a: a.unfold(1, 2, 1) * 1, [f(3, 4)]),
    "cumprod": (lambda a: a.cumprod(1), [f(3, 4)]),
    "baddbmm": (lambda s, a, c: s.baddbmm(a, c, alpha=0.5), [f(2, 3, 2), f(2, 3, 4), f(2, 4, 2)]),
    "ceil": (lambda a: a.ceil() + a, [f(5)]),
    "trunc": (lambda a: a.trunc() + a, [f(5)]),
    "frac": (lambda a: a.frac(), [f(5)]),
    "round_decimals": (lambda a: a.round(decimals=1) + a, [f(5)]),
    "linalg_vector_norm": (lambda a: a.norm() + llgrad.linalg.vector_norm(a, 3, 1).sum(),
                           [f(3, 4)]),
    "sort": (lambda a: a.sort(1)[0], [f(3, 4)]),
    "topk": (lambda a: a.topk(2)[0], [f(3, 4)]),
    "kthvalue": (lambda a: a.kthvalue(2, 1)[0], [f(3, 4)]),
    "mode": (lambda a: a.mode(0)[0], [f(3, 4)]),
    "scatter": (lambda a, ix, s: a.scatter(1, ix, s), [f(3, 4), i(4, 3, 1), f(3, 1)]),
    "scatter_reduce": (lambda a, ix, s: a.scatter_reduce(1, ix, s, "sum"),
                       [f(3, 4), i(4, 3, 2), f(3, 2)]),
    "conv2d": (lambda a, w, c: F.conv2d(a, w, c, padding=1), [f(2, 5, 5), f(3, 2, 3, 3), f(3)]),
    "max_pool2d": (lambda a: F.max_pool2d(a, 2), [f(2, 4, 4)]),
    "conv2d_groups": (lambda a, w: F.conv2d(a, w, None, 2, 1, 1, 2), [f(1, 4, 5, 5),
                                                                     f(4, 2, 3, 2)]),
    "conv3d": (lambda a, w, c: F.conv3d(a, w, c, (2, 1, 1), 1, (1, 1, 2)),
               [f(2, 4, 3, 4), f(3, 2, 2, 2, 2), f(3)]),
    "conv3d_groups": (lambda a, w: F.conv3d(a, w, None, 1, (0, 1, 0), 1, 2),
                      [f(1, 4, 3, 3, 3), f(4, 2, 2, 2, 2)]),
    "max_pool3d": (lambda a: F.max_pool3d(a, 2, 1, 1, ceil_mode=True), [f(2, 3, 3, 4)]),
    "avg_pool3d": (lambda a: F.avg_pool3d(a, (2, 3, 2), 1, 1, True, False), [f(2, 3, 4, 3)]),
    "convolution_backward_input": (lambda g, w: g._op(
        "convolution_backward_input", w, input_size=(5, 4), stride=(2, 1), padding=(1, 1),
        dilation=(1, 1), groups=2), [f(1, 4, 3, 4), f(4, 2, 3, 3)]),
    "convolution_backward_weight": (lambda g, a: g._op(
        "convolution_backward_weight", a, weight_size=(4, 2, 3, 3), stride=(2, 1),
        padding=(1, 1), dilation=(1, 1), groups=2), [f(1, 4, 3, 4), f(1, 4, 5, 4)]),
    "max_pool2d_with_indices_backward": (lambda g, a: g._op(
        "max_pool2d_with_indices_backward", a, F.max_pool2d(a, 3, 1, 1, return_indices=True)[1],
        kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1), ceil_mode=False),
        [f(2, 3, 4), f(2, 3, 4)]),
    "fused_lstm_cell": (lambda x, c: llgrad.cat(x._op("fused_lstm_cell", c), -1),
                        [f(3, 8), f(3, 2)]),
    "fused_lstm_cell_backward": (lambda gh, gc, x, c, cy: llgrad.cat(
        gh._op("fused_lstm_cell_backward", gc, x, c, cy), -1),
        [f(3, 2), f(3, 2), f(3, 8), f(3, 2), f(3, 2)]),
    "lstm_layer": (lambda x, wi, wh, bi, bh, h, c: llgrad.cat([o.reshape(-1) for o in x._op(
        "lstm_layer", wi, wh, bi, bh, h, c, reverse=True)]),
        [f(2, 2, 3), f(8, 3), f(8, 2), f(8), f(8), f(2, 2), f(2, 2)]),
    "lstm_layer_backward": (lambda *a: llgrad.cat([o.reshape(-1) for o in a[0]._op(
        "lstm_layer_backward", *a[1:], reverse=False)]),
        [f(2, 2, 2), f(2, 2), f(2, 2), f(2, 2, 8), f(2, 2, 2), f(2, 2, 3), f(8, 3), f(8, 2),
         f(2, 2), f(2, 2), f(2, 2, 2), f(2, 2, 8), f(2, 2, 2)]),
    "fused_gru_cell": (lambda x, y, h: x._op("fused_gru_cell", y, h), [f(3, 6), f(3, 6), f(3, 2)]),
    "fused_gru_cell_backward": (lambda g, x, y, h: llgrad.cat(
        g._op("fused_gru_cell_backward", x, y, h), -1), [f(3, 2), f(3, 6), f(3, 6), f(3, 2)]),
    "asin": (lambda a: a.asin() + a.arccos(), [u(3, 4)]),
    "acos": (lambda a: a.acos(), [u(3, 4)]),
    "atan": (lambda a: a.atan(), [f(3, 4)]),
    "atan2": (lambda a, c: a.atan2(c), [f(3, 4), f(4)]),
    "xlogy_float": (lambda a, c: a.xlogy(c), [f(3, 4), p(4)]),
    "xlog1py_float": (lambda a, c: llgrad.special.xlog1py(a, c), [f(3, 4), p(3, 4)]),
    "entr": (lambda a: llgrad.special.entr(a), [p(3, 4)]),
    "fmod_float": (lambda a, c: a.fmod(c), [f(3, 4), f(4)]),
    "remainder_float": (lambda a, c: a % c, [f(3, 4), f(4)]),
    "erfc": (lambda a: a.erfc(), [f(3, 4)]),
    "erfinv": (lambda a: a.erfinv(), [u(3, 4)]),
    "lgamma": (lambda a: a.lgamma(), [p(3, 4)]),
    "digamma": (lambda a: a.digamma(), [p(3, 4)]),
    "polygamma": (lambda a: llgrad.polygamma(1, a) + a.polygamma(2), [p(3, 4)]),
    "polygamma_": (lambda a: (a * 1).polygamma_(1), [p(3, 4)]),
    "linalg_inv_ex": (lambda a: (a + 3 * llgrad.eye(3, dtype=a.dtype)).inverse(), [f(3, 3)]),
    "linalg_det": (lambda a: (a + 3 * llgrad.eye(3, dtype=a.dtype)).det(), [f(2, 3, 3)]),
    "linalg_slogdet": (lambda a: llgrad.logdet(a + 3 * llgrad.eye(3, dtype=a.dtype)), [f(3, 3)]),
    "linalg_solve_ex": (lambda a, b: llgrad.linalg.solve(a + 3 * llgrad.eye(3, dtype=a.dtype), b),
                        [f(3, 3), f(3, 2)]),
    "linalg_solve_triangular": (lambda a, b: llgrad.linalg.solve_triangular(
        a + 3 * llgrad.eye(3, dtype=a.dtype), b, upper=False), [f(3, 3), f(3, 2)]),
    "cholesky_solve": (lambda a, b: llgrad.cholesky_solve(     # (tril: the triangle read)
        b, a.tril() + 3 * llgrad.eye(3, dtype=a.dtype)) + llgrad.cholesky_solve(
        b, a.triu() + 3 * llgrad.eye(3, dtype=a.dtype), upper=True), [f(3, 3), f(3, 2)]),
    "linalg_cholesky_ex": (lambda a: llgrad.linalg.cholesky(
        a @ a.mT + llgrad.eye(3, dtype=a.dtype)), [f(3, 3)]),
    "linalg_lu_factor_ex": (lambda a: llgrad.linalg.lu_factor(a + 3 * llgrad.eye(3, dtype=a.dtype)).LU,
                            [f(3, 3)]),
    "linalg_matrix_exp": (lambda a: llgrad.linalg.matrix_exp(a), [f(3, 3)]),
    "linalg_qr": (lambda a: llgrad.linalg.qr(a).R, [f(4, 3)]),
    "linalg_svd": (lambda a: llgrad.linalg.svdvals(a), [f(3, 4)]),
    "linalg_eigh": (lambda a: llgrad.linalg.eigvalsh(a + a.mT), [f(3, 3)]),
    "compare": (lambda a, c: (a > c).double() + (a <= 0).double() + a.isfinite().double()
                + ((a == c) | (a != c) & (a >= c)).double() + a.isnan().logical_not().double()
                + (a < 0).logical_xor(c < 0).double() + (a < 0).logical_and(c < 0).double(),
                [f(3, 4), f(3, 4)]),
    "argmax": (lambda a: a.argmax(1) + a.argmin(), [f(3, 4)]),
    "all_any": (lambda a: (a > 0).all(1).double() + (a > 0).any().double(), [f(3, 4)]),
    "scaled_bessel_i": (lambda a: llgrad.special.i0e(a) + llgrad.special.i1(a)
                        + llgrad.special.i1e(a * 3), [f(3, 4)]),
    "zeta": (lambda a: llgrad.special.zeta(3.0, a) + llgrad.special.zeta(
        llgrad.tensor([2.5, 4.0, 3.0, 6.0], dtype=a.dtype), a), [p(3, 4)]),
}
EPS = {"to_dtype": 1e-2}       # (a float32 round trip: a smaller step only sees rounding)

# ops of the table whose cases are random (a draw per call): uniform, normal, bernoulli
RANDOM_CASES = {
    "uniform": lambda a: a * 1 + a.clone().uniform_(),
    "normal": lambda a: a * 1 + a.clone().normal_(),
    "bernoulli_p": lambda a: a * a.clone().bernoulli_(0.5),
    "bernoulli": lambda a: a * (a.sigmoid().detach()).bernoulli(),
    "random_": lambda a: a * 1 + a.clone().random_(5),
    "exponential": lambda a: a * 1 + a.clone().exponential_(),
    "geometric": lambda a: a * 1 + a.clone().geometric_(0.5),
    "log_normal": lambda a: a * 1 + a.clone().log_normal_(),
    "cauchy": lambda a: a * 1 + a.clone().cauchy_(),
    "normal_tensor": lambda a: a * 1 + llgrad.normal(a.detach() * 0, 1.0),
}


def inputs(name, seed=0):
    rng = np.random.default_rng(seed)
    return [make(s, rng) for s in CASES[name][1]]


def batched_inputs(name, batch, seed=0):
    """Each input with a leading batch dim (every sample drawn independently)."""
    rng = np.random.default_rng(seed)
    return [llgrad.stack([make(s, rng) for _ in range(batch)]) for s in CASES[name][1]]
