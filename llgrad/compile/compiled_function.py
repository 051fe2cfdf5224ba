"""llgrad.compile: trace once per guard key, run the traced graphs afterwards, and attach
the outputs to autograd through one CompiledFunctionBackward node.

On a cache miss the function runs eagerly under the tracer (entry.py), so a first call is
exactly an eager call. Later calls run the entry (run.py). What the tracer cannot record
(a graph break: TraceError) puts back everything the traced run changed (snapshot.py) and
runs the call eagerly, with a warning once per reason naming the user's line
(`fullgraph=True` raises instead); a traced run that changed Python state (an attribute, a
container, a number in a global) is not kept, since a compiled call could not replay that."""
import functools
import threading
import warnings

from ..runtime import trace_state
from ..tracer.trace import ControlFlowError, TraceError
from .dump import _dump_to_env, format_entry
from .entry import trace_entry
from .fastpath import fast_key, plain_function
from .guard_walker import make_walker
from .guards import collect, hooked, identity, without_grads
from .module import CompiledModule, is_module
from .backends import backend as get_backend
from .backends import backward_run, forward_run
from .run import _MISS, _RUN_EAGERLY, _first_result, entry_runner
from .snapshot import StateSnapshot

RECOMPILE_LIMIT = 8
MAX_WALKERS = 4


EAGER = "eager"     # a cache entry: calls with this key run the function eagerly


