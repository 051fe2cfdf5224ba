"""The IR core: every op of the table built with Builder over strided inputs (contiguous,
transposed, offset, stepped, stride-0 broadcast), verified, interpreted and compared with
eager llgrad; the printer/parser round trip; verifier errors; determinism; the passes;
100,000-node graphs; and the interpreter's aliasing and write-back."""
import glob
import os
import sys
import zlib

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.ir import OPS
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType, Value
from llgrad.ir.interpret import interpret
from llgrad.ir.parser import parse_graph
from llgrad.ir.passes import cse, dce
from llgrad.ir.printer import print_graph
from llgrad.ir.verify import VerifyError, verify


# ---- the per-op sample table --------------------------------------------------------------

class T:
    """A tensor operand: its logical shape and dtype and how to fill it."""

    def __init__(self, shape, dtype="float32", gen="randn", high=None):
        self.shape, self.dtype, self.gen, self.high = tuple(shape), dtype, gen, high

    def make(self, shape, rng):
        if self.gen == "randn":
            a = rng.standard_normal(shape)
        elif self.gen == "pos":           # log, sqrt, pow bases, variances
            a = rng.uniform(0.5, 2.0, shape)
        elif self.gen == "unit":          # probabilities
            a = rng.uniform(0.0, 1.0, shape)
        elif self.gen == "special":       # isnan / isfinite
            a = rng.standard_normal(shape)
            a.flat[::3] = np.nan
            a.flat[1::4] = np.inf
            a.flat[2::5] = -np.inf
        elif self.gen == "bool":
            a = rng.integers(0, 2, shape).astype(bool)
        elif self.gen == "rng":           # a generator state, some draws along
            from llgrad.ir import torch_random
            a = torch_random.seeded(int(rng.integers(0, 2 ** 32)))
            torch_random.uniform(a, int(rng.integers(0, 700)), "float32")
        elif self.gen == "int":           # index tensors and small integers: [0, high)
            a = rng.integers(0, self.high, shape)
        else:
            raise ValueError(self.gen)
        return np.asarray(a).astype(self.dtype)


class S:
    """One op's sample: operands (T or Python constants), attributes (a dict, or a
    callable of the operands' TensorTypes), the eager call it must agree with, the
    layouts that make sense, and known eager/op bugs to xfail (layout -> reason)."""

    def __init__(self, operands, attrs=None, eager=None, layouts=None, xfail=None):
        self.operands, self.attrs, self.eager = operands, attrs or {}, eager
        self.layouts, self.xfail = layouts, xfail or {}


def X(*shape, dtype="float32"):
    return T(shape, dtype)


def P(*shape):
    return T(shape, gen="pos")


def B(*shape):
    return T(shape, "bool", "bool")


def I(high, *shape):
    return T(shape, "int64", "int", high)


def _eager_draw(state, draw, shape):
    """Eager randn/rand from the generator state `state`: (values, the state after)."""
    gen = llgrad.runtime.creation.default_generator
    saved = gen._state
    gen._state = state.numpy().copy()
    try:
        values = draw(*shape)
        return values, llgrad.tensor(gen.state.copy())
    finally:
        gen._state = saved


