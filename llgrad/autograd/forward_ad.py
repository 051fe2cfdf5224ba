"""torch.autograd.forward_ad: forward-mode AD with dual tensors.

Inside a dual level (`with dual_level():`), make_dual(primal, tangent) gives a dual tensor:
an alias of primal (a view, differentiable in reverse mode) that carries tangent. Every op
of the table on a dual tensor also computes the output's tangent, the Jacobian-vector
product, from the same source llgrad.func.jvp uses: the op's VJP rule, by the double-VJP
trick (func/forward.py): with u a zero cotangent that requires grad, g = J^T u is linear in
u, so the derivative of <g, t> with respect to u is J t, exactly. So every op with a VJP
has a JVP (coverage equals the op table's). View ops apply the same view to the tangent (a
view of a dual tensor is dual and its tangent is a view of the base's); an in-place op on
a tensor writes its new tangent into the old one (and into the base's, through the view).
unpack_dual(t) gives (primal, tangent); when the level exits every tangent is dropped.

While a level is active, the dispatcher (runtime/dispatch.py, inplace.py) hands every op
to the level (`dispatch.forward_ad`); with none, the cost is one global read per op. As in
PyTorch, one level at a time (levels are global, not per thread). A dual tensor reaching
llgrad.compile's tracer is a graph break (the call runs eagerly, with a warning)."""
import weakref
from collections import namedtuple

import numpy as np

from ..ir import OPS
from ..runtime import dispatch, formatting, gradcheck, grad_mode, saved_tensor, trace_state
from ..runtime.autograd_api import grad as autograd_grad
from ..runtime.creation import zeros
from ..runtime.grad_mode import _DecoratorContext
from ..runtime.inplace import call_inplace as _call_inplace
from ..runtime.tensor import Tensor

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]

_current_level = -1
_VIEW, _ALIAS = OPS["view"], OPS["alias"]
_call = dispatch.call
_grad = grad_mode.state

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
UnpackedDualTensor.__doc__ = """Namedtuple returned by unpack_dual() containing the primal and
tangent components of the dual tensor (torch.autograd.forward_ad.UnpackedDualTensor)."""


def enter_dual_level():
    """Enter a new forward grad level (the one level PyTorch allows) and make it the
    default of make_dual / unpack_dual; returns the level (0)."""
    global _current_level
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.graph_break("forward-mode AD (llgrad.autograd.forward_ad.dual_level)")
    if _current_level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    dispatch.forward_ad = _Level()
    _current_level += 1
    return _current_level


def exit_dual_level(*, level=None):
    """Exit the forward grad level: every tangent associated with it is dropped."""
    global _current_level
    if level is None:
        level = _current_level
    if level != _current_level:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    state, dispatch.forward_ad = dispatch.forward_ad, None
    if state is not None:
        state.tangents.clear()
    _current_level = level - 1


class dual_level(_DecoratorContext):
    """Context manager (and decorator) for forward AD: every forward gradient computed
    inside is dropped on exit; `with dual_level() as level` gives the level."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


def make_dual(tensor, tangent, *, level=None):
    """A new tensor aliased to tensor (a view of it, backward differentiable) with tangent
    as its forward gradient: tangent as is when it has tensor's strides, else a copy laid
    out like tensor."""
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level "
                           "exists, make sure to enter_dual_level() first.")
    if tensor.is_complex() or tangent.is_complex():    # (its rules are the real ones)
        raise NotImplementedError("llgrad: forward-mode AD is not implemented for complex "
                                  "tensors; use backward mode (torch.autograd.grad)")
    if not tensor.is_floating_point():
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not tangent.is_floating_point():
        raise ValueError(f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if level != _current_level:
        raise RuntimeError("Invalid level given to _make_dual")
    state = dispatch.forward_ad
    if state.get(tensor) is not None:
        raise RuntimeError("Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {level} is not supported.")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than "
                           "that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    dual = _call(_VIEW, (tensor,), {"shape": tuple(tensor._data.shape)}, True, True)
    state.set(dual, _laid_out(dual, tangent))
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of a dual tensor: primal an alias of tensor without the tangent
    (a view, backward differentiable), tangent its forward gradient at level (None where it
    has none, or outside the level)."""
    if level is None:
        level = _current_level
    state = dispatch.forward_ad
    if level < 0 or level != _current_level or state is None:   # (None: a custom forward)
        return UnpackedDualTensor(tensor, None)
    tangent = state.get(tensor)
    primal = _call(_ALIAS, (tensor,), {}, True, True)
    return UnpackedDualTensor(primal, tangent)


def _gradcheck_columns(fn, inputs, i):
    """gradcheck's check_forward_ad: the Jacobian of fn's floating outputs with respect to
    inputs[i], one column per element (the tangents for a one-hot tangent of inputs[i])."""
    x, cols = inputs[i], []
    for j in range(x._data.size):
        seed = np.zeros(x._data.size, dtype=x._data.dtype)
        seed[j] = 1
        args = list(inputs)
        with dual_level():
            args[i] = make_dual(x, Tensor._from_array(seed.reshape(x._data.shape)))
            outs = [o for o in _seq(fn(*args)) if isinstance(o, Tensor) and
                    o._dtype.is_floating_point]
            tans = [unpack_dual(o).tangent for o in outs]
        cols.append([np.zeros(o._data.size) if t is None else
                     t._data.astype(np.float64).reshape(-1) for o, t in zip(outs, tans)])
    return cols


