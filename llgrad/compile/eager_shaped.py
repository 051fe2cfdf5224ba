"""Eager ops on native kernels built for their operands' shapes: the ops the table marks
`eager_kernel="shaped"` (the convolution and its two backward products, batch norm and its
backward, group norm, index_add, max- and avg-pooling and their backwards), whose NumPy
implementations (im2col by strided copies, per-channel passes, np.add.at) run at a third of
torch's speed or less, on one thread.

A call whose tensor operands are float arrays of one dtype (beside int32/int64 index
operands), MIN_ELEMENTS or more in the largest (the op's eager_min_elements where the table
gives one: batch and group norm, whose NumPy passes cost ~10x one native loop), runs the kernel
codegen.lower builds for a graph of the op alone on those shapes (the compiled path's
lowering: im2col into scratch, BLAS, the thread pool), built once per (op, shapes, dtypes,
attributes) as eager_native.py builds its kernels (the builder thread, NumPy's
implementation until the kernel is ready; LLGRAD_COMPILE=sync builds before the call) and
kept in the disk cache; an operand that is not C-contiguous or not aligned is copied first.
An index out of range (the kernel's flag) runs NumPy's implementation, which raises eager's
error. At most MAX_KERNELS shapes are kept in a process (a program of ever-new shapes runs
NumPy's implementation past them). Results are the compiled path's, which the op-table tests
hold to the NumPy implementation's within rounding. `reset()` forgets the kernels;
LLGRAD_EAGER_NATIVE=0 turns this off with the rest."""
import warnings

import numpy as np

from ..ir.builder import Builder
from ..ir.graph import TensorType
from . import eager_builds, eager_channels_last

MIN_ELEMENTS = 32768   # (a smaller convolution's NumPy run costs less than its LLVM build)
# grouped (depthwise) convolutions and their two backward products from this many elements:
# NumPy's im2col and col2im of a group's few channels ran at 2-4x torch's time on (8, 8, 16, 16)
# (a DARTS cell's separable and dilated 3x3 / 5x5), the direct loops at 0.3-0.6x
GROUPED_MIN_ELEMENTS = 4096
_CONVS = frozenset(("convolution", "convolution_backward_input", "convolution_backward_weight"))
MAX_KERNELS = 256
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INDICES = (np.dtype(np.int64), np.dtype(np.int32))
_kernels = {}       # (op name, operands' shapes or values, dtype, attributes) -> Kernel | None
stats = {"calls": 0, "built": 0}
_names = {}         # NumPy dtype -> its name (dtype.name is a Python property: ~1 us a read)


def dtype_name(dt):
    """dt.name, remembered per dtype (it is read for every eager call's key)."""
    name = _names.get(dt)
    if name is None:
        name = _names[dt] = dt.name
    return name


def reset():
    """Forget the kernels and the counts (after the builds under way)."""
    eager_builds.wait()
    _kernels.clear()
    stats.update(calls=0, built=0)


def run(op, arrays, attrs):
    """op on arrays (NumPy arrays and Python values) with attrs on its shaped kernel: its
    result (a tuple for several), or None (NumPy's implementation runs)."""
    dtype, big, sig = None, 0, []
    for a in arrays:
        if isinstance(a, np.ndarray):
            if a.dtype in _INDICES:     # (an index operand: gather's, index_add's)
                sig.append(("index", a.shape, dtype_name(a.dtype)))
            elif a.dtype not in _FLOATS or (dtype is not None and a.dtype != dtype):
                return None
            else:
                dtype, big = a.dtype, max(big, a.size)
                sig.append(a.shape)
        elif a is None or type(a) in (int, float, bool):
            sig.append(("value", a))
        else:
            return None
    if dtype is None:
        return None
    if op.name in eager_channels_last.OPS:     # (a channels_last operand, without copies:
        out = eager_channels_last.run(op, arrays, attrs, run)   # a 1x1 convolution's
        if out is not None:                     # product at any size)
            return out
    if big < (op.eager_min_elements or MIN_ELEMENTS) and not (
            big >= GROUPED_MIN_ELEMENTS and op.name in _CONVS and attrs.get("groups", 1) > 1):
        return None     # (before any operand is copied: small calls run NumPy's at once)
    tensors = [kernel_operand(a) for a in arrays if isinstance(a, np.ndarray)]
    try:
        key = (op.name, tuple(sig), dtype, tuple(sorted(attrs.items())))
        found = _kernels.get(key, False)
    except TypeError:               # (an unhashable attribute)
        return None
    if found is False:
        if len(_kernels) >= MAX_KERNELS:
            return None
        found = eager_builds.start(_kernels, key, lambda: _build(op, sig, dtype, attrs))
    if found is None or found is eager_builds.PENDING:
        return None
    try:
        outs = found(tensors)
    except IndexError:              # (an index out of range: NumPy's implementation raises
        return None                 # eager's own error)
    stats["calls"] += 1
    return outs[0] if op.nout == 1 else tuple(outs)


def kernel_operand(a):
    """a as a kernel takes it: C-contiguous and aligned to its itemsize. Others are copied:
    a strided operand (sum's expanded gradient; the op's work is many times a copy's), and
    an unaligned one (a tensor over np.frombuffer at an odd offset), which the kernel's
    launcher refuses where NumPy's implementation takes it (np.ascontiguousarray would hand
    back an unaligned C-contiguous array itself)."""
    flags = a.flags
    return a if flags.c_contiguous and flags.aligned else np.array(a, order="C")


def _build(op, sig, dtype, attrs):
    """The Kernel of a graph of op alone on the operands sig describes (shapes, or
    ("value", v)), or None: where the shape rule refuses them (NumPy's implementation
    raises the error), or LLVM the graph (with a warning)."""
    b = Builder(f"eager_{op.name}")
    operands = [x[1] if x and x[0] == "value" else
                b.input(TensorType(x[2], x[1])) if x and x[0] == "index" else
                b.input(TensorType(dtype.name, x)) for x in sig]
    try:
        y = b.add(op.name, operands, dict(attrs))
        graph = b.ret(*(y if isinstance(y, tuple) else (y,)))
    except Exception:               # noqa: BLE001 (NumPy's implementation decides)
        return None
    kernel = lowered(graph, f"eager {op.name} runs on NumPy")
    stats["built"] += kernel is not None
    return kernel


def lowered(graph, fallback):
    """The Kernel codegen.lower builds for graph, or None: where it has no lowering, or LLVM
    fails (a warning: `fallback` says what runs instead)."""
    from ..codegen import lower       # (loads llvmlite: only when a kernel is needed)
    try:
        return lower.lower(graph)
    except lower.Unsupported:
        return None
    except Exception as e:          # noqa: BLE001 (the eager implementation serves)
        warnings.warn(f"llgrad: {fallback}: its native kernel failed to build "
                      f"({type(e).__name__}: {e})", RuntimeWarning, stacklevel=3)
        return None
