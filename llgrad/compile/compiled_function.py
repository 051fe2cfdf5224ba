"""llgrad.compile: trace once per guard key, run the traced graphs afterwards, and attach
the outputs to autograd through one CompiledFunctionBackward node.

On a cache miss the function runs eagerly under the tracer, with autograd.grad traced after
it (so the backward is made of the very VJP rules eager uses, custom Functions included);
that run's results are returned as they are, so a first call is exactly an eager call.
Later calls run the entry (run.py)."""
import functools
import os
import threading
import warnings

import numpy as np

from ..ir.partition import partition
from ..tracer.pytree import flatten, with_constants
from ..tracer.trace import TraceError, trace_body
from ..runtime import grad_mode, trace_state
from ..runtime.autograd_api import grad as autograd_grad
from .dump import _dump_to_env, _trace_note, format_entry
from .run import (_MISS, _detached, _first_result, backward_run, entry_runner,
                           forward_run)
from .fastpath import fast_key, plain_function
from .guard_walker import make_walker
from .guards import collect, without_grads
from ..runtime.tensor import Tensor

BACKENDS = ("interpret", "python", "llvm", "eager")
RECOMPILE_LIMIT = 8
MAX_WALKERS = 4


def _backend(requested):
    b = requested or os.environ.get("LLGRAD_BACKEND") or "llvm"
    if b not in BACKENDS:
        raise ValueError(f"unknown llgrad backend {b!r} (available: {', '.join(BACKENDS)})")
    return b


class Entry:
    """One compiled specialisation: forward graph (+ backward graph and saved table)."""

    def __init__(self, forward, backward, saved, diff_inputs, diff_outputs, n_out, out_tree,
                 rng_index, guard_items):
        self.forward, self.backward, self.saved = forward, backward, saved
        self.diff_inputs, self.diff_outputs = diff_inputs, diff_outputs
        self.n_out, self.out_tree, self.rng_index = n_out, out_tree, rng_index
        self.guard_items = guard_items


