"""An entry's forward and backward graphs as functions of arrays, on the entry's backend
(a native kernel, generated Python source or the interpreter), made once per entry and
kept on it; a graph the LLVM lowering does not cover runs on the interpreter, with a
warning once."""
import warnings

import numpy as np

from ..ir.graph import StackType
from ..ir.interpret import evaluate
from ..ir.optable import contiguous_strides


def forward_run(entry):
    """The entry's forward as arrays -> (outputs, {Value: array} for guards and write-back),
    on the entry's backend, made once and kept."""
    run = entry._forward_run
    if run is None:
        fwd = entry.forward
        kernel = _kernel(entry, "forward") if entry.backend == "llvm" else None
        if kernel is not None:
            run = kernel.run
        elif entry.backend == "python":
            from ..codegen.pysource import compile_source
            extra = [g.value for g in fwd.guards] + list(fwd.mutated.values())
            fn = compile_source(fwd, write_back=False, extra=extra)
            n = len(fwd.outputs)

            def run(arrays):
                res = fn(*arrays)
                return res[:n], dict(zip(extra, res[n:]))
        else:
            def run(arrays):
                return evaluate(fwd, arrays)
        entry._forward_run = run
    return run


def _kernel(entry, which):
    """The native kernel of entry's forward or backward graph; None (and a note in the
    dump) when the graph has an op the LLVM lowering does not cover yet: the interpreter
    runs that graph instead."""
    from ..codegen.lower import lower, unsupported
    graph = getattr(entry, which)
    bad = unsupported(graph)
    notes = entry.kernels
    if bad is not None:
        node, reason = bad
        what = f"{node.op} ({node.loc})" if node is not None else "graph"
        notes[which] = f"interpreted: {what} is not lowered to LLVM yet: {reason}"
        warn_once(f"llgrad.compile({entry.name}): the {which} graph runs on the interpreter, "
                   f"not as native code: {what} is not lowered to LLVM yet ({reason})")
        return None
    # a backward may let go of the saved activations mid-call (the inputs among the saved
    # values are the caller's: letting go frees nothing): CompiledFunctionBackward.apply_last
    release = tuple(k for k, s in enumerate(entry.saved) if s.input_index is None) \
        if which == "backward" else ()
    kernel = lower(graph, release=release)
    notes[which] = kernel
    return kernel


def backward_run(entry):
    """The entry's backward as arrays -> outputs, on the entry's backend."""
    run = entry._backward_run
    if run is None:
        kernel = _kernel(entry, "backward") if entry.backend == "llvm" else None
        if kernel is not None:
            # cotangents may arrive expanded: the kernel reads dense ones, so a feed for a
            # C-contiguous input that is not C-contiguous is copied (byte strides first:
            # the cheap test that passes on every call that needs no copy)
            dense = [(k, tuple(s * np.dtype(v.type.dtype).itemsize for s in v.type.strides))
                     for k, v in enumerate(entry.backward.inputs)
                     if not isinstance(v.type, StackType)     # (a stack: the kernel checks)
                     and v.type.strides == contiguous_strides(v.type.shape)]
            launch = kernel.launch_direct if kernel.direct else kernel

            def run(feeds):    # (feeds: a list of the caller's own)
                for k, bstrides in dense:
                    f = feeds[k]
                    if f.strides != bstrides and not f.flags.c_contiguous:
                        feeds[k] = np.array(f, order="C")
                return launch(feeds)
        elif entry.backend == "python":
            from ..codegen.pysource import compile_source
            fn = compile_source(entry.backward)
            run = lambda feeds: fn(*feeds)  # noqa: E731
        else:
            run = lambda feeds: evaluate(entry.backward, feeds)[0]  # noqa: E731
        entry._backward_run = run
    return run


_warned = set()


def warn_once(message):
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, UserWarning, stacklevel=5)
