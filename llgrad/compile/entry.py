"""One compiled specialisation (Entry) and the trace that makes it.

A trace is an eager run of the user's function under the tracer, followed, when its outputs
require grad, by autograd.grad of those outputs traced too (so the backward is made of the
very VJP rules eager uses); the joint graph is then split into forward and backward. A
function that runs its own backward (a training step: `loss.backward(); opt.step()`)
returns values, not a graph to differentiate: its one graph is the whole step.

What compile cannot reproduce raises TraceError (state put back, the call run eagerly)."""
import functools
import time

import numpy as np

from ..ir.partition import partition
from ..ir.transposed_copies import read_untransposed
from ..ir.verify import verify
from ..runtime import grad_mode, heap, hypers, saved_tensor, trace_state
from ..runtime.autograd_api import grad as autograd_grad
from ..runtime.backward_hooks import leaf_hooks
from ..runtime.saved_tensor import where_str
from ..runtime.tensor import Tensor
from ..runtime.training_flag import watching
from ..tracer.errors import later_error
from ..tracer.pytree import flatten, made_dataclasses, with_constants
from ..tracer.returned import ReturnedScalar, is_constant, values_in
from ..tracer.trace import TraceError, trace_body
from .dump import _trace_note, add_note as _add_note
from .eager_graph import eager_saved as _eager_saved, frees as _frees
from .attr_writes import Slots
from .guards import WALK_HOOKS, hooked
from .guards_blind import blind_positions
from .guard_values import grad_free
from . import external_io, settings, symbolic_args
from .output_notes import (dead as _dead, leaf_made_inside, leaf_order, reach_masks,
                           rebuild_notes as _rebuild_notes)
from .log import short_loc, user_line
from .input_reshapes import input_reshapes
from .moved_data import check_given, check_replayable, moved_outputs
from .retained import retained_outputs
from .replayed_output import given_up, recording
from .side_effects import none_in_differentiation
from .snapshot import untaken_branch


