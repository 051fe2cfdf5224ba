"""Backends: what runs a compiled entry's graphs. Each makes, once per entry, the forward as
arrays -> (outputs, {Value: array} for guards and write-back) and the backward as feeds ->
outputs; the entry keeps them (forward_run / backward_run).

    llvm        native kernels (codegen); a graph the lowering does not cover runs on the
                interpreter, with a warning once
    python      the graphs as generated Python source over NumPy (codegen/pysource.py)
    interpret   the IR interpreter (ir/interpret.py), the reference
    eager       no graphs: the function itself runs (compiled_function.py)

The backend is chosen once, when compile() is called (`backend=` or LLGRAD_BACKEND)."""
import os
import threading
import time

import numpy as np

from ..ir.graph import StackType
from ..ir.interpret import evaluate
from ..ir.geometry import contiguous_strides
from ..runtime import heap
from . import background, log


class Interpreter:
    name = "interpret"
    traces = True           # (eager runs the function instead)

    def forward(self, entry):
        fwd = entry.forward
        return lambda arrays: evaluate(fwd, arrays)

    def backward(self, entry):
        bwd, dense = entry.backward, dense_feeds(entry)

        def run(feeds):
            densify(feeds, dense)
            return evaluate(bwd, feeds)[0]
        return run

    def __repr__(self):
        return self.name


def dense_feeds(entry):
    """(index, byte strides) of the backward's inputs its graph types C-contiguous:
    cotangents may arrive expanded or transposed (the gradient of `y.transpose(1, 2)`), and
    the graph's views of them (a reshape) assume the dense layout it was traced with."""
    return [(k, tuple(s * np.dtype(v.type.dtype).itemsize for s in v.type.strides))
            for k, v in enumerate(entry.backward.inputs)
            if not isinstance(v.type, StackType)     # (a stack: the kernel checks)
            and v.type.strides == contiguous_strides(v.type.shape)]


def densify(feeds, dense):
    """Copy, in place in the list feeds, those of the dense ones that are not C-contiguous
    (byte strides first: the cheap test that passes on every call that needs no copy)."""
    for k, bstrides in dense:
        f = feeds[k]
        if f.strides != bstrides and not f.flags.c_contiguous:
            feeds[k] = np.array(f, order="C")


class PythonSource(Interpreter):
    name = "python"

    def forward(self, entry):
        from ..codegen.pysource import compile_source   # (astunparse: on first use)
        fwd = entry.forward
        extra = [g.value for g in fwd.guards] + list(fwd.mutated.values())
        fn = compile_source(fwd, write_back=False, extra=extra)
        n = len(fwd.outputs)

        def run(arrays):
            res = fn(*arrays)
            return res[:n], dict(zip(extra, res[n:]))
        return run

    def backward(self, entry):
        from ..codegen.pysource import compile_source
        fn, dense = compile_source(entry.backward), dense_feeds(entry)

        def run(feeds):
            densify(feeds, dense)
            return fn(*feeds)
        return run


class Native(Interpreter):
    name = "llvm"

    @staticmethod
    def trace_starts():
        """A trace whose build follows begins: LLVM's work that needs no plan starts now
        where the cache is cold (codegen/native/cold_start.py) -> time.perf_counter()."""
        from ..codegen.native import cold_start     # (llvmlite: on first use)
        cold_start.trace_starts()
        return time.perf_counter()

    def forward(self, entry):
        kernel = self.kernel(entry, "forward")
        return kernel.run if kernel is not None else Interpreter.forward(self, entry)

    def backward(self, entry):
        kernel = self.kernel(entry, "backward")
        if kernel is None:
            return Interpreter.backward(self, entry)
        return self.backward_of(entry, kernel)

    @staticmethod
    def backward_of(entry, kernel):
        """The backward run of entry through kernel (its own, or a timed copy of it)."""
        # cotangents may arrive expanded: the kernel reads dense ones (dense_feeds)
        dense = dense_feeds(entry)
        launch = kernel.launch_direct if kernel.direct else kernel

        def run(feeds):    # (feeds: a list of the caller's own)
            densify(feeds, dense)
            return launch(feeds)
        return run

    @staticmethod
    def kernel(entry, which):
        """The native kernel of entry's forward or backward graph; None (a note in the dump
        and a warning) when the graph has an op the LLVM lowering does not cover yet."""
        from ..codegen.lower import Unsupported, lower     # (llvmlite: on first use)
        # a backward may let go of the saved activations mid-call (the inputs among the
        # saved values are the caller's: letting go frees nothing): apply_last
        release = tuple(k for k, s in enumerate(entry.saved) if s.input_index is None) \
            if which == "backward" else ()
        emitted = (lambda: background.forward_emitted(entry)) if which == "forward" else None
        sibling = entry.size_sibling
        try:
            kernel = entry.kernels[which] = lower(
                getattr(entry, which), release=release, share_sizes=True, emitted=emitted,
                sibling=sibling and (lambda: sibling(which)),
                text=background.graph_text(entry, which))
            with _count_lock:       # (the forward and backward build on two threads)
                entry.llvm_builds += kernel.built_llvm
        except Unsupported as e:
            what = f"{e.node.op} ({e.node.loc})" if e.node is not None else "graph"
            entry.kernels[which] = f"interpreted: {what} is not lowered to LLVM yet: {e.reason}"
            warn_once(f"llgrad.compile({entry.name}): the {which} graph runs on the "
                      f"interpreter, not as native code: {what} is not lowered to LLVM yet "
                      f"({e.reason})")
            return None
        return kernel