GEOM = ((2, 2), (1, 3), 1)      # shape, strides, offset into a flat buffer
SPECS = {
    # arithmetic
    "add": S([X(3, 4), X(3, 4)], {"alpha": 2}, lambda a, b: a.add(b, alpha=2)),
    "sub": S([X(3, 4), X(dtype="float64")], {"alpha": 1}, lambda a, b: a - b),
    "rsub": S([X(3, 4), 2.5], {"alpha": 1}, lambda a, c: c - a),
    "mul": S([I(5, 3, 4), 2.5], {}, lambda a, c: a * c),
    "div": S([X(3, 4), P(3, 4)], {}, lambda a, b: a / b),
    "div_mode": S([X(3, 4), P(3, 4)], {"rounding_mode": "floor"},
                  lambda a, b: a.div(b, rounding_mode="floor")),
    "div_scalar": S([X(3, 4), 3], {}, lambda a, n: a / n),
    "pow": S([P(3, 4), X(3, 4)], {}, lambda a, b: a.pow(b)),
    "leaky_relu": S([X(3, 4)], {"negative_slope": 0.2}, lambda a: a.leaky_relu(0.2)),
    "leaky_relu_": S([X(3, 4)], {"negative_slope": 0.2},
                     lambda a: F.leaky_relu(a.clone(), 0.2, inplace=True)),
    "gelu": S([X(3, 4)], {"approximate": "tanh"}, lambda a: F.gelu(a, approximate="tanh")),
    "softplus": S([X(3, 4)], {"beta": 2.0, "threshold": 1.0},
                  lambda a: F.softplus(a, beta=2.0, threshold=1.0)),
    "clamp": S([X(3, 4), -0.5, 0.5], {}, lambda a, lo, hi: a.clamp(lo, hi)),
    "clamp_min": S([X(3, 4), X(4)], {}, lambda a, lo: a.clamp_min(lo)),
    "clamp_max": S([X(3, 4), 0.25], {}, lambda a, hi: a.clamp_max(hi)),
    # mixed dtypes: PyTorch's promotion (float16 with int64 is float16)
    "maximum": S([X(3, 4, dtype="float16"), I(5, 3, 4)], {}, lambda a, b: a.maximum(b)),
    "minimum": S([I(5, 3, 4), X(3, 4)], {}, lambda a, b: a.minimum(b)),
    "where": S([B(3, 4), I(5, 3, 4), X(3, 4, dtype="float64")], {},
               lambda c, a, b: llgrad.where(c, a, b)),
    "addcmul": S([X(3, 4), X(4), X(3, 1)], {"value": 0.5},
                 lambda a, b, c: a.addcmul(b, c, value=0.5)),
    "addcdiv": S([X(3, 4), X(3, 4), P(4)], {"value": -2.0},
                 lambda a, b, c: llgrad.addcdiv(a, b, c, value=-2.0)),
    "lerp": S([X(3, 4), X(3, 4), X(4)], {}, lambda a, b, w: a.lerp(b, w)),
    "logical_not": S([B(3, 4)], {}, lambda a: a.logical_not()),
    "isnan": S([T((3, 4), gen="special")], {}, lambda a: a.isnan()),
    "isfinite": S([T((3, 4), gen="special")], {}, lambda a: a.isfinite()),
    # copies, casts, fills (fill/zero/copy are in-place only in the public API)
    "clone": S([X(3, 4)], {"memory_format": "preserve"}, lambda a: a.clone()),
    "to_dtype": S([X(3, 4)], {"dtype": "float64"}, lambda a: a.double()),
    "fill": S([X(3, 4), 2.5], {}, lambda a, v: a.clone().fill_(v)),
    "zero": S([X(3, 4)], {}, lambda a: a.clone().zero_()),
    "copy": S([X(3, 4), X(3, 4)], {}, lambda a, s: a.clone().copy_(s)),
    # reductions, normalisers, scans
    "sum": S([X(2, 3, 4)], {"dim": (1,), "keepdim": True}, lambda a: a.sum(1, keepdim=True)),
    "mean": S([X(2, 3, 4)], {"dim": (0, 2), "keepdim": False}, lambda a: a.mean((0, 2))),
    "prod": S([X(2, 3, 4)], {"dim": None, "keepdim": False}, lambda a: a.prod()),
    "amax": S([X(2, 3, 4)], {"dim": (1,), "keepdim": False}, lambda a: a.amax(1)),
    "amin": S([X(2, 3, 4)], {"dim": (0, 1), "keepdim": True},
              lambda a: a.amin((0, 1), keepdim=True)),
    "max": S([X(2, 3, 4)], {"dim": None, "keepdim": False}, lambda a: a.max()),
    "min": S([X(2, 3, 4)], {"dim": None, "keepdim": False}, lambda a: a.min()),
    "max_dim": S([X(2, 3, 4)], {"dim": 1, "keepdim": False}, lambda a: a.max(1)),
    "min_dim": S([X(2, 3, 4)], {"dim": 2, "keepdim": True}, lambda a: a.min(2, keepdim=True)),
    "argmax": S([X(2, 3, 4)], {"dim": 1, "keepdim": False}, lambda a: a.argmax(1)),
    "argmin": S([X(2, 3, 4)], {"dim": None, "keepdim": False}, lambda a: a.argmin()),
    "all": S([B(2, 3, 4)], {"dim": (1,), "keepdim": False}, lambda a: a.all(1)),
    "any": S([B(2, 3, 4)], {"dim": None, "keepdim": False}, lambda a: a.any()),
    "var": S([X(2, 3, 4)], {"dim": (1,), "correction": 1, "keepdim": False},
             lambda a: a.var(1)),
    "std": S([X(2, 3, 4)], {"dim": None, "correction": 0, "keepdim": False},
             lambda a: a.std(correction=0)),
    "logsumexp": S([X(2, 3, 4)], {"dim": (2,), "keepdim": False}, lambda a: a.logsumexp(2)),
    "softmax": S([X(2, 3, 4)], {"dim": 1}, lambda a: a.softmax(1)),
    "log_softmax": S([X(2, 3, 4)], {"dim": 2}, lambda a: a.log_softmax(2)),
    "cumsum": S([X(2, 3, 4)], {"dim": 1}, lambda a: a.cumsum(1)),
    # views (splitting the last dim is a view of every layout)
    "view": S([X(2, 3, 4)], {"shape": (2, 3, 2, 2)}, lambda a: a.view(2, 3, 2, 2)),
    "_unsafe_view": S([X(2, 3, 4)], {"shape": (2, 3, 2, 2)}, lambda a: a.reshape(2, 3, 2, 2)),
    "_reshape_alias": S([X(2, 3, 4)], {"shape": (2, 3, 2, 2)},
                        lambda a: a.reshape(2, 3, 2, 2)),
    "alias": S([X(3, 4)], {}, lambda a: a[:]),
    "transpose": S([X(2, 3, 4)], {"dim0": 0, "dim1": 2}, lambda a: a.transpose(0, 2)),
    "t": S([X(3, 4)], {}, lambda a: a.t()),
    "permute": S([X(2, 3, 4)], {"dims": (2, 0, 1)}, lambda a: a.permute(2, 0, 1)),
    "expand": S([X(3, 1)], {"size": (2, 3, 4)}, lambda a: a.expand(2, 3, 4)),
    "squeeze": S([X(2, 1, 3)], {"dim": 1}, lambda a: a.squeeze(1)),
    "squeeze_": S([X(2, 1, 3)], {"dim": 1}, lambda a: a.squeeze(1)),
    "unsqueeze": S([X(2, 3)], {"dim": 1}, lambda a: a.unsqueeze(1)),
    "slice": S([X(2, 3, 5)], {"dim": 2, "start": 1, "end": 5, "step": 2},
               lambda a: a[:, :, 1:5:2]),
    "select": S([X(2, 3, 4)], {"dim": 1, "index": 2}, lambda a: a.select(1, 2)),
    "diagonal": S([X(2, 3, 4)], {"offset": 1, "dim1": 1, "dim2": 2},
                  lambda a: a.diagonal(1, 1, 2)),
    # as_strided's geometry is relative to the storage, so its attrs follow the layout
    "as_strided": S([X(3, 4)],
                    lambda t: {"size": (2, 2), "stride": (1, 2), "storage_offset": t.offset,
                               "in_strides": t.strides, "in_offset": t.offset},
                    lambda a: a.as_strided((2, 2), (1, 2), a.storage_offset())),
    "unbind": S([X(3, 4)], {"dim": 0}, lambda a: a.unbind(0)),
    "split": S([X(3, 4)], {"sizes": (1, 3), "dim": 1, "with_sizes": True},
               lambda a: a.split([1, 3], 1)),
    # data movement
    "cat": S([X(3, 4), X(3, 2)], {"dim": 1}, lambda a, b: llgrad.cat([a, b], 1)),
    "stack": S([X(3, 4), X(3, 4)], {"dim": 0}, lambda a, b: llgrad.stack([a, b], 0)),
    "masked_fill": S([X(3, 4), B(3, 4), 0.5], {}, lambda a, m, v: a.masked_fill(m, v)),
    "gather": S([X(3, 4), I(4, 3, 2)], {"dim": 1}, lambda a, i: a.gather(1, i)),
    "scatter_add": S([X(3, 4), I(4, 3, 2), X(3, 2)], {"dim": 1},
                     lambda a, i, s: a.scatter_add(1, i, s)),
    "index_select": S([X(3, 4), I(4, 5)], {"dim": 1}, lambda a, i: a.index_select(1, i)),
    "index_add": S([X(3, 4), I(3, 5), X(5, 4)], {"dim": 0, "alpha": 2},
                   lambda a, i, s: a.index_add(0, i, s, alpha=2)),
    "index": S([X(3, 4), I(3, 2)], {"spec": ("T", ("slice", 1, 3, None))},
               lambda a, i: a[i, 1:3]),
    "index_put": S([X(3, 4), X(2, 4), I(3, 2)], {"spec": ("T",), "accumulate": True},
                   lambda a, v, i: a.index_put((i,), v, accumulate=True)),
    # the flat-buffer ops behind view VJPs have no public method: Tensor._op is the
    # Tensor API the VJP rules call them through
    "strided_scatter": S([X(2, 2)], {"geom": GEOM, "span": 8},
                         lambda a: a._op("strided_scatter", geom=GEOM, span=8)),
    "strided_gather": S([X(8)], {"geom": GEOM}, lambda a: a._op("strided_gather", geom=GEOM)),
    "strided_put": S([X(8), X(2, 2)], {"geom": GEOM},
                     lambda a, v: a._op("strided_put", v, geom=GEOM)),
    "full": S([], {"shape": (2, 3), "value": 1.5, "dtype": "float64"},
              lambda: llgrad.full((2, 3), 1.5, dtype=llgrad.float64), layouts=()),
    "arange": S([], {"start": 2, "step": 3, "size": 4, "dtype": "float32"},
                lambda: llgrad.arange(2, 14, 3, dtype=llgrad.float32), layouts=()),
    # random draws from an explicit generator state, as eager randn/rand draw them
    "rng_normal": S([T((628,), "int64", "rng")], {"shape": (3, 2), "dtype": "float32"},
                    lambda s: _eager_draw(s, llgrad.randn, (3, 2)), layouts=()),
    "rng_integers": S([T((628,), "int64", "rng")],
                      {"shape": (2, 3), "dtype": "int64", "of": "int32", "low": -3, "high": 9},
                      lambda s: _eager_draw(s, lambda *sh: llgrad.empty(
                          *sh, dtype=llgrad.int32).random_(-3, 9).long(), (2, 3)), layouts=()),
    "rng_uniform": S([T((628,), "int64", "rng")], {"shape": (5,), "dtype": "float32"},
                     lambda s: _eager_draw(s, llgrad.rand, (5,)), layouts=()),
    "rng_randperm": S([T((628,), "int64", "rng")], {"shape": (7,), "dtype": "int64"},
                      lambda s: _eager_draw(s, lambda n: llgrad.randperm(n), (7,)),
                      layouts=()),
    # Gamma and Dirichlet draws: rejection sampling (the draws' count read from alpha)
    "rng_standard_gamma": S([T((628,), "int64", "rng"), P(2, 5)],
                            {"shape": (2, 5), "dtype": "float32"},
                            lambda s, a: _eager_draw(s, lambda: llgrad.runtime.methods_random_more
                                                     ._standard_gamma(a), ()),
                            layouts=()),
    "rng_dirichlet": S([T((628,), "int64", "rng"), P(4, 3)],
                       {"shape": (4, 3), "dtype": "float32"},
                       lambda s, a: _eager_draw(s, lambda: llgrad.runtime.methods_random_more
                                                ._sample_dirichlet(a), ()),
                       layouts=()),
    "rng_poisson": S([T((628,), "int64", "rng"), P(2, 5)],
                     {"shape": (2, 5), "dtype": "float32"},
                     lambda s, r: _eager_draw(s, lambda: llgrad.poisson(r), ()),
                     layouts=()),
    "rng_binomial": S([T((628,), "int64", "rng"), P(2, 5), T((2, 5), gen="unit")],
                      {"shape": (2, 5), "dtype": "float32"},
                      lambda s, n, p: _eager_draw(s, lambda: llgrad.binomial(n, p), ()),
                      layouts=()),
    # training rrelu's slopes: a draw for each element <= 0 (their count read from x)
    "rng_rrelu_noise": S([T((628,), "int64", "rng"), X(2, 5)],
                         {"shape": (2, 5), "dtype": "float32", "lower": 0.125, "upper": 0.25},
                         lambda s, x: _eager_draw(s, lambda: llgrad.runtime.methods_random_more
                                                  .rrelu_noise(x, 0.125, 0.25), ()),
                         layouts=()),
    # matrix products and layers
    "mm": S([X(3, 4), X(4, 5)], {}, lambda a, b: a.mm(b)),
    "addmm": S([X(5), X(3, 4), X(4, 5)], {"beta": 0.5, "alpha": 2.0},
               lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2.0)),
    "bmm": S([X(2, 3, 4), X(2, 4, 5)], {}, lambda a, b: a.bmm(b)),
    "matmul": S([X(2, 3, 4), X(4, 5)], {}, lambda a, b: a.matmul(b)),
    "dot": S([X(4), X(4)], {}, lambda a, b: a.dot(b)),
    "mv": S([X(3, 4), X(4)], {}, lambda a, b: a.mv(b)),
    "layer_norm": S([X(2, 3, 4), X(4), X(4)], {"normalized_ndim": 1, "eps": 1e-5},
                    lambda x, w, b: F.layer_norm(x, (4,), w, b, eps=1e-5)),
    "batch_norm": S([X(4, 3, 5), X(3), X(3), None, None], {"training": True, "eps": 1e-5},
                    lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=True,
                                                         eps=1e-5)),
    # (F.batch_norm updates running statistics with momentum 1 to the batch's exactly)
    "batch_norm_with_stats": S([X(4, 3, 5), X(3), X(3)], {"eps": 1e-5},
                               lambda x, w, b: (lambda rm, rv: (F.batch_norm(
                                   x, rm, rv, w, b, training=True, momentum=1.0), rm, rv))(
                                   llgrad.zeros(3), llgrad.zeros(3))),
    "embedding": S([X(5, 3), I(5, 2, 3)], {"padding_idx": None},
                   lambda w, i: F.embedding(i, w)),
    "nll_loss": S([X(4, 5), I(5, 4), P(5)], {"ignore_index": -100, "reduction": "mean"},
                  lambda x, t, w: F.nll_loss(x, t, w)),
    "mse_loss": S([X(3, 4), X(3, 4)], {"reduction": "sum"},
                  lambda a, b: F.mse_loss(a, b, reduction="sum")),
    "binary_cross_entropy_with_logits": S(
        [X(3, 4), T((3, 4), gen="unit"), P(3, 4), None], {"reduction": "mean"},
        lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw)),
}
for _n in ("exp", "sin", "cos", "tanh", "erf", "sigmoid", "relu", "neg", "abs", "sign",
           "expm1", "silu", "floor", "round"):
    SPECS[_n] = S([X(3, 4)], {}, (lambda n: lambda a: getattr(a, n)())(_n))
