"""Running a compiled entry (its graphs on their backend: kernels.py): the flat runner a
call takes; the result tensors (outputs that alias inputs become their views, or the inputs
themselves where eager returns those), the write-back of mutated inputs, and the
CompiledFunctionBackward node attached in grad mode."""
import functools
import operator

import numpy as np

from ..ir.ops_shape import strided_view
from ..tracer.pytree import unflattener
from ..runtime import grad_mode, trace_state
from . import grad_views, guard_precheck
from .attr_write_replay import Pending
from .backward_node import CompiledFunctionBackward, FreedBackward, replay_kept
from ..runtime.creation import default_generator
from .fastpath import quick_runner
from .input_reshapes import replay_reshapes
from .moved_data import aliases_hold, assign_moved, share_moved
from .py_draws import drawing
from .retained import assign_retained
from .replayed_output import raises, replay
from .backends import forward_run, report, warn_once
from .log import short_loc
from ..runtime.tensor import Storage, Tensor

_STORAGE, _DATA = operator.attrgetter("_storage"), operator.attrgetter("_data")
_MISS = object()        # a runner's answer when a value guard of the entry fails
_RUN_EAGERLY = object()  # its answer when the call must run eagerly (compiled_function.py)


def entry_runner(entry):
    """tensors -> the entry's result, or _MISS if one of its value guards fails: in the
    current grad mode, made once (fastpath.quick_runner where it applies, else run_entry)."""
    grad = entry.backward is not None and grad_mode.state.grad_enabled
    runners = entry._runners
    run = runners.get(grad)
    if run is None:
        forward_run(entry)                  # (builds the kernel, or starts its build)
        if entry._forward_run is None:      # (built in the background: not kept till then)
            run = functools.partial(_while_building, entry)
            run = functools.partial(_replaying, run, entry.given) if entry.given else run
            return functools.partial(drawing, run, entry, _NOT_SERVED) \
                if entry.draws else run
        report(entry)                       # (the background build's warnings)
        kernel = entry.kernels.get("forward")
        if getattr(kernel, "direct", False) and not entry.rendered:
            run = quick_runner(entry, kernel.launch_direct,
                               CompiledFunctionBackward.attach if grad else None, _RUN_EAGERLY)
        run = run or functools.partial(run_entry, entry)
        run = runners[grad] = functools.partial(_replaying, run, entry.given) \
            if entry.given else run
        if entry.draws:     # (Python's random draws, made before the graph: py_draws.py)
            run = runners[grad] = functools.partial(drawing, run, entry, _NOT_SERVED)
    return run


def _replaying(run, given, tensors):
    """run(tensors), then the warnings and prints eager gives (replayed_output.py) if it
    ran; eagerly if a warning would be an error (raised before the function's later
    writes)."""
    if raises(given):
        return _RUN_EAGERLY
    out, texts = run(tensors), None
    if type(out) is WithTexts:
        out, texts = out.result, out.texts
    if out is not _MISS and out is not _RUN_EAGERLY and out is not STAND_IN:
        replay(given, texts=texts)
    return out


class WithTexts:
    """A compiled call's result and its text of each value the traced run formatted for
    output (entry.rendered), which _replaying writes where the run wrote its own."""
    __slots__ = ("result", "texts")

    def __init__(self, result, texts):
        self.result, self.texts = result, texts


class StandIn:
    """The answer for a call whose compiled code is still being built: CompiledFunction's
    call finishes it by running the function eagerly in its place, seen as compiled code
    (compiler.is_compiling() is true there, as in the trace the code comes from)."""
    __slots__ = ()

    def finish(self, fn, args, kwargs):
        """fn(*args, **kwargs), standing in for the compiled entry."""
        state = trace_state.state
        prev, state.standing_in = state.standing_in, True
        try:
            return fn(*args, **kwargs)
        finally:
            state.standing_in = prev


STAND_IN = StandIn()


def untraced(fn, args, kwargs, forced):
    """fn(*args, **kwargs) for an untraced compiled call: on the eager backend seen as
    compiled code (compiler.is_compiling(), as under torch.compile(backend="eager")), under
    the force_eager stance (forced) as plain eager code."""
    return fn(*args, **kwargs) if forced else STAND_IN.finish(fn, args, kwargs)


_NOT_SERVED = (_MISS, _RUN_EAGERLY, STAND_IN)   # (a call's draws are put back: py_draws.py)
FINISHED_BY_CALL = (Pending, StandIn)     # answers CompiledFunction's call finishes