class Entry:
    """One compiled specialisation: the graphs, what the run path needs to call them and
    to rebuild eager's results, and the guard items of the call it was traced on."""
    __slots__ = (
        "forward", "backward", "saved",   # graphs (backward None: nothing to differentiate)
        "diff_inputs", "diff_outputs",    # input / output positions with gradient edges
        "n_out", "n_fn_out", "out_tree",  # outputs: the function's, then .grad values set
        "rng_index",                      # the RNG state's input position, or None
        "guard_items",                    # [(name, value)] of the traced call
        "grad_free", "functions",         # any .grad state served; custom Functions run
        "unused",                         # positions in diff_inputs with no gradient
        "grad_assign",                    # [(input, output position or None)]: .grad set
        "data_assign", "input_aliases", "input_reshapes",  # moved_data.py, input_reshapes.py
        "retained",                       # [(output, its .grad's position)]: retained.py
        "grad_outputs", "grad_views",     # [(output, input)]: `return w.grad`; w.grad[0]
        "grad_inputs",                    # [(input, input j)]: `w.grad = x`, x an input
        "input_outputs",                  # [(output, input)]: `return x` gives x itself
        "plain_alias", "no_grad_views",   # outputs rebuilt as eager makes them
        "step",                           # the function runs a backward of its own
        "leaf_hooks",                     # (its backward runs the inputs' hooks: guards.py)
        "freed_outputs",                  # outputs whose graph the function's backward freed
        "scalar_outputs",                 # {output: read}: returned as read(result tensor)
                                          # makes them (t.item()'s number, t.numpy(): returned.py)
        "eager_saved",                    # input / output positions eager saved for backward
                                          # ({position: mask of the outputs reading it},
                                          # outputs' (mask, what made it): eager_graph.py)
        "reusable",                       # eager's graph frees nothing: backward runs again
        "frees",                          # per output: the outputs a backward from it frees
        "n_returned",                     # the returned outputs (out_tree's leaves) ...
        "attr_writes",                    # ... then tensors put into objects: (writes, their
                                          # output positions) (attr_writes.py), or None
        "written",                        # the guard paths of those tensors (a check)
        "input_views", "same_outputs", "detached",  # output_notes.py: outputs made as eager's
        "output_views",                   # (and views of another output: output_notes)
        "multi_views",                    # (and outputs of unbind, split, ...: output_notes)
        "inference_outs",                 # (and outputs made under inference_mode inside)
        "leaf_order",                     # (output_notes.leaf_order: the gradient edges' order)
        "reach", "bumps", "out_versions",  # (output_notes.py, snapshot.bumps)
        "replay_kept",                    # (backward_node.replay_kept)
        "name", "backend", "grad_on",     # grad_on: inputs given requires_grad (side_effects)
        "timings",                        # seconds of the trace and builds (log.py)
        "kernels", "_forward_run", "_backward_run", "_runners", "_node_layout", "_unflatten",
        "_build_job", "_interim_runs",    # background.py: the build, interpreter runs till then
        "_cache_hints", "_compiled_before",     # and whether a process built it before
        "llvm_builds",                    # how many LLVM modules its kernels built
        "given", "rendered",              # its warnings and prints (replayed_output.py),
        # (out index, format) of each value a print formatted (runtime/rendered_text.py)
        "counters", "appended",           # numbers it changed in the state (symbolic_slots),
                                          # lists it appended to (appended_lists.py)
        "blind",                          # guard positions it serves any value of (guards_blind)
        "external_io", "linked_arrays",   # files it read or wrote; arrays read as tensors
        "size_reads",                     # the sizes its user's code read (size_reads.py)
        "draws",                          # Python's random draws it makes (py_draws.py)
        "_guard_check",                   # its value guards' slice (guard_precheck.py)
        "size_sibling")                   # its graphs at another size (size_templates.py)

    def __init__(self, name, backend, guard_items):
        self.name, self.backend, self.guard_items = name, backend, guard_items
        self.backward, self.saved, self.diff_inputs, self.diff_outputs = None, [], [], []
        self.unused, self.grad_assign, self.input_outputs, self.out_versions = [], [], [], []
        self.data_assign, self.retained, self.input_aliases, self.input_reshapes = [], [], [], []
        self.plain_alias, self.no_grad_views, self.freed_outputs, self.bumps = [], [], [], {}
        self.input_views, self.same_outputs, self.detached, self.reach = [], [], [], None
        self.output_views, self.grad_outputs, self.grad_inputs, self.grad_views = [], [], [], []
        self.multi_views, self.replay_kept, self.frees = [], None, ()
        self.inference_outs, self.leaf_order = [], None
        self.scalar_outputs, self.eager_saved, self.reusable = {}, ({}, {}, {}), False
        self.n_returned, self.attr_writes, self.written, self.counters = 0, None, (), ()
        self.grad_free, self.rng_index, self.step, self.grad_on = False, None, False, []
        self.leaf_hooks, self.appended, self.blind, self.functions = False, (), (), ()
        self.kernels, self._runners, self.timings = {}, {}, {}
        self._forward_run = self._backward_run = self._node_layout = self._unflatten = None
        self._build_job, self._interim_runs, self._cache_hints = None, {}, {}
        self._compiled_before, self.llvm_builds, self.given, self.rendered = None, 0, [], []
        self.external_io, self.linked_arrays, self.size_reads, self.draws = [], frozenset(), [], ()
        self._guard_check = self.size_sibling = None


def trace_entry(name, backend, traced_fn, tensors, guards, args, kwargs, n_own, entered=(),
                fn=None, dynamic=frozenset()):
    """Trace traced_fn(*args, **kwargs) with `tensors` [(path, Tensor)] as the inputs ->
    (Entry, the traced run's result, which is eager's). entered: the containers and objects
    the guard walk entered (an untaken branch's effects on them are put back). fn: the
    user's function as the guard walk reads its call (the tensors it puts into the objects
    it reaches become outputs: attr_writes.py); None: traced_fn. dynamic: the guard walk's
    (WALK_HOOKS: it walked the inputs' hooks, which the function's own backward may run).

    The pipeline, a step each:
        trace      the function run eagerly under the tracer, its VJP traced after it
        check      what it wrote into its inputs (_check_mutated)
        partition  the joint graph split into forward and backward (ir/partition.py)
        verify     every graph that comes out (ir/verify.py)
    and, on the backend's first run (backends.py): simplify -> plan -> LLVM -> native code."""
    entry = Entry(name, backend, guards)
    # which inputs are differentiated is decided before the call (one written in place
    # with a value that requires grad comes out requiring grad: see _check_mutated)
    differentiable = [t.requires_grad and t._dtype._cat >= 2 for _, t in tensors]  # (complex too)
    t0 = getattr(backend, "trace_starts", time.perf_counter)()  # (Native's: backends.py)
    try:
        with external_io.recording() as entry.external_io:
            graph, state = _trace(entry, traced_fn, tensors, args, kwargs, n_own, entered,
                                  differentiable, traced_fn if fn is None else fn, dynamic)
        _check_mutated(name, tensors, differentiable, graph.mutated, state["grad"])
        t1 = time.perf_counter()
        _partition(entry, graph, state, differentiable)
    except TraceError:
        given_up(entry.given)
        raise
    finally:
        hypers.settle()         # (the optimiser's groups hold numbers again, as eager's)
    t2 = time.perf_counter()
    for g in (entry.forward, entry.backward):   # (the graph as traced: trace_body verified it)
        if g is not None and g is not graph:
            verify(g)
    entry.timings.update(trace=t1 - t0, partition=t2 - t1, verify=time.perf_counter() - t2)
    # (what the run printed and warned is given by the caller, once it keeps the run's
    # result: a call traced again after it (a stand-in given up) must not print it twice)
    result = state["result"]
    del graph, state
    heap.release_freed()        # (what the recording freed: see runtime/heap.py)
    return entry, result


