"""Every op of the op table (llgrad.ir.OPS), exercised through the public API.

SAMPLES maps each differentiable op to sample programs (functions of their inputs, written
once against a module `T` that is either llgrad or torch). Each sample is gradchecked,
gradgradchecked (unless its op is in NOT_TWICE_DIFFERENTIABLE), its backward node name is
checked, and, when PyTorch is installed, its node name, forward values and gradients are
compared with PyTorch's for the same program. EXEMPT lists the non-differentiable ops.
Adding an op to the table without a sample fails `test_every_op_has_a_sample` at once.
"""
import collections
import glob
import os

import numpy as np
import pytest

import llgrad
from llgrad.ir import OPS
from llgrad.runtime.node import OpNode

_rng = np.random.default_rng(20240611)


# ---- input builders ----------------------------------------------------------------------
# Float arrays become float64 leaves with requires_grad=True; K(...) wraps a constant (no
# grad, any dtype); integer and bool arrays are constants.

def R(*shape, lo=-1.5, hi=1.5):
    """Uniform values (no ties in practice)."""
    return np.asarray(_rng.uniform(lo, hi, shape))


def P(*shape):
    """Positive values, away from 0."""
    return np.asarray(_rng.uniform(0.5, 2.0, shape))


def NZ(*shape):
    """Values away from 0 (both signs): no kink of relu/abs/sign within eps."""
    return np.asarray(_rng.uniform(0.3, 1.5, shape) * _rng.choice([-1.0, 1.0], shape))


# Cases added after the first corpus draw from a generator of their own (R_, NZ_), so that
# the inputs of the others (and the compiled batches built from them) stay as they were.
_rng_new = np.random.default_rng(20261129)


def R_(*shape, lo=-1.5, hi=1.5):
    return np.asarray(_rng_new.uniform(lo, hi, shape))


def NZ_(*shape):
    return np.asarray(_rng_new.uniform(0.3, 1.5, shape) * _rng_new.choice([-1.0, 1.0], shape))


def I(*rows):  # noqa: E743
    """An int64 index: I(2, 0, 2) is 1-D, I([0, 1], [1, 3]) is 2-D."""
    return np.array(rows, dtype=np.int64)


def B(*rows):
    return np.array(rows, dtype=bool)


class K:
    """A constant input: built as a tensor without requires_grad."""

    def __init__(self, arr):
        self.arr = np.asarray(arr)


def build(T, inputs):
    out = []
    for a in inputs:
        if isinstance(a, np.generic):
            a = np.asarray(a)
        if isinstance(a, K):
            out.append(T.tensor(np.array(a.arr)))
        elif isinstance(a, np.ndarray) and a.dtype.kind == "f":
            out.append(T.tensor(np.array(a), dtype=T.float64, requires_grad=True))
        elif isinstance(a, np.ndarray):
            out.append(T.tensor(np.array(a)))
        else:
            out.append(a)
    return out


def F(T):
    return T.nn.functional


def _setitem(t, idx, value):
    t[idx] = value
    return t


def _inplace_view(t, f):
    """Run the in-place f on (a view of) t; return t (its grad_fn is then CopySlices)."""
    f(t)
    return t


def _grad(T, out, inp, g):
    """The gradient as a differentiable function (create_graph=True)."""
    return T.autograd.grad(out, inp, g, create_graph=True)[0]


# ---- sample programs -----------------------------------------------------------------------

class Case:
    """One sample program of an op.

    fn(T, *inputs) -> a tensor or a tuple of tensors. node: the class name of the first
    output's grad_fn (PyTorch's).
    top=False: the op is not the program's last step (it must still be in its graph).
    torch_name=False: the node names are llgrad's own (the strided-buffer ops behind view
    VJPs have no PyTorch counterpart). torch: a reason string skips the PyTorch comparison.
    gradgrad: a reason string skips gradgradcheck for this program; gradcheck: a reason
    string skips both (at a kink, or where the gradient is not the derivative by
    definition); the PyTorch comparison still checks the gradient.
    xfail: {test kind: reason} for known bugs outside llgrad/ir (kinds: gradcheck,
    gradgradcheck, node, torch); strict, so a fix shows up as XPASS.
    """

    def __init__(self, id, fn, *inputs, node, eps=1e-6, atol=1e-5, rtol=1e-3, gradgrad=None,
                 gradcheck=None, top=True, torch_name=True, torch=None, xfail=None):
        self.id, self.fn, self.inputs, self.node = id, fn, inputs, node
        self.eps, self.atol, self.rtol = eps, atol, rtol
        self.gradcheck, self.gradgrad = gradcheck, gradgrad or gradcheck
        self.top, self.torch_name, self.torch = top, torch_name, torch
        self.xfail = xfail or {}

    def __repr__(self):
        return self.id


SAMPLES = collections.OrderedDict()


def S(name, *cases):
    assert name not in SAMPLES, name
    SAMPLES[name] = list(cases)


_KINK = "a kink or a tie (a subgradient, as PyTorch picks it): compared with PyTorch only"


def binary(f, node, a=R, b=R, scalar=1.5, inplace=None):
    cases = [
        Case("same", lambda T, x, y: f(x, y), a(3, 4), b(3, 4), node=node),
        Case("bcast", lambda T, x, y: f(x, y), a(3, 1), b(4), node=node),
        Case("bcast_lead", lambda T, x, y: f(x, y), a(2, 1, 3), b(4, 1), node=node),
        Case("noncontig", lambda T, x, y: f(x.t(), y[:, ::2]), a(4, 3), b(3, 8), node=node),
    ]
    if scalar is not None:
        cases.append(Case("scalar", lambda T, x: f(x, scalar), a(2, 3), node=node))
    if inplace is not None:
        cases.append(Case("inplace", lambda T, x, y: inplace(x * 1, y), a(3, 4), b(4),
                          node=node))
    return cases


def unary(f, node, dom=R, inplace=None, **kw):
    cases = [
        Case("plain", lambda T, x: f(T, x), dom(2, 3), node=node, **kw),
        Case("noncontig", lambda T, x: f(T, x.t()[:, ::2]), dom(3, 4), node=node, **kw),
        Case("scalar0d", lambda T, x: f(T, x), dom(), node=node, **kw),
    ]
    if inplace is not None:
        cases.append(Case("inplace", lambda T, x: inplace(x.clone()), dom(2, 3), node=node, **kw))
    return cases


# -- arithmetic --
S("add", *binary(lambda x, y: x + y, "AddBackward0", inplace=lambda x, y: x.add_(y)),
  Case("alpha", lambda T, x, y: x.add(y, alpha=2.5), R(3, 4), R(4), node="AddBackward0"),
  Case("radd", lambda T, x: 2.0 + x, R(3), node="AddBackward0"),
  Case("fn", lambda T, x, y: T.add(x, y), R(2, 3), R(2, 1), node="AddBackward0"))
S("sub", *binary(lambda x, y: x - y, "SubBackward0", inplace=lambda x, y: x.sub_(y)),
  Case("alpha", lambda T, x, y: x.sub(y, alpha=0.5), R(3, 4), R(3, 1), node="SubBackward0"))
S("rsub",
  Case("scalar", lambda T, x: 2.0 - x, R(3, 4), node="RsubBackward1"),
  Case("noncontig", lambda T, x: 1 - x.t(), R(3, 2), node="RsubBackward1"))
S("mul", *binary(lambda x, y: x * y, "MulBackward0", inplace=lambda x, y: x.mul_(y)),
  Case("rmul", lambda T, x: 3.0 * x, R(2, 2), node="MulBackward0"),
  Case("self", lambda T, x: x * x, R(2, 3), node="MulBackward0"),
  Case("0d_tensor", lambda T, x, s: x * s, R(3, 2), R(), node="MulBackward0"),
  Case("int_other", lambda T, x, i: x * i, R(3), I(2, -1, 3), node="MulBackward0"),
  Case("f32_other", lambda T, x, y: x * y, R(3), K(R(3).astype(np.float32)), node="MulBackward0"),
  Case("inplace_view", lambda T, x, w: _inplace_view(x.clone(), lambda v: v[:, 1].mul_(w)),
       R(2, 3), R(2), node="CopySlices", top=False))
S("div", *binary(lambda x, y: x / y, "DivBackward0", b=NZ, inplace=lambda x, y: x.div_(y)),
  Case("fn", lambda T, x, y: T.div(x, y), R(2, 3), NZ(3), node="DivBackward0"),
  Case("int_numerator", lambda T, i, y: i / y, I(2, -1, 3), NZ(3), node="DivBackward0"),
  Case("inplace_view", lambda T, x, y: _inplace_view(x * 1, lambda v: v[1:].div_(y)),
       R(3, 2), NZ(2), node="CopySlices", top=False))
S("div_mode",
  Case("floor", lambda T, x: x.div(0.3, rounding_mode="floor"), R_(3, 4), node="DivBackward2"),
  Case("trunc_tensor", lambda T, x, y: T.div(x, y, rounding_mode="trunc"), R_(3, 4), NZ_(4),
       node="DivBackward2"),
  Case("none_given", lambda T, x, y: x.t().div(y, rounding_mode=None), R_(3, 2), NZ_(2, 3),
       node="DivBackward2"),
  Case("inplace", lambda T, x, y: (x * 1).div_(y, rounding_mode=None), R_(3, 4), NZ_(4),
       node="DivBackward2"))
S("div_scalar",
  Case("cross_entropy_probs", lambda T, x, p: F(T).cross_entropy(x, p), R_(3, 4),
       K(np.full((3, 4), 0.25, np.float32)), node="DivBackward1"),
  Case("cross_entropy_probs_3d", lambda T, x, p: F(T).cross_entropy(x, p, label_smoothing=0.1),
       R_(2, 3, 2), K(np.full((2, 3, 2), 1 / 3, np.float32)), node="DivBackward1"))
