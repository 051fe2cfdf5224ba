"""Backward nodes (what `grad_fn` points at), saved tensors and their version checks.

Each op's node class carries PyTorch's name (MulBackward0, ...); classes are made once per
name. A node's `next_functions` holds one (node, output_nr) edge per differentiable input,
(None, 0) where no gradient flows, as PyTorch has them: indices, masks, targets and Python
numbers given as Scalars have none (the op table's nondiff / number_edges; `_edge_at`
maps an op's inputs to their edges).
"""
import itertools
import sys
import types
import weakref

import numpy as np

from . import backward_run, grad_mode, trace_state
from ..ir.bfloat16 import round_to
from .dispatch_bf16 import vjp_in_float32
from .dtypes import bfloat16
from .grad_layout import laid_out_as, new_grad_order
from .hook_handle import _register
from .saved_tensor import FREED_SLOT, RawSavedField, SavedField, SavedNumber, SavedTensor
from .tensor import Storage, Tensor

_sequence = itertools.count()

# the _saved of a node that saves nothing (most view and arithmetic ops): one shared,
# read-only mapping instead of a dict per node (record gives a saving node its own)
_NOTHING_SAVED = types.MappingProxyType({})
_NAMESPACED = frozenset(("CopyBackwards", "CopySlices", "Error"))     # (Node.name)