for _n in ("log", "log1p", "sqrt", "rsqrt", "reciprocal"):
    SPECS[_n] = S([P(3, 4)], {}, (lambda n: lambda a: getattr(a, n)())(_n))
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):      # small ints: ties happen
    SPECS[_n] = S([I(3, 3, 4), I(3, 3, 4)], {}, (lambda n: lambda a, b: getattr(a, n)(b))(_n))
for _n in ("logical_and", "logical_or", "logical_xor"):
    SPECS[_n] = S([B(3, 4), B(3, 4)], {}, (lambda n: lambda a, b: getattr(a, n)(b))(_n))

# Samples of further op families live beside this file, one file each (specs_*.py): each
# runs in this module's namespace (S, T, X, ..., SPECS) and adds to SPECS.
SPEC_FILES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "specs_*.py")))
for _path in SPEC_FILES:
    with open(_path) as _f:
        exec(compile(_f.read(), _path, "exec"), globals())  # noqa: S102 (the suite's own)


# ---- layouts: a graph input of the base, then view nodes ----------------------------------

LAYOUTS = ("contiguous", "transposed", "sliced", "stepped", "broadcast")


def layout_plan(shape, layout):
    """(base shape, [(view op, attrs)], the same views in eager) that turn a base into a
    tensor of `shape` with the layout; None where the layout means nothing for `shape`."""
    nd = len(shape)
    if layout == "transposed" and nd >= 2:
        return (shape[:-2] + (shape[-1], shape[-2]),
                [("transpose", {"dim0": nd - 2, "dim1": nd - 1})],
                lambda t: t.transpose(-2, -1))
    if layout == "sliced" and nd >= 1:           # a nonzero storage offset
        n = shape[0]
        return ((n + 2,) + shape[1:], [("slice", {"dim": 0, "start": 1, "end": n + 1,
                                                  "step": 1})],
                lambda t: t[1:n + 1])
    if layout == "stepped" and nd >= 1:          # stride 2 in the last dim (and an offset)
        n = shape[-1]
        return (shape[:-1] + (2 * n,), [("slice", {"dim": nd - 1, "start": 1, "end": 2 * n,
                                                    "step": 2})],
                lambda t: t[..., 1::2])
    if layout == "broadcast":                    # stride 0 in the first dim of size > 1
        d = next((i for i, n in enumerate(shape) if n > 1), None)
        if d is not None:
            return (shape[:d] + (1,) + shape[d + 1:], [("expand", {"size": shape})],
                    lambda t: t.expand(*shape))
    return None