S("pow",
  Case("square", lambda T, x: x ** 2, R(3, 4), node="PowBackward0"),
  Case("frac", lambda T, x: x ** 2.5, P(2, 3), node="PowBackward0"),
  Case("neg_exp", lambda T, x: x.pow(-1.5), P(2, 3), node="PowBackward0"),
  Case("zero_exp", lambda T, x: x ** 0, R(2, 2), node="PowBackward0"),
  Case("square_method", lambda T, x: x.square(), R(2, 3), node="PowBackward0"),
  Case("tensor", lambda T, x, y: x ** y, P(3, 4), R(3, 4), node="PowBackward1"),
  Case("tensor_bcast", lambda T, x, y: T.pow(x, y), P(3, 1), R(4), node="PowBackward1"),
  Case("noncontig", lambda T, x, y: x.t() ** y[::2], P(4, 3), R(6, 4), node="PowBackward1"),
  Case("scalar_base", lambda T, x: 2.0 ** x, R(3, 4), node="PowBackward2"),
  Case("zero_scalar_base", lambda T, x: 0.0 ** x, P(3), node="PowBackward2"),
  Case("zero_base", lambda T, b, y: b ** y, K([0.0, 1.5, 2.0]), P(3), node="PowBackward1"),
  Case("int_exponent", lambda T, x, e: x ** e, R(3), I(2, 3, 0), node="PowBackward1"),
  Case("inplace", lambda T, x: (x * 1).pow_(3), R(2, 3), node="PowBackward0"))
S("neg", *unary(lambda T, x: -x, "NegBackward0", inplace=lambda x: x.neg_()),
  Case("fn", lambda T, x: T.neg(x), R(3), node="NegBackward0"))

# -- unary math --
S("exp", *unary(lambda T, x: x.exp(), "ExpBackward0", inplace=lambda x: x.exp_()),
  Case("inplace_view", lambda T, x: _inplace_view(x.clone(), lambda v: v[:, ::2].exp_()),
       R(2, 3), node="CopySlices", top=False))
S("log", *unary(lambda T, x: x.log(), "LogBackward0", dom=P, inplace=lambda x: x.log_()))
S("log1p", *unary(lambda T, x: T.log1p(x), "Log1PBackward0", dom=P))
S("expm1", *unary(lambda T, x: x.expm1(), "Expm1Backward0", inplace=lambda x: x.expm1_()))
S("sqrt", *unary(lambda T, x: x.sqrt(), "SqrtBackward0", dom=P, inplace=lambda x: x.sqrt_()))
S("rsqrt", *unary(lambda T, x: x.rsqrt(), "RsqrtBackward0", dom=P, inplace=lambda x: x.rsqrt_()))
S("reciprocal", *unary(lambda T, x: x.reciprocal(), "ReciprocalBackward0", dom=NZ,
                       inplace=lambda x: x.reciprocal_()),
  Case("rtruediv", lambda T, x: 2.0 / x, NZ(3), node="MulBackward0", top=False))
S("abs", *unary(lambda T, x: x.abs(), "AbsBackward0", dom=NZ, inplace=lambda x: x.abs_()),
  Case("builtin", lambda T, x: abs(x), NZ(4), node="AbsBackward0"),
  Case("at_zero", lambda T, x: x.abs(), np.array([-1.0, 0.0, 1.0]), node="AbsBackward0",
       gradcheck=_KINK))
S("sign", *unary(lambda T, x: x.sign(), "SignBackward0", dom=NZ),
  Case("at_zero", lambda T, x: x.sign(), np.array([-1.0, 0.0, 1.0]), node="SignBackward0",
       gradcheck=_KINK))
S("sin", *unary(lambda T, x: x.sin(), "SinBackward0", inplace=lambda x: x.sin_()))
S("cos", *unary(lambda T, x: T.cos(x), "CosBackward0"))
S("tanh", *unary(lambda T, x: x.tanh(), "TanhBackward0", inplace=lambda x: x.tanh_()),
  Case("functional", lambda T, x: F(T).tanh(x), R(3), node="TanhBackward0"))
S("erf", *unary(lambda T, x: x.erf(), "ErfBackward0"))
S("sigmoid", *unary(lambda T, x: x.sigmoid(), "SigmoidBackward0",
                    inplace=lambda x: x.sigmoid_()),
  Case("functional", lambda T, x: F(T).sigmoid(x), R(3), node="SigmoidBackward0"),
  Case("large", lambda T, x: x.sigmoid(), np.array([-30.0, -8.0, 8.0, 30.0]),
       node="SigmoidBackward0"),
  Case("inplace_view", lambda T, x: _inplace_view(x * 1, lambda v: v[1].sigmoid_()), R(2, 3),
       node="CopySlices", top=False))

# -- activations --
S("relu", *unary(lambda T, x: x.relu(), "ReluBackward0", dom=NZ, inplace=lambda x: x.relu_()),
  Case("functional", lambda T, x: F(T).relu(x), NZ(2, 3), node="ReluBackward0"),
  Case("at_zero", lambda T, x: x.relu(), np.array([-1.0, 0.0, 1.0]), node="ReluBackward0",
       gradcheck=_KINK))
S("leaky_relu",
  *unary(lambda T, x: F(T).leaky_relu(x), "LeakyReluBackward0", dom=NZ),
  Case("slope", lambda T, x: F(T).leaky_relu(x, 0.2), NZ(3, 4), node="LeakyReluBackward0"),
  Case("at_zero", lambda T, x: F(T).leaky_relu(x, 0.2), np.array([-1.0, 0.0, 1.0]),
       node="LeakyReluBackward0", gradcheck=_KINK),
  )
S("leaky_relu_",
  Case("inplace", lambda T, x: F(T).leaky_relu(x * 1, 0.3, inplace=True), NZ(3, 4),
       node="LeakyReluBackward1"),
  Case("default_slope", lambda T, x: F(T).leaky_relu(x * 2, inplace=True), NZ_(2, 3),
       node="LeakyReluBackward1"),
  Case("on_view", lambda T, x: _inplace_view(
      x * 1, lambda t: F(T).leaky_relu(t[:, 1:], 0.2, inplace=True)), NZ_(3, 4),
      node="CopySlices", top=False))
S("gelu", *unary(lambda T, x: F(T).gelu(x), "GeluBackward0"),
  Case("tanh", lambda T, x: F(T).gelu(x, approximate="tanh"), R(3, 4), node="GeluBackward0"),
  Case("tanh_noncontig", lambda T, x: F(T).gelu(x.t(), approximate="tanh"), R(3, 4),
       node="GeluBackward0"))
S("silu", *unary(lambda T, x: F(T).silu(x), "SiluBackward0"))
S("softplus", *unary(lambda T, x: F(T).softplus(x), "SoftplusBackward0"),
  Case("beta_threshold", lambda T, x: F(T).softplus(x, beta=2.0, threshold=1.0),
       np.array([-1.2, -0.3, 0.2, 0.45, 0.55, 1.3]), node="SoftplusBackward0"))
S("clamp",
  Case("both", lambda T, x: x.clamp(-0.5, 0.5), np.array([[-1.1, -0.2, 0.3], [0.8, 0.1, -0.7]]),
       node="ClampBackward1"),
  Case("min", lambda T, x: x.clamp(min=0.1), np.array([-1.1, -0.2, 0.3, 0.8]),
       node="ClampBackward1"),
  Case("max", lambda T, x: T.clamp(x, max=0.1), np.array([-1.1, -0.2, 0.3, 0.8]),
       node="ClampBackward1"),
  Case("clip", lambda T, x: x.t().clip(-0.5, 0.5), np.array([[-1.1, -0.2], [0.3, 0.8]]),
       node="ClampBackward1"),
  Case("tensor_bounds", lambda T, x, lo, hi: x.clamp(lo, hi), R(3, 4),
       R(4, lo=-1.0, hi=-0.2), R(3, 1, lo=0.2, hi=1.0), node="ClampBackward0"),
  Case("tensor_min", lambda T, x, lo: x.clamp(min=lo), R(3, 4), R(4), node="ClampBackward0"),
  Case("tensor_max_only", lambda T, x, hi: T.clamp(x, max=hi), R(3, 4), R(3, 1),
       node="ClampBackward0"),
  Case("at_bounds", lambda T, x: x.clamp(-0.5, 0.5), np.array([-0.5, 0.0, 0.5, 0.7]),
       node="ClampBackward1", gradcheck=_KINK),
  Case("tensor_at_bounds", lambda T, x, lo, hi: x.clamp(lo, hi), np.array([-0.5, 0.0, 0.5]),
       np.array([-0.5, -0.5, -0.5]), np.array([0.5, 0.5, 0.5]), node="ClampBackward0",
       gradcheck=_KINK),
  Case("inplace", lambda T, x: (x * 1).clamp_(-0.5, 0.5), np.array([-1.1, -0.2, 0.3, 0.8]),
       node="ClampBackward1"),
  )
S("clamp_min",
  Case("scalar", lambda T, x: x.clamp_min(0.1), np.array([-1.1, -0.2, 0.3, 0.8]),
       node="ClampMinBackward0"),
  Case("tensor", lambda T, x, lo: x.clamp_min(lo), R_(3, 4), R_(4), node="ClampMinBackward1"),
  Case("noncontig", lambda T, x: x.t().clamp_min(-0.2), R_(3, 4), node="ClampMinBackward0"),
  Case("inplace", lambda T, x: (x * 1).clamp_min_(0.1), np.array([-1.1, -0.2, 0.3, 0.8]),
       node="ClampMinBackward0"),
  Case("at_bound", lambda T, x, lo: x.clamp_min(lo), np.array([-0.5, 0.0, 0.5]),
       np.array([-0.5, 0.0, 0.7]), node="ClampMinBackward1", gradcheck=_KINK))
