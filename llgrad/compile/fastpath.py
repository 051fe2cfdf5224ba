"""The lean call path of a compiled function: a flat guard key for the common call.

`guards.collect` walks arguments, objects and their attributes and names every guard so
that a recompile can say which one changed; that costs tens of microseconds. Most calls
pass only tensors and Python numbers, positionally, to a plain function. For those,
`fast_key` builds one flat tuple, in a few microseconds, that determines the full guard key
(same tensors, dtypes, shapes, strides, requires_grad, .grad layouts, numbers, grad mode),
and the tensor inputs in the order collect() gives them. After a full walk a
CompiledFunction remembers fast key -> the runner of that key's entries, so a repeated call
skips the walk and the cache lookup; anything else (keyword arguments, containers, modules,
a tensor passed twice) returns None and takes the full walk.

Then the call itself: an entry whose forward needs nothing but one kernel launch gets a
runner (`quick_runner`) that is the launch, cheap result tensors (`fresh_tensors`), the
backward node when grad is on, and a generated builder of the output structure
(`tree_builder`); other entries run through run.run_entry."""
import inspect
import itertools

import numpy as np

from ..ir.promotion import _DEFAULT
from ..runtime import grad_mode
from ..runtime.dtypes import _BY_NP
from ..runtime.tensor import Storage, Tensor
from ..tracer.pytree import Constant, unflattener
from .class_state import LIBRARIES as _LIBRARIES
from .function_reads import captured_reads

_NUMBERS = (int, float, bool)


def fast_key(args):
    """(flat key, tensor inputs) for positional tensors and numbers, else None."""
    parts, tensors, grads = [], [], None
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            g = a._grad
            if a._hooks or (a._acc is not None and a._acc._hooked) or a.__dict__ or \
                    type(a) is not Tensor or type(a._storage) is not Storage:
                return None          # (hooks and attributes set on a tensor, a Parameter or
                # another subclass, whose class is in the key, a meta tensor: the full walk)
            # (a tensor's dtype object stands for its array's: one per NumPy dtype)
            rg = a._requires_grad or (a._base is not None and a.requires_grad)
            # (whether a is a leaf: a step's backward sets a leaf's .grad, a non-leaf's
            # reaches the leaves behind it)
            if g is None:
                parts.append((a._dtype, d.shape, d.strides, rg, a._grad_fn is None))
            else:
                gd = g._data
                parts.append((a._dtype, d.shape, d.strides, rg, a._grad_fn is None, g._dtype,
                              gd.shape, gd.strides))
                grads = [g] if grads is None else grads + [g]
            tensors.append(a)
        elif type(a) in _NUMBERS:   # (a float's zero with its sign: guards.scalar_guard)
            parts.append((type(a), (a or repr(a)) if type(a) is float else a))
        else:
            return None
    if len(tensors) > 1 and len(set(map(id, tensors))) != len(tensors):
        return None                  # a tensor passed twice: the full walk decides
    if grads is not None:
        everything = tensors + grads
        if len(set(map(id, everything))) != len(everything):
            return None              # a .grad that is also an input (or shared)
        tensors = everything
    st = grad_mode.state
    parts.append(st.grad_enabled)
    parts.append(st.inference)
    parts.append(_DEFAULT[2])       # (the default float dtype: guards.collect)
    return tuple(parts), tensors


def plain_key(cf, args):
    """fast_key(args) for the calls of CompiledFunction cf of a plain function, while what
    it read from its closure and globals is still there (the library functions and modules
    it found: `act = F.gelu` rebinds a global); else None, with the reads, plainness and the
    flat keys' runners made again (the full walk guards those reads)."""
    for where, v in cf._reads:
        if where[0] == "cell":
            try:
                now = where[1].cell_contents
            except ValueError:
                now = _EMPTY
        else:
            now = where[1].get(where[2], _EMPTY)
        if now is not v:
            cf._plain, cf._reads = plain_function(cf.fn), plain_reads(cf.fn)
            cf._fast.clear()
            return None
    return fast_key(args)


def plain_reads(fn):
    """[(where, value)] of what the plain function fn read from closure cells and
    globals (guards.captured_reads; value _EMPTY: an empty cell or an absent name)."""
    if isinstance(getattr(fn, "_plain", None), bool):       # a CompiledFunction
        return fn._reads
    inner = getattr(fn, "_llgrad_inner", None)
    if inner is not None:
        return plain_reads(inner)
    if not inspect.isfunction(fn):
        return ()
    return tuple((where, _EMPTY if kind in ("empty", "absent") else v)
                 for where, v, kind, _ in captured_reads(fn)[1])


_EMPTY = object()


def plain_function(fn):
    """Whether fn's guards come from its arguments alone: a plain function (not a bound
    method, a module or another object with state, whose attributes collect() walks) that
    reads from its closure and globals nothing but modules and library functions and
    classes (no tensor, array, number, object or function of the user's, which collect()
    walks and guards: guards.captured_reads)."""
    if isinstance(getattr(fn, "_plain", None), bool):       # a CompiledFunction (a transform)
        return fn._plain
    inner = getattr(fn, "_llgrad_inner", None)
    if inner is not None:       # a transform's wrapper: its own cells never change
        return plain_function(inner)
    if inspect.isbuiltin(fn):
        return getattr(fn, "__self__", None) is None
    return inspect.isfunction(fn) and all(
        kind == "absent" or (kind == "skip" and _library(v))
        for _, v, kind, _ in captured_reads(fn)[1])