# ops whose values are complex (eager only: the IR holds no complex values; their tests are
# tests/runtime/test_complex.py and test_fft.py)
COMPLEX_ONLY = {n for n, op in OPS.items() if op.complex == "only"}


def _cases():
    out = []
    for name in sorted(set(OPS) - COMPLEX_ONLY):
        spec = SPECS.get(name)
        for layout in LAYOUTS:
            if layout != "contiguous":
                if spec is None or (spec.layouts is not None and layout not in spec.layouts):
                    continue
                if not any(isinstance(x, T) and layout_plan(x.shape, layout)
                           for x in spec.operands):
                    continue
            marks = ()
            if spec is not None and layout in spec.xfail:
                marks = pytest.mark.xfail(strict=True, reason=spec.xfail[layout])
            out.append(pytest.param(name, layout, id=f"{name}-{layout}", marks=marks))
    return out


def build_op_graph(name, layout, rng):
    """Graph inputs -> layout views -> the op. Returns the graph, the input arrays, the
    eager operands, and per operand the index of its root graph input (or None)."""
    spec = SPECS[name]
    b = Builder("op_" + name.lstrip("_"))
    operands, feeds, eager_in, roots = [], [], [], []
    for i, x in enumerate(spec.operands):
        if not isinstance(x, T):
            operands.append(x)
            eager_in.append(x)
            roots.append(None)
            continue
        plan = layout_plan(x.shape, layout) or (x.shape, [], lambda t: t)
        base_shape, views, eager_views = plan
        arr = x.make(base_shape, rng)
        v = b.input(TensorType(x.dtype, base_shape), f"in{i}")
        roots.append(len(feeds))
        feeds.append(arr)
        for op, attrs in views:
            v = b.add(op, [v], attrs, view_of=v, loc=f"layout.py:{i}")
        assert v.type.shape == x.shape
        operands.append(v)
        eager_in.append(eager_views(llgrad.tensor(arr)))
    attrs = spec.attrs
    if callable(attrs):
        attrs = attrs(*[v.type for v in operands if isinstance(v, Value)])
    view_of = operands[0] if OPS[name].kind == "view" else None
    out = b.add(name, operands, attrs, loc=f"model.py:{len(name)}", view_of=view_of)
    graph = b.ret(*(out if isinstance(out, tuple) else (out,)))
    return graph, feeds, eager_in, roots


