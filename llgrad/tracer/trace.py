"""Define-by-run tracing: run the user's function once on real tensors while every op the
dispatcher executes is also recorded into a Graph.

Each traced tensor maps to an IR Value. In-place ops are functionalised: the op is recorded
out of place, and the new value is written into the value of the tensor's *root* (the graph
input or op result that owns the memory) with strided ops; any alias read later is derived
again from its root, so it sees the update. Inputs whose memory changed are written back
(`graph.mutated`)."""
from __future__ import annotations
import inspect
import re
from typing import TYPE_CHECKING

import numpy as np

from ..ir.builder import Builder
from ..ir.graph import Graph, Guard, TensorType
from ..ir.ops_random import STATE_SHAPE
from ..ir.ops_shape import strided_view
from ..ir.geometry import geometry_overlaps, geometry_span
from ..ir.verify import verify
from ..runtime import grad_mode, trace_state
from ..runtime.creation import default_generator
from ..runtime.node import _sequence
from ..runtime.saved_tensor import user_location
from ..runtime.size_reads import SizeReads
from ..runtime.symbolic_uses import check_layout, check_write
from ..runtime.tensor import Tensor
from .bindings import Bindings, array_storage as _array_storage, geometry as _geometry, \
    overlaps_input as _overlaps_input
from . import view_values
from .errors import ControlFlowError, TraceError, check_branch_alias  # noqa: F401 (TraceError)
from .item_reads import item_value
from .numpy_reads import check_write as check_numpy_write, numpy_view, run_body
from .masks import mask_attrs, tensors_of
from .pytree import flatten

if TYPE_CHECKING:
    from collections.abc import Callable


def tensor_type(t):
    return TensorType(t._dtype.name, tuple(t._data.shape), t.stride(), t._storage_offset())