S("clamp_max",
  Case("scalar", lambda T, x: x.clamp_max(0.1), np.array([-1.1, -0.2, 0.3, 0.8]),
       node="ClampMaxBackward0"),
  Case("tensor", lambda T, x, hi: x.clamp_max(hi), R_(3, 4), R_(3, 1), node="ClampMaxBackward1"),
  Case("inplace", lambda T, x: (x * 1).clamp_max_(0.1), np.array([-1.1, -0.2, 0.3, 0.8]),
       node="ClampMaxBackward0"),
  Case("at_bound", lambda T, x, hi: x.clamp_max(hi), np.array([-0.5, 0.0, 0.5]),
       np.array([-0.5, 0.0, 0.7]), node="ClampMaxBackward1", gradcheck=_KINK))
S("maximum", *binary(lambda x, y: x.maximum(y), "MaximumBackward0", scalar=None),
  Case("fn", lambda T, x, y: T.maximum(x, y), R(2, 3), R(3), node="MaximumBackward0"),
  Case("max_tensor", lambda T, x, y: T.max(x, y), R(2, 3), R(3), node="MaximumBackward0"),
  Case("ties", lambda T, x, y: x.maximum(y), np.array([1.0, 2.0, 3.0]),
       np.array([1.0, 0.0, 3.0]), node="MaximumBackward0", gradcheck=_KINK))
S("minimum", *binary(lambda x, y: x.minimum(y), "MinimumBackward0", scalar=None),
  Case("fn", lambda T, x, y: T.minimum(x, y), R(2, 3), R(3), node="MinimumBackward0"),
  Case("ties", lambda T, x, y: T.min(x, y), np.array([1.0, 2.0, 3.0]),
       np.array([1.0, 0.0, 3.0]), node="MinimumBackward0", gradcheck=_KINK))
_MASK34 = B([1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0])
S("where",
  Case("same", lambda T, c, x, y: T.where(c, x, y), _MASK34, R(3, 4), R(3, 4),
       node="WhereBackward0"),
  Case("bcast", lambda T, c, x, y: T.where(c, x, y), _MASK34, R(3, 1), R(4),
       node="WhereBackward0"),
  Case("scalar_other", lambda T, c, x: T.where(c, x, 0.5), _MASK34, R(3, 4),
       node="WhereBackward0"),
  Case("scalar_self", lambda T, c, y: T.where(c, 0.5, y), _MASK34, R(4), node="WhereBackward0"),
  Case("method", lambda T, c, x, y: x.t().where(c.t(), y), _MASK34, R(3, 4), R(3),
       node="WhereBackward0"))
S("floor", *unary(lambda T, x: x.floor(), "FloorBackward0",
                  dom=lambda *s: np.floor(R(*s, lo=-3, hi=3)) + R(*s, lo=0.1, hi=0.9)))
S("round", *unary(lambda T, x: x.round(), "RoundBackward0",
                  dom=lambda *s: np.round(R(*s, lo=-3, hi=3)) + R(*s, lo=-0.4, hi=0.4)))

# -- copies, casts, fills --
S("clone",
  Case("plain", lambda T, x: x.clone(), R(2, 3), node="CloneBackward0"),
  Case("contiguous", lambda T, x: x.t().contiguous(), R(2, 3), node="CloneBackward0"),
  Case("fn", lambda T, x: T.clone(x[:, ::2]), R(2, 4), node="CloneBackward0"))
S("to_dtype",
  Case("float", lambda T, x: x.float(), R(2, 3), node="ToCopyBackward0", eps=1e-3, atol=1e-3),
  Case("to", lambda T, x: x[:, ::2].to(T.float32), R(2, 4), node="ToCopyBackward0",
       eps=1e-3, atol=1e-3))
S("fill",
  Case("scalar", lambda T, x: x.clone().fill_(1.5), R(3, 4), node="FillBackward2"),
  Case("tensor", lambda T, x, v: (x * 1).fill_(v), R(3, 4), R(), node="FillBackward3"),
  Case("tensor_view", lambda T, x, v: _inplace_view(x.clone(), lambda t: t[1:].fill_(v)),
       R(3, 2), R(), node="CopySlices", top=False),
  Case("setitem_view", lambda T, x: _setitem(x.clone(), (slice(1, None),), 2.0), R(3, 4),
       node="CopySlices"))
S("zero",
  Case("plain", lambda T, x: x.clone().zero_(), R(3, 4), node="ZeroBackward0"),
  Case("view", lambda T, x: _inplace_view(x.clone(), lambda v: v[:, 1].zero_()), R(3, 4),
       node="CopySlices"))
S("copy",
  Case("bcast", lambda T, x, y: x.clone().copy_(y), R(3, 4), R(4), node="CopyBackwards"),
  Case("0d_src", lambda T, x, y: x.clone().copy_(y), R(2, 2), R(), node="CopyBackwards"),
  Case("noncontig", lambda T, x, y: (x * 1).copy_(y.t()), R(3, 4), R(4, 3),
       node="CopyBackwards"),
  Case("setitem_view", lambda T, x, y: _setitem(x * 1, (slice(None), slice(None, None, 2)), y),
       R(3, 4), R(3, 2), node="CopySlices"))


# -- reductions --
S("sum",
  Case("all", lambda T, x: x.sum(), R(3, 4), node="SumBackward0"),
  Case("dim", lambda T, x: x.sum(1), R(3, 4), node="SumBackward1"),
  Case("dims_keepdim", lambda T, x: x.sum((0, 2), keepdim=True), R(2, 3, 2),
       node="SumBackward1"),
  Case("neg_dim", lambda T, x: T.sum(x, dim=-1), R(2, 3), node="SumBackward1"),
  Case("noncontig", lambda T, x: x.t()[::2].sum(0), R(3, 4), node="SumBackward1"),
  Case("scalar0d", lambda T, x: x.sum(), R(), node="SumBackward0"))
S("mean",
  Case("all", lambda T, x: x.mean(), R(3, 4), node="MeanBackward0"),
  Case("dim", lambda T, x: x.mean(1), R(3, 4), node="MeanBackward1"),
  Case("dims_keepdim", lambda T, x: x.mean((0, 2), keepdim=True), R(2, 3, 2),
       node="MeanBackward1"),
  Case("noncontig", lambda T, x: T.mean(x.t(), -1), R(3, 4), node="MeanBackward1"))
S("prod",
  Case("all", lambda T, x: x.prod(), NZ(2, 3), node="ProdBackward0"),
  Case("dim", lambda T, x: x.prod(1), NZ(3, 4), node="ProdBackward1"),
  Case("keepdim_noncontig", lambda T, x: x.t().prod(0, keepdim=True), NZ(3, 4),
       node="ProdBackward1"),
  Case("one_zero", lambda T, x: x.prod(1), np.array([[1.2, 0.0, -0.7], [0.5, 1.1, 2.0]]),
       node="ProdBackward1"),
  Case("one_zero_all", lambda T, x: x.prod(), np.array([[1.2, 0.0, -0.7], [0.5, 1.1, 2.0]]),
       node="ProdBackward0"),
  Case("two_zeros", lambda T, x: x.prod(1), np.array([[1.2, 0.0, 0.0], [0.5, 1.1, 2.0]]),
       node="ProdBackward1"),
  Case("two_zeros_all", lambda T, x: x.prod(), np.array([[1.2, 0.0], [0.0, 2.0]]),
       node="ProdBackward0"),
  Case("three_zeros_keepdim", lambda T, x: x.prod(0, keepdim=True),
       np.array([[0.0, 1.5], [0.0, 0.0], [0.0, 2.0]]), node="ProdBackward1"))
S("amax",
  Case("all", lambda T, x: x.amax(), R(3, 4), node="AmaxBackward0"),
  Case("dim", lambda T, x: x.amax(1), R(3, 4), node="AmaxBackward0"),
  Case("dims_keepdim", lambda T, x: T.amax(x, (0, 2), keepdim=True), R(2, 3, 2),
       node="AmaxBackward0"),
  Case("noncontig", lambda T, x: x.t().amax(0), R(3, 4), node="AmaxBackward0"),
  Case("ties", lambda T, x: x.amax(1), np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]),
       node="AmaxBackward0", gradcheck=_KINK))
S("amin",
  Case("all", lambda T, x: x.amin(), R(3, 4), node="AminBackward0"),
  Case("dim", lambda T, x: x.t().amin(-1, keepdim=True), R(3, 4), node="AminBackward0"))
S("max",
  Case("all", lambda T, x: x.max(), R(3, 4), node="MaxBackward1"),
  Case("fn_noncontig", lambda T, x: T.max(x.t()[::2]), R(3, 4), node="MaxBackward1"),
  Case("ties", lambda T, x: x.max(), np.array([[1.0, 3.0], [3.0, 0.0]]), node="MaxBackward1",
       gradcheck=_KINK))
S("min",
  Case("all", lambda T, x: x.min(), R(3, 4), node="MinBackward1"),
  Case("fn", lambda T, x: T.min(x), R(5), node="MinBackward1"))
S("max_dim",
  Case("dim", lambda T, x: x.max(1).values, R(3, 4), node="MaxBackward0"),
  Case("keepdim", lambda T, x: x.max(0, keepdim=True)[0], R(3, 4), node="MaxBackward0"),
  Case("noncontig", lambda T, x: T.max(x.t(), dim=-1).values, R(3, 4), node="MaxBackward0"),
  Case("ties", lambda T, x: x.max(1).values, np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]),
       node="MaxBackward0", gradcheck=_KINK),
  Case("both_outputs", lambda T, x: tuple(x.max(0)), R(3, 2), node="MaxBackward0"))