def _trace(entry, traced_fn, tensors, args, kwargs, n_own, entered, differentiable, fn,
           dynamic):
    """The traced run -> (its verified joint graph, what the run decided)."""
    name = entry.name
    state = {}

    def body():
        before = [t._grad for _, t in tensors]
        storages = [t._storage for _, t in tensors]
        mode = settings.grad_mode_now()
        hypers.trace_inputs(tensors)    # (the optimiser's lr: these inputs, hypers.py)
        trace_state.state.tracer.reused = True
        if WALK_HOOKS in dynamic:   # (the input leaves' hooks the call was guarded with)
            guarded = trace_state.state.tracer.leaf_hooks = {
                id(t): h for _, t in tensors
                if t._grad_fn is None and hooked(t) and (h := leaf_hooks(t)) is not None}
            entry.leaf_hooks = bool(guarded)
        slots = Slots(fn, args, kwargs)
        kept = [args, kwargs, *entered]     # (where a printed value's text must not stay)
        made = made_dataclasses([*args, *kwargs.values(), *entered])    # (their results)
        with recording(entry.given, kept) as rendering, watching() as flags:
            result = symbolic_args.returned_stand_ins(raw := traced_fn(*args, **kwargs), made)
            kept.append(result)
        entry.linked_arrays = (tracer := trace_state.state.tracer).linked_arrays
        entry.size_reads, entry.draws = tracer.size_reads, getattr(tracer, "py_draws", ())
        if tracer.broken:               # (a graph break the function caught itself)
            raise TraceError(tracer.broken)
        state["left_mode"] = settings.swap_grad_mode(mode)     # (settings.py)
        leaves, tree = flatten(result, objects=made)
        tree, outs = with_constants(tree, leaves, is_constant)
        bad = next(((p, x) for p, x in leaves if not isinstance(x, (Tensor, ReturnedScalar))
                    and not is_constant(x)), None)
        if bad is not None:
            raise TraceError(f"{name} returned a non-tensor ({type(bad[1]).__name__}) at "
                             f"output {bad[0] or 0}: a compiled function returns tensors, "
                             "None, Python numbers and strings (in tuples, lists, dicts)")
        entry.scalar_outputs = {k: o.reader() for k, o in enumerate(outs)
                                if isinstance(o, ReturnedScalar)}
        state["result"] = values_in(result)
        outs = [o.tensor if isinstance(o, ReturnedScalar) else o for o in outs]
        entry.out_tree = tree
        _written_outputs(entry, slots, outs, result, dynamic, flags.written_first)
        for piece in rendering.pieces:      # (values formatted for output: outputs too)
            entry.rendered.append((len(outs), piece.render if piece.written else None))
            outs.append(piece.tensor)
        if not any(r for _, r in entry.rendered):   # (only returned: ReturnedScalar's)
            entry.rendered = []
        _rebuild_notes(entry, outs, tensors, raw, entered, (fn, args, kwargs))
        # .grad the function set (a training step's backward): outputs to assign back
        changed = [(k, t._grad) for k, (_, t) in enumerate(tensors) if t._grad is not before[k]
                   or (t._grad is None and id(t) in tracer.grad_cleared)]
        grad_outs = [g for _, g in changed if g is not None]
        entry.grad_assign = [(k, None if g is None else sum(
            1 for _, h in changed[:n] if h is not None)) for n, (k, g) in enumerate(changed)]
        entry.grad_outputs = [(k, i) for k, o in enumerate(outs) for i, g in changed if g is o]
        entry.grad_inputs = [(i, j) for i, g in changed for j, (_, t) in enumerate(tensors)
                             if g is t]
        input_reshapes(entry, tracer, tensors)  # (x.unsqueeze_(0): input_reshapes.py)
        grad_outs += moved_outputs(entry, tensors, storages, outs, len(grad_outs),  # (x.data
                                   tracer.input_aliases, tracer.memory_written)  # = y)
        tracer.merge_inputs(entry.input_aliases)    # (one memory: one Value to read)
        grad_outs += retained_outputs(entry, tracer, outs, len(grad_outs))
        check_given(tracer, tensors, changed, outs + grad_outs)  # (eager's views, not copies)
        entry.n_fn_out, entry.n_out = len(outs), len(outs) + len(grad_outs)
        entry.functions = getattr(tracer, "functions", frozenset())     # custom Functions
        # (.grad only cleared: later calls clear it too; a backward after the call fills it)
        step = entry.step = tracer.backward_runs > 0 or any(g is not None for _, g in changed)
        entry.grad_free = n_own == len(tensors) and grad_free(tracer, tensors, changed)
        # (no view made under no_grad (no edge), nor, after a backward, an input returned itself)
        diff_out = [i for i, o in enumerate(outs) if o.requires_grad
                    and i not in entry.scalar_outputs
                    and not (o._creation is not None and o._grad_fn is None) and not (
                        (step or tracer.graph_freed) and i in dict(entry.input_outputs))]
        if step:    # its own backward ran: its results that require grad were backpropagated
            # through, or made of results that were (a backward from them raises)
            for i in diff_out:
                if not _dead(outs[i].grad_fn):
                    made = getattr(outs[i].grad_fn, "_where", None)
                    at = f" (made at {where_str(made)})" if made not in (None, "?") else ""
                    if not tracer.backward_runs:    # (a .grad set, no backward run)
                        raise TraceError(f"{name} sets a .grad and returns a result that "
                                         f"requires grad{at}: compile does not support that")
                    raise TraceError(f"{name} runs a backward and returns a result that "
                                     f"requires grad{at} whose graph a later backward can "
                                     "still run (made after that backward, or kept with "
                                     "retain_graph): compile does not support that")
            entry.freed_outputs = diff_out
        elif diff_out and tracer.graph_freed:
            # autograd.grad inside freed the graph behind some results (a Hessian-vector product's
            # loss): a backward from them raises before any leaf as in eager; others keep theirs
            entry.freed_outputs = [i for i in diff_out if _dead(outs[i].grad_fn)]
            diff_out = [i for i in diff_out if i not in entry.freed_outputs]
        if diff_out and not step and not grad_mode.state.grad_enabled:
            # (enable_grad inside a function called under no_grad: compiled code attaches
            # a backward only where the call's own grad mode is on)
            raise TraceError(f"a result requires grad (enable_grad() inside the function) "
                             f"while the call runs under no_grad, at {short_loc(user_line())}")
        for k, (_, t) in enumerate(tensors):   # `x.requires_grad_(flag)` inside on a leaf:
            if t._grad_fn is None and t._base is None:  # compiled calls replay it (grad_on)
                differentiable[k] = t._requires_grad and t._dtype._cat >= 2
        if diff_out and not step and leaf_made_inside([outs[i] for i in diff_out],
                                                      [t for _, t in tensors], tracer.first_node):
            raise TraceError("a result is computed from a leaf that requires grad made inside "
                             "the function (requires_grad=True, an nn.Parameter), which a "
                             f"compiled call cannot make (the call at {short_loc(user_line())})")
        state["grad"] = grad_mode.state.grad_enabled and any(differentiable) and \
            not step and bool(diff_out)
        if state["grad"]:
            check_replayable(entry, tensors)    # (no `.data =`, no aliased inputs)
        if not state["grad"]:
            return outs + grad_outs
        if tracer.inner_hooks:  # (compile's own derivation runs no hooks: the caller's would)
            raise TraceError(f"{tracer.inner_hooks}, on the graph of a result that requires "
                             "grad")
        if entry.retained:      # (a backward after the call would fill it: retained.py)
            raise TraceError("retain_grad() inside the compiled function on a result that "
                             "requires grad")
        entry.frees = _frees(outs, diff_out, tracer.first_node)
        entry.reusable = not any(entry.frees)
        diff_in = [t for (_, t), d in zip(tensors, differentiable) if d]
        cts = [Tensor._from_array(np.ones(outs[i]._data.shape, outs[i]._data.dtype))
               for i in diff_out]
        for k, ct in enumerate(cts):
            tracer.input(ct, f"ct{k}")
        state["n_primal"] = len(tracer.builder.graph.inputs) - len(cts)
        entry.diff_outputs = diff_out
        entry.reach = reach_masks([outs[i] for i in diff_out], diff_in)
        entry.leaf_order = leaf_order([outs[i] for i in diff_out], diff_in)
        tracer.hooks_off = True     # the inputs' hooks run when the gradients reach them
        outer, saved_tensor.unpacked = saved_tensor.unpacked, set()
        try:
            with none_in_differentiation(entered):
                grads = autograd_grad([outs[i] for i in diff_out], diff_in, cts,
                                      retain_graph=True, allow_unused=True)
        except RuntimeError as e:
            # (errors eager raises only when the caller runs backward: the call runs eagerly)
            later = later_error(e)
            if later is None:
                raise
            raise later from None
        finally:
            tracer.hooks_off = False
            unpacked, saved_tensor.unpacked = saved_tensor.unpacked, outer
            if outer is not None:
                outer |= unpacked
        entry.eager_saved = _eager_saved(outs, tensors, diff_out, unpacked)
        entry.unused = [k for k, g in enumerate(grads) if g is None]
        return outs + grad_outs + [g if g is not None else t.new_zeros(t.shape)
                                   for g, t in zip(grads, diff_in)]

    try:
        graph = trace_body(name, tensors, body, functools.partial(
            untaken_branch, [t for _, t in tensors], entered, fn=fn or traced_fn), examples=False)
    except TraceError:
        raise
    except Exception as e:      # the user's own error, raised as eager raises it
        _add_note(e, _trace_note(name, tensors, e))
        raise
    settings.swap_grad_mode(state.get("left_mode"))
    return graph, state