def _np(t):
    return t.detach().numpy()


def _ptr(a):
    return a.__array_interface__["data"][0]


def test_every_op_has_a_sample():
    assert sorted(set(OPS) - set(SPECS) - COMPLEX_ONLY) == []
    assert sorted(set(SPECS) - set(OPS)) == []


def test_layouts_are_what_they_say():
    _, feeds, ins, _ = build_op_graph("mm", "stepped", np.random.default_rng(0))
    assert ins[0].stride() == (8, 2) and ins[0].storage_offset() == 1
    g, *_ = build_op_graph("mm", "broadcast", np.random.default_rng(0))
    assert [str(n.outputs[0].type) for n in g.nodes[:2]] == ["f32[3,4]{0,1}", "f32[4,5]{0,1}"]
    g, *_ = build_op_graph("mm", "sliced", np.random.default_rng(0))
    assert str(g.nodes[0].outputs[0].type) == "f32[3,4]{4,1}+4"


@pytest.mark.parametrize("name, layout", _cases())
def test_op(name, layout):
    assert name in SPECS, f"no sample operands for op {name!r}: add one to SPECS"
    spec = SPECS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    graph, feeds, eager_in, roots = build_op_graph(name, layout, rng)
    verify(graph)

    text = print_graph(graph)
    parsed = parse_graph(text)
    assert print_graph(parsed) == text
    verify(parsed)

    got = interpret(graph, *feeds)
    want = spec.eager(*eager_in)
    want = tuple(want) if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want) == len(graph.outputs)
    for g, w, v in zip(got, want, graph.outputs):
        w = _np(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        assert (g.dtype.name, g.shape) == (v.type.dtype, v.type.shape)   # the shape rule
        np.testing.assert_array_equal(g, w)
        if OPS[name].kind == "view":        # the type's strides/offset are the array's
            base = feeds[roots[0]]
            assert np.shares_memory(g, base) or g.size == 0
            assert tuple(s // g.itemsize for s in g.strides) == v.type.strides
            assert (_ptr(g) - _ptr(base)) // g.itemsize == v.type.offset
    for g, w in zip(interpret(parsed, *feeds), got):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op, a, b, want", [
    ("mul", "float32", "int64", "float32"),       # PyTorch, not NumPy (float64)
    ("add", "float16", "int64", "float16"),
    ("add", "uint8", "int8", "int16"),
    ("div", "int32", "int64", "float32"),         # float_out
    ("div", "float16", "int64", "float16"),
    ("add", "int64", 2.5, "float32"),             # a Python float: the default dtype
    ("add", "bool", 1, "int64"),
    ("add", "float32", ("float64", ()), "float32"),   # a 0-d tensor of the same category
    ("add", "int64", ("float64", ()), "float64"),     # ... of a higher one
])
def test_promotion_is_pytorchs_and_eagers(op, a, b, want):
    def typ(x):
        dt, shape = x if isinstance(x, tuple) else (x, (3,))
        return TensorType(dt, shape)

    bx = Builder()
    ins = [bx.input(typ(x)) if isinstance(x, (str, tuple)) else x for x in (a, b)]
    out = bx.add(op, ins, {"alpha": 1} if op == "add" else {})
    g = bx.ret(out)
    verify(g)
    assert out.type.dtype == want
    feeds = [np.ones(v.type.shape, v.type.dtype) for v in g.inputs]
    got, = interpret(g, *feeds)
    assert got.dtype == want
    it = iter(feeds)
    eager = [llgrad.from_numpy(next(it)) if isinstance(x, (str, tuple)) else x for x in (a, b)]
    assert _np(getattr(eager[0], op)(eager[1])).dtype == want


@pytest.mark.xfail(strict=True, raises=(VerifyError, OverflowError),
                   reason="ops_elementwise binary impls hand Python ints to NumPy 2, which "
                   "refuses out-of-range ones (uint8 * -1); PyTorch wraps to 255")
def test_integer_scalar_out_of_the_tensors_range_wraps():
    b = Builder()
    x = b.input(TensorType("uint8", (2,)), "x")
    g = b.ret(b.add("mul", [x, -1], types=[TensorType("uint8", (2,))]))
    verify(g)
    got, = interpret(g, np.array([1, 2], np.uint8))
    np.testing.assert_array_equal(got, np.array([255, 254], np.uint8))
    np.testing.assert_array_equal(_np(llgrad.tensor(np.array([1, 2], np.uint8)) * -1), got)