S("min_dim",
  Case("dim", lambda T, x: x.min(1).values, R(3, 4), node="MinBackward0"),
  Case("keepdim_noncontig", lambda T, x: x[:, ::2].min(0, keepdim=True).values, R(3, 4),
       node="MinBackward0"))
S("var",
  Case("all", lambda T, x: x.var(), R(3, 4), node="VarBackward0"),
  Case("dim", lambda T, x: x.var(1), R(3, 4), node="VarBackward0"),
  Case("unbiased_false", lambda T, x: x.var(0, unbiased=False, keepdim=True), R(3, 4),
       node="VarBackward0"),
  Case("correction", lambda T, x: x.t().var((0,), correction=2), R(3, 4), node="VarBackward0"),
  Case("dims", lambda T, x: T.var(x, (0, 2)), R(2, 3, 2), node="VarBackward0"))
S("std",
  Case("all", lambda T, x: x.std(), R(3, 4), node="StdBackward0"),
  Case("dim", lambda T, x: x.std(1), R(3, 4), node="StdBackward0"),
  Case("keepdim_noncontig", lambda T, x: x.t().std(0, keepdim=True, unbiased=False), R(3, 4),
       node="StdBackward0"))
S("logsumexp",
  Case("dim", lambda T, x: x.logsumexp(1), R(3, 4), node="LogsumexpBackward0"),
  Case("dims_keepdim", lambda T, x: T.logsumexp(x, (0, 2), keepdim=True), R(2, 3, 2),
       node="LogsumexpBackward0"),
  Case("noncontig", lambda T, x: x.t().logsumexp(-1), R(3, 4), node="LogsumexpBackward0"),
  Case("large", lambda T, x: x.logsumexp(0), np.array([800.0, 799.0, -5.0]),
       node="LogsumexpBackward0"))
S("softmax",
  Case("dim1", lambda T, x: x.softmax(1), R(3, 4), node="SoftmaxBackward0"),
  Case("functional", lambda T, x: F(T).softmax(x, dim=0), R(3, 4), node="SoftmaxBackward0"),
  Case("noncontig_3d", lambda T, x: x.transpose(0, 2).softmax(-1), R(2, 3, 2),
       node="SoftmaxBackward0"),
  Case("masked_inf", lambda T, x, m: x.masked_fill(m, float("-inf")).softmax(-1), R(3, 4),
       B([0, 1, 0, 1], [0, 0, 0, 1], [1, 1, 0, 0]), node="SoftmaxBackward0"))
S("log_softmax",
  Case("dim1", lambda T, x: x.log_softmax(1), R(3, 4), node="LogSoftmaxBackward0"),
  Case("functional", lambda T, x: F(T).log_softmax(x.t(), dim=0), R(3, 4),
       node="LogSoftmaxBackward0"),
  Case("large", lambda T, x: x.log_softmax(0), np.array([500.0, 499.0, -3.0]),
       node="LogSoftmaxBackward0"),
  Case("masked_inf", lambda T, x, m: x.masked_fill(m, float("-inf")).log_softmax(-1)[:, :2],
       R(2, 3), B([0, 0, 1], [0, 0, 1]), node="SliceBackward0", top=False))
S("cumsum",
  Case("dim1", lambda T, x: x.cumsum(1), R(3, 4), node="CumsumBackward0"),
  Case("dim0_noncontig", lambda T, x: T.cumsum(x.t(), 0), R(3, 4), node="CumsumBackward0"),
  Case("1d", lambda T, x: x.cumsum(-1), R(5), node="CumsumBackward0"))

# -- views --
S("view",
  Case("view", lambda T, x: x.view(4, 3), R(3, 4), node="ViewBackward0"),
  Case("flat", lambda T, x: x.view(-1), R(3, 4), node="ViewBackward0"),
  Case("reshape_contiguous", lambda T, x: x.reshape(2, 6), R(3, 4), node="ViewBackward0"),
  Case("unflatten", lambda T, x: x.unflatten(1, (2, 2)), R(3, 4), node="ViewBackward0"),
  Case("flatten", lambda T, x: x.flatten(), R(2, 3, 2), node="ViewBackward0"))
S("_reshape_alias",
  Case("reshape_viewable", lambda T, x: x.t().reshape(4, 1, 3), R_(3, 4),
       node="ReshapeAliasBackward0"),
  Case("sliced_flat", lambda T, x: x[:, :1].t().reshape(-1), R_(3, 4),
       node="ReshapeAliasBackward0"),
  Case("flatten_tail", lambda T, x: x.permute(2, 0, 1).flatten(1), R_(2, 3, 2),
       node="ReshapeAliasBackward0"))
S("_unsafe_view",
  Case("reshape_copy", lambda T, x: x.t().reshape(-1), R(3, 4), node="UnsafeViewBackward0"),
  Case("flatten_copy", lambda T, x: x.t().flatten(), R(3, 4), node="UnsafeViewBackward0"))
S("alias",
  Case("ellipsis", lambda T, x: x[...], R(3, 4), node="AliasBackward0"),
  Case("full_tuple", lambda T, x: x[:, :], R_(3, 4), node="AliasBackward0"),
  Case("one_tuple", lambda T, x: x[(slice(None),)], R_(3, 4), node="AliasBackward0"))
S("transpose",
  Case("3d", lambda T, x: x.transpose(0, 2), R(2, 3, 2), node="TransposeBackward0"),
  Case("mT", lambda T, x: x.mT, R(3, 4), node="TransposeBackward0"),
  Case("swapaxes_noncontig", lambda T, x: T.swapaxes(x[:, ::2], 0, 1), R(3, 4),
       node="TransposeBackward0"))
S("t",
  Case("2d", lambda T, x: x.t(), R(3, 4), node="TBackward0"),
  Case("1d", lambda T, x: x.t(), R(3), node="TBackward0"),
  Case("noncontig", lambda T, x: T.t(x[:, ::2]), R(3, 4), node="TBackward0"))
S("permute",
  Case("3d", lambda T, x: x.permute(2, 0, 1), R(2, 3, 2), node="PermuteBackward0"),
  Case("neg_dims", lambda T, x: x.permute(-1, 0, -2), R(2, 3, 2), node="PermuteBackward0"),
  Case("T", lambda T, x: x.T, R(3, 4), node="PermuteBackward0"),
  Case("fn_noncontig", lambda T, x: T.permute(x.t(), (1, 0)), R(3, 4), node="PermuteBackward0"))
S("expand",
  Case("col", lambda T, x: x.expand(3, 4), R(3, 1), node="ExpandBackward0"),
  Case("lead", lambda T, x: x.expand(2, 3, 4), R(4), node="ExpandBackward0"),
  Case("minus_one", lambda T, x: x.expand(2, -1, 3), R(2, 1), node="ExpandBackward0"),
  Case("0d", lambda T, x: x.expand(3, 2), R(), node="ExpandBackward0"),
  Case("expand_as", lambda T, x, y: x.expand_as(y), R(1, 4), K(np.zeros((3, 4))),
       node="ExpandBackward0"),
  Case("noncontig", lambda T, x: T.broadcast_to(x.t()[:, :1], (3, 4, 3)), R(3, 4),
       node="ExpandBackward0"))
S("squeeze",
  Case("all", lambda T, x: x.squeeze(), R(3, 1, 2, 1), node="SqueezeBackward0"),
  Case("dim", lambda T, x: x.squeeze(1), R(3, 1, 2), node="SqueezeBackward1"),
  Case("dim_noop", lambda T, x: x.squeeze(0), R(3, 1, 2), node="SqueezeBackward1"),
  Case("dims", lambda T, x: x.squeeze((1, 3)), R(3, 1, 2, 1), node="SqueezeBackward2"),
  Case("dims_some", lambda T, x: x.squeeze((0, 1)), R(3, 1, 2), node="SqueezeBackward2"),
  Case("noncontig", lambda T, x: x.t()[:1].squeeze(0), R(3, 4), node="SqueezeBackward1"))
S("unsqueeze",
  Case("mid", lambda T, x: x.unsqueeze(1), R(3, 4), node="UnsqueezeBackward0"),
  Case("neg", lambda T, x: T.unsqueeze(x.t(), -1), R(3, 4), node="UnsqueezeBackward0"),
  Case("none_index", lambda T, x: x[None], R(3), node="UnsqueezeBackward0"))
S("slice",
  Case("step", lambda T, x: x[1:, ::2], R(3, 4), node="SliceBackward0"),
  Case("narrow", lambda T, x: x.narrow(1, 1, 2), R(3, 4), node="SliceBackward0"),
  Case("negative_start", lambda T, x: x[-2:], R(4, 2), node="SliceBackward0"),
  Case("chained", lambda T, x: x[:, 1:3][::2], R(3, 4), node="SliceBackward0"),
  Case("full", lambda T, x: x[:], R(3, 4), node="SliceBackward0"))
S("select",
  Case("int", lambda T, x: x[1], R(3, 4), node="SelectBackward0"),
  Case("method_neg", lambda T, x: x.select(1, -1), R(3, 4), node="SelectBackward0"),
  Case("after_slice", lambda T, x: x[:, 0], R(3, 4), node="SelectBackward0"),
  Case("noncontig", lambda T, x: T.select(x.t(), 0, 2), R(3, 4), node="SelectBackward0"))
S("diagonal",
  Case("main", lambda T, x: x.diagonal(), R(3, 4), node="DiagonalBackward0"),
  Case("offset", lambda T, x: x.diagonal(1), R(3, 4), node="DiagonalBackward0"),
  Case("neg_offset_3d", lambda T, x: x.diagonal(-1, 0, 2), R(3, 2, 3),
       node="DiagonalBackward0"),
  Case("dims_swapped", lambda T, x: x.diagonal(1, 1, 0), R(3, 4), node="DiagonalBackward0"),
  Case("noncontig", lambda T, x: T.diagonal(x.t()), R(3, 4), node="DiagonalBackward0"))