gradcheck.forward_columns = _gradcheck_columns


def _tangent_of(t):
    state = dispatch.forward_ad
    return None if state is None else state.get(t)


formatting.tangent_of = _tangent_of           # (repr(t): "..., tangent=tensor(...))")


def _unpack_dual_output(saved):
    """A saved output kept with its tangent (_Level.keep_saved) unpacks dual, in its level."""
    t = Tensor._from_array(saved[0], saved[1])
    if dispatch.forward_ad is saved[3]:
        saved[3].set(t, saved[2])
    return t


saved_tensor.unpack_dual_output = _unpack_dual_output


# ---- the level: tangents, and the dispatcher's hook ------------------------------------------

class _Level:
    """The tangents of the dual tensors of the active level, by id (entries go with their
    tensors), and the dispatcher's hook (dispatch.forward_ad)."""

    def __init__(self):
        self.tangents = {}

    def get(self, t):
        e = self.tangents.get(id(t))
        return None if e is None else e[1]

    def set(self, t, tangent):
        key, tangents = id(t), self.tangents

        def gone(ref):
            e = tangents.get(key)
            if e is not None and e[0] is ref:
                del tangents[key]
        tangents[key] = (weakref.ref(t, gone), tangent)

    def _of(self, inputs):
        """The tangent of each input (None: not dual), or None when no input is dual."""
        tans = None
        get = self.tangents.get
        for i, x in enumerate(inputs):
            e = get(id(x))          # (an id of a live tensor is no other live object's)
            if e is not None:
                if tans is None:
                    tans = [None] * len(inputs)
                tans[i] = e[1]
        return tans

    def call(self, op, inputs, attrs):
        tans = self._of(inputs)
        if tans is None or _grad.inference:      # (inference mode: no tangents, as PyTorch)
            return _call(op, inputs, attrs, True, True)
        _no_trace()
        if op.kind == "view":
            out = _call(op, inputs, attrs, True, True)
            if tans[0] is not None:
                tout = _call(op, (tans[0],) + tuple(inputs[1:]), attrs, True, True)
                for o, t in zip(_seq(out), _seq(tout)):
                    if o._dtype.is_floating_point:
                        self.set(o, t)
            return out
        if op.vjp is None:
            return _call(op, inputs, attrs, True, True)
        reverse = grad_mode.state.grad_enabled and any(
            isinstance(x, Tensor) and x.requires_grad for x in inputs)
        res, touts = _jvp(op, inputs, attrs, tans)
        if reverse:             # the primal again, on the inputs themselves (their history)
            out = _call(op, inputs, attrs, True, True)
        else:
            res = [r.detach() if isinstance(r, Tensor) else r for r in res]
            out = res[0] if op.nout == 1 else tuple(res)
        for o, t in zip(_seq(out), touts):
            if t is not None:
                self.set(o, _laid_out(o, t))
                if reverse:
                    self.keep_saved(o)
        return out

    def call_inplace(self, op, t, inputs, attrs):
        tans = self._of(inputs)
        old = self.get(t)
        if tans is None and old is None or _grad.inference:
            return _call_inplace(op, t, inputs, attrs, True, True)
        _no_trace()
        new = None
        if tans is not None and op.vjp is not None and t._dtype.is_floating_point:
            new = _jvp(op, inputs, attrs, tans)[1][0]
        _call_inplace(op, t, inputs, attrs, True, True)
        if not t._dtype.is_floating_point:
            return t
        if old is None and t._base is None and new is not None:
            self.set(t, _laid_out(t, new.to(t.dtype)))
        else:
            if old is None:
                old = self._view_tangent(t)
            if new is None:
                old.zero_()         # (what no dual input reaches, as fill_ or copy_ of
            else:                   # a plain tensor, has derivative zero)
                old.copy_(new)
        self.keep_saved(t)
        return t

    def keep_saved(self, o):
        """Where o's op saved o for backward (exp's result) as (data, storage), keep its
        tangent beside it: unpacked, it is dual, so that a backward run inside the level
        differentiates forward through it (forward over reverse), as PyTorch's."""
        saved = getattr(o._grad_fn, "_saved", None)
        tangent = self.get(o)
        if not saved or tangent is None:
            return
        for s in saved.values() if isinstance(saved, dict) else saved:
            if isinstance(s, saved_tensor.SavedTensor) and s.is_output and \
                    type(s.tensor) is tuple and s.tensor[0] is o._data:
                s.tensor = s.tensor[:2] + (tangent, self)

    def function(self, cls, ctx, args, results):
        """After a custom autograd.Function's forward: its jvp gives the outputs' tangents
        from the inputs' (zeros for a tensor input that is not dual, None for others)."""
        tans = self._of(args)
        if tans is None:
            return
        _no_trace()
        grads = [t if t is not None else _zeros_like(a) if isinstance(a, Tensor) else None
                 for a, t in zip(args, tans)]
        level, dispatch.forward_ad = dispatch.forward_ad, None    # (jvp computes on primals)
        try:
            tangents = _seq(cls.jvp(ctx, *grads))
        finally:
            dispatch.forward_ad = level
            ctx.saved_for_forward = None    # (PyTorch frees them after jvp)
        for o, t in zip(results, tangents):
            if isinstance(o, Tensor) and isinstance(t, Tensor) and o._dtype.is_floating_point:
                self.set(o, _laid_out(o, t))

    def _view_tangent(self, t):
        """A zero tangent for t: for a view, a view of its base's tangent (made zero for
        a base without one), so the base sees what an in-place op writes into the view."""
        base = t._base
        if base is None:
            tangent = _zeros_like(t)
        else:
            tb = self.get(base)
            if tb is None:
                tb = _zeros_like(base)
                self.set(base, tb)
            if tb.stride() == base.stride():
                off = t.storage_offset() - base.storage_offset() + tb.storage_offset()
                tangent = tb.as_strided(tuple(t.shape), t.stride(), off)
            else:
                tangent = _zeros_like(t)
        self.set(t, tangent)
        return tangent


