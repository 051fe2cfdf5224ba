"""rng_uniform and rng_normal: draws of PyTorch's CPU generator given its state (the int64
array of llgrad/ir/torch_random.py), bit-exact with the interpreter and with eager mode.

Both call back into Python. The generator is a Mersenne Twister whose draws are a recurrence
(one after another: no loop of them vectorises), and each distribution is ATen's
transformation of those draws, in its order (a ragged end of a normal fill redrawn, one
Box-Muller value cached in the state for the next call): the interpreter's functions, run on
the same state, are the one definition, so native code copies the state into the new-state
buffer and calls `llgrad_rng_draw(kind, state, out, n, single, flag)`, a ctypes callback
registered with the JIT by jit.add_symbol at import (so cached object code finds it too),
which draws with torch_random and writes the values and the advanced state in place. ctypes
releases the GIL for the native call and the callback takes it back. An exception in the
callback cannot propagate through native frames: it raises the group's flag, and the kernel
raises after the call."""
import ctypes

import numpy as np
from llvmlite import ir

from ...ir import torch_random
from ...ir.graph import Value
from ...ir.ops_random import STATE_SHAPE
from ..native import jit
from .loops import Access, for_range
from .scalar import I64, PTR
from .table import register

_SYMBOL = "llgrad_rng_draw"
_DTYPES = ("float32", "float64", "int64", "int32", "int16", "int8", "uint8", "bool", "float16")
_DRAWS = (lambda state, n, dt, low, high: torch_random.uniform(state, n, dt),
          lambda state, n, dt, low, high: torch_random.normal(state, n, dt),
          lambda state, n, dt, low, high: torch_random.normal(state, n, dt, contiguous=False),
          lambda state, n, dt, low, last: torch_random.integers(state, n, dt, low, last + 1),
          lambda state, n, dt, low, high: torch_random.integers(state, n, dt, full=True),
          lambda state, n, dt, low, high: torch_random.randperm(state, n))


def _check(node):
    st = node.inputs[0]
    if not isinstance(st, Value) or st.type.dtype != "int64" or st.type.shape != STATE_SHAPE:
        return f"a generator state that is not int64{list(STATE_SHAPE)}"
    if node.attrs.get("dtype") not in (("int64",) if node.op in ("rng_integers", "rng_randperm")
                                       else ("float32", "float64")):
        return f"dtype {node.attrs.get('dtype')!r}"
    if node.attrs.get("of", "int64") not in _DTYPES:
        return f"draws for dtype {node.attrs.get('of')!r}"
    return None


_CALLBACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                  ctypes.c_void_p)


def _draw(kind, state_ptr, out_ptr, n, dtype_code, low, last, flag_ptr):
    try:
        words = np.ctypeslib.as_array((ctypes.c_int64 * STATE_SHAPE[0]).from_address(state_ptr))
        dt = _DTYPES[dtype_code]
        values = _DRAWS[kind](words, n, dt, low, last)
        if n:
            size = n * values.dtype.itemsize
            out = np.ctypeslib.as_array((ctypes.c_char * size).from_address(out_ptr))
            out.view(values.dtype)[...] = values
    except BaseException:                      # noqa: BLE001  (reported through the flag)
        ctypes.c_int64.from_address(flag_ptr).value = 1


_callback = _CALLBACK_TYPE(_draw)              # kept alive for as long as the module
jit.add_symbol(_SYMBOL, ctypes.cast(_callback, ctypes.c_void_p).value)


def _prepare(plan, group):
    group.state["flag"] = plan.flag(group, f"{group.root.op}: drawing in the Python callback "
                                           "failed")


def _emit(plan, group, fg):
    node, b = group.root, fg.b
    vals, new = node.outputs
    src = plan.access(node.inputs[0], STATE_SHAPE)
    dst = Access(plan.buffers[new], "int64", 0, (1,))
    with for_range(b, 0, STATE_SHAPE[0]) as k:
        fg.store(fg.load(src, [k]), dst, [k])
    flag = fg.ptrs[group.state["flag"]]
    b.store(ir.Constant(I64, 0), flag)
    fn = fg.module.globals.get(_SYMBOL)
    if fn is None:
        fn = ir.Function(fg.module, ir.FunctionType(ir.VoidType(), [I64, PTR, PTR, I64, I64,
                                                                    I64, I64, PTR]),
                         name=_SYMBOL)
    a = node.attrs
    if node.op == "rng_randperm":
        kind, dt = 5, "int64"
    elif node.op == "rng_integers":
        kind, dt = (4 if a.get("full") else 3), a.get("of", "int64")
    else:
        kind, dt = (0 if node.op == "rng_uniform" else 1 if a.get("fill", True) else 2), \
            vals.type.dtype
    b.call(fn, [ir.Constant(I64, kind), fg.ptrs[plan.buffers[new]],
                fg.ptrs[plan.buffers[vals]], ir.Constant(I64, vals.type.numel),
                ir.Constant(I64, _DTYPES.index(dt)), ir.Constant(I64, int(a.get("low", 0))),
                ir.Constant(I64, int(a.get("high", 1)) - 1), flag])     # (2**63 - 1 fits)


for _op in ("rng_uniform", "rng_normal", "rng_integers", "rng_randperm"):
    register(_op, "kernel", emit=_emit, prepare=_prepare, check=_check)
