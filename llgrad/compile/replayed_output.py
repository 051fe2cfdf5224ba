"""What a traced run gave the user besides its results, given again by every compiled call
of its entry: warnings and text written to sys.stdout / sys.stderr (print). A compiled
call runs none of the function's Python, yet eager warns and prints at each call.

The traced run records, on the tracing thread only, each warning shown
(warnings._showwarnmsg) with its origin and each write to the standard streams, and holds
them until its trace is kept (one given up gives nothing: the call runs again); a compiled
call gives them again in order: each warning through warnings.warn_explicit with its
origin's module and registry, so the user's filters and the once-per-line memory decide as
they decide for eager's (once per line by default, every time under "always", an
exception under "error"), each text written to the stream the call finds. What is printed
is made of values the trace guards (a number read from a tensor is a value guard), or of
values formatted for the output, which each call formats again from its own
(runtime/rendered_text.py: `print(loss)`, `print(f"{loss.item():.4f}")`), so it is the text
eager would print. A warning or a print inside tensor-dependent control flow
(whether eager gives it depends on the data) makes the function traced as plain Python, its
conditions value guards. A call under filters that make one of the warnings an error runs
eagerly (the error is raised where the function warns, before its later writes: raises()).
compile's own warnings ("llgrad.compile(...)") are not recorded:
they are given where compile decides them."""
import contextlib
import sys
import threading
import warnings

from ..runtime import trace_state
from ..runtime.backward_hooks import UnguardedLeafHooks
from ..runtime.formatting import print_options
from ..runtime.rendered_text import Renderings, held
from ..runtime.saved_tensor import _internal, users_file
from ..runtime.symbolic_scalar import stand_ins
from ..tracer.errors import ControlFlowError, TraceError


def _in_region(what):
    if getattr(trace_state.state.tracer, "parent", None) is not None:
        raise ControlFlowError(f"{what} given inside tensor-dependent control flow")


class _Recorder:
    """The standard streams and the warnings display while a traced run goes on: what the
    tracing thread writes is held and recorded (a trace that is given up prints nothing:
    the call runs again eagerly)."""

    def __init__(self, out):
        self.out, self.me, self.showing, self.closed = out, threading.get_ident(), False, False
        self.rendering = Renderings(_users_frame, _internal)
        self.streams = {name: getattr(sys, name) for name in ("stdout", "stderr")}
        self.shown, self.warns = warnings._showwarnmsg, warnings.warn
        self.filters = warnings.filters, tuple(warnings.filters)    # (the caller's)
        self.impl = warnings._showwarnmsg_impl      # (a catch_warnings(record=True) swaps it)

    def mine(self):
        # (closed: another thread's trace put its own streams back over this one's, which
        # then stays in place, passing everything on)
        return threading.get_ident() == self.me and not (self.showing or self.closed)

    def write(self, name, text):
        if not self.mine():
            return self.streams[name].write(text)
        plain = str.__str__(text) if isinstance(text, str) else text
        _in_region(f"output written to sys.{name} ({plain[:40]!r})")
        # (the text and, where it carries formatted values, its parts: literal text and
        # the indices of the pieces each compiled call formats again, rendered_text.py)
        self.out.append(("write", name, plain, self.rendering.consume(text)))
        self.rendering.given += 1
        return len(plain)

    def flush(self, name):
        """A flush of the stream: recorded where it comes between the texts (print's
        flush=True; compiled calls flush there too), else passed on."""
        if not self.mine():
            return self.streams[name].flush()
        self.out.append(("flush", name))

    def warn(self, message, category=None, stacklevel=1, source=None, **kwargs):
        """warnings.warn while the trace runs: a warning of the tracing thread under the
        caller's filters is recorded whatever they decide now, so each compiled call gives
        it under the filters it finds (one hidden by "ignore" at the trace raises under a
        later "error", as eager's would); written() gives the traced call's. Under filters
        the function set itself, or an "error" now (eager raises there), it passes on."""
        if not self.mine() or kwargs or str(message).startswith("llgrad.compile(") or \
                warnings.filters is not self.filters[0] or \
                tuple(warnings.filters) != self.filters[1]:
            return self.warns(message, category, stacklevel + 1, source, **kwargs)
        category = type(message) if isinstance(message, Warning) else category or UserWarning
        try:
            space, frame = None, sys._getframe(stacklevel)
        except ValueError:          # (deeper than the stack: warnings names `sys`)
            space, frame = sys.__dict__, None
        space = frame.f_globals if frame is not None else space
        origin = (message, category, frame.f_code.co_filename if frame else "sys",
                  frame.f_lineno if frame else 1, space.get("__name__", "<string>"),
                  space.setdefault("__warningregistry__", {}))
        if _action(*origin[:5]) == "error":
            return self.warns(message, category, stacklevel + 1, source)
        self._record(origin)

    def _record(self, origin):
        message, category, filename, lineno = origin[:4]
        _in_region(f"a warning ({category.__name__}: {message}) at {filename}:{lineno}")
        # (one given once per process: eager's later calls do not give it again)
        self.out.append(("once" if trace_state.state.once else "warn",) + origin)
        self.rendering.given += 1
        self.rendering.went_out(str(message))     # (its text given as traced)

    def warning(self, msg):
        # (one the function's own catch_warnings(record=True) block takes goes to its list,
        # as eager's does, and is not given again: the compiled calls return what it read)
        if self.mine() and not str(msg.message).startswith("llgrad.compile(") and \
                warnings._showwarnmsg_impl is self.impl:
            origin = _origin(msg)
            _unmark(origin)         # (held as the texts are: written() gives it; a trace
            # given up, a branch eager may not take among them, leaves no note of it)
            self._record(origin)
            return
        self.showing = True         # (its text goes to stderr: not a write of the function's)
        try:
            self.shown(msg)
        finally:
            self.showing = False