def _while_building(entry, tensors):
    """A call while the entry's native forward is being built (background.py) runs the
    function eagerly (STAND_IN), exactly as without compile; then the entry's own run."""
    return STAND_IN if entry._forward_run is None else run_entry(entry, tensors)


def until_built(remember, table, fast, entries, n_own, building, run, tensors):
    """The flat-key runner (compiled_function._remember) of calls while some of entries'
    native forwards are being built: run (standing in, as the full walk of the guards would
    choose) till every one is built, then remember's final runners in its place."""
    if any(e._forward_run is None for e in building):
        return run(tensors)
    remember(fast, entries, n_own)
    final = table.get(fast[0])
    return run(tensors) if final is None or getattr(final, "func", None) is until_built \
        else final(tensors)


def own_inputs(run, n_own, tensors):
    """run on the first n_own tensors (a grad-free entry: compiled_function._remember)."""
    return run(tensors[:n_own])


def eager_runner(tensors):
    """The runner of calls that run eagerly."""
    return _RUN_EAGERLY


def _first_result(runners, tensors):
    for run in runners:
        out = run(tensors)
        if out is not _MISS:
            return out
    return _MISS


def run_entry(entry, tensors):
    """Run a compiled entry on the inputs; _MISS if one of its value guards fails."""
    fwd = entry.forward
    if entry.input_aliases and not aliases_hold(entry, tensors):
        return _MISS            # (traced with two inputs over one memory, now apart)
    if fwd.mutated and _overlapping(tensors, fwd.mutated, entry.input_aliases):
        # the kernel writes its inputs and assumes they do not share memory
        warn_once(f"llgrad.compile({entry.name}): running eagerly: inputs share memory "
                  f"and the function writes one of them in place{_written_at(fwd)}")
        return _RUN_EAGERLY
    if fwd.mutated and not grad_mode.state.inference and any(
            i < len(tensors) and tensors[i]._inference for i in fwd.mutated):
        return _RUN_EAGERLY     # (where eager raises: an inference tensor written outside
                                # inference_mode)
    arrays = [t._data for t in tensors]
    before = None           # (values a replay of the forward reads: see replay_kept)
    if fwd.mutated and entry.backward is not None and grad_mode.state.grad_enabled:
        before = {i: np.array(arrays[i]) for i in replay_kept(entry)} or None
    rng_state = None
    if entry.rng_index is not None:         # the RNG state input follows the tensors
        rng_state = default_generator.state.copy()
        arrays.append(rng_state)
    if fwd.guards and not guard_precheck.holds(entry, arrays):
        return _MISS            # (found by the guards' slice, before the whole forward)
    try:
        outs, env = forward_run(entry)(arrays)
    except Exception:   # (an index check): nothing was written; eager gives its own error,
        return _RUN_EAGERLY     # after whatever the function does before it
    if not guard_precheck.guards_hold(fwd.guards, env):
        return _MISS
    if fwd.mutated:     # values kept for backward must not change with the write-back
        outs = list(outs[:entry.n_out]) + [
            np.array(o) if any(np.shares_memory(o, arrays[i]) for i in fwd.mutated) else o
            for o in outs[entry.n_out:]]
    reshaped = replay_reshapes(entry, tensors) if entry.input_reshapes else ()
    for k in reshaped.difference(fwd.mutated) if reshaped else ():
        tensors[k]._storage.version += entry.bumps.get(k, 1)   # (the in-place ops' bumps)
    for i, v in fwd.mutated.items():                # commit: write back, bump versions
        if entry.rng_index is not None and i == entry.rng_index:
            default_generator.state[...] = env[v]
            continue
        t = tensors[i]
        if env[v] is not t._data:       # (else the kernel wrote it in place)
            try:
                t._data[...] = env[v]
            except ValueError:          # (NumPy's read-only view of an expanded input)
                _write_read_only(t, env[v])
        t._storage.version += entry.bumps.get(i, 1)
    results = _wrap_outputs(outs[:entry.n_fn_out], tensors)
    taken = set(map(id, arrays))
    taken.update(map(id, outs[:entry.n_fn_out]))
    for k, pos in entry.grad_assign:            # .grad the step set (or cleared)
        if pos is None:
            tensors[k]._grad = None
            continue
        g = outs[entry.n_fn_out + pos]
        if g.base is not None or id(g) in taken:     # (a fresh output buffer is its own)
            g = np.array(g)
        taken.add(id(g))
        tensors[k]._grad = Tensor._from_array(g)
    assign_moved(entry, tensors, outs, taken)  # `p.data = y`: p's new memory
    for k, j in entry.grad_inputs:      # `w.grad = x`: the input itself, as in eager
        tensors[k]._grad = tensors[j]
    for k, i in entry.grad_outputs:     # `return w.grad`: the .grad the call set, as eager's
        results[k] = tensors[i]._grad
    grad_views.remake(entry, tensors, results)  # (`return w.grad.detach()`, w.grad[0])
    for k, flag in entry.grad_on:   # `x.requires_grad = True` the run set on a leaf input
        if flag is None:            # (or `x.detach_()` on one with a history)
            tensors[k]._grad_fn, flag = None, False
        tensors[k]._requires_grad = flag
    for k, i, off, strides in entry.input_views:  # eager returns a view of input i
        t, arr = tensors[i], results[k]._data
        if not np.shares_memory(arr, t._data):
            size = arr.dtype.itemsize    # (off and strides in bytes from t's first element)
            results[k] = Tensor._view_of(strided_view(t._data, arr.shape, [   # (its dtype:
                st // size for st in strides], off // size, arr.dtype), t)   # view_as_real)
    for k, j, off, strides, how, layout in entry.output_views:   # views of output j
        base, arr = results[j], results[k]._data
        if not np.shares_memory(arr, base._data):
            if base._data.strides != layout:
                continue
            size = arr.dtype.itemsize
            arr = strided_view(base._data, arr.shape, [st // size for st in strides],
                               off // size)
        elif how is True:       # (_wrap_outputs made it a view of the output it shares)
            continue
        # (an alias without history, or a view of one: `y.detach()`, `y.detach()[0]`,
        # neither a view of y, which _wrap_outputs makes of arrays sharing memory; `y.data`:
        # over the version counter of the output first over it, or one of its own)
        if type(how) is tuple:
            first, is_view = how
            own = results[first] if first < k else Tensor._from_array(
                base._data, Storage(base._storage.base))
            results[k] = Tensor._view_of(arr, own) if is_view else \
                Tensor._from_array(arr, own._storage)
        else:
            results[k] = Tensor._view_of(arr, base) if how is True else \
                Tensor._view_of(arr, base._alias()) if how is None else \
                Tensor._from_array(arr, base._storage)
    for k in entry.plain_alias:     # (a view made here under no_grad would require grad)
        if results[k]._creation is not None:
            results[k]._creation = None
    for k, i, made in entry.no_grad_views:
        if results[k]._creation is None:
            results[k] = Tensor._view_of(results[k]._data, tensors[i])
            results[k]._creation = made     # (made under no_grad inside, called with grad on)
    for k, i, is_view, own in entry.detached:   # x.detach() or x.data (or a view of it): no
        arr, t = results[k]._data, tensors[i]   # base, no history (.data: its own counter)
        alias = t.data if own else t._alias()
        results[k] = Tensor._view_of(arr, alias) if is_view else \
            Tensor._from_array(arr, alias._storage)
    for k, version in entry.out_versions:  # (before attach records the saved versions)
        results[k]._storage.version = version
    if entry.backward is not None and grad_mode.state.grad_enabled:
        CompiledFunctionBackward.attach(entry, tensors, results, outs[entry.n_out:], rng_state,
                                        before)
    for k, i in entry.input_outputs:    # `return x`: x itself, as eager returns it (a
        results[k] = tensors[i]         # gradient reaching it goes to x, not to the node)
    for k, j in entry.same_outputs:     # `return y, y`: one tensor, as eager returns
        results[k] = results[j]
    for k, made in entry.multi_views:  # (outputs of unbind, split, ...: written in place,
        results[k]._multi_view = made   # raise as eager's do)
    for k, flag in entry.inference_outs:   # (made under inference_mode inside)
        results[k]._inference = flag
    for k in entry.freed_outputs:   # a step's backward went through them (as in eager)
        r = results[k]
        r._requires_grad, r._grad_fn = True, FreedBackward()
    assign_retained(entry, results, outs)   # (retain_grad() inside: retained.py)
    share_moved(entry, tensors, results)    # (`p.data = y`, y an output: one Storage)
    if entry.scalar_outputs:        # `return loss.item()`: numbers, as eager returns
        results = list(results)     # (and `.numpy()`, `.tolist()`: tracer/returned.py)
        for k, read in entry.scalar_outputs.items():
            results[k] = read(results[k])
    build = entry._unflatten
    if build is None:
        build = entry._unflatten = unflattener(entry.out_tree)
    if entry.attr_writes is not None:       # (the caller puts them: it has the arguments)
        writes, positions = entry.attr_writes
        out = Pending(build(results[:entry.n_returned]), writes,
                      [results[k] for k in positions])
    else:
        out = build(results[:entry.n_returned])
    if entry.rendered:      # (printed values: formatted as the traced run formatted them)
        return WithTexts(out, [render and render(results[k]._data)
                               for k, render in entry.rendered])
    return out


def _written_at(fwd):
    """' (written at file.py:12)': the user's line of a write of an input, or ''."""
    locs = [v.node.loc for v in fwd.mutated.values() if v.node is not None and v.node.loc]
    return f" (written at {short_loc(locs[0])})" if locs else ""


def _write_read_only(t, value):
    """Write back an input NumPy holds read-only: an expanded one, through a writeable view
    of its memory, as eager writes it (a trace only succeeds where eager's write did: one
    value for the elements that share memory, so repeated writes agree)."""
    base = t._storage.base
    if not base.flags.writeable:
        raise RuntimeError("the tensor's memory is read-only (a read-only NumPy array or "
                           "memmap under from_numpy): clone() it, or make the array "
                           "writeable, before writing into it")
    offset = t._data.__array_interface__["data"][0] - t._storage.data_ptr()
    np.ndarray(t._data.shape, t._data.dtype, base, offset, t._data.strides)[...] = value


def _overlapping(tensors, written, aliases=()):
    """Whether an input the call writes (positions in `written`) overlaps another input's
    bytes: views of one storage, or (from_numpy) distinct storages over one NumPy buffer.
    Disjoint views of one storage do not (parameters that vector_to_parameters made slices
    of one vector): the kernel reads and writes each input's own elements. (Inputs only
    read may share: x[:-1] and x[1:].) aliases: inputs the trace bound as another's memory
    (moved_data.aliases_hold), left out."""
    written = [i for i in written if i < len(tensors)]  # (the RNG state input follows them)
    if aliases:
        gone = {k for k, _ in aliases}
        tensors = [t for k, t in enumerate(tensors) if k not in gone]
        written = [i - sum(g < i for g in gone) for i in written if i not in gone]
    storages = list(map(_STORAGE, tensors))
    if len({id(st.base) for st in storages}) == len(tensors) and \
            all(st.base.base is None for st in storages):
        return False        # distinct buffers that own their memory cannot overlap
    # a sweep over the spans by start (n log n: a many-parameter step's optimizer state
    # makes hundreds of inputs): a span overlaps an earlier one iff it starts before the
    # largest end so far, of any span if it is written, of a written one if not. Only
    # over the inputs that may share memory with a written one: those whose owning array
    # is a written input's, or whose memory NumPy does not own (a PPO update's thousands
    # of rollout tensors, views of the arrays they were cut from: 6 ms a call otherwise)
    written = set(written)
    owners = [_owner(st.base) for st in storages]
    shared = {owners[k] for k in written}
    if None in shared:
        keep = range(len(tensors))
    else:
        keep = [k for k, o in enumerate(owners) if o is None or o in shared]
    spans = sorted((*_byte_span(tensors[k]._data), k in written) for k in keep
                   if tensors[k]._data.size)
    end_any = end_written = -1
    for lo, hi, w in spans:
        if lo < (end_any if w else end_written):
            return True
        end_any = max(end_any, hi)
        if w:
            end_written = max(end_written, hi)
    return False


def _owner(a):
    """id of the array that owns a's memory (follows the chain of views), None where the
    memory is not a NumPy array's own (a buffer, a memmap's mmap): it may be anyone's."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return id(a) if a.base is None else None


def _byte_span(a):
    """[first byte, past the last byte) of array a (strides are never negative here)."""
    lo = a.__array_interface__["data"][0]
    return lo, lo + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + a.itemsize


def _wrap_outputs(arrays, inputs):
    """Tensors for the output arrays. An output that aliases an input, or a larger output,
    becomes a view of it (as in eager), so in-place writes through it rebase history."""
    if all(a.base is None for a in arrays):       # fresh arrays (a kernel's outputs)?
        ids = set(map(id, arrays))
        if len(ids) == len(arrays) and ids.isdisjoint(map(id, map(_DATA, inputs))):
            return [Tensor._from_array(a) for a in arrays]    # they alias nothing
    results = [None] * len(arrays)
    for k in sorted(range(len(arrays)), key=lambda k: -arrays[k].size):
        arr = arrays[k]
        base = next((t for t in list(inputs) + [r for r in results if r is not None]
                     if arr.size and np.shares_memory(arr, t._data)), None)
        results[k] = Tensor._view_of(arr, base) if base is not None else Tensor._from_array(arr)
    return results