def _partition(entry, graph, state, differentiable):
    """Forward and backward from the joint graph (a graph without gradients is the forward
    as it is)."""
    n_out = entry.n_out
    # the traced run was an eager run: the generator already stands where eager leaves it
    entry.rng_index = next((i for i, v in enumerate(graph.inputs) if v.name == "rng"), None)
    if not state["grad"]:
        entry.forward = graph
        return
    entry.diff_inputs = [i for i, d in enumerate(differentiable) if d]
    # (before the cut: a backward product then reads the weight, not a saved copy of it)
    joint = read_untransposed(graph)
    if joint is not graph:
        verify(joint)
    graph = joint
    mutated = list(graph.mutated)
    joint_outputs = list(graph.outputs)
    graph.outputs = (joint_outputs[:n_out] + [graph.mutated[i] for i in mutated]
                     + [g.value for g in graph.guards] + joint_outputs[n_out:])
    guards_list, graph.guards, graph.mutated = graph.guards, [], {}
    kept = set(entry.eager_saved[0])
    if entry.rng_index is not None:    # (the state a call draws from: its own array)
        kept.add(entry.rng_index)
    entry.forward, entry.backward, entry.saved = partition(
        graph, state["n_primal"], n_out, len(mutated), len(guards_list), guards_list,
        mutated, sorted(kept))