def test_strided_gather_reads_the_logical_buffer():
    # the geometry addresses the buffer's elements, not its memory: a stepped (or stride-0)
    # buffer is read through its own strides
    b = Builder()
    base = b.input(TensorType("float32", (16,)), "base")
    buf = b.add("slice", [base], {"dim": 0, "start": 1, "end": 16, "step": 2}, view_of=base)
    g = b.ret(b.add("strided_gather", [buf], {"geom": GEOM}))
    verify(g)
    arr = np.arange(16, dtype=np.float32)
    got, = interpret(g, arr)
    np.testing.assert_array_equal(got, arr[1::2][[[1, 4], [2, 5]]])


# ---- verifier errors ------------------------------------------------------------------------

F32_34 = TensorType("float32", (3, 4))


def test_verify_use_before_definition():
    b = Builder()
    x = b.input(F32_34, "x")
    y = b.add("exp", [x], loc="model.py:3")
    z = b.add("neg", [y], loc="model.py:4")
    g = b.ret(z)
    g.nodes.reverse()
    with pytest.raises(VerifyError, match=r"node 0 `neg %1` \(model\.py:4\): uses a value "
                                          r"before it is defined"):
        verify(g)


def test_verify_result_type_disagrees_with_rule():
    b = Builder()
    x = b.input(F32_34, "x")
    y = b.add("exp", [x], loc="model.py:7")
    b.add("sum", [y], {"dim": (1,), "keepdim": False}, types=[TensorType("float32", (3, 1))],
          loc="model.py:8")
    g = b.ret(y)
    with pytest.raises(VerifyError, match=r"node 1 `sum %0` \(model\.py:8\): result type "
                                          r"f32\[3,1\]\{1,1\} but the op's rule gives "
                                          r"f32\[3\]\{1\}"):
        verify(g)
    # dtype too, and a view's strides/offset are part of its type
    b = Builder()
    x = b.input(F32_34, "x")
    b.add("exp", [x], types=[TensorType("float64", (3, 4))], loc="a.py:1")
    with pytest.raises(VerifyError, match=r"node 0 `exp %x` \(a\.py:1\): result type f64"):
        verify(b.ret())
    b = Builder()
    x = b.input(F32_34, "x")
    b.add("t", [x], types=[TensorType("float32", (4, 3))], view_of=x, loc="a.py:2")
    with pytest.raises(VerifyError, match=r"node 0 `t %x` \(a\.py:2\): result type "
                                          r"f32\[4,3\]\{3,1\} but the op's rule gives "
                                          r"f32\[4,3\]\{1,4\}"):
        verify(b.ret())


def test_verify_view_must_alias_its_first_operand():
    b = Builder()
    x = b.input(F32_34, "x")
    y = b.input(F32_34, "y")
    b.add("transpose", [x], {"dim0": 0, "dim1": 1}, view_of=y, loc="model.py:11")
    with pytest.raises(VerifyError, match=r"node 0 `transpose %x` \(model\.py:11\): a view "
                                          r"must alias its first operand"):
        verify(b.ret())
    b = Builder()
    x = b.input(F32_34, "x")
    b.add("slice", [x], {"dim": 0, "start": 1, "end": 2, "step": 1}, loc="model.py:12")
    with pytest.raises(VerifyError, match=r"`slice %x` \(model\.py:12\): a view must alias"):
        verify(b.ret())
    b = Builder()
    x = b.input(F32_34, "x")
    b.add("exp", [x], view_of=x, loc="model.py:13")
    with pytest.raises(VerifyError, match=r"`exp %x` \(model\.py:13\): only view ops may "
                                          r"alias a value"):
        verify(b.ret())


def test_verify_unknown_op():
    b = Builder()
    x = b.input(F32_34, "x")
    y = b.add("exp", [x], loc="model.py:20")
    b.add("frobnicate", [y, 2.0], {"k": 1}, types=[F32_34], loc="model.py:21")
    with pytest.raises(VerifyError, match=r"node 1 `frobnicate %0, 2\.0` \(model\.py:21\): "
                                          r"unknown op 'frobnicate'"):
        verify(b.ret())


def test_verify_invalid_operands():
    b = Builder()
    x = b.input(F32_34, "x")
    b.add("mm", [x, x], types=[TensorType("float32", (3, 4))], loc="model.py:30")
    with pytest.raises(VerifyError, match=r"node 0 `mm %x, %x` \(model\.py:30\): invalid "
                                          r"operands"):
        verify(b.ret())


def test_verify_rejects_a_view_that_copies():
    # _unsafe_view reshapes with a copy when a view is impossible (eager only calls it on
    # contiguous tensors): the rule must not invent a geometry for the copy
    b = Builder()
    x = b.input(F32_34, "x")
    t = b.add("t", [x], view_of=x)
    b.add("_unsafe_view", [t], {"shape": (12,)}, types=[TensorType("float32", (12,))],
          view_of=t, loc="model.py:40")
    with pytest.raises(VerifyError, match=r"node 1 `_unsafe_view %0` \(model\.py:40\): "
                                          r"invalid operands: .*not a view"):
        verify(b.ret())


def test_verify_returns_and_write_backs():
    b = Builder("g")
    x = b.input(F32_34, "x")
    y = b.add("exp", [x])
    g = b.ret(y)
    g.outputs = [Value(F32_34, None, 0, "ghost")]
    with pytest.raises(VerifyError, match=r"graph g: returns an undefined value"):
        verify(g)
    g.outputs = [y]
    g.mutated = {0: b.add("sum", [y], {"dim": None, "keepdim": False})}
    with pytest.raises(VerifyError, match=r"write-back of %x changes its shape"):
        verify(g)


# ---- determinism and the text form ---------------------------------------------------------