class Node:
    """Base of every backward node."""
    __slots__ = ("next_functions", "_seq", "_pre_hooks", "_post_hooks", "_retained",
                 "__weakref__")

    def __init__(self):
        self.next_functions = ()
        self._seq = next(_sequence)
        self._pre_hooks = None      # {output_nr: {key: hook(grad) -> grad or None}}; -1: the
                                    # node's own pre-hooks, hook(grad_outputs) -> tuple or None
        self._post_hooks = None     # {key: hook(grad_inputs, grad_outputs) -> tuple or None}
        self._retained = None       # {output_nr: weakref to a tensor that retains its grad}

    _nout = 1          # how many outputs (gradient slots); multi-output nodes override

    def name(self):     # (PyTorch's hand-written nodes: torch::autograd::CopySlices ...)
        n = type(self).__name__
        return "llgrad::autograd::" + n if n in _NAMESPACED else n

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    # Hooks are kept in dicts keyed by registration, so a handle removes exactly its own
    # registration (the same function registered twice is two hooks, as in PyTorch).
    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) -> new grad_inputs or None, after the node runs."""
        hooks = self._post_hooks
        if hooks is None:
            hooks = self._post_hooks = {}
        return _register(hooks, fn, self)

    def register_prehook(self, fn):
        """fn(grad_outputs) -> new grad_outputs or None, before the node runs."""
        return self._add_pre_hook(-1, fn)

    def _add_pre_hook(self, output_nr, fn):
        hooks = self._pre_hooks
        if hooks is None:
            hooks = self._pre_hooks = {}
        return _register(hooks.setdefault(output_nr, {}), fn, self)

    def release(self):
        pass

    def apply(self, grads):
        raise TypeError(f"{type(self).__name__} cannot be applied")

    def apply_last(self, grads):
        """apply, as the last call before release() (retain_graph=False): a node may free
        its saved values while it runs."""
        return self.apply(grads)


class OpNode(Node):
    """The node of an op from the op table; also the `ctx` its VJP rule reads: c.<name> is
    what the op saved under that name (unpacked), else its attribute <name>; c._saved_<name>
    the same (PyTorch's grad_fn._saved_self). Those names are defined on the class as they
    appear (_Field, define_fields), not by a __getattr__: a class with __getattr__ makes
    every attribute read of every node (next_functions, _seq, apply, ... in the engine) take
    CPython's slow, unspecialised path."""
    __slots__ = ("_op", "attrs", "_saved", "_in_meta", "_out_meta", "_where", "_freed",
                 "_edge_at", "_nout")

    def __init__(self, op, attrs):
        # Node.__init__ inlined: this runs once per recorded op
        self.next_functions = ()
        self._seq = next(_sequence)
        self._pre_hooks = self._post_hooks = self._retained = None
        self._op = op
        self.attrs = attrs
        if attrs and not _fields.issuperset(attrs):
            define_fields(attrs)
        self._saved = _NOTHING_SAVED
        self._in_meta = ()
        self._out_meta = None
        self._nout = 1          # (record sets both for a multi-output op)
        self._where = "?"
        self._freed = False
        # input position -> its edge in next_functions (-1: none; PyTorch gives indices,
        # masks and Scalars none), or None where every input has the edge of its position
        self._edge_at = None

    # --- the ctx interface of VJP rules (and _Field below) ---------------------------------
    def needs(self, i):
        at = self._edge_at
        if at is not None:
            i = at[i]
            if i < 0:
                return False
        return self.next_functions[i][0] is not None

    def shape(self, i):
        return self._in_meta[i][0]

    def dtype(self, i):
        return self._in_meta[i][1]

    @property
    def ninputs(self):
        return len(self._in_meta)

    building_graph = property(lambda self: grad_mode.state.grad_enabled, doc="Whether the rule "
                              "runs with grad mode on (create_graph; ops_elementwise.zero_linked).")
    recorded = property(lambda self: trace_state.state.tracer is not None, doc="Whether a "
                        "tracer records the rule's ops (prod_grad.prod_vjp branches if not).")

    # --- running -------------------------------------------------------------------------
    def release(self):
        self._freed = backward_run.current.now     # (which backward freed it)
        saved = self._saved
        if saved is _NOTHING_SAVED:     # (most nodes: nothing to free)
            return
        for k, v in saved.items():
            if isinstance(v, (SavedTensor, list, SavedNumber)):
                # a marker, not None: None is a legitimate saved value (clamp's min=None)
                saved[k] = FREED_SLOT

    def apply(self, grads):
        op = self._op
        if op.nout == 1:
            g = grads[0]
            res = None
            # (an eager_native op's NumPy VJP too, where its native one declines: small tensors)
            if not (op.eager_native and native_vjp is not None) or \
                    (res := native_vjp(self, g)) is None:
                fast = fast_vjps.get(op)
                if fast is not None:
                    res = fast(self, g)
            if res is None:
                res = vjp_in_float32(op.vjp, self, g) if type(g) is Tensor and \
                    g._dtype is bfloat16 else op.vjp(self, g)
        else:
            if op.vjp_reads is not None and all(grads[k] is None for k in op.vjp_reads):
                return self.edge_grads([None] * len(self._in_meta))
            g = [gi if gi is not None else _zeros(meta, op.broadcast_zero_grads)
                 for gi, meta in zip(grads, self._out_meta)]
            res = vjp_in_float32(op.vjp, self, g) if any(
                type(x) is Tensor and x._dtype is bfloat16 for x in g) else op.vjp(self, g)
        if self._edge_at is None:       # (edge_grads' common case, without its call)
            return fix_grads(res, self.next_functions, self._in_meta)
        return self.edge_grads(res)

    def edge_grads(self, res):
        """The VJP's gradients (one per input) as the engine takes them: one per edge,
        summed back to their inputs' shapes and cast to their dtypes."""
        at = self._edge_at
        if at is None:
            return fix_grads(res, self.next_functions, self._in_meta)
        edges = self.next_functions
        fixed = fix_grads(res, [edges[e] if e >= 0 else (None, 0) for e in at], self._in_meta)
        return [g for g, e in zip(fixed, at) if e >= 0]


def _zeros(meta, broadcast=False):
    if broadcast:       # (the op's VJP takes a stride-0 zero for one nothing reached)
        return Tensor._from_array(np.broadcast_to(np.zeros((), meta[1].np), meta[0]))
    return Tensor._from_array(np.zeros(meta[0], dtype=meta[1].np))


def fix_grads(res, edges, in_meta):
    """Sum broadcast gradients back to the input's shape and cast to its dtype."""
    out = []
    for r, (fn, _), meta in zip(res, edges, in_meta):
        if r is None or fn is None:
            out.append(None)
            continue
        shape, dt = meta
        if r._data.shape != shape:
            r = r.sum_to_size(shape)
        if r._dtype is not dt:      # (a real input's from a complex one: its real part)
            r = (r.real if r._dtype.is_complex and not dt.is_complex else r).to(dt)
        out.append(r)
    return out


# AccumulateGrad with a sparse gradient or .grad (sparse_coo.py installs it)
accumulate_sparse = None


# the backward of eager_native ops as one native loop (compile/eager_native.py installs it):
# native_vjp(node, grad) -> what op.vjp(node, grad) returns, or None where the rule must run
native_vjp = None


def set_native_vjp(fn):
    """Install fn as the native_vjp hook (None: every VJP rule runs as written); the previous."""
    global native_vjp
    prev, native_vjp = native_vjp, fn
    return prev


# op -> fast(node, grad): what op.vjp(node, grad) returns, computed without the dispatcher
# where it can be (fast_vjp.py: the matrix products), else None (the rule runs)
fast_vjps = {}


_fields = set()     # the names define_fields has seen


def define_fields(names):
    """Define each name a node holds (what ops save, attributes' names) on OpNode: by
    OpNode() for its attributes, by the dispatcher for what an op saves. A method or slot of
    the name keeps precedence; a name starting with "_" is only _saved_<name> (as before)."""
    for name in names:
        if name not in _fields:
            _fields.add(name)
            for attr in ("_saved_" + name,) + (() if name.startswith("_") else (name,)):
                if not hasattr(OpNode, attr):
                    setattr(OpNode, attr, SavedField(name, attr.startswith("_saved_")))
            setattr(OpNode, "_raw_saved_" + name, RawSavedField(name))


_node_classes = {}


def node_class(name):
    cls = _node_classes.get(name)
    if cls is None:
        cls = _node_classes[name] = type(name, (OpNode,), {"__slots__": ()})
    return cls


class AccumulateGrad(Node):
    """Adds the incoming gradient into a leaf's .grad (after the leaf's hooks). The leaf
    holds its node; the node holds the leaf weakly, so there is no reference cycle.

    Besides the leaf's own hooks (Tensor.register_hook, run first), the node has PyTorch's
    hooks of its own, run by the engine (backward_hooks.run_acc) in this order: its pre-hooks
    (register_prehook: fn(grad_outputs), may replace the gradient), the accumulation, the
    leaf's post-accumulate-grad hooks (Tensor.register_post_accumulate_grad_hook: fn(leaf),
    kept here, one node per leaf), its post hooks (register_hook: fn((), grad_outputs)).
    `_hooked` says that any of these was ever registered; the engine reads only that flag
    when none was."""
    __slots__ = ("_variable", "_post_acc_hooks", "_hooked")

    def __init__(self, variable):
        Node.__init__(self)
        self._variable = weakref.ref(variable)
        self._post_acc_hooks = None     # {key: hook(leaf) -> None}
        self._hooked = False

    @property
    def variable(self):
        return self._variable()

    def name(self):
        return "llgrad::autograd::AccumulateGrad"     # PyTorch: "torch::autograd::..."

    def register_hook(self, fn):
        self._hooked = True
        return Node.register_hook(self, fn)

    def register_prehook(self, fn):
        self._hooked = True
        return Node.register_prehook(self, fn)

    def _add_post_accumulate_hook(self, fn):
        hooks = self._post_acc_hooks
        if hooks is None:
            hooks = self._post_acc_hooks = {}
        self._hooked = True
        return _register(hooks, fn)

    def accumulate(self, g, create_graph, owned=False):
        """Add g into the leaf's .grad. owned: the caller hands over its only reference
        (the engine, where it drops its own); then, as PyTorch does, a first gradient
        that nothing else refers to and that has the leaf's layout becomes .grad itself,
        not a copy."""
        leaf = self.variable
        # the leaf is gone (nobody can read its gradient), or it stopped requiring grad
        # after the graph was made: PyTorch's AccumulateGrad then accumulates nothing
        if leaf is None or not leaf._requires_grad:
            return
        old = trace_state.grad_of(leaf)     # (a traced call's .grad added into: its key)
        gd = leaf._grad_dtype       # (Tensor.grad_dtype set: the gradient is cast to it)
        if gd is not False and gd is not None and g._dtype is not gd:
            g = g.to(gd)
            if old is None and g.__class__ is Tensor:    # (a .grad of its own dtype)
                with grad_mode.no_grad():
                    leaf._grad = g.clone()
                return
        if (g.__class__ is not Tensor and g.is_sparse) or \
                (old is not None and old.__class__ is not Tensor and old.is_sparse):
            accumulate_sparse(leaf, old, g)     # (sparse gradients: embedding's)
            return
        if create_graph and g._storage.__class__ is Storage:    # (copied, as PyTorch's,
            leaf._grad = old + g if old is not None else Tensor._from_array(np.empty_like(
                leaf._data, order=new_grad_order(leaf._data))).copy_(g)     # in its layout)
            return
        if trace_state.state.tracer is not None or g._storage.__class__ is not Storage:
            # traced (a compiled training step), or a meta gradient: tensor ops, so the
            # tracer records them
            with grad_mode.no_grad():
                if old is None:     # as eager: a new .grad has its leaf's layout (and device)
                    leaf._grad = laid_out_as(g, leaf).to(leaf.device)
                else:
                    leaf._grad = old.add_(g)
            return
        if old is None:
            if owned and sys.getrefcount(g) <= _HANDED_OVER_REFS and _sole_owner(g, leaf):
                leaf._grad = Tensor._from_array(g._data, g._storage)
                return
            buf = np.empty_like(leaf._data, order=new_grad_order(leaf._data))
            buf[...] = g._data
            leaf._grad = Tensor._from_array(buf)     # (a Parameter's too, as torch)
        elif not old._data.flags.writeable:    # (an expanded .grad the user set: add_'s
            old.add_(g)                         # checks raise PyTorch's error)
        else:       # (in place, as PyTorch, also into a .grad that requires grad)
            if old._dtype is bfloat16:      # (the sum rounded to bfloat16, as its add_)
                old._data[...] = round_to(old._data.astype(np.float32) + g._data)
            else:
                old._data += g._data
            old._storage.version += 1


def _sole_owner(g, leaf):
    """Whether g's memory is g's alone (no view, no other tensor or array refers to it)
    and laid out as the leaf's data (PyTorch's layout contract for .grad)."""
    d, st = g._data, g._storage
    return g._base is None and g._grad_fn is None and not g._requires_grad \
        and not g._hooks and st.base is d and d.base is None and d.flags.writeable \
        and d.dtype == leaf._data.dtype and d.shape == leaf._data.shape \
        and d.strides == leaf._data.strides \
        and sys.getrefcount(d) <= _ARRAY_REFS and sys.getrefcount(st) <= _STORAGE_REFS


def _baselines():
    """Reference counts that mean "nobody else": measured here, the way accumulate and
    _sole_owner measure them (a count differs between Python versions)."""
    class _Probe:
        def accumulate(self, g, create_graph, owned=False):
            return sys.getrefcount(g)

    def handed_over():
        g = object()
        return _Probe().accumulate(g, False, True)

    t = types.SimpleNamespace(_data=np.empty(1))
    t._storage = types.SimpleNamespace(base=t._data)

    def counts(g):
        d, st = g._data, g._storage
        return sys.getrefcount(d), sys.getrefcount(st)
    return (handed_over(),) + counts(t)


_HANDED_OVER_REFS, _ARRAY_REFS, _STORAGE_REFS = _baselines()


def accumulate_node(leaf):
    acc = leaf._acc
    if acc is None:
        acc = leaf._acc = AccumulateGrad(leaf)
    return acc


def gradient_edge(t):
    fn = t._grad_fn if t._base is None else t.grad_fn     # views may regenerate theirs
    if fn is not None:
        return (fn, t._output_nr)
    if t._requires_grad:
        acc = t._acc
        return (acc if acc is not None else accumulate_node(t), 0)
    return None


def grad_enabled():
    return grad_mode.state.grad_enabled