def _written_outputs(entry, slots, outs, result, dynamic, written_first):
    """The tensors the run put into objects it reaches (attr_writes.py) as outputs after the
    returned ones (one that is also returned, not as a number, is that output)."""
    entry.n_returned = len(outs)
    writes, written, paths = slots.writes(result, dynamic, written_first)
    entry.counters, entry.appended = slots.counters, slots.appended
    entry.blind = blind_positions(entry.guard_items, slots.blind, slots.funcs)
    if not writes:
        return
    at = {id(o): k for k, o in enumerate(outs) if k not in entry.scalar_outputs}
    positions = []
    for t in written:
        if id(t) not in at:
            at[id(t)] = len(outs)
            outs.append(t)
        positions.append(at[id(t)])
    entry.attr_writes, entry.written = (writes, positions), paths


def _check_mutated(name, tensors, differentiable, mutated, grad):
    """Inputs written in place must not take part in the graph's autograd: compiled code
    writes their new values back, but gives them no history (eager would make such an
    input a non-leaf whose grad_fn leads to the value written). (A step that runs its own
    backward may update inputs that require grad, under no_grad: grad is False then.)"""
    for i in mutated:
        if i >= len(tensors):           # (the generator state's input)
            continue
        label, t = tensors[i]
        loc = t._storage.write_loc
        if loc is None:         # (written through an alias of its own storage: `p.data`)
            node = mutated[i].node
            loc = node.loc if node is not None and node.loc else None
        at = f" (written at {where_str(loc)})" if loc is not None else ""
        # (no `llgrad.compile(name):`: the eager fallback's warning, fullgraph's error add it)
        if differentiable[i] and grad:
            raise TraceError(f"input {label!r} requires grad and is modified in place while "
                             f"the function's results require grad{at}")
        if not differentiable[i] and t.requires_grad:
            raise TraceError(f"input {label!r} does not require grad but is written in "
                             f"place with a value that does, which gives it autograd "
                             f"history{at}")