def build_mlp():
    b = Builder("mlp")
    x = b.input(TensorType("float32", (8, 4)), "x")
    w1 = b.input(TensorType("float32", (4, 16)), "w1")
    b1 = b.input(TensorType("float32", (16,)), "b1")
    w2 = b.input(TensorType("float32", (16, 3)), "w2")
    h = b.add("mm", [x, w1], loc="mlp.py:5")
    h = b.add("add", [h, b1], {"alpha": 1}, loc="mlp.py:5")
    h = b.add("tanh", [h], loc="mlp.py:6")
    wt = b.add("t", [w2], view_of=w2, loc="mlp.py:7")
    y = b.add("mm", [h, b.add("t", [wt], view_of=wt, loc="mlp.py:7")], loc="mlp.py:7")
    loss = b.add("sum", [y], {"dim": None, "keepdim": False}, loc="mlp.py:8")
    return b.ret(loss, y)


MLP_TEXT = """\
graph mlp(%x: f32[8,4]{4,1}, %w1: f32[4,16]{16,1}, %b1: f32[16]{1}, %w2: f32[16,3]{3,1}) {
  %0 = mm %x, %w1                      : f32[8,16]{16,1}        # mlp.py:5
  %1 = add %0, %b1 alpha=1             : f32[8,16]{16,1}        # mlp.py:5
  %2 = tanh %1                         : f32[8,16]{16,1}        # mlp.py:6
  %3 = t %w2                           : f32[3,16]{1,3}         # view of %w2; mlp.py:7
  %4 = t %3                            : f32[16,3]{3,1}         # view of %3; mlp.py:7
  %5 = mm %2, %4                       : f32[8,3]{3,1}          # mlp.py:7
  %6 = sum %5 dim=None keepdim=False   : f32[]{}                # mlp.py:8
  return %6, %5
}"""


def test_building_twice_prints_identically():
    assert print_graph(build_mlp()) == print_graph(build_mlp())
    g, *_ = build_op_graph("layer_norm", "stepped", np.random.default_rng(1))
    h, *_ = build_op_graph("layer_norm", "stepped", np.random.default_rng(2))
    assert str(g) == str(h)


def test_golden_mlp_text():
    g = build_mlp()
    verify(g)
    assert print_graph(g) == MLP_TEXT
    assert print_graph(parse_graph(MLP_TEXT)) == MLP_TEXT


def test_mlp_interprets_like_eager():
    g = build_mlp()
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(v.type.shape).astype(np.float32) for v in g.inputs]
    loss, y = interpret(g, *arrays)
    x, w1, b1, w2 = (llgrad.tensor(a) for a in arrays)
    want = (x.mm(w1) + b1).tanh().mm(w2.t().t())
    np.testing.assert_array_equal(y, _np(want))
    np.testing.assert_array_equal(loss, _np(want.sum()))


def test_round_trip_of_literals():
    b = Builder("lit")
    x = b.input(TensorType("float32", (3, 4)), "x")
    i = b.input(TensorType("int64", (2,)), "i")
    y = b.add("index", [x, i], {"spec": ("T", ("slice", None, 3, 2))})
    z = b.add("clamp", [x, None, -0.5])
    c = b.add("constant", [], {"value": [[1.5, -2.0], [True, 0.1]], "dtype": "float64"})
    d = b.add("split", [x], {"sizes": (1, 1, 2), "dim": 1, "with_sizes": True}, view_of=x)
    g = b.ret(y, z, c, *d)
    verify(g)
    text = str(g)
    assert "spec=('T',('slice',None,3,2))" in text and "clamp %x, None, -0.5" in text
    assert "%3, %4, %5 = split %x" in text
    parsed = parse_graph(text)
    assert print_graph(parsed) == text
    assert parsed.nodes[0].attrs == {"spec": ("T", ("slice", None, 3, 2))}
    assert parsed.nodes[1].inputs[1:] == [None, -0.5]


def test_round_trip_of_nonfinite_constants():
    b = Builder("nf")
    x = b.input(TensorType("float32", (3,)), "x")
    c = b.add("constant", [], {"value": [float("inf"), float("-inf"), float("nan")],
                               "dtype": "float32"})
    g = b.ret(b.add("add", [x, c], {"alpha": 1}))
    text = str(g)
    parsed = parse_graph(text)
    assert print_graph(parsed) == text
    out, = interpret(parsed, np.zeros(3, np.float32))
    np.testing.assert_array_equal(out, [np.inf, -np.inf, np.nan])


# ---- passes ---------------------------------------------------------------------------------

