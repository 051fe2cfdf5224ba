"""rng_uniform and rng_normal: draws from PCG64 given its state as int64[4] (128-bit state
and increment, high words first; see llgrad/ir/ops_random.py), bit-exact with NumPy.

rng_uniform is native: PCG64 (XSL-RR 128/64) in i128 arithmetic, as NumPy's pcg64.h:
state = state * MULT + inc, then the output is the 64-bit xor of the new state's halves
rotated right by its top 6 bits; Generator.random() is (u >> 11) * 2^-53, cast to the dtype.
The draws are a recurrence (one after another), so this loop does not vectorise.

rng_normal calls back into Python. NumPy's standard_normal is a ziggurat whose tables and
rare slow path (libm exp/log, extra draws) live inside NumPy's C code; re-deriving the tables
or the libm results bit for bit is fragile, and bit-exactness with the interpreter is the
contract. So native code copies the state into the new-state buffer and calls
`llgrad_rng_normal(state, out, n, single, flag)`: a ctypes callback, registered with the JIT
by jit.add_symbol at import (so cached object code finds it too), that draws with NumPy
(ir.ops_random.generator_from_array, the interpreter's own way) and writes the values and
the new state in place. ctypes releases the GIL for the native call and the callback takes
it back. An exception in the callback cannot propagate through native frames: it raises the
group's flag, and the kernel raises after the call."""
import ctypes

import numpy as np
from llvmlite import ir

from ...ir.graph import Value
from ...ir.ops_random import generator_from_array, state_to_array
from ..native import jit
from .loops import Access, for_range
from .scalar import F64, I64, PTR, Scalar
from .table import register

_MULT = 0x2360ED051FC65DA44385DF649FCCF645        # PCG_DEFAULT_MULTIPLIER_128
I128 = ir.IntType(128)
_SYMBOL = "llgrad_rng_normal"


def _check(node):
    st = node.inputs[0]
    if not isinstance(st, Value) or st.type.dtype != "int64" or st.type.shape != (4,):
        return "a generator state that is not int64[4]"
    if node.attrs.get("dtype") not in ("float32", "float64"):
        return f"dtype {node.attrs.get('dtype')!r}"
    return None


def _copy_state(plan, fg, node):
    """Copy the input state into the new-state result; returns that result's Access."""
    st, new = node.inputs[0], node.outputs[1]
    src = plan.access(st, (4,))
    dst = Access(plan.buffers[new], "int64", 0, (1,))
    for k in range(4):
        i = [ir.Constant(I64, k)]
        fg.store(fg.load(src, i), dst, i)
    return dst


def _emit_uniform(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    vals = node.outputs[0]
    dst = _copy_state(plan, fg, node)
    words = [fg.load(dst, [ir.Constant(I64, k)]).v for k in range(4)]

    def u128(hi, lo):
        return b.or_(b.shl(b.zext(hi, I128), ir.Constant(I128, 64)), b.zext(lo, I128))

    inc = u128(words[2], words[3])
    state = fg.alloca(I128, "pcg")
    b.store(u128(words[0], words[1]), state)
    out = Access(plan.buffers[vals], vals.type.dtype, 0, (1,))
    with for_range(b, 0, vals.type.numel) as i:
        s = b.add(b.mul(b.load(state, typ=I128), ir.Constant(I128, _MULT)), inc)
        b.store(s, state)
        hi = b.trunc(b.lshr(s, ir.Constant(I128, 64)), I64)
        x = b.xor(hi, b.trunc(s, I64))
        rot = b.lshr(hi, ir.Constant(I64, 58))
        u = sg.call("llvm.fshr", I64, x, x, rot)                  # rotate right
        d = b.fmul(b.uitofp(b.lshr(u, ir.Constant(I64, 11)), F64), ir.Constant(F64, 2.0 ** -53))
        fg.store(sg.cast(Scalar(d, "float64"), vals.type.dtype), out, [i])
    s = b.load(state, typ=I128)
    fg.store(Scalar(b.trunc(b.lshr(s, ir.Constant(I128, 64)), I64), "int64"), dst,
             [ir.Constant(I64, 0)])
    fg.store(Scalar(b.trunc(s, I64), "int64"), dst, [ir.Constant(I64, 1)])


# ---- rng_normal: the callback ---------------------------------------------------------------

_CALLBACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                  ctypes.c_int64, ctypes.c_void_p)


def _draw_normal(state_ptr, out_ptr, n, single, flag_ptr):
    try:
        words = np.ctypeslib.as_array((ctypes.c_int64 * 4).from_address(state_ptr))
        g = generator_from_array(words)
        values = g.standard_normal(n, dtype=np.float64)
        dt = np.float32 if single else np.float64
        if n:
            out = np.ctypeslib.as_array(
                (ctypes.c_char * (n * np.dtype(dt).itemsize)).from_address(out_ptr))
            out.view(dt)[...] = values.astype(dt)
        words[...] = state_to_array(g.bit_generator)
    except BaseException:                      # noqa: BLE001  (reported through the flag)
        ctypes.c_int64.from_address(flag_ptr).value = 1


_callback = _CALLBACK_TYPE(_draw_normal)       # kept alive for as long as the module
jit.add_symbol(_SYMBOL, ctypes.cast(_callback, ctypes.c_void_p).value)


def _prepare_normal(plan, group):
    group.state["flag"] = plan.flag(group, "rng_normal: drawing in the Python callback failed")


def _emit_normal(plan, group, fg):
    node, b = group.root, fg.b
    vals = node.outputs[0]
    _copy_state(plan, fg, node)
    flag = fg.ptrs[group.state["flag"]]
    b.store(ir.Constant(I64, 0), flag)
    fn = fg.module.globals.get(_SYMBOL)
    if fn is None:
        fn = ir.Function(fg.module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64, PTR]),
                         name=_SYMBOL)
    b.call(fn, [fg.ptrs[plan.buffers[node.outputs[1]]], fg.ptrs[plan.buffers[vals]],
                ir.Constant(I64, vals.type.numel),
                ir.Constant(I64, int(vals.type.dtype == "float32")), flag])


register("rng_uniform", "kernel", emit=_emit_uniform, check=_check)
register("rng_normal", "kernel", emit=_emit_normal, prepare=_prepare_normal, check=_check)
