"""Lowering of the ops the table marks `native_host` (LAPACK factorisations: inv, det, LU,
QR, SVD, eigh, matrix_exp): native code calls back into Python, which runs the op's NumPy
implementation on the operands in the kernel's buffers, as the interpreter runs it (the
same operand casts, results converted to their types' dtypes), and writes the results into
the group's buffers. A graph holding one of them thus stays native code around it, where it
ran whole on the interpreter.

The group's code fills an array with the address of each operand's first element and each
result's buffer and calls `llgrad_host_call(key, addresses, flag)`, a ctypes callback
registered with the JIT at import (so cached object code finds it too). The key names the
node's description (op, attributes, operand and result types), which prepare() registers in
every process that plans the graph, and register_loaded() in one that loads the plan from
the disk cache. ctypes releases the GIL around the native call and the callback takes it
back, as ops_random's does. An exception in the callback cannot pass through native
frames: it raises the group's flag, and the kernel raises after the call (a compiled call
then runs eagerly, which gives eager's own error)."""
import ctypes
import hashlib

import numpy as np
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from ...ir.interpret import apply_casts, node_impl
from ...ir.optable import OPS
from ..native import jit
from .scalar import I64, PTR, mem_type
from .table import register

_SYMBOL = "llgrad_host_call"
_CALLS = {}         # key -> (impl, attrs, operands, results): what prepare() registered


def _check(node):
    for v in node.outputs:
        t = v.type
        if t.offset or tuple(t.strides) != tuple(contiguous_strides(t.shape)):
            return f"a result laid out {t}, not C-contiguous"
    return None


def _operands(node):
    """("value", dtype, shape, element strides) per tensor operand, ("number", x) else."""
    out = []
    for x in node.inputs:
        if isinstance(x, Value):
            t = x.type
            strides = tuple(0 if n == 1 else s for n, s in zip(t.shape, t.strides))
            out.append(("value", t.dtype, tuple(t.shape), strides))
        else:
            out.append(("number", x))
    return tuple(out)


def _key(node):
    """A 63-bit key of what the callback needs to know, the same in every process."""
    text = repr((node.op, sorted(node.attrs.items()), _operands(node),
                 [(v.type.dtype, tuple(v.type.shape)) for v in node.outputs]))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def _register(node):
    """The callback's table entry for node, under its key (returned)."""
    impl, casts = node_impl(node)           # (the interpreter's, for the same values)
    key = _key(node)
    _CALLS[key] = (impl, dict(node.attrs), tuple(casts or ()), _operands(node),
                   tuple((v.type.dtype, tuple(v.type.shape)) for v in node.outputs))
    return key


def _prepare(plan, group):
    group.state["key"] = _register(group.root)
    group.state["register"] = _register     # (for a plan loaded from the disk cache)
    group.state["flag"] = plan.flag(group, f"{group.root.op}: its NumPy implementation, "
                                           "called from native code, failed")


def _array(address, dtype, shape, strides):
    """The array of dtype and shape at address (its first element) with element strides."""
    dt = np.dtype(dtype)
    if not address or any(n == 0 for n in shape):
        return np.zeros(shape, dt)
    it = dt.itemsize
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    raw = (ctypes.c_char * ((hi - lo + 1) * it)).from_address(address + lo * it)
    return np.ndarray(shape, dt, buffer=raw, offset=-lo * it,
                      strides=tuple(s * it for s in strides))


def _call(key, addresses, flag):
    try:
        impl, attrs, casts, operands, results = _CALLS[key]
        n = sum(spec[0] == "value" for spec in operands)
        ptrs = (ctypes.c_void_p * (n + len(results))).from_address(addresses)
        args, k = [], 0
        for spec in operands:
            if spec[0] == "value":
                args.append(_array(ptrs[k], *spec[1:]))
                k += 1
            else:
                args.append(spec[1])
        out = impl(*apply_casts(args, casts), **attrs)
        for m, ((dt, shape), o) in enumerate(zip(results, out if len(results) > 1 else (out,))):
            o = np.asarray(o)
            if o.shape != shape:
                raise ValueError(f"result {m} of shape {o.shape}, its type's {shape}")
            _array(ptrs[n + m], dt, shape, contiguous_strides(shape))[...] = o.astype(dt)
    except BaseException:                      # noqa: BLE001  (reported through the flag)
        ctypes.c_int64.from_address(flag).value = 1


def register_loaded(plan):
    """Fill the callback's table for a plan loaded from the disk cache (codegen/prepared.py):
    the prepare that registered its keys ran in the process that stored it. (Without this a
    warm process's kernel raised its flag at every call and the call ran eagerly.) The
    regions of a cond or while_loop (control.py) are planned on their own: their sub-plans'
    groups are registered as well, as deep as they nest."""
    plans = [plan]
    while plans:
        for group in plans.pop().groups:
            register = group.state.get("register")
            if register is not None:
                register(group.root)
            plans += [call.sub for call in (group.state.get("calls") or {}).values()]


_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(_call)
jit.add_symbol(_SYMBOL, ctypes.cast(_CALLBACK, ctypes.c_void_p).value)     # (kept alive here)


def _emit(plan, group, fg):
    node, b = group.root, fg.b
    values = [x for x in node.inputs if isinstance(x, Value)]
    count = len(values) + len(node.outputs)
    table = fg.alloca(PTR, "host_ptrs", count=count)
    for k, x in enumerate(values):
        acc = plan.access(x, x.type.shape)
        first = b.gep(fg.ptrs[acc.buf], [ir.Constant(I64, acc.offset)], inbounds=True,
                      source_etype=mem_type(acc.dt))
        b.store(first, b.gep(table, [ir.Constant(I64, k)], source_etype=PTR))
    for m, v in enumerate(node.outputs):
        b.store(fg.ptrs[plan.buffers[v]],
                b.gep(table, [ir.Constant(I64, len(values) + m)], source_etype=PTR))
    flag = fg.ptrs[group.state["flag"]]
    b.store(ir.Constant(I64, 0), flag)
    fn = fg.module.globals.get(_SYMBOL)
    if fn is None:
        fn = ir.Function(fg.module, ir.FunctionType(ir.VoidType(), [I64, PTR, PTR]),
                         name=_SYMBOL)
    b.call(fn, [ir.Constant(I64, group.state["key"]), table, flag])


for _op in OPS.values():
    if _op.native_host:
        register(_op.name, "kernel", emit=_emit, prepare=_prepare, check=_check)