class Tracer(Bindings):
    def __init__(self, name):
        super().__init__()     # values, roots, bases, aliased: what it knows of tensors
        self.builder = Builder(name)
        self.inputs = {}       # id(storage) -> graph input index
        self.rng_example = default_generator.state.copy()
        self.rng_input = self.rng_value = None
        self.loc_override = None   # set while replaying a graph or running a VJP rule
        self.grad_read = False     # whether the traced code read some tensor's .grad
        self.grad_cleared = set()  # ids of tensors the traced code set `.grad = None` on
        self.region_made = {}      # id(tensor) -> (tensor, region): made inside a region
        self.branch_aliases = {}   # id(base) -> (base, the if): a branch result from outside it
        self.hooks_off = False     # compile's own differentiation: the engine runs no hooks
        self.leaf_hooks = None     # id(input leaf) -> its hooks compile guards (None: unwalked)
        self.backward_runs = 0     # .backward() calls the traced code made itself (a step)
        self.graph_freed = False   # whether a backward / autograd.grad of its freed a graph
        self.inner_hooks = None    # what first hooked a node it made, and where (hook_handle.py)
        self.broken = None         # a graph break's message (kept if user code catches it)
        self.arrays = {}           # id(an input's base array) -> its Storage (array_storage)
        self.linked_arrays = set()  # ids of those Storages array_storage gave (read as inputs)
        self.size_reads = SizeReads()   # the sizes the user's code read (size_reads.py)
        self.shared = set()        # ids of input storages whose memory two inputs share
        self.input_aliases = []    # [(input, input j, version)]: both over j's Storage
        self.input_reshapes = []   # [(tensor, view, args, kwargs)]: x.unsqueeze_(0) on one
        self.first_node = next(_sequence)   # backward nodes made before the trace have less
        # untaken(what): a context manager around tracing the untaken branch of a tensor `if`
        self.untaken = None     # (its Python effects put back, control.py); None: no such care
        # whether later calls with other values reuse the trace (compile's): an input's layout
        # (left out of guards) cannot be read; library checks of values are ops, value guards
        self.reused = False

    def current_loc(self):
        return self.loc_override or str(user_location())

    # ---- values --------------------------------------------------------------------------
    def add(self, op, operands, attrs, view_of=None, types=None):
        return self.builder.add(op, operands, attrs, types=types, loc=self.current_loc(),
                                view_of=view_of)

    def knows(self, t):
        """True when t is a value of this trace (so a region traced inside it captures t)."""
        e = self.values.get(id(t))
        return (e is not None and e[0]() is t) or self._sid(t) in self.roots

    def bind(self, t, v):       # t (a fresh tensor owning its memory) holds the value v
        self._bind_root(t, v)

    def input(self, t, name):
        self.real_values((t,))
        sid = id(t._storage)
        if self._input_alias(t, name):     # (p and `state["old_p"]` after `p.data = old_p`)
            return self.values[id(t)][1]
        if self._owns(t) or _overlaps_input(t, self.arrays) and not self._disjoint_region(t):
            # inputs that share memory (x[:-1], x[1:]) are read as they are; writing that
            # memory, or reading another alias of it, cannot be traced (_shared)
            self.shared.add(sid)
            self.shared.update(id(st) for st in self.arrays.values()
                               if np.may_share_memory(st.base, t._storage.base))
            if sid in self.roots:
                v = self.builder.input(tensor_type(t), name)
                self._set_value(t, v)
                return v
        v = self.builder.input(tensor_type(t), name)
        self.inputs[id(t._storage)] = len(self.builder.graph.inputs) - 1
        self.arrays[id(t._storage.base)] = t._storage
        self._bind_root(t, v)
        return v

    def value_of(self, t):
        v = self.value_entry(t)
        if v is not None:
            return v
        sid = self._sid(t)
        root = self.roots.get(sid)
        if root is None:
            made = self.region_made.get(id(t))
            if made is not None and made[0] is t:
                raise ControlFlowError(
                    f"{self.current_loc()}: a tensor computed inside {made[1]} is used "
                    "outside it: it escaped through a side effect (a list, a dict, an "
                    "attribute, a global). Only variables assigned in the branches or the "
                    "loop carry values out of tensor-dependent control flow.")
            if t.requires_grad and grad_mode.state.grad_enabled:   # (as a constant: no grad)
                self.graph_break("a tensor that requires grad that would be a constant of the "
                                 "trace (made untraced inside, or reached past the guards)")
            # a tensor made inside fn or captured from outside: a constant of the graph
            v = self._constant(t)
            self._bind_root(t, v)
            return v
        rt, rv, geom = self._root(sid)
        if rt is t or geom == _geometry(t):
            return rv               # the root itself, or an alias of all of it
        self._shared(t, "reading another view of")
        # an alias read after its memory changed: derive it again from its root's value
        v = view_values.read(self, t, rv, geom)
        self._set_value(t, v)
        return v

    def output(self, t):
        """The value of t as a graph output, with t's eager strides. The IR lays results of
        non-view ops out contiguous where eager keeps its input's strides (x.t() * 2), so a
        returned tensor would otherwise differ in stride(), is_contiguous() and in which
        .view of it succeeds."""
        v = self.value_of(t)
        shape, strides = tuple(t._data.shape), t.stride()
        if v.type.strides == strides:
            return v
        prev = self.loc_override       # (the copy is the line that made the value's)
        self.loc_override = v.node.loc if v.node is not None and v.node.loc else prev
        try:
            return self._relaid(t, v, shape, strides)
        finally:
            self.loc_override = prev

    def _relaid(self, t, v, shape, strides):
        if all(a == b or n <= 1 for a, b, n in zip(v.type.strides, strides, shape)):
            # only size-1 dims differ: the same memory, re-strided
            base, offset, in_strides, in_offset = v, v.type.offset, v.type.strides, \
                v.type.offset
        elif not geometry_overlaps(shape, strides):
            # the elements in eager's order (from offset 0: offsets are a buffer's own)
            geom = (shape, strides, 0)
            base = self.add("strided_scatter", [v], {"geom": geom,
                                                     "span": geometry_span(*geom)})
            offset, in_strides, in_offset = 0, (1,), 0
        else:       # repeated elements (an expanded result): eager's whole memory
            _, rv, geom = self._root(self._sid(t))
            span = max(geometry_span(*geom), geometry_span(*_geometry(t)))
            base = self._root_memory(geom, rv, span)
            offset, in_strides, in_offset = t._storage_offset(), (1,), 0
        return self.add("as_strided", [base], {
            "size": shape, "stride": strides, "storage_offset": offset,
            "in_strides": in_strides, "in_offset": in_offset}, view_of=base)

    def _constant(self, t):
        """t's value as a constant node. A 0-size dim before others would lose the dims after
        it in a nested list ((2, 0, 3).tolist() is [[], []]): such a constant is made flat
        and viewed to t's shape."""
        data = t._data
        if data.size == 0 and data.ndim > 1:
            flat = self.add("constant", [], {"value": [], "dtype": t._dtype.name})
            return self.add("view", [flat], {"shape": tuple(data.shape)}, view_of=flat)
        return self.add("constant", [], {"value": data.tolist(), "dtype": t._dtype.name})

    def _shared(self, t, what):
        if self._sid(t) in self.shared:
            self.graph_break(f"{what} memory that inputs share (pass separate tensors, or "
                             ".clone() one of them)")

    def _root_memory(self, geom, rv, span):
        """The memory under a root of geometry geom (value rv) as a flat buffer of span
        elements. Where the root's elements share memory (stride-0 dims of an expanded input)
        they hold one value, put there once: strided_scatter would sum them (the adjoint of
        strided_gather); such dims are read at index 0 alone, a scatter native code runs."""
        for d in [d for d, (n, s) in enumerate(zip(*geom[:2])) if s == 0 and n > 1]:
            rv = self.add("slice", [rv], {"dim": d, "start": 0, "end": 1, "step": 1},
                          view_of=rv)
            geom = (tuple(geom[0][:d]) + (1,) + tuple(geom[0][d + 1:]), geom[1], geom[2])
        if not geometry_overlaps(geom[0], geom[1]):
            return self.add("strided_scatter", [rv], {"geom": geom, "span": span})
        zeros = self.add("full", [], {"shape": (span,), "value": 0, "dtype": rv.type.dtype})
        return self.add("strided_put", [zeros, rv], {"geom": geom})

    # ---- hooks called by the dispatcher ----------------------------------------------------
    def record(self, op, inputs, attrs, results):
        operands = self.operands(inputs, results)
        attrs = mask_attrs(self, op, inputs, operands, attrs)     # x[mask]: tracer/masks.py
        view = op.kind == "view"
        if op.name in _RESHAPES and not _viewable(operands[0].type, attrs["shape"]):
            # eager viewed a layout this value does not have in the IR: results of non-view
            # ops are contiguous in the IR (ir/shape_rules.py) while eager keeps its input's
            # strides, as PyTorch does ((x.t() * 2).t() is contiguous eagerly, {1,n} here).
            # The values are the same, and writes through the view reach the eager root
            # (record_inplace), so the view may read a contiguous copy.
            operands[0] = self.add("clone", [operands[0]], {"memory_format": "contiguous"})
        if op.name == "as_strided":         # (it reads eager's storage order)
            operands, attrs = self._in_storage_order(inputs[0], operands, attrs)
        outs = self.add(op.name, operands, attrs, view_of=operands[0] if view else None)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for r, v in zip(results, outs):
            if view:
                self._set_value(r, v)
            else:
                self._bind_root(r, v)

    def record_inplace(self, op, t, operands, attrs):
        """After eager wrote op's result into t: the new value of t, and of its root."""
        check_branch_alias(self, t, op.name)      # (y = x in a tensor if's branch)
        if op.name == "index_put":
            attrs = mask_attrs(self, op, tensors_of(self, operands), operands, attrs)
        new = self.add(op.name, operands, attrs)
        if new.type.dtype != t._dtype.name:
            new = self.add("to_dtype", [new], {"dtype": t._dtype.name})
        if new.type.shape != tuple(t._data.shape):
            new = self.add("expand", [new], {"size": tuple(t._data.shape)}, view_of=new)
        sid = self._sid(t)
        self._shared(t, "writing into")
        check_write(self, sid)      # (a copy standing for a view: runtime/symbolic_uses.py)
        check_numpy_write(self, sid)    # (t.numpy()'s array: numpy_reads.py)
        rt, rv, geom = self._root(sid)
        if rt is t:
            self._bind_root(t, new)
        elif geom == _geometry(t) and not geometry_overlaps(*geom[:2]):  # (all of it: buf.data)
            self._rebind(sid, new)
            self._set_value(t, new)
        else:
            self._rebind(sid, view_values.write(self, t, new, rv, geom))
            self._set_value(t, new)
        if sid in self.aliased:     # (their versions did not move: derive them again)
            for k, e in list(self.values.items()):
                x = e[0]()
                if x is not None and x is not t and x is not rt and self._sid(x) == sid:
                    self.values.pop(k, None)

    def random(self, opname, result, *operands, **attrs):
        if self.rng_input is None:
            self.rng_input = self.builder.input(TensorType("int64", STATE_SHAPE), "rng")
            self.rng_value = self.rng_input
        ins = [self.rng_value, *self.operands(operands, [result])]    # (a bfloat16 draw stops)
        values, self.rng_value = self.add(opname, ins, {"shape": tuple(result._data.shape),
                                                        "dtype": result._dtype.name, **attrs})
        self._bind_root(result, values)

    item_value, numpy_view = item_value, numpy_view    # (item_reads.py, numpy_reads.py)

    def guard(self, t, value):
        if self._sid(t) in self.roots or id(t) in self.values:
            self.builder.graph.guards.append(Guard(self.value_of(t), value, self.current_loc()))

    def untraceable(self, what):
        self.graph_break(f"{what} cannot be traced (its result would be baked into the "
                         "graph as a constant)")

    def graph_break(self, reason):
        """Stop: what the function does here cannot become compiled code."""
        self.broken = f"{reason} at {user_location()}"
        raise TraceError(self.broken)

    def array_storage(self, arr):
        """The Storage of the input over NumPy array arr (or over the array arr views), or
        None: from_numpy(arr) inside the function is that input (an array the function
        reads from its globals, closure or arguments is an input, guards.py), not a
        constant."""
        return _array_storage(self, arr)

    def reads_layout(self, t, what):
        """The user reads where t lies in memory (storage_offset(), data_ptr(), _version, an
        as_strided given its own storage offset): an input's differs between calls that the
        guards let share this trace, so the number cannot be baked in. A tensor made inside
        the function has the same layout at every call."""
        top = self
        while getattr(top, "parent", None) is not None:     # (a region's: its trace's inputs)
            top = top.parent
        check_layout(top, t)    # (a copy standing for a view: runtime/symbolic_uses.py)
        if top.reused and (top._sid(t) in top.inputs or id(t._storage) in top.shared):
            self.graph_break(f"{what} of an input (its value differs from call to call) "
                             "cannot be traced")

    def reads_out(self, t, what, guard=False):
        """t's values leave the graph as Python or NumPy data (t.numpy(), t.tolist(),
        np.asarray(t)): the trace cannot follow what is computed from them, unless t is
        a constant of the trace. guard (t.tolist(), pack_padded_sequence's lengths): a
        small t's values become value guards, each as t[i].item()'s."""
        if self.knows(t) and guard and t._data.size <= _GUARDED_READS:
            flat = t._alias().reshape(-1)     # (not detach(): no user's stop)
            for i, v in enumerate(t._data.reshape(-1).tolist()):
                self.guard(flat[i], v)
        elif self.knows(t):
            self.graph_break(f"{what} reads a traced tensor's values out of the graph")

    # ---- finishing ---------------------------------------------------------------------------
    def finish(self, outputs):
        g = self.builder.graph
        g.outputs = outputs
        for sid, idx in self.inputs.items():
            v = self.roots[sid][1]
            if v is not g.inputs[idx]:
                g.mutated[idx] = v
        if self.rng_input is not None:
            g.mutated[g.inputs.index(self.rng_input)] = self.rng_value
        return g