_count_lock = threading.Lock()


class Eager(Interpreter):
    name = "eager"
    traces = False


BACKENDS = {b.name: b for b in (Native(), PythonSource(), Interpreter(), Eager())}


def backend(requested):
    """The Backend for a name (None: LLGRAD_BACKEND, else llvm)."""
    name = requested or os.environ.get("LLGRAD_BACKEND") or "llvm"
    if name not in BACKENDS:
        raise ValueError(f"unknown llgrad backend {name!r} (available: "
                         f"{', '.join(BACKENDS)})")
    return BACKENDS[name]


def forward_run(entry, sync=False):
    """The entry's forward on its backend, made once and kept; while its native code is
    being built in the background (background.py), the interpreter's (unless sync: then
    the build is waited for, or made here)."""
    run = entry._forward_run
    return run if run is not None else _run_for(entry, "forward", sync)


def backward_run(entry, sync=False):
    """The entry's backward, as forward_run."""
    run = entry._backward_run
    return run if run is not None else _run_for(entry, "backward", sync)


def _run_for(entry, which, sync):
    if not sync and background.enabled(entry):
        background.request(entry, build_now)
        run = getattr(entry, f"_{which}_run")
        return run if run is not None else interim_run(entry, which)
    background.wait(entry)
    run = getattr(entry, f"_{which}_run")
    if run is not None:
        return run
    if which == "forward":
        background.beside(entry, build_now)
        try:
            return build_now(entry, which)
        finally:
            background.forward_emitted(entry)
    return build_now(entry, which)


def interim_run(entry, which):
    """The interpreter's run of a graph whose native code is not ready yet (made once)."""
    runs = entry._interim_runs
    run = runs.get(which)
    if run is None:
        run = runs[which] = getattr(Interpreter, which)(BACKENDS["interpret"], entry)
    return run


def build_now(entry, which, interpreter=False):
    """Make and keep the run of entry's `which` graph here (interpreter: the interpreter's,
    after a failed background build)."""
    run = interim_run(entry, which) if interpreter else _build(entry, which)
    if which == "backward" and background.pending(entry):
        # (the forward's runner may be made already, and report nothing more: the
        # backward's first call gives the build's warnings)
        run = _reporting(entry, run)
    setattr(entry, f"_{which}_run", run)
    if not interpreter and entry.backend.name == "llvm" and \
            not isinstance(entry.kernels.get(which), str):
        background.built(entry, which)
    return run


def report(entry):
    """Give, on the caller's thread and once, the warnings of entry's background build
    (a graph not lowered to LLVM; a failed build, whose graphs run on the interpreter)."""
    notes, error = background.reports(entry)
    for message in notes:
        warn_once(message)
    if error is not None:
        warn_once(f"llgrad.compile({entry.name}): building native code failed, the "
                  f"graphs run on the interpreter: {error}")


def _reporting(entry, run):
    """A backward run that gives the build's warnings at its first call, then is run."""
    def first(feeds):
        entry._backward_run = run
        report(entry)
        return run(feeds)
    return first


on_build = None     # instrument.py's hook while a profile or the perf log is on


def _build(entry, which):
    """Make the run of entry's `which` graph, timed for the compile log and the progress
    line (log.py), and noting where the kernel came from (built, or found in a cache)."""
    t0 = time.perf_counter()        # (the first build imports codegen: that counts too)
    native = entry.backend.name == "llvm"
    if native:
        from ..codegen.native import jit
        before = dict(getattr(jit, "stats", {}))
    run = getattr(entry.backend, which)(entry)
    seconds = time.perf_counter() - t0
    kernel = entry.kernels.get(which)
    if isinstance(kernel, str):
        how = kernel
    elif kernel is None or not native:
        how = f"{entry.backend.name} backend"
    else:
        stats = getattr(jit, "stats", {})
        delta = {k: v - before.get(k, 0) for k, v in stats.items()}
        groups = len(kernel.plan.groups)
        how = (f"LLVM (optimised and compiled), {groups} groups" if delta.get("codegen")
               else f"loaded from the disk cache, {groups} groups" if delta.get("loaded")
               else f"found in memory (same graph compiled before), {groups} groups")
    log.built(entry, which, seconds, how)
    heap.release_freed()        # (what the lowering freed: see runtime/heap.py)
    hook = on_build
    if hook is not None:
        run = hook(entry, which, run, seconds)
    return run


_warned = set()


def warn_once(message):
    """warnings.warn(message) the first time (on the build thread: at the next call)."""
    if background.defer(message):
        return
    if message not in _warned:
        _warned.add(message)
        log.warn_user(message)


def _reset():
    """Forget which warnings were given (tests)."""
    _warned.clear()
