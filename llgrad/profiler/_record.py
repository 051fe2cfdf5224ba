"""What torch.profiler records, as llgrad records it: eager ops by PyTorch's aten names, the
autograd engine's nodes, record_function blocks, and compiled calls and their kernels.

Nothing here is on an op's path until a profile records: then `dispatch.profiler` is the
hook below (the dispatcher, the in-place dispatcher and the autograd engine each read that
one global per op or node, and call the hook when it is set), and the sessions are sinks of
compile/instrument.py, which times compiled calls (one event per call, one per kernel).

A session is one recording window of a profile: raw events (name, category, start and end
in perf_counter ns, thread, input shapes, stack, bytes allocated); events.py turns them into
FunctionEvents with parents, children and self times."""
import functools
import os
import sys
import threading
import time
import traceback

from ..compile import instrument
from ..runtime import dispatch, inplace
from ..runtime.tensor import Tensor

ns = time.perf_counter_ns
_tid = threading.get_ident

# llgrad's op names that are not PyTorch's aten names (the rest are the same)
ATEN_NAMES = {"max_dim": "max", "min_dim": "min", "div_mode": "div", "div_scalar": "div",
              "to_dtype": "_to_copy", "rng_normal": "normal", "rng_uniform": "uniform",
              "normal_tensor": "normal", "bernoulli_p": "bernoulli", "round_decimals": "round",
              "softmax": "_softmax", "log_softmax": "_log_softmax",
              "layer_norm": "native_layer_norm", "batch_norm": "native_batch_norm",
              "batch_norm_with_stats": "native_batch_norm",
              "convolution3d": "convolution", "fused_lstm_cell": "_thnn_fused_lstm_cell",
              "fused_gru_cell": "_thnn_fused_gru_cell", "copy": "copy_", "zero": "zero_",
              "fill": "fill_", "lstm_layer": "mkldnn_rnn_layer"}
_names = {}             # (op name, in place) -> the event's name


def aten_name(name, inplace=False):
    """PyTorch's name of llgrad's op `name` ('aten::mm'; in place 'aten::add_')."""
    key = (name, inplace)
    out = _names.get(key)
    if out is None:
        base = ATEN_NAMES.get(name, name)
        if inplace and not base.endswith("_"):
            base += "_"
        out = _names[key] = "aten::" + base
    return out


class RawEvent:
    __slots__ = ("name", "cat", "start", "end", "tid", "shapes", "stack", "mem")

    def __init__(self, name, cat, start, end, tid, shapes=None, stack=None, mem=0):
        self.name, self.cat, self.start, self.end, self.tid = name, cat, start, end, tid
        self.shapes, self.stack, self.mem = shapes, stack, mem


# instrument's categories kept (the others' time is the self time of the event around them)
_COMPILED = {"call": "compiled", "kernel": "kernel", "compile": "compile",
             "interpreted": "kernel"}
_SUFFIX = ": guards and dispatch"


class Session:
    """One recording window: the raw events, and what to record beside the times. It is a
    sink of compile/instrument.py too (level, eager, event, events_extend, top)."""
    level = "calls"         # (instrument: each compiled kernel timed as a whole)
    eager = False           # (eager ops come through dispatch.profiler instead)

    def __init__(self, record_shapes=False, profile_memory=False, with_stack=False):
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack = with_stack
        self.events = []
        self.t0 = self.t1 = None

    def add(self, ev):
        self.events.append(ev)

    # ---- instrument's sink ----
    def event(self, ev):
        kind = _COMPILED.get(ev.cat)
        if kind is None or "profiler's" in ev.name:      # (instrument's own work)
            return
        name = ev.name[:-len(_SUFFIX)] if ev.name.endswith(_SUFFIX) else ev.name
        prefix = "llgrad::compiled: " if kind == "compiled" else f"llgrad::{kind}: "
        self.events.append(RawEvent(prefix + name, kind, ev.start, ev.start + ev.dur, ev.tid))

    def events_extend(self, events):
        for ev in events:
            self.event(ev)

    def top(self, ev, cats):
        pass