_GUARDED_READS = 64    # (t.tolist() of more elements than this stops the trace)
_RESHAPES = ("view", "_reshape_alias")   # views whose existence depends on the strides


def _viewable(ty, shape):
    """Whether a value of TensorType ty can be reshaped to shape without a copy."""
    standin = strided_view(np.zeros(1, dtype=ty.dtype), ty.shape, ty.strides)
    try:
        np.reshape(standin, shape, copy=False)
    except ValueError:
        return False
    return True


def _arg_names(fn, args, kwargs):
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        return list(bound.arguments.items())
    except (TypeError, ValueError):
        return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())


def _snapshot(t):
    """A copy of t with its strides and offset, inside a copy of its whole storage (a
    traced as_strided may read any of it)."""
    base = t._storage.base
    span = geometry_span(base.shape, tuple(s // base.itemsize for s in base.strides), 0)
    flat = np.array(strided_view(base, (span,), (1,)))
    return strided_view(flat, t._data.shape, t.stride(), t._storage_offset())


def trace_body(name, inputs, body, untaken=None, examples=True):
    """Trace body() with `inputs` [(name, Tensor)] as the graph inputs. Returns the verified
    graph; its outputs are the tensor leaves of body's result (graph.out_tree rebuilds it).
    untaken: see Tracer.untaken. examples: keep copies of the inputs as they were, and the
    RNG state, as graph.example_inputs (compile does not: a copy of every parameter)."""
    name = re.sub(r"\W", "", name)
    tracer = Tracer(name if name.isidentifier() else "f")
    tracer.untaken = untaken
    prev = trace_state.state.tracer
    trace_state.state.tracer = tracer
    # (before body() can mutate them)
    copies = [_snapshot(t) for _, t in inputs] if examples else None
    try:
        for argname, t in inputs:
            tracer.input(t, argname)
        result = run_body(tracer, body)     # (body(); a write into t.numpy()'s view breaks)
        leaves, tree = flatten(result)
        outs = []
        for path, leaf in leaves:
            if not isinstance(leaf, Tensor):
                raise TraceError(f"trace: {name} returned a non-tensor "
                                 f"({type(leaf).__name__}) at output {path or 0}")
            outs.append(tracer.output(leaf))
        graph = tracer.finish(outs)
    finally:
        trace_state.state.tracer = prev
    graph.out_tree = tree
    if copies is not None:
        graph.example_inputs = copies
        if tracer.rng_input is not None:
            graph.example_inputs.append(np.array(tracer.rng_example))
    return verify(graph)


def trace(fn: Callable, *args: object, **kwargs: object) -> Graph:
    """Run fn once on args, recording every op into a verified Graph (DESIGN.md's IR)."""
    inputs = []
    for argname, a in _arg_names(fn, args, kwargs):
        leaves, _ = flatten(a, argname)
        inputs += [(p, leaf) for p, leaf in leaves if isinstance(leaf, Tensor)]
    return trace_body(getattr(fn, "__name__", "f"), inputs, lambda: fn(*args, **kwargs))