S("as_strided",
  # (a storage offset given for an input is a layout read compiled calls cannot share: the
  # operands with one are made inside)
  Case("plain", lambda T, x: (x * 1).as_strided((2, 2), (1, 2), 1), R(6),
       node="AsStridedBackward0"),
  Case("overlap", lambda T, x: x.as_strided((3, 3), (1, 1)), R(6), node="AsStridedBackward0"),
  Case("of_view", lambda T, x: x[1:].as_strided((2, 3), (3, 1)), R(3, 3),
       node="AsStridedBackward0"),
  Case("of_transpose", lambda T, x: (x * 1).t().as_strided((2, 2), (2, 1), 1), R(2, 3),
       node="AsStridedBackward0"))
S("unbind",
  Case("dim0", lambda T, x: x.unbind(), R(3, 4), node="UnbindBackward0"),
  Case("dim1_fn", lambda T, x: T.unbind(x, 1), R(3, 4), node="UnbindBackward0"),
  Case("noncontig", lambda T, x: x.t().unbind(1), R(3, 4), node="UnbindBackward0"),
  Case("one_used", lambda T, x: x.unbind(0)[1], R(3, 2), node="UnbindBackward0"))
S("split",
  Case("size", lambda T, x: x.split(2, 1), R(3, 5), node="SplitBackward0"),
  Case("sizes", lambda T, x: x.split([1, 3], 1), R(3, 4), node="SplitWithSizesBackward0"),
  Case("chunk", lambda T, x: x.chunk(2), R(4, 3), node="SplitBackward0"),
  Case("noncontig", lambda T, x: T.split(x.t(), 2), R(3, 4), node="SplitBackward0"),
  Case("one_used", lambda T, x: x.split(2, 1)[1], R(2, 5), node="SplitBackward0"),
  Case("empty_piece", lambda T, x: x.split([0, 3, 1], 1), R(2, 4),
       node="SplitWithSizesBackward0"))

# -- data movement --
S("cat",
  Case("dim1", lambda T, x, y: T.cat([x, y], 1), R(3, 2), R(3, 3), node="CatBackward0"),
  Case("three_noncontig", lambda T, x, y, z: T.cat([x, y.t(), z[::2]], 0), R(2, 3), R(3, 1),
       R(4, 3), node="CatBackward0"),
  Case("neg_dim", lambda T, x, y: T.concat((x, y), -1), R(2, 2, 1), R(2, 2, 2),
       node="CatBackward0"),
  Case("same_input", lambda T, x: T.cat([x, x * 2]), R(3), node="CatBackward0"),
  Case("one_tensor", lambda T, x: T.cat([x[:, 1:]], 1), R(2, 3), node="CatBackward0"))
S("stack",
  Case("dim0", lambda T, x, y: T.stack([x, y]), R(3, 2), R(3, 2), node="StackBackward0"),
  Case("last_noncontig", lambda T, x, y: T.stack([x, y.t()], 2), R(3, 2), R(2, 3),
       node="StackBackward0"),
  Case("1d_neg_dim", lambda T, x, y, z: T.stack((x, y, z), -1), R(2), R(2), R(2),
       node="StackBackward0"))
_MASK4 = B(1, 0, 1, 1)
S("masked_fill",
  Case("scalar", lambda T, x, m: x.masked_fill(m, 0.5), R(3, 4), _MASK34,
       node="MaskedFillBackward0"),
  Case("bcast_mask", lambda T, x, m: x.masked_fill(m, -1.0), R(3, 4), _MASK4,
       node="MaskedFillBackward0"),
  Case("noncontig", lambda T, x, m: x.t().masked_fill(m.t(), 2.0), R(3, 4), _MASK34,
       node="MaskedFillBackward0"),
  Case("tensor_value", lambda T, x, m, v: x.masked_fill(m, v), R(3, 4), _MASK34, R(),
       node="MaskedFillBackward1"),
  Case("inplace", lambda T, x, m: (x * 1).masked_fill_(m, 0.0), R(3, 4), _MASK4,
       node="MaskedFillBackward0"))
S("gather",
  Case("dim1", lambda T, x, i: x.gather(1, i), R(3, 4), I([0, 3, 0], [1, 1, 2], [3, 2, 1]),
       node="GatherBackward0"),
  Case("smaller_index", lambda T, x, i: x.gather(0, i), R(3, 4), I([2, 0], [1, 1]),
       node="GatherBackward0"),
  Case("noncontig", lambda T, x, i: T.gather(x.t(), 1, i), R(3, 4), I([0, 2], [2, 2], [1, 0],
                                                                      [0, 0]),
       node="GatherBackward0"),
  Case("neg_dim", lambda T, x, i: x.gather(-1, i), R(2, 3), I([2], [0]), node="GatherBackward0"))
S("scatter_add",
  Case("dim1", lambda T, x, i, s: x.scatter_add(1, i, s), R(3, 4), I([0, 3, 0], [1, 1, 2]),
       R(2, 3), node="ScatterAddBackward0"),
  Case("partial_src", lambda T, x, i, s: x.scatter_add(0, i, s), R(3, 4), I([2, 0], [1, 1]),
       R(3, 3), node="ScatterAddBackward0",
       torch="PyTorch's backward fails when src is larger than index (it returns a gradient "
             "of index's shape for src)"),
  Case("inplace", lambda T, x, i, s: (x * 1).scatter_add_(1, i, s), R(2, 3), I([0, 0], [2, 1]),
       R(2, 2), node="ScatterAddBackward0"),
  Case("noncontig_src", lambda T, x, i, s: x.t().scatter_add(1, i, s.t()), R(3, 2),
       I([0, 1], [1, 1]), R(2, 2), node="ScatterAddBackward0"))
S("index_select",
  Case("dim0", lambda T, x, i: x.index_select(0, i), R(3, 4), I(2, 0, 2),
       node="IndexSelectBackward0"),
  Case("noncontig", lambda T, x, i: T.index_select(x.t(), 1, i), R(3, 4), I(1, 1),
       node="IndexSelectBackward0"))
S("index_add",
  Case("dim0", lambda T, x, i, s: x.index_add(0, i, s), R(3, 4), I(2, 0, 2), R(3, 4),
       node="IndexAddBackward0"),
  Case("alpha_dim1", lambda T, x, i, s: x.index_add(1, i, s, alpha=2.0), R(2, 3), I(0, 2),
       R(2, 2), node="IndexAddBackward0"),
  Case("inplace", lambda T, x, i, s: (x * 1).index_add_(0, i, s), R(3, 2), I(1, 1), R(2, 2),
       node="IndexAddBackward0"))
S("index",
  Case("tensor", lambda T, x, i: x[i], R(3, 4), I(2, 0, 2), node="IndexBackward0"),
  Case("tensor_slice", lambda T, x, i: x[i, 1:], R(3, 4), I(1, 1), node="IndexBackward0"),
  Case("list_dim1", lambda T, x: x[:, [0, 2, 0]], R(3, 4), node="IndexBackward0"),
  Case("mask", lambda T, x, m: x[m], R(3, 4), _MASK34, node="IndexBackward0"),
  Case("two_tensors", lambda T, x, i, j: x[i, j], R(3, 4), I(0, 2, 2), I(3, 1, 1),
       node="IndexBackward0"),
  Case("noncontig", lambda T, x, i: x.t()[i], R(3, 4), I(3, 0), node="IndexBackward0"),
  Case("negative", lambda T, x, i: x[:, i], R(2, 3), I(-1, 0, -1), node="IndexBackward0"),
  Case("mask_1d", lambda T, x, m: x[m, 1:], R(3, 4), B(1, 0, 1), node="IndexBackward0"),
  Case("ellipsis", lambda T, x, i: x[..., i], R(2, 2, 3), I(0, 2), node="IndexBackward0"),
  Case("none", lambda T, x, i: x[None, i], R(3, 2), I(1, 1), node="IndexBackward0"))
S("index_put",
  Case("plain", lambda T, x, i, v: x.index_put((i,), v), R(3, 4), I(2, 0), R(4),
       node="IndexPutBackward0"),
  Case("accumulate", lambda T, x, i, v: x.index_put((i,), v, accumulate=True), R(3, 4),
       I(2, 0, 2), R(3, 4), node="IndexPutBackward0"),
  Case("accumulate_bcast", lambda T, x, i, v: x.index_put((i,), v, accumulate=True), R(3, 4),
       I(2, 0, 2), R(4), node="IndexPutBackward0"),
  Case("setitem", lambda T, x, i, v: _setitem(x * 1, (i,), v), R(3, 4), I(1,), R(4),
       node="IndexPutBackward0"),
  Case("setitem_2d", lambda T, x, i, j, v: _setitem(x.clone(), (i, j), v), R(3, 4), I(0, 2),
       I(3, 1), R(2), node="IndexPutBackward0"),
  Case("setitem_mask", lambda T, x, m, v: _setitem(x.clone(), (m,), v), R(3, 4), _MASK34, R(),
       node="IndexPutBackward0"))

# -- the strided-buffer ops: reached through double backward (create_graph=True) and
# through in-place ops on views; their node names are llgrad's own.


S("strided_scatter",
  Case("slice_vjp", lambda T, x, g: _grad(T, x[1:, ::2], x, g), R(3, 4), R(2, 2),
       node="ViewBackward0", torch_name=False),
  Case("diagonal_vjp", lambda T, x, g: _grad(T, x.diagonal(), x, g), R(3, 3), R(3),
       node="ViewBackward0", torch_name=False),
  # the gradient reaching strided_scatter's VJP is an expanded (stride-0) buffer
  Case("slice_vjp_summed", lambda T, x, g: _grad(T, x[1:, ::2], x, g).sum(), R(3, 4), R(2, 2),
       node="SumBackward0", top=False))
