"""llgrad.compile: trace once per guard key, run the traced graphs afterwards, and attach
the outputs to autograd through one CompiledFunctionBackward node.

On a cache miss the function runs eagerly under the tracer (entry.py), so a first call is
exactly an eager call. Later calls run the entry (run.py). What the tracer cannot record (a
graph break: TraceError) puts back everything the traced run changed (snapshot.py) and runs
the call eagerly, with a warning once per reason naming the user's line (`fullgraph=True`
raises instead); a traced run that changed Python state other than the tensors it put into
objects (attr_writes.py) is not kept: a compiled call cannot replay it."""
import functools
import threading
import time
import weakref

from ..runtime import trace_state
from ..tracer.trace import ControlFlowError, TraceError
from . import (appended_lists, background, dynamo_config, eager_builds, guards_blind, leaf_hooks,
               dynamic_sizes, eager_settled, log, not_kept, numpy_reads, ran_functions, stance,
               symbolic_args, symbolic_slots, volatile_guards)
from .compile_doc import Callable, documented
from .eager_only import eager_only_reason
from .dump import _dump_to_env, dump_text
from .entry import trace_entry
from .entry_lookup import EAGER, entry_for
from .attr_writes import Slots
from .fastpath import plain_function, plain_key, plain_reads
from .guard_walker import make_walker
from .defaults import default_filler
from .guards import collect, hooked, identity, without_grads
from .module import CompiledModule, is_module
from .readable import Names, guard_lines, why_retrace
from .replayed_output import given_up, written
from .recompile_limit import name as fn_name, warn_limit
from .side_effects import fresh_optimizer, unguardable, unreplayed_change
from .backends import backend as get_backend, build_now
from .run import (_MISS, _RUN_EAGERLY, FINISHED_BY_CALL as LATER, _first_result, eager_runner,
                  entry_runner, own_inputs, until_built, untraced)
from .snapshot import StateSnapshot
from .torch_api import torch_compile_arguments
from .traced_function import traced_function

MAX_WALKERS = 4

registry = weakref.WeakSet()    # every CompiledFunction (the profiler times their entries)