def _check_pass(p, g, feeds):
    """p(g) verifies, computes what g computes, and leaves g as it was (a pass that changes
    nothing may return g itself)."""
    before, want = str(g), interpret(g, *[a.copy() for a in feeds])
    h = p(g)
    verify(h)
    for a, b in zip(interpret(h, *[a.copy() for a in feeds]), want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert str(g) == before
    for graph in (g, h):          # each Value's node is the node that lists it
        for n in graph.nodes:
            assert all(o.node is n for o in n.outputs)
    assert print_graph(parse_graph(str(h))) == str(h)
    return h


def _ops(g):
    return [n.op for n in g.nodes]


def test_dce_removes_dead_nodes():
    b = Builder()
    x = b.input(F32_34, "x")
    y = b.add("exp", [x])
    dead = b.add("sin", [y])
    b.add("neg", [dead])                               # dead chain of two
    t = b.add("t", [x], view_of=x)
    b.add("sum", [t], {"dim": None, "keepdim": False})  # dead user of a live view
    out = b.add("mul", [t, 2.0])
    upd = b.add("add", [x, 1.0], {"alpha": 1})          # live only through the write-back
    g = b.ret(out)
    g.mutated = {0: upd}
    h = _check_pass(dce, g, [np.ones((3, 4), np.float32)])
    assert _ops(h) == ["t", "mul", "add"]
    g.mutated = {}
    assert _ops(_check_pass(dce, g, [np.ones((3, 4), np.float32)])) == ["t", "mul"]


def test_cse_merges_duplicates_but_not_different_attrs():
    b = Builder()
    x = b.input(F32_34, "x")
    a1 = b.add("add", [x, 1.0], {"alpha": 1})
    a2 = b.add("add", [x, 1.0], {"alpha": 1})          # duplicate of a1
    a3 = b.add("add", [x, 1.0], {"alpha": 2})          # different attribute
    a4 = b.add("add", [x, 1], {"alpha": 1})            # different constant (int)
    e1 = b.add("exp", [a1])
    e2 = b.add("exp", [a2])                            # duplicate once a2 is a1
    s1 = b.add("sum", [e1], {"dim": (0,), "keepdim": False})
    s2 = b.add("sum", [e2], {"dim": (1,), "keepdim": False})
    v1 = b.add("transpose", [x], {"dim0": 0, "dim1": 1}, view_of=x)
    v2 = b.add("transpose", [x], {"dim0": 0, "dim1": 1}, view_of=x)
    m = b.add("mul", [v1, v2])
    g = b.ret(s1, s2, a3, a4, e2, m)
    h = _check_pass(cse, g, [np.random.default_rng(4).standard_normal((3, 4), np.float32)])
    assert _ops(h) == ["add", "add", "add", "exp", "sum", "sum", "transpose", "mul"]
    assert h.outputs[4] is h.nodes[3].output
    assert h.nodes[7].inputs[0] is h.nodes[7].inputs[1]
    assert [n.attrs.get("alpha") for n in h.nodes[:3]] == [1, 2, 1]


def test_passes_compose():
    g, feeds, *_ = build_op_graph("layer_norm", "sliced", np.random.default_rng(6))
    h = g
    for p in (cse, dce, cse, dce):
        h = _check_pass(p, h, feeds)
    assert str(h) == str(g)


# ---- deep graphs --------------------------------------------------------------------------

@pytest.mark.slow      # (~7 s)
def test_100k_node_chain():
    b = Builder("deep")
    typ = TensorType("float32", (4,))
    v = b.input(typ, "x")
    for _ in range(50_000):
        v = b.add("add", [v, 1.0], {"alpha": 1}, types=[typ])
        v = b.add("mul", [v, 0.5], types=[typ])
    g = b.ret(v)
    assert len(g.nodes) == 100_000
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)    # nothing may recurse once per node
    try:
        verify(g)
        text = print_graph(g)
        parsed = parse_graph(text)
        assert print_graph(parsed) == text
        out, = interpret(parsed, np.full(4, 7.0, np.float32))
    finally:
        sys.setrecursionlimit(limit)
    np.testing.assert_allclose(out, 1.0)


# ---- the interpreter's aliasing ----------------------------------------------------------------

def test_views_share_memory_with_their_base():
    b = Builder()
    x = b.input(TensorType("float32", (4, 6)), "x")
    s = b.add("slice", [x], {"dim": 1, "start": 1, "end": 6, "step": 2}, view_of=x)
    t = b.add("transpose", [s], {"dim0": 0, "dim1": 1}, view_of=s)
    u = b.add("unsqueeze", [t], {"dim": 0}, view_of=t)
    e = b.add("expand", [u], {"size": (2, 3, 4)}, view_of=u)
    g = b.ret(s, t, e, b.add("exp", [t]))
    verify(g)
    arr = np.arange(24, dtype=np.float32).reshape(4, 6)
    s_, t_, e_, ex = interpret(g, arr)
    for a in (s_, t_, e_):
        assert np.shares_memory(a, arr)
    assert not np.shares_memory(ex, arr)
    assert e_.strides[0] == 0
    np.testing.assert_array_equal(e_[1], arr[:, 1::2].T)
    arr[0, 1] = -1                  # a write to the base shows through every view
    assert s_[0, 0] == t_[0, 0] == e_[1, 0, 0] == -1


def test_write_back_updates_the_input():
    b = Builder("inplace")
    x = b.input(TensorType("float32", (4,)), "x")
    y = b.add("add", [x, 1.0], {"alpha": 1})
    g = b.ret(y)
    g.mutated = {0: y}                      # x.add_(1.0)
    verify(g)
    text = str(g)
    assert "  mutate %x = %0" in text.splitlines()
    assert print_graph(parse_graph(text)) == text
    arr = np.arange(4, dtype=np.float32)
    out, = interpret(g, arr)
    np.testing.assert_array_equal(arr, [1, 2, 3, 4])
    np.testing.assert_array_equal(out, arr)


def test_write_back_through_a_view():
    # x[1:3] *= 2 as CopySlices records it: compute on the view, put it back into the base
    b = Builder("copy_slices")
    x = b.input(TensorType("float32", (4,)), "x")
    s = b.add("slice", [x], {"dim": 0, "start": 1, "end": 3, "step": 1}, view_of=x)
    m = b.add("mul", [s, 2.0])
    full = b.add("strided_put", [x, m], {"geom": ((2,), (1,), 1)})
    g = b.ret(s)
    g.mutated = {0: full}
    verify(g)
    arr = np.arange(4, dtype=np.float32)
    s_, = interpret(parse_graph(str(g)), arr)
    np.testing.assert_array_equal(arr, [0, 2, 4, 3])
    assert np.shares_memory(s_, arr)
    np.testing.assert_array_equal(s_, [2, 4])      # the view sees the write-back
    t = llgrad.tensor(np.arange(4, dtype=np.float32))
    t[1:3] *= 2
    np.testing.assert_array_equal(_np(t), arr)


def test_interpret_checks_its_inputs():
    g = build_mlp()
    with pytest.raises(TypeError, match="takes 4 inputs, got 1"):
        interpret(g, np.zeros((8, 4), np.float32))
    with pytest.raises(ValueError, match=r"input %x: expected shape \(8, 4\)"):
        interpret(g, *[np.zeros((1,), np.float32)] * 4)