class _Tee:
    def __init__(self, recorder, name):
        self._recorder, self._name = recorder, name

    def write(self, text):
        return self._recorder.write(self._name, text)

    def writelines(self, lines):        # (each line a write, recorded as print's are)
        for line in lines:
            self.write(line)

    def flush(self):
        return self._recorder.flush(self._name)

    def __getattr__(self, name):
        if name == "buffer" and self._recorder.mine():
            # (bytes written past the text layer: compiled calls could not write them)
            trace_state.state.tracer.graph_break(f"sys.{self._name}.buffer (bytes written "
                                                 "to the stream under its text layer)")
        return getattr(self._recorder.streams[self._name], name)


@contextlib.contextmanager
def recording(out, kept=()):
    """Append to `out` what replay() needs of each warning shown and each text written to
    sys.stdout or sys.stderr while the block runs; both are held for written(), or given
    when the block raises an error of the function's own (not TraceError). Yields the
    run's Renderings (values formatted for output); kept: a list the block fills with what
    must not hold their text when it ends (its result, the objects it reaches)."""
    rec = _Recorder(out)
    warnings._showwarnmsg, warnings.warn = rec.warning, rec.warn
    tees = {name: _Tee(rec, name) for name, s in rec.streams.items() if s is not None}
    for name, tee in tees.items():
        setattr(sys, name, tee)
    state = trace_state.state
    outer, state.rendering = state.rendering, rec.rendering
    rec.rendering.options = print_options()
    try:
        yield rec.rendering
        state.rendering = outer
        rec.rendering.check(kept)   # (a piece not written as made: the read it stood for)
        if tees and held(kept, _Tee, modules=False):
            raise TraceError("the function keeps sys.stdout or sys.stderr as it finds them "
                             "while compile records its output")
    except TraceError:
        raise
    except BaseException as e:
        _restore(rec, tees)
        # (a stand-in's escape, or the step reaching leaf hooks the guard walk left out: the
        # call is traced again, symbolic_args.py, leaf_hooks.py)
        if not stand_ins.active and not isinstance(e, UnguardedLeafHooks):
            written(out)        # (the function's own error: eager wrote all that first)
        else:
            given_up(out)
        raise
    finally:
        state.rendering = outer
        _restore(rec, tees)