class CompiledFunction:
    def __init__(self, fn, backend=None, recompile_limit=RECOMPILE_LIMIT, transform=True,
                 fullgraph=False):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.fullgraph = fullgraph  # a graph break raises instead of running eagerly
        self.transform = transform  # rewrite tensor-dependent if/while (tracer/convert.py)
        self._converted = None      # (the function traced, its rewritten source or None)
        self.backend = backend
        self._resolved = get_backend(backend)    # (LLGRAD_BACKEND read when compiled)
        self.recompile_limit = recompile_limit
        self.cache = {}             # guard key -> [Entry] (entries differ in value guards)
        self.n_traces = 0           # how many times fn was traced (tests count this)
        self.entries = []
        self._warned = set()        # the reasons already warned about (once each)
        self._not_kept = None       # why the last traced run was not kept (side effects)
        self._lock = threading.RLock()     # one trace at a time; the cache changes under it
        self._plain = plain_function(fn)    # guards from arguments alone (fastpath.py)
        self._fast = {}             # flat key of a simple call -> runner of its entries
        # key without .grad items -> entries whose trace neither read nor set a .grad (and
        # saw none): a call that differs only in .grad (a training step's second call,
        # after the first backward made them) runs them rather than tracing again
        self._grad_free = {}
        self._walkers = []          # guard walks compiled for calls with objects (at most
        #                             MAX_WALKERS structures): guard_walker.py
        self._walker_tries = 0

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __repr__(self):
        return f"<llgrad.compile of {getattr(self.fn, '__qualname__', self.fn)}>"

    # ---- calling ------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not self._resolved.traces:
            return self.fn(*args, **kwargs)       # debug mode: the original function
        if trace_state.state.tracer is not None:
            return self._traced_fn()(*args, **kwargs)     # inlined into a trace
        fast = None if kwargs or not self._plain else fast_key(args)
        if fast is None:
            for walk in self._walkers:
                fast = walk(args, kwargs)
                if fast is not None:
                    break
        if fast is not None:
            run = self._fast.get(fast[0])
            if run is not None:
                out = run(fast[1])
                if out is _RUN_EAGERLY:
                    return self.fn(*args, **kwargs)
                if out is not _MISS:
                    return out
        entered = []
        tensors, guards, n_own = collect(self.fn, args, kwargs, entered)
        key = tuple(v for _, v in guards)
        inputs = [t for _, t in tensors]
        if fast is not None and len(fast[1]) != len(inputs):
            # fn reads tensors from its closure or globals (made since it was decorated):
            # its inputs are not its arguments alone, so no flat key stands for its calls
            self._plain, fast = False, None
            self._fast.clear()
        if fast is None and self._walker_tries < 2 * MAX_WALKERS and \
                len(self._walkers) < MAX_WALKERS and self._entries_for(key, n_own):
            fast = self._new_walker(args, kwargs, inputs)
        out = self._run_cached(key, n_own, inputs, fast)
        if out is _RUN_EAGERLY:
            return self.fn(*args, **kwargs)
        if out is not _MISS:
            return out
        with self._lock:
            out = self._run_cached(key, n_own, inputs, None)   # another thread traced it
            if out is not _MISS:
                return self.fn(*args, **kwargs) if out is _RUN_EAGERLY else out
            if self.n_traces >= self.recompile_limit:
                self._warn_limit(guards)
                return self.fn(*args, **kwargs)
            return self._trace_call(tensors, guards, entered, key, n_own, args, kwargs)

    def _trace_call(self, tensors, guards, entered, key, n_own, args, kwargs):
        """A call with no entry: trace it (an eager run), keep the entry if the run left
        no Python state changed, or put the state back and run eagerly where it cannot be
        traced."""
        snapshot = StateSnapshot([t for _, t in tensors], entered)
        self.n_traces += 1
        try:
            entry, result = trace_entry(getattr(self.fn, "__name__", "f"), self._resolved,
                                        self._traced_fn(), tensors, guards, args, kwargs,
                                        n_own, entered)
        except ControlFlowError as e:
            snapshot.restore()
            if self.fullgraph or self._converted[1] is None:
                raise
            # trace the function as it is: its tensor conditions become value guards
            self._converted = (self.fn, None)
            self._warn_once(f"tensor-dependent control flow left as Python (value guards): "
                            f"{str(e).splitlines()[0]}")
            return self._trace_call(tensors, guards, entered, key, n_own, args, kwargs)
        except TraceError as e:
            snapshot.restore()
            self._add(key, n_own, EAGER)
            return self._eagerly(str(e).split("\n")[0], args, kwargs)
        foreign = snapshot.foreign_random()
        if foreign is not None:     # (the traced run was eager's: its result stands)
            self._add(key, n_own, EAGER)
            self._warn_once(f"running eagerly: the function draws from {foreign}, which a "
                            "compiled call cannot replay (use llgrad's generator)")
            return result
        after_tensors, after, after_own = collect(self.fn, args, kwargs)
        changed = _python_changes(guards, after) or _tensor_changes(
            tensors[:n_own], after_tensors[:after_own])
        if changed:
            # (the next call, seeing the new state, traces again: an optimiser's first step,
            # which makes its state, is followed by steps that change none)
            self._not_kept = f"the traced run changed {changed}"
            return result
        self._not_kept = None
        self.entries.append(entry)
        _dump_to_env(self, entry)
        self._add(key, n_own, entry)
        return result

    def _add(self, key, n_own, entry):
        self.cache[key] = self.cache.get(key, []) + [entry]
        if entry is not EAGER and entry.grad_free:
            free = without_grads(key, n_own)
            self._grad_free[free] = self._grad_free.get(free, []) + [entry]
        self._fast.clear()            # runners made before know only the older entries

    def _eagerly(self, reason, args, kwargs):
        """Run the call eagerly: what it does cannot be compiled (once per reason, a
        warning; with fullgraph=True an error)."""
        if self.fullgraph:
            raise TraceError(f"llgrad.compile({getattr(self.fn, '__name__', 'fn')}, "
                             f"fullgraph=True): {reason}")
        self._warn_once(f"running eagerly: {reason}")
        return self.fn(*args, **kwargs)

    def _warn_once(self, text):
        if text not in self._warned:
            self._warned.add(text)
            warnings.warn(f"llgrad.compile({getattr(self.fn, '__name__', 'fn')}): {text}",
                          UserWarning, stacklevel=5)

    def _run_cached(self, key, n_own, inputs, fast):
        """Run the first entry for key whose value guards hold, else the first grad-free
        entry for key without its .grad items (on the own inputs alone), and remember it
        for calls with the flat key `fast`; _MISS if none."""
        out = self._run_first(self.cache.get(key), inputs, fast)
        if out is _MISS and self._grad_free and any(g is not None for g in key[-1 - n_own:-1]):
            # (with every .grad None, the grad-free entries are key's own: tried above)
            out = self._run_first(self._grad_free.get(without_grads(key, n_own)),
                                  inputs[:n_own], fast, n_own)
        return out

    def _run_first(self, entries, inputs, fast, n_own=None):
        hooks = None
        for entry in entries or ():
            if entry is not EAGER and entry.step:
                if hooks is None:       # (a step's backward would run its inputs' hooks)
                    hooks = any(map(hooked, inputs))
                if hooks:
                    continue
            out = _RUN_EAGERLY if entry is EAGER else entry_runner(entry)(inputs)
            if out is not _MISS:
                self._remember(fast, entries, n_own)
                return out
        return _MISS

    def _new_walker(self, args, kwargs, inputs):
        """A walker of calls shaped like this one (guard_walker.py), made on the second full
        walk of a structure (the first traced it); -> its (flat key, tensors) or None."""
        self._walker_tries += 1     # (a call shape no walker covers: not retried forever)
        walk = make_walker(self.fn, args, kwargs)
        fast = walk and walk(args, kwargs)
        if fast is None or len(fast[1]) != len(inputs) or \
                any(a is not b for a, b in zip(fast[1], inputs)):
            return None     # (not expected: the walker reads what collect() reads)
        self._walkers.append(walk)
        return fast

    def _entries_for(self, key, n_own):
        return self.cache.get(key) or self._grad_free.get(without_grads(key, n_own))

    def _remember(self, fast, entries, n_own=None):
        """Let calls with this flat key (fastpath.py) go straight to these entries (given
        the first n_own tensors: grad-free entries)."""
        runners = [_eager_runner if e is EAGER else entry_runner(e) for e in entries] \
            if fast else None
        if runners:
            run = runners[0] if len(runners) == 1 else functools.partial(_first_result, runners)
            if n_own is not None:
                run = functools.partial(_own_inputs, run, n_own)
            self._fast[fast[0]] = run

    def _warn_limit(self, guards):
        if "recompile limit" in self._warned:
            return
        self._warned.add("recompile limit")
        last = self.entries[-1].guard_items if self.entries else []
        changed = [f"{n}: {dict(last).get(n)!r} -> {v!r}" for n, v in guards
                   if dict(last).get(n) != v]
        if self._not_kept:
            changed = [f"none kept: {self._not_kept}, which a compiled call cannot replay"]
        elif not changed:   # a value read while tracing (bool(t), .item(), a mask's count)
            reads = [f"{g.expected!r} at {g.loc}" for g in
                     (self.entries[-1].forward.guards if self.entries else ())]
            changed = ["a value guard (the traced values: " + "; ".join(reads) + ")"
                       if reads else "a value guard"]
        warnings.warn(f"llgrad.compile({getattr(self.fn, '__name__', 'fn')}): recompile limit "
                      f"({self.recompile_limit}) reached; the guard that changed: "
                      f"{changed[0]}. From now on, running eagerly for new guard values.",
                      RuntimeWarning, stacklevel=3)

    def _traced_fn(self):
        """fn with its tensor-dependent control flow rewritten (converted once), or fn."""
        if self._converted is None:
            from ..tracer.convert import convert
            inner = getattr(self.fn, "_llgrad_inner", None)
            if not self.transform:
                self._converted = (self.fn, None)
            elif inner is not None:         # a transform (grad, ...): convert what it wraps
                conv, source = convert(inner)
                self._converted = (self.fn if conv is inner else self.fn._llgrad_rewrap(conv),
                                   source)
            else:
                self._converted = convert(self.fn)
        return self._converted[0]

    # ---- inspection ---------------------------------------------------------------------------
    def dump(self, *args, llvm=False, asm=False, python=False, **kwargs):
        """The forward IR, backward IR, saved values (with bytes), guards and mutated inputs
        of the specialisation these arguments select (compiling it if needed); with
        llvm=True the LLVM IR before and after optimisation, with asm=True the assembly,
        with python=True the graphs as Python source. Changes nothing the caller can see:
        a trace it needs runs on the state as it is and everything it wrote is put back."""
        entered = []
        tensors, guards, n_own = collect(self.fn, args, kwargs, entered)
        key = tuple(v for _, v in guards)
        entries = [e for e in self._entries_for(key, n_own) or () if e is not EAGER]
        if not entries:
            snapshot = StateSnapshot([t for _, t in tensors], entered)
            try:
                self(*args, **kwargs)
            finally:
                snapshot.restore()
            entries = [e for e in self._entries_for(key, n_own) or () if e is not EAGER]
        if not entries:
            return (f"llgrad.compile({getattr(self.fn, '__name__', 'fn')}): no compiled "
                    f"entry for these arguments ({self._not_kept or 'it runs eagerly'})\n")
        entry = entries[-1]
        if llvm or asm:
            forward_run(entry)
            if entry.backward is not None:
                backward_run(entry)
        text = format_entry(entry, python=python, llvm=llvm, asm=asm) + self._walk_text(python)
        source = self._converted[1] if self._converted else None
        return text + ("\n== rewritten source (tensor-dependent control flow) ==\n" + source
                       if source else "")

    def _walk_text(self, python):
        """How a call finds its entry: a flat key, compiled guard walkers (their source with
        python=True) or the full walk."""
        text = "\n== guard walk ==\n"
        if self._plain:
            text += "  calls of positional tensors and numbers: a flat key (fastpath.py)\n"
        if self._walkers:
            text += (f"  {len(self._walkers)} compiled walker(s), one per call structure "
                     "(guard_walker.py)" + ("" if python else "; python=True shows them")
                     + "\n" + ("".join(w.source for w in self._walkers) if python else ""))
        else:
            text += ("  other calls: the full walk (guards.collect); a walker is made on a "
                     "structure's second call\n")
        return text


