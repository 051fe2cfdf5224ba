"""Lowerings of ir/ops_fill_more.py: random_, exponential, geometric, log_normal and cauchy as
maps of their float64 draws (in float64, the reference's order, rounded to the result's
dtype by the caller; log1p, exp, sin and cos from vecmath), and normal(mean, std) with
tensors as mean + std * noise in the result's dtype."""
import math

from llvmlite import ir

from . import vecmath
from .scalar import F64, Scalar, is_float
from .table import elementwise


def _f64(sg, v):
    return Scalar(ir.Constant(F64, float(v)), "float64")


def _draw(sg, u):
    return sg.cast(u, "float64")


@elementwise("random_")
def _random(sg, node, x, k):
    return k                         # (the integers drawn: cast to the result's dtype)


def _floats(node):
    if not is_float(node.outputs[0].type.dtype):
        return "a non-float result"
    return None


@elementwise("exponential", check=_floats)
def _exponential(sg, node, x, u):
    e = sg.neg(vecmath.log1p(sg, sg.neg(_draw(sg, u))))
    return sg.div(e, _f64(sg, node.attrs.get("lambd", 1.0)))


@elementwise("geometric")
def _geometric(sg, node, x, u):
    q = sg.div(vecmath.log(sg, _draw(sg, u)), _f64(sg, math.log1p(-node.attrs.get("p", 0.5))))
    return Scalar(sg.call("llvm.ceil", F64, q.v), "float64")


@elementwise("log_normal", check=_floats)
def _log_normal(sg, node, x, n):
    a = node.attrs
    return vecmath.exp(sg, sg.add(_f64(sg, a.get("mean", 1.0)),
                                  sg.mul(_f64(sg, a.get("std", 2.0)), _draw(sg, n))))


@elementwise("cauchy", check=_floats)
def _cauchy(sg, node, x, u):
    a = node.attrs
    t = sg.mul(_f64(sg, math.pi), sg.sub(_draw(sg, u), _f64(sg, 0.5)))
    tan = sg.div(vecmath.sin(sg, t), vecmath.cos(sg, t))
    return sg.add(_f64(sg, a.get("median", 0.0)), sg.mul(_f64(sg, a.get("sigma", 1.0)), tan))


@elementwise("normal_tensor", check=_floats)
def _normal_tensor(sg, node, mean, std, noise):
    dt = node.outputs[0].type.dtype
    return sg.add(sg.cast(mean, dt), sg.mul(sg.cast(std, dt), sg.cast(noise, dt)))