class CompiledFunction:
    def __init__(self, fn, backend=None, recompile_limit=RECOMPILE_LIMIT, transform=True):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.transform = transform  # rewrite tensor-dependent if/while (tracer/convert.py)
        self._converted = None      # (the function traced, its rewritten source or None)
        self.backend = backend
        self._resolved = _backend(backend)  # LLGRAD_BACKEND is read when compile() is called
        self.recompile_limit = recompile_limit
        self.cache = {}             # guard key -> [Entry] (entries differ in value guards)
        self.n_traces = 0           # how many times fn was traced (tests count this)
        self.entries = []
        self._warned = False
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
        if self._resolved == "eager":
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
                if out is not _MISS:
                    return out
        tensors, guards, n_own = collect(self.fn, args, kwargs)
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
        if out is not _MISS:
            return out
        with self._lock:
            out = self._run_cached(key, n_own, inputs, None)   # another thread traced it
            if out is not _MISS:
                return out
            if self.n_traces >= self.recompile_limit:
                self._warn_limit(guards)
                return self.fn(*args, **kwargs)
            entry, result = self._trace(tensors, guards, args, kwargs, n_own)
            self.cache[key] = self.cache.get(key, []) + [entry]
            if entry.grad_free:
                free = without_grads(key, n_own)
                self._grad_free[free] = self._grad_free.get(free, []) + [entry]
            self._fast.clear()            # runners made before know only the older entries
            return result

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
        for entry in entries or ():
            out = entry_runner(entry)(inputs)
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
        runners = [entry_runner(e) for e in entries] if fast else None
        if runners:
            run = runners[0] if len(runners) == 1 else functools.partial(_first_result, runners)
            if n_own is not None:
                run = functools.partial(_own_inputs, run, n_own)
            self._fast[fast[0]] = run

    def _warn_limit(self, guards):
        if self._warned:
            return
        self._warned = True
        last = self.entries[-1].guard_items if self.entries else []
        changed = [f"{n}: {dict(last).get(n)!r} -> {v!r}" for n, v in guards
                   if dict(last).get(n) != v]
        if not changed:     # a value read while tracing (bool(t), .item(), a mask's count)
            reads = [f"{g.expected!r} at {g.loc}" for g in
                     (self.entries[-1].forward.guards if self.entries else ())]
            changed = ["a value guard (the traced values: " + "; ".join(reads) + ")"
                       if reads else "a value guard"]
        warnings.warn(f"llgrad.compile({getattr(self.fn, '__name__', 'fn')}): recompile limit "
                      f"({self.recompile_limit}) reached; the guard that changed: "
                      f"{changed[0]}. Running eagerly from now on for new guard values.",
                      RuntimeWarning, stacklevel=3)

    def _trace(self, tensors, guards, args, kwargs, n_own):
        self.n_traces += 1
        # which inputs are differentiated is decided before the call (one written in place
        # with a value that requires grad comes out requiring grad: see _check_mutated)
        differentiable = [t.requires_grad and t._dtype.is_floating_point for _, t in tensors]
        needs_grad = grad_mode.state.grad_enabled and any(differentiable)
        state = {"diff_out": [], "unused": []}

        def body():
            before = [t._grad for _, t in tensors]
            result = self._traced_fn()(*args, **kwargs)
            grad_read = trace_state.state.tracer.grad_read
            leaves, tree = flatten(result)
            # (None and Python numbers returned beside the tensors: constants of the result)
            tree, outs = with_constants(tree, leaves, _is_constant)
            bad = next(((p, x) for p, x in leaves
                        if not isinstance(x, Tensor) and not _is_constant(x)), None)
            if bad is not None:
                raise TraceError(f"{name} returned a non-tensor ({type(bad[1]).__name__}) at "
                                 f"output {bad[0] or 0}: a compiled function returns tensors, "
                                 "None, Python numbers and strings (in tuples, lists, dicts)")
            state["tree"], state["result"] = tree, result
            # outputs that are input tensors themselves (`return x`, not x.detach() or a
            # view, which the graph cannot tell apart): later calls return the input too
            where = {id(t): i for i, (_, t) in enumerate(tensors)}
            state["identity"] = [(k, where[id(o)]) for k, o in enumerate(outs)
                                 if id(o) in where and tensors[where[id(o)]][1] is o]
            # outputs that do not require grad: an untracked alias of an input (x.detach())
            # is the same array as a view made under no_grad (which requires grad), so
            # later calls are told apart here
            state["plain_alias"] = [k for k, o in enumerate(outs) if isinstance(o, Tensor)
                                    and not o.requires_grad]
            # and views made under no_grad of an input (which require grad, with no edge),
            # found again where the array cannot show it (an empty view aliases nothing)
            storage = {id(t._storage): i for i, (_, t) in enumerate(tensors)}
            state["no_grad_views"] = [(k, storage[id(o._storage)]) for k, o in enumerate(outs)
                                      if isinstance(o, Tensor) and o._creation is not None
                                      and o.requires_grad and id(o._storage) in storage]
            # .grad the function set (a training step's backward): outputs to assign back
            changed = [(k, t._grad) for k, (_, t) in enumerate(tensors)
                       if t._grad is not before[k]]
            grad_outs = [g for _, g in changed if g is not None]
            state["grad_assign"] = [(k, None if g is None else sum(
                1 for _, h in changed[:n] if h is not None)) for n, (k, g) in enumerate(changed)]
            state["n_fn_out"], state["n_out"] = len(outs), len(outs) + len(grad_outs)
            # traced with no .grad, none read or set: the entry serves any .grad state
            state["grad_free"] = n_own == len(tensors) and not grad_read and not changed
            # a step that ran its own backward returns values, not a graph to differentiate
            state["grad"] = needs_grad and not changed
            if not state["grad"]:
                return outs + grad_outs
            diff_in = [t for (_, t), d in zip(tensors, differentiable) if d]
            diff_out = [i for i, o in enumerate(outs)
                        if isinstance(o, Tensor) and o.requires_grad]
            cts = []
            tracer = trace_state.state.tracer
            for k, i in enumerate(diff_out):
                ct = Tensor._from_array(np.ones(outs[i]._data.shape, outs[i]._data.dtype))
                tracer.input(ct, f"ct{k}")
                cts.append(ct)
            state["n_primal"] = len(tracer.builder.graph.inputs) - len(cts)
            state["diff_out"] = diff_out
            grads = autograd_grad([outs[i] for i in diff_out], diff_in, cts, retain_graph=True,
                                  allow_unused=True) if diff_out else [None] * len(diff_in)
            state["unused"] = [k for k, g in enumerate(grads) if g is None]
            return outs + grad_outs + [g if g is not None else t.new_zeros(t.shape)
                                       for g, t in zip(grads, diff_in)]

        name = getattr(self.fn, "__name__", "f")
        try:
            graph = trace_body(name, tensors, body)
        except Exception as e:
            add_note(e, _trace_note(name, tensors, e))
            raise
        _check_mutated(name, tensors, differentiable, graph.mutated, state["grad"])
        n_out = state["n_out"]
        # the traced run was an eager run: the generator already stands where eager leaves it
        rng_index = next((i for i, v in enumerate(graph.inputs) if v.name == "rng"), None)
        if state["grad"]:
            diff_inputs = [i for i, d in enumerate(differentiable) if d]
            mutated = list(graph.mutated)
            joint_outputs = list(graph.outputs)
            graph.outputs = (joint_outputs[:n_out] + [graph.mutated[i] for i in mutated]
                             + [g.value for g in graph.guards] + joint_outputs[n_out:])
            guards_list, graph.guards, graph.mutated = graph.guards, [], {}
            forward, backward, saved = partition(graph, state["n_primal"], n_out, len(mutated),
                                                 len(guards_list), guards_list, mutated)
            entry = Entry(forward, backward, saved, diff_inputs, state["diff_out"], n_out,
                          state["tree"], rng_index, guards)
        else:
            entry = Entry(graph, None, [], [], [], n_out, state["tree"], rng_index, guards)
            if state["grad_assign"]:    # the traced run's results: values, as later calls give
                state["result"] = _detached(state["result"])
        entry.grad_free = state["grad_free"]
        entry.unused = state["unused"]    # positions in diff_inputs: their .grad stays None
        entry.n_fn_out, entry.grad_assign = state["n_fn_out"], state["grad_assign"]
        entry.input_outputs = state["identity"]
        entry.plain_alias, entry.no_grad_views = state["plain_alias"], state["no_grad_views"]
        entry.name = name
        entry.backend = self._resolved
        self.entries.append(entry)
        _dump_to_env(self, entry)
        return entry, state["result"]

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
        with python=True the graphs as Python source."""
        tensors, guards, n_own = collect(self.fn, args, kwargs)
        key = tuple(v for _, v in guards)
        if not self._entries_for(key, n_own):
            self(*args, **kwargs)
        entry = (self._entries_for(key, n_own) or [self.entries[-1]])[-1]
        if (llvm or asm) and entry.backend == "llvm":
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


def _is_constant(leaf):
    return leaf is None or type(leaf) in (int, float, bool, str)


def _own_inputs(run, n_own, tensors):
    return run(tensors[:n_own])


def _check_mutated(name, tensors, differentiable, mutated, grad):
    """Inputs written in place must not take part in the graph's autograd: compiled code
    writes their new values back, but gives them no history (eager would make such an
    input a non-leaf whose grad_fn leads to the value written). (A step that runs its own
    backward may update inputs that require grad, under no_grad: grad is False then.)"""
    for i in mutated:
        if i >= len(tensors):           # (the generator state's input)
            continue
        label, t = tensors[i]
        if differentiable[i] and grad:
            raise TraceError(f"llgrad.compile({name}): input {label!r} requires grad and is "
                             "modified in place; compile does not support that yet (run it "
                             "eagerly)")
        if not differentiable[i] and t.requires_grad:
            raise TraceError(f"llgrad.compile({name}): input {label!r} does not require grad "
                             "but is written in place with a value that does, which would "
                             "give it autograd history; compile does not support that yet "
                             "(run it eagerly, or write a value that does not require grad, "
                             "e.g. with .detach())")


def add_note(e, note):
    """BaseException.add_note (Python 3.11+). On 3.10 the note goes in __notes__ too, and
    joins a one-string message, since the traceback prints no __notes__ there."""
    if hasattr(e, "add_note"):
        e.add_note(note)
        return
    e.__notes__ = [*getattr(e, "__notes__", ()), note]
    if len(e.args) == 1 and isinstance(e.args[0], str):
        e.args = (f"{e.args[0]}\n{note}",)


def compile(fn=None, *, backend=None, recompile_limit=RECOMPILE_LIMIT, transform=True):
    """Decorator or call: compile fn (see CompiledFunction). transform=False traces fn as
    it is (tensor-dependent if/while become value guards instead of IR control flow)."""
    _backend(backend)
    if fn is None:
        return lambda f: CompiledFunction(f, backend, recompile_limit, transform)
    return CompiledFunction(fn, backend, recompile_limit, transform)