S("strided_gather",
  Case("as_strided_vjp", lambda T, x, g: _grad(T, x.as_strided((2, 2), (1, 2)), x, g),
       R(6), R(2, 2), node="StridedGatherBackward0", torch_name=False),
  Case("inplace_view", lambda T, x, g: _grad(T, _inplace_view(x.clone(),
                                                               lambda v: v[1:].mul_(2.0)),
                                               x, g),
       R(3, 2), R(3, 2), node="StridedGatherBackward0", torch_name=False))
S("strided_put",
  Case("inplace_view", lambda T, x, w, g: _grad(
      T, _inplace_view(x.clone(), lambda v: v[:, 1].mul_(w)), (x, w), g),
      R(2, 3), R(2), R(2, 3), node="StridedGatherBackward0", torch_name=False))

# -- matrix products --
S("mm",
  Case("plain", lambda T, x, y: x.mm(y), R(2, 3), R(3, 4), node="MmBackward0"),
  Case("matmul_op", lambda T, x, y: x @ y, R(2, 3), R(3, 2), node="MmBackward0"),
  Case("noncontig", lambda T, x, y: T.mm(x.t(), y[:, ::2]), R(3, 2), R(3, 4),
       node="MmBackward0"),
  Case("linear", lambda T, x, w: F(T).linear(x, w), R(2, 3), R(4, 3), node="MmBackward0"),
  Case("1d_2d", lambda T, v, y: v @ y, R(3), R(3, 2), node="SqueezeBackward4", top=False))
S("squeeze_",
  Case("matmul_1d_2d", lambda T, v, y: v @ y, R_(3), R_(3, 2), node="SqueezeBackward4"),
  Case("matmul_noncontig", lambda T, v, y: T.matmul(v[::2], y.t()), R_(6), R_(2, 3),
       node="SqueezeBackward4"))
S("addmm",
  Case("linear_bias", lambda T, x, w, b: F(T).linear(x, w, b), R(2, 3), R(4, 3), R(4),
       node="AddmmBackward0"),
  Case("linear_noncontig", lambda T, x, w, b: F(T).linear(x.t(), w, b), R_(3, 2), R_(4, 3), R_(4),
       node="AddmmBackward0"),
  Case("linear_1d", lambda T, x, w, b: F(T).linear(x, w, b), R_(3), R_(4, 3), R_(4),
       node="ViewBackward0", top=False),
  Case("linear_3d", lambda T, x, w, b: F(T).linear(x, w, b), R_(2, 2, 3), R_(4, 3), R_(4),
       node="ViewBackward0", top=False),
  Case("linear_matrix_bias", lambda T, x, w, b: F(T).linear(x, w, b), R_(2, 3), R_(4, 3),
       R_(2, 1), node="AddmmBackward0"),
  Case("method_beta_alpha", lambda T, b, x, y: b.addmm(x, y, beta=0.5, alpha=-2.0), R_(2, 4),
       R_(2, 3), R_(3, 4), node="AddmmBackward0"),
  Case("beta_zero", lambda T, b, x, y: b.addmm(x, y, beta=0), R_(4), R_(2, 3), R_(3, 4),
       node="AddmmBackward0"))
S("bmm",
  Case("plain", lambda T, x, y: x.bmm(y), R(2, 2, 3), R(2, 3, 2), node="BmmBackward0"),
  Case("noncontig", lambda T, x, y: T.bmm(x.mT, y), R(2, 3, 2), R(2, 3, 2),
       node="BmmBackward0"))
S("matmul",
  Case("3d_2d", lambda T, x, y: x @ y, R(2, 2, 3), R(3, 2), node="UnsafeViewBackward0"),
  Case("3d_3d", lambda T, x, y: x @ y, R(2, 2, 3), R(2, 3, 2), node="UnsafeViewBackward0"),
  Case("bcast_batch", lambda T, x, y: T.matmul(x, y), R(2, 1, 2, 3), R(3, 3, 2),
       node="UnsafeViewBackward0"),
  Case("noncontig", lambda T, x, y: x.transpose(1, 2).matmul(y.t()), R(2, 3, 2), R(2, 3),
       node="UnsafeViewBackward0"),
  Case("1d_3d", lambda T, v, y: v @ y, R(3), R(2, 3, 2), node="UnsafeViewBackward0", top=False),
  Case("3d_1d", lambda T, x, v: x @ v, R(2, 2, 3), R(3), node="UnsafeViewBackward0", top=False))
S("dot",
  Case("plain", lambda T, x, y: x.dot(y), R(4), R(4), node="DotBackward0"),
  Case("matmul_op", lambda T, x, y: x @ y, R(3), R(3), node="DotBackward0"),
  Case("noncontig", lambda T, x, y: T.dot(x[::2], y), R(6), R(3), node="DotBackward0"))
S("mv",
  Case("plain", lambda T, x, v: x.mv(v), R(3, 4), R(4), node="MvBackward0"),
  Case("matmul_op", lambda T, x, v: x @ v, R(2, 3), R(3), node="MvBackward0"),
  Case("noncontig", lambda T, x, v: T.mv(x.t(), v[::2]), R(3, 2), R(6), node="MvBackward0"))

# -- layers and losses --
S("layer_norm",
  Case("affine", lambda T, x, w, b: F(T).layer_norm(x, (4,), w, b), R(3, 4), R(4), R(4),
       node="NativeLayerNormBackward0"),
  Case("plain", lambda T, x: F(T).layer_norm(x, (4,)), R(2, 4), node="NativeLayerNormBackward0"),
  Case("no_batch", lambda T, x, w, b: F(T).layer_norm(x, (4,), w, b), R(4), R(4), R(4),
       node="NativeLayerNormBackward0"),
  Case("weight_only", lambda T, x, w: F(T).layer_norm(x, [3], w), R(2, 3), R(3),
       node="NativeLayerNormBackward0"),
  Case("bias_only", lambda T, x, b: F(T).layer_norm(x, (3,), None, b), R(2, 3), R(3),
       node="NativeLayerNormBackward0"),
  Case("2d_shape", lambda T, x, w, b: F(T).layer_norm(x, (2, 3), w, b, eps=1e-3), R(2, 2, 3),
       R(2, 3), R(2, 3), node="NativeLayerNormBackward0"),
  Case("noncontig", lambda T, x, w: F(T).layer_norm(x.t(), (3,), w), R(3, 4), R(3),
       node="NativeLayerNormBackward0"))
S("batch_norm",
  Case("train_affine", lambda T, x, w, b: F(T).batch_norm(x, None, None, w, b, training=True),
       R(4, 3), R(3), R(3), node="NativeBatchNormBackward0"),
  Case("train_3d", lambda T, x: F(T).batch_norm(x, None, None, training=True), R(2, 3, 2),
       node="NativeBatchNormBackward0"),
  Case("train_noncontig", lambda T, x, w: F(T).batch_norm(x.t(), None, None, w, None,
                                                           training=True),
       R(3, 4), R(3), node="NativeBatchNormBackward0"),
  Case("eval_affine", lambda T, x, m, v, w, b: F(T).batch_norm(x, m.to(x.dtype), v.to(x.dtype),
                                                             w, b, training=False),
       R(4, 3), K(R(3)), K(P(3)), R(3), R(3), node="NativeBatchNormBackward0"),
  Case("eval_3d", lambda T, x, m, v: F(T).batch_norm(x, m.to(x.dtype), v.to(x.dtype),
                                                     training=False, eps=1e-3),
       R(2, 3, 2), K(R(3)), K(P(3)), node="NativeBatchNormBackward0"))
# (training with running statistics: the op gives the batch's for their update; each call
# updates copies, so that gradcheck's calls all see the same buffers)
S("batch_norm_with_stats",
  Case("train_affine", lambda T, x, w, b, m, v: F(T).batch_norm(
      x, m.to(x.dtype).clone(), v.to(x.dtype).clone(), w, b, training=True),
      R(4, 3), R(3), R(3), K(R(3)), K(P(3)), node="NativeBatchNormBackward0"),
  Case("train_3d", lambda T, x, m, v: F(T).batch_norm(
      x, m.to(x.dtype).clone(), v.to(x.dtype).clone(), training=True, momentum=0.3),
      R(2, 3, 2), K(R(3)), K(P(3)), node="NativeBatchNormBackward0"))
S("embedding",
  Case("plain", lambda T, i, w: F(T).embedding(i, w), I(2, 0, 2), R(3, 4),
       node="EmbeddingBackward0"),
  Case("2d_index", lambda T, i, w: F(T).embedding(i, w), I([0, 1], [1, 3]), R(4, 2),
       node="EmbeddingBackward0"),
  Case("0d_index", lambda T, i, w: F(T).embedding(i, w), K(np.int64(2)), R(3, 2),
       node="EmbeddingBackward0"),
  Case("padding_idx", lambda T, i, w: F(T).embedding(i, w, padding_idx=1), I(1, 0, 1, 2),
       R(3, 2), node="EmbeddingBackward0",
       gradcheck="the padding_idx row gets no gradient by definition (PyTorch's semantics)"))
