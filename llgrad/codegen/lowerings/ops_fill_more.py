"""Lowerings of ir/ops_fill_more.py: random_, exponential, geometric, log_normal and cauchy as
maps of their float64 draws (in float64, the reference's order, rounded to the result's
dtype by the caller; log1p, log, exp and tan are calls of libm's, as the eager ops use),
and normal(mean, std) with tensors as mean + std * noise in the result's dtype."""
import math

from llvmlite import ir

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


def _libm(sg, name, x):
    # C's libm function (log1p, log, exp, tan; ops_elementwise's cos of a Python number) of
    # a float64: the eager ops compute with it, as ATen's serial kernels do (vecmath's
    # approximations are ulps away from it)
    fn = sg.module.globals.get(name)
    if fn is None:
        fn = ir.Function(sg.module, ir.FunctionType(F64, [F64]), name=name)
    return Scalar(sg.b.call(fn, [x.v]), "float64")


def _out(sg, node, r):
    # (a float16 result from the double through float32, as c10::Half is made)
    return sg.cast(r, "float32") if node.outputs[0].type.dtype == "float16" else r


@elementwise("exponential", check=_floats)
def _exponential(sg, node, x, u):
    e = _libm(sg, "log1p", sg.neg(_draw(sg, u)))
    return _out(sg, node, sg.mul(_f64(sg, -1.0 / node.attrs.get("lambd", 1.0)), e))


@elementwise("geometric")
def _geometric(sg, node, x, u):
    q = sg.div(_libm(sg, "log", _draw(sg, u)), _f64(sg, math.log1p(-node.attrs.get("p", 0.5))))
    return Scalar(sg.call("llvm.ceil", F64, q.v), "float64")


@elementwise("log_normal", check=_floats)
def _log_normal(sg, node, x, n):
    a = node.attrs
    m = sg.fused(_draw(sg, n), _f64(sg, a.get("std", 2.0)), _f64(sg, a.get("mean", 1.0)))
    return _out(sg, node, _libm(sg, "exp", m))


@elementwise("cauchy", check=_floats)
def _cauchy(sg, node, x, u):
    a = node.attrs
    t = sg.mul(_f64(sg, math.pi), sg.sub(_draw(sg, u), _f64(sg, 0.5)))
    return _out(sg, node, sg.fused(_f64(sg, a.get("sigma", 1.0)), _libm(sg, "tan", t),
                                   _f64(sg, a.get("median", 0.0))))


@elementwise("normal_tensor", check=_floats)
def _normal_tensor(sg, node, mean, std, noise):
    dt = node.outputs[0].type.dtype
    return sg.add(sg.cast(mean, dt), sg.mul(sg.cast(std, dt), sg.cast(noise, dt)))