class CompiledFunction:
    """What llgrad.compile(fn) returns: call it as fn; see help(llgrad.compile)."""
    def __init__(self, fn, backend=None, recompile_limit=None, transform=True,
                 fullgraph=False):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.fullgraph = fullgraph  # a graph break raises instead of running eagerly
        self.transform = transform  # rewrite tensor-dependent if/while (tracer/convert.py)
        self._converted = None      # (the function traced, its rewritten source or None)
        self.backend = backend
        self._resolved = get_backend(backend)    # (LLGRAD_BACKEND read when compiled)
        self.own_limit = recompile_limit    # (None: torch._dynamo.config's, at each trace)
        self.cache = {}             # guard key -> [Entry] (entries differ in value guards)
        self.n_traces = 0           # how many times fn was traced (tests count this)
        self.entries = []           # (n_llvm_compiles: the LLVM modules their kernels built)
        self._warned = set()        # the reasons already warned about (once each)
        self._not_kept, self._unkept_streak = None, 0   # why the last traced run was not kept
        # (side effects), and how many in a row were not: not_kept.py
        self._first_untraced = False    # the first call ran untraced (side_effects.fresh_optimizer)
        # a traced call that reached a fresh optimiser was not kept: later ones run untraced
        self._fresh_unkept = False
        self._lock = threading.RLock()     # one trace at a time; the cache changes under it
        self._plain, self._reads = plain_function(fn), plain_reads(fn)     # (fastpath.py)
        self._fast = {}             # flat key of a simple call -> runner of its entries
        # key without .grad items -> entries whose trace neither read nor set a .grad (nor
        # saw one): a call that differs only in .grad (a training step's second) runs them
        self._grad_free, self._blind = {}, {}   # (_blind: guards_blind.note's table)
        self._walkers = []          # guard walks compiled per call structure: guard_walker.py
        self._sizes = dynamic_sizes.FunctionSizes()     # (new sizes: dynamic_sizes.py)
        self.dynamic_sizes = True   # (False: torch.compile(dynamic=False), a trace per size)
        self._walker_tries, self._defaults = 0, default_filler(fn)   # (defaults: guards.py)
        self.graph_breaks = []      # why calls ran eagerly: [reason], in order (explain.py)
        self._eager_reasons = {}    # guard key -> why its calls run eagerly
        self._eager_streak = eager_settled.EagerStreak()    # (all eager: no walk)
        self._dynamic, self._static, self._numbers_seen, self._tracing_symbolic = \
            frozenset(), frozenset(), {}, set()     # (numbers as inputs: symbolic_args)
        registry.add(self)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self.__call__, obj)

    def __repr__(self):
        return f"<llgrad.compile of {getattr(self.fn, '__qualname__', self.fn)}>"

    # ---- calling ------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not self._resolved.traces or stance.state.stance == "force_eager":   # (debug mode)
            return untraced(self.fn, args, kwargs, stance.state.stance == "force_eager")
        if trace_state.state.tracer is not None:
            return self._traced_fn()(*args, **kwargs)     # inlined into a trace
        reason = eager_only_reason()
        if reason is not None:          # (hooks or modes native code cannot honour)
            return self._eagerly(reason, args, kwargs)
        if trace_state.state.vmap_levels or self._eager_streak.skip():  # (under vmap: its
            return self.fn(*args, **kwargs)     # batched ops; eager_settled.py: all eager)
        args, kwargs = self._defaults(args, kwargs) if self._defaults else (args, kwargs)
        fast = None if kwargs or not self._plain or self._dynamic else plain_key(self, args)
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
                    return eager_settled.ran_eagerly(self, args, kwargs)
                if out is not _MISS:
                    return out.finish(self.fn, args, kwargs) if type(out) in LATER else out
        entered = []
        tensors, guards, n_own = collect(self.fn, args, kwargs, entered, self._dynamic)
        key = tuple(v for _, v in guards)
        inputs = [t for _, t in tensors]
        if fast is not None and len(fast[1]) != len(inputs):
            # fn reads tensors from its closure or globals (made since it was decorated):
            # its inputs are not its arguments alone, so no flat key stands for its calls
            self._plain, fast, self._fast = False, None, {}
        if fast is None and self._walker_tries < 2 * MAX_WALKERS and \
                len(self._walkers) < MAX_WALKERS and self._entries_for(key, n_own):
            fast = self._new_walker(args, kwargs, inputs)
        out = self._run_cached(key, n_own, inputs, fast)
        if out is _RUN_EAGERLY:
            return eager_settled.ran_eagerly(self, args, kwargs)
        if out is not _MISS:
            return out.finish(self.fn, args, kwargs) if type(out) in LATER else out
        with self._lock:
            out = self._run_cached(key, n_own, inputs, None)   # another thread traced it
            if out is _RUN_EAGERLY or out is _MISS and volatile_guards.relatives_settled(
                    self, guards, key, EAGER):      # (a settled key's but for numbers)
                return eager_settled.ran_eagerly(self, args, kwargs)
            if out is not _MISS:
                return out.finish(self.fn, args, kwargs) if type(out) in LATER else out
            if dynamic_sizes.served(self, guards, key, n_own):
                return self(*args, **kwargs)    # (a new size of a fitted entry: no trace)
            if self.n_traces and stance.keeps_from_tracing():
                return stance.untraced_call(self, args, kwargs)
            if dynamic_sizes.traces_to_limit(self) >= self.recompile_limit:
                return warn_limit(self, guards, args, kwargs) or self.fn(*args, **kwargs)
            return self._trace_call(tensors, guards, entered, key, n_own, args, kwargs)

    def _trace_call(self, tensors, guards, entered, key, n_own, args, kwargs):
        """A call with no entry: trace it (an eager run), keep the entry if the run left no
        Python state changed, or put the state back and run eagerly where it cannot be."""
        if unguardable(guards):     # (not cached: each new iterator would be a new key)
            return self._eagerly(unguardable(guards), args, kwargs)
        if symbolic_slots.newly_dynamic(self, guards, args, kwargs, entered):
            return self(*args, **kwargs)    # (collected again: the number is an input)
        fresh = fresh_optimizer(entered)
        if fresh and (self._fresh_unkept or not self.n_traces and not self._first_untraced):
            # an optimiser's first step makes its state: such a traced run is never kept
            # (side_effects.py), so the first call runs eagerly and the next one traces
            self._first_untraced = True
            with eager_builds.paused():     # (kernels for eager calls this one step needs not)
                return self.fn(*args, **kwargs)
        unkept = self._not_kept     # (why the trace before this one was not kept: not_kept.py)
        snapshot = StateSnapshot([t for _, t in tensors], entered,
                                 Slots(self.fn, args, kwargs).names, self.fn)
        if (self.entries or self._not_kept) and log.enabled("recompiles"):
            log.emit("recompiles", "%s", why_retrace(self, key, guards, tensors, args, kwargs))
        self.n_traces += 1
        t0 = time.perf_counter()
        try:
            with ran_functions.recording(self, entered, args, kwargs, tensors) as ran, \
                    symbolic_slots.standing_in(self, tensors, args, kwargs, entered) as call, \
                    dynamic_sizes.expecting(self, guards):
                entry, result = trace_entry(fn_name(self.fn), self._resolved,
                                            self._traced_fn(), tensors, guards, *call, n_own,
                                            entered, self.fn, self._dynamic)
        except BaseException as e:
            # (a tensor `if` the conversion cannot keep is traced again below as plain
            # Python, its numbers still inputs: their stand-ins did not cause it)
            plain = isinstance(e, ControlFlowError) and not self.fullgraph and \
                self._converted[1] is not None
            if not plain and (leaf_hooks.retry_with_hooks(self, e, snapshot)
                              or symbolic_args.retry(self, e, snapshot, key=key)
                              or dynamic_sizes.retry_plain(self, e, snapshot)):
                return self(*args, **kwargs)
            if not isinstance(e, TraceError):
                dynamic_sizes.raised(self)
                raise
            snapshot.restore()
            plain = isinstance(e, ControlFlowError)
            if plain and (self.fullgraph or self._converted[1] is None):
                raise
            entry, result = (plain, str(e).split("\n")[0]), None
        if type(entry) is tuple:    # (a break, handled outside the handler: its frames and the
            # snapshot would hold the inputs' storages, which an eager resize_ finds unshared)
            snapshot, (plain, reason) = None, entry
            if not plain:     # (the key its numbers' stand-ins made, if they did not break it)
                self._add(symbolic_args.innocent_break(self, reason) or key, n_own, EAGER)
                return self._eagerly(reason, args, kwargs, key)
            # its control flow left as Python: its tensor conditions become value guards
            self._traced_fn(control_flow=False)
            reason = f"tensor-dependent control flow left as Python (value guards): {reason}"
            self._break(reason, eager=False)
            self._warn_once(reason)
            return self._trace_call(tensors, guards, entered, key, n_own, args, kwargs)
        symbolic_slots.mark(self, entry.counters, entered)  # (numbers it counts: inputs)
        appended_lists.mark(self, entry.appended, symbolic_args._forget_fast_paths)
        reason = snapshot.unreplayed_effect(entry)  # (changed: a change it cannot replay)
        changed = reason is None and numpy_reads.mark(self, entry, tensors, guards, snapshot,
            unreplayed_change(self.fn, args, kwargs, guards, tensors[:n_own], entry, self._dynamic)
            or ran and ran.unsound())   # (it ran a method its key did not follow)
        leaked = symbolic_args.holds_symbolic(result)   # (an effect alone: eager's run)
        if (changed or leaked) and (again := symbolic_args.retry(
                self, None, snapshot, not (leaked or entry.given) and changed)):
            given_up(entry.given)   # (the call runs again, which prints and warns)
            if again is not True:   # (not kept: this call runs eagerly)
                not_kept.note(self, self._not_kept, unkept, any(fresh))
            return self(*args, **kwargs) if again is True else self.fn(*args, **kwargs)
        if dynamic_sizes.redo_plain(self, entry, snapshot, [t for _, t in tensors]):
            given_up(entry.given)
            return self(*args, **kwargs)
        written(entry.given)    # (the traced run was eager's: its result and output stand)
        if reason is not None:
            self._add(key, n_own, EAGER)
            self._break(reason, key=key)
            self._warn_once(f"running eagerly: {reason}")
            return result
        if changed:
            self._fresh_unkept = self._fresh_unkept or any(fresh)   # (its first step's)
            not_kept.note(self, f"the traced run changed {changed}", unkept, any(fresh))
            return result
        self._not_kept, entry.bumps = None, snapshot.bumps([t for _, t in tensors], entry)
        kept_key = ran.key(key) if ran else key
        dynamic_sizes.learn(self, entry, kept_key == key)  # (its build reads plain graphs)
        self.entries.append(entry)
        log.traced(entry, time.perf_counter() - t0)
        if log.enabled("guards"):
            lines = guard_lines(guards, Names(self.fn, args, kwargs), entry.forward.guards,
                                entry.forward)
            log.emit("guards", "%s (entry %d): %d guards\n%s", entry.name, len(self.entries),
                     len(lines), "\n".join("  " + ln for ln in lines))
        _dump_to_env(self, entry)
        self._add(kept_key, n_own, entry)
        return result

    def _add(self, key, n_own, entry):
        self.cache[key] = self.cache.get(key, []) + [entry]
        guards_blind.note(self._blind, key, n_own, entry)  # (flags its step sets: any value)
        if entry is not EAGER and entry.grad_free:
            free = without_grads(key, n_own)
            self._grad_free[free] = self._grad_free.get(free, []) + [entry]
        settled = volatile_guards.settle(self, key, EAGER)  # (a guard changing every call)
        if entry is not EAGER and not settled and background.enabled(entry):
            background.request(entry, build_now)  # (LLVM starts now, while the caller goes on)

    def _eagerly(self, reason, args, kwargs, key=None):
        """Run the call eagerly, warning once per reason (fullgraph=True: an error)."""
        if self.fullgraph:
            raise TraceError(f"llgrad.compile({fn_name(self.fn)}, "
                             f"fullgraph=True): {reason}")
        if key is not None or reason not in self.graph_breaks:  # (uncached calls: noted once)
            self._break(reason, key=key)
        self._warn_once(f"running eagerly: {reason}")
        return self.fn(*args, **kwargs)

    def _break(self, reason, key=None, eager=True):
        """Note a graph break (explain.py) and log it (graph_breaks channel)."""
        self.graph_breaks.append(reason)
        if key is not None:     # (a trace that broke, or whose effect no call can replay)
            self._eager_reasons[key] = reason
            self._eager_streak.eager_call(self.entries)
        if log.enabled("graph_breaks"):
            log.emit("graph_breaks", "%s: %s: %s (call at %s)",
                     fn_name(self.fn),
                     "running eagerly" if eager else "traced again as plain Python", reason,
                     log.user_line(3))

    def _warn_once(self, text):
        if text not in self._warned:
            self._warned.add(text)
            log.warn_user(f"llgrad.compile({fn_name(self.fn)}): {text}")

    def _run_cached(self, key, n_own, inputs, fast):
        """Run the first entry for key whose value guards hold, else the first grad-free
        entry for key without its .grad items (on its own inputs), else one blind to where
        key differs (guards_blind.py); remember it for calls with flat key `fast`; or _MISS."""
        out = self._run_first(self.cache.get(key), inputs, fast)
        if out is _MISS and self._grad_free and any(g is not None for g in key[-1 - n_own:-1]):
            # (with every .grad None, the grad-free entries are key's own: tried above)
            out = self._run_first(self._grad_free.get(without_grads(key, n_own)),
                                  inputs[:n_own], fast, n_own)
        if out is _MISS and self._blind:
            out = guards_blind.run(self, key, n_own, inputs, fast)
        return out

    def _run_first(self, entries, inputs, fast, n_own=None):
        hooks = None
        for entry in entries or ():
            if entry is not EAGER and entry.step and not entry.leaf_hooks:
                if hooks is None:       # (a step's backward runs the hooks only its trace ran)
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
        walk = make_walker(self.fn, args, kwargs, self._dynamic)
        fast = walk and walk(args, kwargs)
        if fast is None or len(fast[1]) != len(inputs) or \
                any(a is not b and identity(a) != identity(b) for a, b in zip(fast[1], inputs)):
            return None     # (not expected: the walker reads what collect() reads)
        self._walkers.append(walk)
        return fast

    def _entries_for(self, key, n_own):
        return self.cache.get(key) or self._grad_free.get(without_grads(key, n_own))

    def _remember(self, fast, entries, n_own=None):
        """Let calls with flat key `fast` (fastpath.py) run these entries (n_own: grad-free)."""
        building = [e for e in entries if e is not EAGER and e._forward_run is None]
        if entries and fast:
            runners = [eager_runner if e is EAGER else entry_runner(e) for e in entries]
            run = runners[0] if len(runners) == 1 else functools.partial(_first_result, runners)
            run = run if n_own is None else functools.partial(own_inputs, run, n_own)
            self._fast[fast[0]] = functools.partial(  # (not final: replaced once built)
                until_built, self._remember, self._fast, fast, entries, n_own, building,
                run) if building else run

    @property
    def recompile_limit(self):
        """How many traces before calls with new guard values run eagerly: compile's
        recompile_limit, else torch._dynamo.config.recompile_limit as it is now."""
        return dynamo_config.recompile_limit(self.own_limit)

    @property
    def n_llvm_compiles(self):
        """How many LLVM modules this function's entries built (kernels found in the memory
        or disk cache cost none): with n_traces, what new shapes and values cost."""
        return sum(e.llvm_builds for e in self.entries)

    def _traced_fn(self, control_flow=True):
        """fn with its tensor-dependent control flow rewritten (converted once), or fn;
        control_flow=False: only its returned .item() calls (outputs, not value guards)."""
        return traced_function(self, control_flow)

    # ---- inspection ---------------------------------------------------------------------------
    def dump(self, *args, llvm=False, asm=False, python=False, format="text", **kwargs):
        """The forward IR, backward IR, saved values (with bytes), guards and mutated inputs
        of the specialisation these arguments select (compiling it if needed); with
        llvm=True the LLVM IR before and after optimisation, with asm=True the assembly,
        with python=True the graphs as Python source; format="dot" gives the forward and
        backward graphs in Graphviz DOT instead (dot.py). Changes nothing the caller can
        see: a trace it needs runs on the state as it is and everything it wrote is put
        back. Returns a str whose repr is the text itself (a REPL shows it readably)."""
        if format not in ("text", "dot"):
            raise ValueError(f"dump: format must be 'text' or 'dot', not {format!r}")
        return dump_text(self, self._entry_for(args, kwargs), llvm, asm, python, format)

    def _entry_for(self, args, kwargs, trace=True):
        return entry_for(self, args, kwargs, trace)     # (entry_lookup.py)

    def wait(self):
        """Block until every entry's native code is built (background.py), as benchmarks do."""
        for entry in self.entries:
            background.wait(entry)

    def reset(self):
        """Forget every traced entry (torch.compiler.reset): the next call traces again."""
        with self._lock:
            self.cache, self.entries, self._fast, self._grad_free, self._walkers, self._blind, \
                self._sizes = {}, [], {}, {}, [], {}, dynamic_sizes.FunctionSizes()
            self._walker_tries, self.n_traces, self._not_kept, self._warned = 0, 0, None, set()
            self._first_untraced, self._dynamic, self._static, self._numbers_seen = \
                False, frozenset(), frozenset(), {}
            self.graph_breaks, self._eager_reasons, self._fresh_unkept = [], {}, False
            self._eager_streak.reset()


@documented         # (the help text: compile_doc.py)
def compile(fn: "Callable | None" = None, *, backend: "str | None" = None,
            recompile_limit: "int | None" = None, transform: bool = True,
            fullgraph: bool = False, **torch_options: object
            ) -> "CompiledFunction | CompiledModule | Callable":
    backend, disable = torch_compile_arguments(backend, torch_options)
    limit = recompile_limit
    get_backend(backend)

    def make(f):
        if disable:                 # (torch.compile(disable=True) hands the function back)
            return f
        cf = CompiledFunction(f, backend, limit, transform, fullgraph)
        cf.dynamic_sizes = torch_options.get("dynamic") is not False
        return CompiledModule(f, cf) if is_module(f) else cf
    return make if fn is None else make(fn)