def _users_frame():
    """The nearest frame past llgrad's own if it is the user's code, else None (a library's
    code between: what it does with the text, a padding, a second write, is not known)."""
    f = sys._getframe(1)
    while f is not None and _internal[f.f_code.co_filename]:
        f = f.f_back
    return f if f is not None and users_file(f.f_code.co_filename) else None


def _restore(rec, tees):
    rec.closed = True
    if warnings._showwarnmsg == rec.warning:
        warnings._showwarnmsg = rec.shown
    if warnings.warn == rec.warn:
        warnings.warn = rec.warns
    for name, tee in tees.items():
        if getattr(sys, name) is tee:       # (else the function put its own there)
            setattr(sys, name, rec.streams[name])


def written(given):
    """Give what a traced run gave (recording's list) once its trace is kept: a trace that
    is given up gives nothing, since the call then runs again eagerly."""
    replay(given, first=True)


def _unmark(origin):
    """Take back what warnings.warn_explicit noted of a warning it just showed (the
    once-per-line and once-per-text memory): given again by written() it is decided by the
    filters and that memory afresh, and a trace given up leaves no note of it."""
    message, category, _, lineno, _, registry = origin
    text = str(message)
    for memory, key in ((registry, (text, category, lineno)), (registry, (text, category, 0)),
                        (registry, (text, category)), (warnings.onceregistry, (text, category))):
        if memory is not None and memory.get(key):
            del memory[key]


def _origin(msg):
    """(message, category, filename, lineno, module name, registry) of a warning shown: the
    module and registry are those of the frame it names (as warnings.warn found them)."""
    frame = sys._getframe(2)
    while frame is not None and not (frame.f_code.co_filename == msg.filename
                                     and frame.f_lineno == msg.lineno):
        frame = frame.f_back
    space = frame.f_globals if frame is not None else {}
    registry = space.setdefault("__warningregistry__", {}) if frame is not None else None
    return (msg.message, msg.category, msg.filename, msg.lineno,
            space.get("__name__", "<string>"), registry)


def raises(given):
    """Whether the warnings filters now make a warning of `given` an exception (action
    "error"): eager raises it where the function warns, before what the function does next;
    a compiled call would raise it only after its kernels wrote (such a call runs eagerly)."""
    return any(item[0] == "warn" and _action(*item[1:6]) == "error" for item in given)


def _action(message, category, filename, lineno, module):
    """The action warnings.warn_explicit takes for this warning under the filters now."""
    text = str(message)
    if isinstance(message, Warning):
        category = type(message)
    for action, msg, cat, mod, ln in warnings.filters:
        if (msg is None or msg.match(text)) and issubclass(category, cat) and \
                (mod is None or mod.match(module)) and (ln == 0 or lineno == ln):
            return action
    return warnings.defaultaction


def replay(given, first=False, texts=None):
    """Give again what a traced run gave (recording's list); first: give it the first
    time, warnings given once per process included. texts: this call's text of each piece
    (the values the run formatted for output), put where the run wrote its own."""
    for item in given:
        if item[0] == "write":
            stream = getattr(sys, item[1])
            if stream is not None:
                parts = item[3] if texts is not None else None
                stream.write(item[2] if parts is None else "".join(
                    p if type(p) is str else texts[p] for p in parts))
        elif item[0] == "flush":
            stream = getattr(sys, item[1])
            if stream is not None:
                stream.flush()
        elif item[0] == "warn" or first:
            warnings.warn_explicit(*item[1:])


def given_up(given):
    """A trace given up gives nothing (the call runs again, eagerly), but the warnings of it
    given once per process: eager's run, whose library has noted them given, would not."""
    replay([item for item in given if item[0] == "once"], first=True)