_TGT = I(1, 0, 3)
S("nll_loss",
  Case("mean", lambda T, x, t: F(T).nll_loss(x, t), R(3, 4), _TGT, node="NllLossBackward0"),
  Case("weight", lambda T, x, t, w: F(T).nll_loss(x, t, w.to(x.dtype)), R(3, 4), _TGT, K(P(4)),
       node="NllLossBackward0"),
  Case("ignore_index", lambda T, x, t: F(T).nll_loss(x, t, ignore_index=0), R(3, 4), _TGT,
       node="NllLossBackward0"),
  Case("sum", lambda T, x, t: F(T).nll_loss(x, t, reduction="sum"), R(3, 4), _TGT,
       node="NllLossBackward0"),
  Case("none_weight", lambda T, x, t, w: F(T).nll_loss(x.t(), t, w.to(x.dtype), reduction="none"), R(4, 3),
       _TGT, K(P(4)), node="NllLossBackward0"),
  Case("cross_entropy", lambda T, x, t: F(T).cross_entropy(x, t), R(3, 4), _TGT,
       node="NllLossBackward0"),
  Case("weight_ignore", lambda T, x, t, w: F(T).nll_loss(x, t, w.to(x.dtype), ignore_index=3), R(3, 4),
       _TGT, K(P(4)), node="NllLossBackward0"),
  Case("3d", lambda T, x, t: F(T).nll_loss(x, t), R(2, 3, 2), I([0, 2], [1, 1]),
       node="NllLoss2DBackward0"),
  Case("4d_sum", lambda T, x, t: F(T).nll_loss(x, t, reduction="sum"), R(2, 3, 1, 2),
       I([[0, 2]], [[1, 1]]), node="NllLoss2DBackward0"),
  Case("1d", lambda T, x, t: F(T).nll_loss(x, t), R(4), K(np.int64(2)), node="NllLossBackward0"),
  Case("1d_none_weight", lambda T, x, t, w: F(T).nll_loss(x, t, w.to(x.dtype), reduction="none"), R_(4),
       K(np.int64(1)), K(P(4)), node="NllLossBackward0"),
  Case("1d_cross_entropy_sum", lambda T, x, t: F(T).cross_entropy(x, t, reduction="sum"),
       R_(5), K(np.int64(4)), node="NllLossBackward0", top=False),
  Case("cross_entropy_smooth", lambda T, x, t: F(T).cross_entropy(x, t, label_smoothing=0.1),
       R(3, 4), _TGT, node="AddBackward0", top=False))
S("mse_loss",
  Case("mean", lambda T, x, y: F(T).mse_loss(x, y), R(3, 4), R(3, 4), node="MseLossBackward0"),
  Case("sum", lambda T, x, y: F(T).mse_loss(x, y, reduction="sum"), R(3, 2), R(3, 2),
       node="MseLossBackward0"),
  Case("none_noncontig", lambda T, x, y: F(T).mse_loss(x.t(), y, reduction="none"), R(2, 3),
       R(3, 2), node="MseLossBackward0"))
S("binary_cross_entropy_with_logits",
  Case("mean", lambda T, x, t: F(T).binary_cross_entropy_with_logits(x, t), R(3, 4),
       R(3, 4, lo=0, hi=1), node="BinaryCrossEntropyWithLogitsBackward0"),
  Case("weight_sum", lambda T, x, t, w: F(T).binary_cross_entropy_with_logits(
      x, t, w, reduction="sum"), R(3, 4), R(3, 4, lo=0, hi=1), K(P(4)),
      node="BinaryCrossEntropyWithLogitsBackward0"),
  Case("pos_weight_none", lambda T, x, t, pw: F(T).binary_cross_entropy_with_logits(
      x.t(), t, pos_weight=pw, reduction="none"), R(4, 3), R(3, 4, lo=0, hi=1), K(P(4)),
      node="BinaryCrossEntropyWithLogitsBackward0"),
  Case("all_mean", lambda T, x, t, w, pw: F(T).binary_cross_entropy_with_logits(
      x, t, w, pos_weight=pw), R(2, 3), R(2, 3, lo=0, hi=1), K(P(2, 3)), K(P(3)),
      node="BinaryCrossEntropyWithLogitsBackward0"),
  Case("large_logits", lambda T, x, t: F(T).binary_cross_entropy_with_logits(x, t),
       np.array([-40.0, -3.0, 3.0, 40.0]), R(4, lo=0, hi=1),
       node="BinaryCrossEntropyWithLogitsBackward0"))

S("addcmul",
  Case("same", lambda T, x, a, b: T.addcmul(x, a, b), R_(3, 4), R_(3, 4), R_(3, 4),
       node="AddcmulBackward0"),
  Case("bcast_value", lambda T, x, a, b: x.addcmul(a, b, value=-0.5), R_(3, 1), R_(4),
       R_(3, 4), node="AddcmulBackward0"),
  Case("noncontig", lambda T, x, a, b: x.t().addcmul(a[:, ::2], b), R_(4, 3), R_(3, 8),
       R_(3, 1), node="AddcmulBackward0"),
  Case("inplace", lambda T, x, a, b: (x * 1).addcmul_(a, b, value=2.0), R_(3, 4), R_(4),
       R_(3, 1), node="AddcmulBackward0"))
S("addcdiv",
  Case("same", lambda T, x, a, b: T.addcdiv(x, a, b), R_(3, 4), R_(3, 4), NZ_(3, 4),
       node="AddcdivBackward0"),
  Case("bcast_value", lambda T, x, a, b: x.addcdiv(a, b, value=0.25), R_(3, 1), R_(4),
       NZ_(3, 4), node="AddcdivBackward0"),
  Case("inplace", lambda T, x, a, b: (x * 1).addcdiv_(a.t(), b, value=-3.0), R_(2, 3),
       R_(3, 2), NZ_(3), node="AddcdivBackward0"))
S("lerp",
  Case("scalar_near", lambda T, x, y: T.lerp(x, y, 0.3), R_(3, 4), R_(4),
       node="LerpBackward0"),
  Case("scalar_far", lambda T, x, y: x.t().lerp(y, 0.8), R_(4, 3), R_(3, 1),
       node="LerpBackward0"),
  Case("tensor", lambda T, x, y, w: x.lerp(y, w), R_(3, 4), R_(4), R_(3, 1, lo=-0.5, hi=1.5),
       node="LerpBackward1"),
  Case("inplace", lambda T, x, y, w: (x * 1).lerp_(y, w), R_(2, 3), R_(2, 3), R_(3),
       node="LerpBackward1"))

# complex values (real in and out here, so that gradcheck reads them): eager only, a compiled
# function that meets one runs eagerly (tests/runtime/test_complex.py), so the trace and
# native-code tests of the table leave these ops out
EAGER_ONLY = tuple(n for n, op in OPS.items() if op.complex == "only")
S("view_as_real",
  Case("times", lambda T, x: T.view_as_real(T.view_as_complex(x) * (1 + 2j)), R_(3, 2),
       node="ViewAsRealBackward0"))
S("view_as_complex",
  Case("abs", lambda T, x: T.view_as_complex(x).abs(), NZ_(3, 2), node="AbsBackward0",
       top=False))
S("conj_physical",
  Case("conj", lambda T, x: T.view_as_real(T.view_as_complex(x).conj() * (2 - 1j)), R_(4, 2),
       node="ViewAsRealBackward0", top=False))
S("complex",
  Case("parts", lambda T, x, y: T.view_as_real(T.complex(x, y) * (1 + 1j)), R_(3), R_(3),
       node="ViewAsRealBackward0", top=False))
S("angle_complex",
  Case("angle", lambda T, x: T.view_as_complex(x).angle(), NZ_(3, 2), node="AngleBackward0"))
S("fft_c2c",
  Case("fft", lambda T, x: T.view_as_real(T.fft.fft(T.view_as_complex(x))), R_(4, 2),
       node="ViewAsRealBackward0", top=False),
  Case("ifft2_ortho", lambda T, x: T.view_as_real(T.fft.ifft2(T.view_as_complex(x), norm="ortho")),
       R_(3, 4, 2), node="ViewAsRealBackward0", top=False))
S("fft_r2c",
  Case("rfft", lambda T, x: T.view_as_real(T.fft.rfft(x)), R_(2, 6), node="ViewAsRealBackward0",
       top=False),
  Case("rfft_odd", lambda T, x: T.view_as_real(T.fft.rfft(x, norm="forward")), R_(5),
       node="ViewAsRealBackward0", top=False))
S("fft_c2r",
  Case("irfft", lambda T, x: T.fft.irfft(T.view_as_complex(x), n=6), R_(2, 4, 2),
       node="FftC2RBackward0"),
  Case("irfft_odd", lambda T, x: T.fft.irfft(T.view_as_complex(x), n=5, norm="ortho"),
       R_(3, 2), node="FftC2RBackward0"))


# ---- non-differentiable ops ------------------------------------------------------------------