def _library(v):
    """A module, or a function or class of a library (guarded by identity otherwise)."""
    if inspect.ismodule(v):
        return True
    return (inspect.isroutine(v) or inspect.isclass(v)) and \
        (getattr(v, "__module__", None) or "").startswith(_LIBRARIES)


# ---- results ---------------------------------------------------------------------------------
def fresh_tensors(arrays):
    """Tensors over arrays that alias nothing (a kernel's fresh output buffers): what
    Tensor._from_array makes, with the grad-mode read once for all of them (and each
    Storage filled in place: its __init__ call costs more than the three stores)."""
    inference = grad_mode.state.inference
    new, by_np = object.__new__, _BY_NP
    out = []
    for arr in arrays:
        if type(arr) is not np.ndarray:      # (an interpreted graph's NumPy scalar)
            arr = np.asarray(arr)
        t = new(Tensor)
        t._data = arr
        st = t._storage = new(Storage)       # = Storage(arr)
        st.base, st.version, st.write_loc = arr, 0, None
        t._dtype = by_np[arr.dtype]
        t._requires_grad = t._retains_grad = t._multi_view = False
        t._grad = t._grad_fn = t._base = t._hooks = t._acc = None
        t._output_nr = t._view_version = 0
        t._inference = inference
        out.append(t)
    return out


def tree_builder(tree):
    """leaves -> the structure `tree` (tracer.pytree's format) describes, as one generated
    expression such as `lambda l: (l[0], (l[1],))`: pytree.unflatten walks the tree
    recursively, which costs microseconds on every call of a compiled function."""
    names = {}
    try:
        src = _expr(tree, itertools.count(), names)
        return eval(f"lambda l: {src}", names)      # noqa: S307 (our own text)
    except (SyntaxError, RecursionError, MemoryError):     # nested too deep for the parser
        return unflattener(tree)


def _expr(tree, index, names):
    if tree is None:
        return f"l[{next(index)}]"
    kind, children = tree

    def name(obj):                  # types and dict keys: referred to by a global name
        n = f"_k{len(names)}"
        names[n] = obj
        return n
    if kind is Constant:
        return name(children)
    if kind is dict:
        return "{" + ", ".join(f"{name(k)}: {_expr(c, index, names)}"
                               for k, c in children) + "}"
    items = [_expr(c, index, names) for c in children]
    if kind is tuple:
        return "(" + "".join(i + ", " for i in items) + ")"
    if kind is list:
        return "[" + ", ".join(items) + "]"
    if hasattr(kind, "_fields"):                     # a namedtuple
        return f"{name(kind)}({', '.join(items)})"
    return f"{name(kind)}([{', '.join(items)}])"     # a list or tuple subclass


# ---- the runner of a simple entry ------------------------------------------------------------
def quick_runner(entry, launch, attach=None, eagerly=None):
    """For an entry whose forward is a direct native kernel (fresh output buffers) with
    nothing to check or commit after the call (no value guards, write-backs, RNG or .grad
    updates, tensors put into objects): tensors -> result, one kernel launch and the output
    tensors; with `attach` (grad mode on, a backward graph) also the
    CompiledFunctionBackward node. Else None. A launch that raises (an index check: the
    kernel wrote nothing) gives `eagerly`: eager's run raises eager's error."""
    fwd = entry.forward
    if fwd.guards or fwd.mutated or entry.rng_index is not None or entry.grad_assign or \
            entry.data_assign or entry.input_aliases or entry.input_reshapes or \
            entry.retained or \
            entry.freed_outputs or entry.scalar_outputs or entry.attr_writes is not None or \
            entry.grad_on or entry.out_versions or entry.multi_views or \
            entry.inference_outs or entry.input_outputs or entry.input_views or \
            entry.detached or entry.no_grad_views or entry.output_views or \
            entry.same_outputs or entry.grad_outputs or entry.grad_inputs:
        # (outputs that are inputs, views or aliases of inputs or of each other, computed
        # by the kernel as fresh buffers (`x[1:4].detach()`): run_entry makes them eager's)
        return None
    # (no .grad updates: the function's outputs are all the primal outputs, n_out of them;
    # the saved values for backward follow them)
    n, build = entry.n_out, tree_builder(entry.out_tree)
    if attach is None and n == len(fwd.outputs):       # (every output: no slice to copy)
        def quick(tensors):
            try:
                return build(fresh_tensors(launch([t._data for t in tensors])))
            except Exception:       # noqa: BLE001 - eager raises its own
                return eagerly
    elif attach is None:
        def quick(tensors):
            try:
                outs = launch([t._data for t in tensors])
            except Exception:       # noqa: BLE001
                return eagerly
            return build(fresh_tensors(outs[:n]))
    else:
        def quick(tensors):
            try:
                outs = launch([t._data for t in tensors])
            except Exception:       # noqa: BLE001
                return eagerly
            results = fresh_tensors(outs[:n])
            attach(entry, tensors, results, outs[n:])
            return build(results)
    return quick