def _own_inputs(run, n_own, tensors):
    return run(tensors[:n_own])


def _eager_runner(tensors):
    return _RUN_EAGERLY


def _python_changes(before, after):
    """The first guard item (other than a tensor's .grad, which an entry sets itself) that
    a traced run changed, as text; None if it changed none."""
    if len(before) == len(after) and all(a is b or a == b for a, b in zip(before, after)):
        return None
    after_items = dict(after)
    for name, value in before:
        if name.endswith(".grad") or name == "grad mode":
            continue
        now = after_items.get(name, "(gone)")
        if not (now is value or now == value):
            return f"{name} ({_short(value)} -> {_short(now)})"
    names = {n for n, _ in before}
    new = [n for n, _ in after if n not in names and not n.endswith(".grad")]
    return f"{new[0]} (made by the call)" if new else None


def _tensor_changes(before, after):
    """The first place where the traced run put another tensor (`self.last = h`: a
    compiled call would leave the old one there), as text; None if it put none."""
    now = {path: identity(t) for path, t in after}
    for path, t in before:
        if now.get(path) != identity(t):
            return f"{path} (another tensor)"
    return None


def _short(v):
    text = repr(v)
    return text if len(text) < 60 else text[:57] + "..."


def compile(fn=None, *, backend=None, recompile_limit=RECOMPILE_LIMIT, transform=True,
            fullgraph=False):
    """Decorator or call: compile fn (see CompiledFunction); a module gives a module-like
    object whose calls are compiled (module.py). transform=False traces fn as it is
    (tensor-dependent if/while become value guards instead of IR control flow);
    fullgraph=True raises where a call would otherwise run eagerly."""
    get_backend(backend)

    def make(f):
        cf = CompiledFunction(f, backend, recompile_limit, transform, fullgraph)
        return CompiledModule(f, cf) if is_module(f) else cf
    return make if fn is None else make(fn)