Exempt = collections.namedtuple("Exempt", "reason fn inputs")
_CMP = "comparison: boolean output, no gradient"
_LOGIC = "logical op: boolean output, no gradient"
EXEMPT = {
    "eq": Exempt(_CMP, lambda T, x, y: x == y, (R(3), R(3))),
    "ne": Exempt(_CMP, lambda T, x, y: x != y, (R(3), R(3))),
    "lt": Exempt(_CMP, lambda T, x, y: x < y, (R(3), R(3))),
    "le": Exempt(_CMP, lambda T, x, y: x <= y, (R(3), R(3))),
    "gt": Exempt(_CMP, lambda T, x, y: x > y, (R(3), R(3))),
    "ge": Exempt(_CMP, lambda T, x, y: x >= y, (R(3), R(3))),
    "logical_and": Exempt(_LOGIC, lambda T, x, y: (x > 0) & (y > 0), (R(3), R(3))),
    "logical_or": Exempt(_LOGIC, lambda T, x, y: (x > 0) | (y > 0), (R(3), R(3))),
    "logical_xor": Exempt(_LOGIC, lambda T, x, y: (x > 0) ^ (y > 0), (R(3), R(3))),
    "logical_not": Exempt(_LOGIC, lambda T, x: (x > 0).logical_not(), (R(3),)),
    "isnan": Exempt("predicate: boolean output", lambda T, x: x.isnan(), (R(3),)),
    "isfinite": Exempt("predicate: boolean output", lambda T, x: x.isfinite(), (R(3),)),
    "argmax": Exempt("index output (int64)", lambda T, x: x.argmax(1), (R(2, 3),)),
    "argmin": Exempt("index output (int64)", lambda T, x: x.argmin(), (R(2, 3),)),
    "all": Exempt("boolean reduction", lambda T, x: (x > 0).all(), (R(2, 3),)),
    "any": Exempt("boolean reduction", lambda T, x: (x > 0).any(1), (R(2, 3),)),
    "rng_normal": Exempt("random draws (no gradient)", lambda T, x: T.randn(3), (R(3),)),
    "rng_uniform": Exempt("random draws (no gradient)", lambda T, x: T.rand(3), (R(3),)),
    "rng_integers": Exempt("random draws (no gradient)",
                           lambda T, x: T.empty(3).random_(5), (R(3),)),
    "rng_randperm": Exempt("random draws (no gradient)", lambda T, x: T.randperm(5), (R(3),)),
    "rng_rrelu_noise": Exempt("random draws (no gradient)",
                              lambda T, x: T.nn.functional.rrelu(x.detach(), training=True),
                              (R(3),)),
    "rng_standard_gamma": Exempt("random draws (gradient: distributions' rsample)",
                                 lambda T, x: T._standard_gamma(x.detach().abs() + 0.5),
                                 (R(3),)),
    "rng_dirichlet": Exempt("random draws (gradient: distributions' rsample)",
                            lambda T, x: T._sample_dirichlet(x.detach().abs() + 0.5),
                            (R(3),)),
    "rng_poisson": Exempt("random draws (no gradient)",
                          lambda T, x: T.poisson(x.detach().abs() * 12), (R(3),)),
    "rng_binomial": Exempt("random draws (no gradient)",
                           lambda T, x: T.binomial(x.detach().abs() * 30, x.detach().sigmoid()),
                           (R(3),)),
    "full": Exempt("creation (no inputs)", lambda T, x: T.zeros(3), (R(3),)),
    "arange": Exempt("creation (no inputs)", lambda T, x: T.arange(3, dtype=x.dtype), (R(3),)),
}

# Ops whose VJP is not itself differentiable (gradgradcheck skipped for all their samples),
# with the reason. Empty: every differentiable op of the table is twice differentiable.
NOT_TWICE_DIFFERENTIABLE = {}

# Exempt ops of float results that PyTorch gives no derivative (torch.special's Bessel
# functions and polynomials): the samples_*.py files that declare them add them here
FLOAT_WITHOUT_DERIVATIVE = set()

# Samples of further op families live beside this file, one file each (samples_*.py): each
# runs in this module's namespace (S, K, R, Exempt, EXEMPT, ...) and adds to the tables.
SAMPLE_FILES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "samples_*.py")))
for _path in SAMPLE_FILES:
    with open(_path) as _f:
        exec(compile(_f.read(), _path, "exec"), globals())  # noqa: S102 (the suite's own)


# ---- helpers ---------------------------------------------------------------------------------

def _flat(out):
    if isinstance(out, (tuple, list)):
        return [o for o in out]
    return [out]


def _float_size(case):
    return sum(np.asarray(a).size for a in case.inputs
               if isinstance(a, np.ndarray) and a.dtype.kind == "f")


def _params(kind, cases, one_per_op=False):
    """Params of cases; with one_per_op, only one sample of each op runs by default (the
    one with the fewest float input elements, the first of those) and its others are
    marked slow (the suite's time: the slow run has them all)."""
    default = {}
    if one_per_op:
        for op, case in cases:
            if kind not in case.xfail and (op not in default or
                                           _float_size(case) < _float_size(default[op])):
                default[op] = case
    out = []
    for op, case in cases:
        marks = ()
        if kind in case.xfail:
            marks = (pytest.mark.xfail(strict=True, reason=case.xfail[kind]),)
        elif one_per_op and default[op] is not case:
            marks = (pytest.mark.slow,)
        out.append(pytest.param(op, case, id=f"{op}-{case.id}", marks=marks))
    return out


ALL_CASES = [(op, c) for op, cases in SAMPLES.items() for c in cases]
GRADCHECK_CASES = [(op, c) for op, c in ALL_CASES if c.gradcheck is None]
GRADGRAD_CASES = [(op, c) for op, c in ALL_CASES
                  if op not in NOT_TWICE_DIFFERENTIABLE and c.gradgrad is None]


def _llgrad_fn(case):
    return lambda *xs: case.fn(llgrad, *xs)


def _nodes(out):
    """Every backward node reachable from out.grad_fn (CopySlices' wrapped op included)."""
    seen, stack, found = set(), [out.grad_fn], []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        found.append(n)
        stack.extend(fn for fn, _ in getattr(n, "next_functions", ()))
        if getattr(n, "fn", None) is not None:
            stack.append(n.fn)
    return found


# ---- the table is complete --------------------------------------------------------------------

def test_every_op_has_a_sample():
    assert not set(SAMPLES) & set(EXEMPT)
    assert set(OPS) == set(SAMPLES) | set(EXEMPT), (
        f"ops without a sample: {sorted(set(OPS) - set(SAMPLES) - set(EXEMPT))}; "
        f"samples of unknown ops: {sorted((set(SAMPLES) | set(EXEMPT)) - set(OPS))}")


def test_exempt_ops_are_not_differentiable():
    assert [n for n in EXEMPT if OPS[n].vjp is not None
            and not hasattr(OPS[n].vjp, "no_derivative")] == []
    assert [n for n in SAMPLES if OPS[n].vjp is None] == []
    assert set(NOT_TWICE_DIFFERENTIABLE) <= set(SAMPLES)


def test_sample_ids_unique():
    for op, cases in SAMPLES.items():
        ids = [c.id for c in cases]
        assert len(ids) == len(set(ids)), op
        assert cases, op


@pytest.mark.parametrize("op", sorted(EXEMPT))
def test_exempt_output_has_no_grad(op):
    e = EXEMPT[op]
    out = e.fn(llgrad, *build(llgrad, e.inputs))
    assert not out.requires_grad and out.grad_fn is None
    assert not out.dtype.is_floating_point or OPS[op].kind in ("random", "creation") \
        or op in FLOAT_WITHOUT_DERIVATIVE


# ---- per-sample checks -------------------------------------------------------------------------

@pytest.mark.parametrize("op,case", _params("gradcheck", GRADCHECK_CASES))
def test_gradcheck(op, case):
    inputs = build(llgrad, case.inputs)
    assert llgrad.autograd.gradcheck(_llgrad_fn(case), inputs, eps=case.eps, atol=case.atol,
                                     rtol=case.rtol)


@pytest.mark.filterwarnings("ignore:Input #1 requires gradient and is not a double")
@pytest.mark.parametrize("op,case", _params("gradgradcheck", GRADGRAD_CASES, one_per_op=True))
def test_gradgradcheck(op, case):
    inputs = build(llgrad, case.inputs)
    assert llgrad.autograd.gradgradcheck(_llgrad_fn(case), inputs, eps=case.eps,
                                         atol=case.atol, rtol=case.rtol)


@pytest.mark.parametrize("op,case", _params("node", ALL_CASES))
def test_node(op, case):
    """The first output's grad_fn has PyTorch's name, and the program runs the op."""
    out = _flat(case.fn(llgrad, *build(llgrad, case.inputs)))[0]
    assert type(out.grad_fn).__name__ == case.node
    ops = {n._op.name for n in _nodes(out) if isinstance(n, OpNode)}
    assert op in ops, f"the sample never ran {op!r} (ops in its graph: {sorted(ops)})"
    if case.top and case.torch_name and isinstance(out.grad_fn, OpNode):
        assert out.grad_fn._op is OPS[op]


@pytest.mark.torch
@pytest.mark.parametrize("op,case", _params("torch", ALL_CASES))
def test_matches_torch(op, case):
    """Same program in PyTorch: same node name, forward values and gradients."""
    torch = pytest.importorskip("torch")
    if case.torch:
        pytest.skip(case.torch)
    lx, tx = build(llgrad, case.inputs), build(torch, case.inputs)
    lo, to = _flat(case.fn(llgrad, *lx)), _flat(case.fn(torch, *tx))
    if case.torch_name:
        assert type(lo[0].grad_fn).__name__ == type(to[0].grad_fn).__name__
    assert len(lo) == len(to)
    for a, b in zip(lo, to):
        assert tuple(a.shape) == tuple(b.shape)
        assert a.dtype.is_floating_point == b.dtype.is_floating_point
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-7,
                                   atol=1e-10)
    rng = np.random.default_rng(0)
    keep = [i for i, o in enumerate(to) if o.requires_grad]
    assert keep == [i for i, o in enumerate(lo) if o.requires_grad]
    seeds = [rng.standard_normal(tuple(to[i].shape)) for i in keep]
    li = [x for x in lx if isinstance(x, llgrad.Tensor) and x.requires_grad]
    ti = [x for x in tx if isinstance(x, torch.Tensor) and x.requires_grad]
    lg = llgrad.autograd.grad([lo[i] for i in keep], li,
                              [llgrad.tensor(s).to(lo[i].dtype) for s, i in zip(seeds, keep)],
                              allow_unused=True)
    tg = torch.autograd.grad([to[i] for i in keep], ti,
                             [torch.tensor(s).to(to[i].dtype) for s, i in zip(seeds, keep)],
                             allow_unused=True)
    for x, a, b in zip(ti, lg, tg):
        a = np.zeros(tuple(x.shape)) if a is None else a.numpy()
        b = np.zeros(tuple(x.shape)) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)