def _seq(out):
    return out if isinstance(out, tuple) else (out,)


def _no_trace():
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.graph_break("forward-mode AD (a dual tensor of llgrad.autograd.forward_ad)")


def _zeros_like(t):
    with grad_mode.no_grad():
        return t.detach().clone().zero_()


def _laid_out(primal, tangent):
    """tangent with primal's strides, storage offset and storage size (a copy into zeros
    where they differ, as PyTorch's new_with_same_meta), so that a view op that reads the
    layout (as_strided with a storage offset) reads the same places of both; as it is where
    primal's elements overlap."""
    n = primal._storage.base.nbytes // primal._data.itemsize
    stride, off = primal.stride(), primal._storage_offset()
    if tangent.stride() == stride and tangent._storage_offset() == off and \
            tangent._storage.base.nbytes // tangent._data.itemsize == n:
        return tangent
    span = 0
    for st, size in sorted((st, size) for size, st in zip(primal._data.shape, stride)
                           if size > 1):
        if st <= span:
            return tangent
        span += (size - 1) * st
    buf = zeros(n, dtype=tangent.dtype).as_strided(tuple(primal._data.shape), stride, off)
    return buf.copy_(tangent)


def _jvp(op, inputs, attrs, tans):
    """(op's outputs computed for the JVP, the tangent of each output: J t by the double-VJP
    trick, None for an output that is not floating point). Each dual input enters as a
    fresh node of its own (an alias that keeps its history where it requires grad, for
    reverse mode through the tangents; else a detached leaf), so the gradient with respect
    to it counts its use by this op only."""
    grad_on = grad_mode.state.grad_enabled
    nondiff = dispatch._nondiff_positions(op, len(inputs)) if op.nondiff else ()
    xs, pairs, create = list(inputs), [], False
    with grad_mode.enable_grad():
        for i, t in enumerate(tans):
            if t is None or i in nondiff:
                continue
            x = inputs[i]
            if grad_on and x.requires_grad:
                x = _call(_ALIAS, (x,), {}, True, True)
                create = True
            else:
                x = x.detach().requires_grad_(True)
            xs[i] = x
            create = create or (grad_on and t.requires_grad)
            pairs.append((x, t if t._dtype is x._dtype else t.to(x.dtype)))
        # a tangent is a function of every input that requires grad, dual or not (mul's
        # t*w): keep its graph so reverse mode through the tangent reaches w too
        create = create or grad_on and any(
            isinstance(x, Tensor) and x.requires_grad for x in inputs)
        res = _call(op, xs, attrs, True, True)
        res = list(res) if isinstance(res, tuple) else [res]
        live = [k for k, r in enumerate(res) if isinstance(r, Tensor) and r.requires_grad]
        us = [zeros(res[k]._data.shape, dtype=res[k].dtype).requires_grad_(True) for k in live]
        jv = [None] * len(us)
        if us and pairs:
            gs = autograd_grad([res[k] for k in live], [x for x, _ in pairs], us,
                               create_graph=True, allow_unused=True)
            gt = [(g, t) for g, (_, t) in zip(gs, pairs) if g is not None and g.requires_grad]
            if gt:
                jv = autograd_grad([g for g, _ in gt], us, [t for _, t in gt],
                                   create_graph=create, allow_unused=True)
    touts = [None] * len(res)
    storages = [t._storage for _, t in pairs]
    for k, u, j in zip(live, us, jv):
        if j is None:
            j = _zeros_like(res[k])
        elif any(j._storage is s for s in storages):    # (clone's: t itself) a tangent of
            j = j.clone()                               # its own, as the output is
        touts[k] = j if create else j.detach()
    for k, r in enumerate(res):     # (floating outputs that need no grad: derivative zero)
        if touts[k] is None and isinstance(r, Tensor) and r._dtype.is_floating_point and \
                pairs:
            touts[k] = _zeros_like(r)
    return res, touts