_sessions = []          # the sessions recording now
_want = {"shapes": False, "memory": False, "stack": False}
_lock = threading.Lock()


def start(session):
    """Start recording into session (the hooks are installed by the first)."""
    with _lock:
        _sessions.append(session)
        _configure()
    instrument.activate(session)
    session.t0 = ns()


def stop(session):
    """Stop recording into session (the hooks are removed with the last)."""
    session.t1 = ns()
    instrument.deactivate(session)
    with _lock:
        if session in _sessions:
            _sessions.remove(session)
        _configure()


def recording():
    return bool(_sessions)


def _configure():
    _want["shapes"] = any(s.record_shapes for s in _sessions)
    _want["memory"] = any(s.profile_memory for s in _sessions)
    _want["stack"] = any(s.with_stack for s in _sessions)
    dispatch.profiler = _HOOK if _sessions else None


def _emit(ev):
    for s in _sessions:
        s.add(ev)


_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_stack():
    """The user's frames, innermost first, as PyTorch writes them ('file.py(12): fn')."""
    out = []
    for fr in reversed(traceback.extract_stack(sys._getframe(2))):
        if not os.path.abspath(fr.filename).startswith(_HERE):
            out.append(f"{fr.filename}({fr.lineno}): {fr.name}")
    return out


def _shapes(inputs):
    return [list(x._data.shape) if isinstance(x, Tensor) else [] for x in inputs]


def _nbytes(out):
    if isinstance(out, Tensor):
        return out._data.nbytes
    return sum(o._data.nbytes for o in out if isinstance(o, Tensor)) \
        if isinstance(out, (tuple, list)) else 0


class _Hook:
    """dispatch.profiler while a session records: each op (and node) an event."""

    def op(self, op, inputs, attrs):
        t0 = ns()
        out = dispatch.call(op, inputs, attrs, True)
        t1 = ns()
        want = _want
        _emit(RawEvent(aten_name(op.name), "cpu_op", t0, t1, _tid(),
                       _shapes(inputs) if want["shapes"] else None,
                       user_stack() if want["stack"] else None,
                       _nbytes(out) if want["memory"] and op.kind != "view" else 0))
        return out

    def op_inplace(self, op, t, inputs, attrs):
        t0 = ns()
        out = inplace.call_inplace(op, t, inputs, attrs, True)
        t1 = ns()
        want = _want
        _emit(RawEvent(aten_name(op.name, True), "cpu_op", t0, t1, _tid(),
                       _shapes(inputs) if want["shapes"] else None,
                       user_stack() if want["stack"] else None))
        return out

    def node(self, node, grads, retain_graph):
        name = type(node).__name__
        t0 = ns()
        t1 = ns()
        try:
            return node.apply(grads) if retain_graph else node.apply_last(grads)
        finally:
            t2 = ns()
            tid = _tid()
            shapes = [] if _want["shapes"] else None
            _emit(RawEvent(f"autograd::engine::evaluate_function: {name}", "cpu_op", t0,
                           ns(), tid, shapes))
            _emit(RawEvent(name, "cpu_op", t1, t2, tid, shapes))


_HOOK = _Hook()


class record_function:
    """torch.profiler.record_function / torch.autograd.profiler.record_function: the block
    (or each call of a decorated function) is an event named `name` while a profile records
    (nothing otherwise). In a function llgrad.compile traces, the block is an event when
    the trace runs (the first call, op by op); a compiled call runs native kernels, not the
    Python code, so it is one event with its kernels inside, and its blocks do not show
    (results are the same whether a profile records or not)."""

    def __init__(self, name, args=None):
        self.name, self.args = name, args
        self._open = []                 # (start ns, thread) of the open blocks

    def __enter__(self):
        self._open.append((ns(), _tid()) if _sessions else None)
        return self

    def __exit__(self, *exc):
        opened = self._open.pop() if self._open else None
        if opened is not None and _sessions:
            t0, tid = opened
            _emit(RawEvent(self.name, "user_annotation", t0, ns(), tid,
                           [] if _want["shapes"] else None,
                           user_stack() if _want["stack"] else None))
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapped
