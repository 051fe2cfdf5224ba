"""autograd.Function: user-defined ops with their own backward (PyTorch's API)."""
import functools
import inspect
import warnings

import numpy as np

from . import autocast_cast, dispatch, grad_mode, trace_state
from .copy_slices import CopySlices
from .node import Node, fix_grads, gradient_edge
from .saved_tensor import FREED, SavedTensor, user_location
from .tensor import Tensor


_tstate = trace_state.state

# a Function's call with vmap active (llgrad/func/custom_function.py installs it):
# batched_apply(cls, args, kwargs) -> the outputs, or NotImplemented to run it as usual
batched_apply = None


class FunctionCtx:
    """What forward() receives as ctx; also what backward() receives."""
    __slots__ = ()

    def save_for_backward(self, *tensors):
        """Save tensors for backward (read there as ctx.saved_tensors, version-checked),
        as in PyTorch (which checks them only when it records the node: apply)."""
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        """Save tensors for jvp (read there as ctx.saved_tensors), as in PyTorch."""
        for t in tensors:
            if not (isinstance(t, Tensor) or t is None):
                raise AssertionError("save_for_forward expects all arguments to be tensors; "
                                     "you should save non-tensors as attributes on ctx.")
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors):
        """Declare the inputs that forward modified in place, as in PyTorch."""
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        """Declare outputs that get no gradient, as in PyTorch."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value):
        """Whether backward receives zeros (True, the default) or None for outputs
        without a gradient, as in PyTorch."""
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The backward node of one Function call; it is also the ctx (as in PyTorch)."""

    def __init__(self):
        Node.__init__(self)
        self.to_save = ()
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = ()
        self.saved_for_forward = None       # (what jvp reads as saved_tensors, while it runs)
        self._saved = None
        self._in_meta = ()
        self._out_meta = ()
        self._where = user_location()

    @property
    def saved_tensors(self):
        if self.saved_for_forward is not None:
            return tuple(self.saved_for_forward)
        if self._saved is None:
            if self.to_save is None:
                raise RuntimeError(FREED)
            return tuple(self.to_save)
        return tuple(s.unpack(self) if s is not None else None for s in self._saved)

    @property
    def _nout(self):
        return len(self._out_meta)

    def release(self):
        self._saved = [None if s is None else _Freed() for s in self._saved or ()]

    def apply(self, grads):
        if self.materialize_grads:      # (a non-tensor output's gradient stays None)
            # (and, with PyTorch's ctx._materialize_non_diff_grads = False, a
            # non-differentiable output's)
            keep = () if getattr(self, "_materialize_non_diff_grads", True) else \
                self._nondiff_nrs
            grads = [g if g is not None or m[1] is None or i in keep else
                     Tensor._from_array(np.zeros(m[0], m[1].np))
                     for i, (g, m) in enumerate(zip(grads, self._out_meta))]
        with autocast_cast.resumed():
            res = self._forward_cls.backward(self, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self._in_meta)             # (one gradient per argument of forward)
        if len(res) != n:
            if len(res) > n and all(r is None for r in res[n:]):
                res = res[:n]
            else:
                raise RuntimeError(f"function {type(self).__name__} returned an incorrect number "
                                   f"of gradients (expected {n}, got {len(res)})")
        for i, (r, m) in enumerate(zip(res, self._in_meta)):
            if r is None:
                continue
            if m is None:
                raise RuntimeError(f"function {type(self).__name__} returned a gradient "
                                   f"different than None at position {i + 1}, but the "
                                   "corresponding forward input was not a Variable")
            if not isinstance(r, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")
            if r._data.shape != m[0] and not _expandable(m[0], r._data.shape):
                raise RuntimeError(f"Function {type(self).__name__} returned an invalid "
                                   f"gradient at index {i} - got {list(r._data.shape)} but "
                                   f"expected shape compatible with {list(m[0])}")
        # the edges: one per tensor argument (PyTorch's); None gradients for the others
        edges = iter(self.next_functions)
        per_arg = [next(edges) if m is not None else (None, 0) for m in self._in_meta]
        return [g for g, m in zip(fix_grads(res, per_arg, self._in_meta), self._in_meta)
                if m is not None]


def _expandable(shape, to):
    """Whether an input of `shape` broadcasts to a gradient of shape `to` (which is then
    summed back to it), PyTorch's test of a custom gradient's shape."""
    try:
        return np.broadcast_shapes(shape, to) == tuple(to)
    except ValueError:
        return False


class _Freed:
    def unpack(self, node):
        raise RuntimeError(FREED)


class FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,),
                                 {"_forward_cls": cls})


class Function(metaclass=FunctionMeta):
    """A user-defined op with its own backward, as torch.autograd.Function: subclass it with
    static forward(ctx, ...) (or forward(...) and setup_context) and backward(ctx, *grads),
    then call Cls.apply(...)."""
    def __init__(self, *args, **kwargs):
        warnings.warn(f"{self.__class__} should not be instantiated. Methods on autograd "
                      "functions are all static, so you should invoke them on the class itself. "
                      "Instantiating an autograd function will raise an error in a future "
                      "version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is "
                           "deprecated. Please use new-style autograd function with static "
                           "forward method. (Example: https://pytorch.org/docs/stable/"
                           "autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """The op's computation (static): forward(ctx, *args) or, with setup_context,
        forward(*args)."""
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """The gradients of the inputs from those of the outputs (static): backward(ctx,
        *grad_outputs), one result per forward argument."""
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """The outputs' tangents from the inputs' (static), for forward-mode AD
        (llgrad.autograd.forward_ad): jvp(ctx, *tangents), one result per output."""
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Save what backward needs when forward takes no ctx (static):
        setup_context(ctx, inputs, output)."""
        raise NotImplementedError("setup_context is not implemented.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward and, if an input requires grad, record the backward node, as
        torch.autograd.Function.apply."""
        uses_setup = cls.setup_context.__func__ is not Function.setup_context.__func__ \
            if hasattr(cls.setup_context, "__func__") else \
            cls.setup_context is not Function.setup_context
        if uses_setup and (kwargs or _signature(cls)[1]):
            # PyTorch binds keyword and default arguments into the inputs (setup_context
            # sees them; a tensor among them gets a gradient)
            bound = _signature(cls)[0].bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, {}
        if _tstate.vmap_levels or _tstate.func_transforms:
            if not uses_setup:
                raise RuntimeError(
                    "In order to use an autograd.Function with functorch transforms (vmap, "
                    "grad, jvp, jacrev, ...), it must override the setup_context staticmethod. "
                    "For more details, please see "
                    "https://pytorch.org/docs/main/notes/extending.func.html")
            if _tstate.func_jvps and cls.jvp is Function.jvp:
                raise NotImplementedError("You must implement the jvp function for custom "
                                          "autograd.Function to use it with forward mode AD.")
            if _tstate.vmap_levels and batched_apply is not None:
                res = batched_apply(cls, args, kwargs)
                if res is not NotImplemented:
                    return res
        top = _tstate.tracer                # (compile/function_replays.py: replays lose it)
        if getattr(top, "parent", None) is not None:
            # a branch or loop body's results are rebuilt from its ops, which would lose the
            # Function's backward: traced as plain Python, it is the enclosing trace's
            top.graph_break(f"the custom autograd.Function {cls.__name__}")
        if top is not None:
            top.functions = getattr(top, "functions", frozenset()) | {cls}    # (a loop: once)
        ctx = cls._backward_cls()
        inputs = _inputs(cls, args, kwargs) if kwargs else args
        tensor_args = [a if isinstance(a, Tensor) else None for a in inputs]
        ctx.needs_input_grad = tuple(a is not None and a.requires_grad for a in tensor_args)
        with grad_mode.no_grad(), _PrimalsOnly():
            if uses_setup:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        record = grad_mode.state.grad_enabled and any(ctx.needs_input_grad)
        dirty = {id(t) for t in ctx.dirty_tensors}
        for t in ctx.dirty_tensors:
            # PyTorch bumps the version of every dirty tensor and refuses leaves needing grad
            t._storage.version += 1
            if t._requires_grad and t._grad_fn is None and t._base is None and \
                    grad_mode.state.grad_enabled:
                raise RuntimeError("a leaf Variable that requires grad has been used in an "
                                   "in-place operation.")
        if dirty - {id(o) for o in outs}:
            raise RuntimeError("Some elements marked as dirty during the forward method were "
                               "not returned as output. The inputs that are modified inplace "
                               "must all be outputs of the Function.")
        nondiff = {id(t) for t in ctx.non_differentiable}
        results = [o if not isinstance(o, Tensor) or id(o) in dirty else
                   _output(o, tensor_args, record and id(o) not in nondiff) for o in outs]
        if record:
            ctx.next_functions = tuple(gradient_edge(a) or (None, 0)
                                       for a in tensor_args if a is not None)
            ctx._in_meta = tuple((a._data.shape, a._dtype) if a is not None else None
                                 for a in tensor_args)
            ctx._out_meta = [(o._data.shape, o._dtype) if isinstance(o, Tensor) else ((), None)
                             for o in results]
            out_ids = {id(o): i for i, o in enumerate(outs) if isinstance(o, Tensor)}
            ctx._nondiff_nrs = {out_ids[k] for k in nondiff if k in out_ids}
            for i, o in enumerate(results):
                if isinstance(o, Tensor) and id(outs[i]) not in nondiff and \
                        o._dtype._cat >= 2:
                    o._grad_fn, o._output_nr, o._requires_grad = ctx, i, True
                    if id(o) in dirty and o._base is not None:
                        _rebase_view(o, ctx, sum(isinstance(r, Tensor) for r in results))
            saved = []
            for i, t in enumerate(ctx.to_save):
                if t is None:
                    saved.append(None)
                elif not isinstance(t, Tensor):
                    raise TypeError("save_for_backward can only save variables, but argument "
                                    f"{i} is of type {type(t).__name__}")
                elif id(t) in out_ids:
                    saved.append(SavedTensor(results[out_ids[id(t)]], is_output=True,
                                             output_nr=out_ids[id(t)]))
                else:
                    saved.append(SavedTensor(t))
            ctx._saved = saved
            ctx.to_save = None
        if dispatch.forward_ad is not None:     # a dual level: the outputs' tangents by jvp
            dispatch.forward_ad.function(cls, ctx, args, results)
        ctx.saved_for_forward = None            # (for jvp only; backward sees its own)
        return results[0] if single else tuple(results)


def _inputs(cls, args, kwargs):
    """The inputs of a forward taking ctx called with keyword arguments, as PyTorch's
    apply counts them (needs_input_grad, the gradients backward returns): the arguments
    bound to forward's parameters, in their order, defaults left out (a tensor passed by
    keyword gets a gradient)."""
    try:
        bound = _signature(cls)[0].bind(None, *args, **kwargs)
    except TypeError:           # (forward's own call raises)
        return tuple(args) + tuple(kwargs.values())
    params, P = bound.signature.parameters, inspect.Parameter
    return tuple(x for name, v in list(bound.arguments.items())[1:] for x in (
        v if params[name].kind is P.VAR_POSITIONAL else
        v.values() if params[name].kind is P.VAR_KEYWORD else (v,)))


def _signature(cls):
    """(the signature of cls.forward, whether it has default values), cached on cls."""
    got = cls.__dict__.get("_llgrad_signature")
    if got is None:
        sig = inspect.signature(cls.forward)
        got = sig, any(p.default is not p.empty for p in sig.parameters.values())
        setattr(cls, "_llgrad_signature", got)
    return got


def _output(o, tensor_args, differentiable):
    """A tensor forward returned, as the Function's output (PyTorch's rules): an input
    returned as is becomes a view of it (a detached alias when it requires grad and gets no
    history: not recorded, or non-differentiable); a view (of an input, or made in forward)
    is marked so that writing it in place raises (that would bypass the custom backward)."""
    if any(o is a for a in tensor_args):
        if not differentiable and o.requires_grad:
            return o.detach()
        with grad_mode.no_grad():           # (an op: a batched tensor's view is batched)
            o = o.view_as(o)
    elif o._grad_fn is not None or o._requires_grad:
        return o.detach()                   # (made outside forward, with history)
    if o._base is not None and not o._inference:
        o._creation = "custom_function"
    return o


def _rebase_view(view, ctx, n_tensors):
    """A view forward modified in place (mark_dirty): its base's history goes through the
    custom backward (PyTorch's CopySlices; the view's grad_fn is regenerated from it)."""
    if n_tensors > 1:
        raise RuntimeError(
            "If your Function modifies inplace an input that is a view of another Tensor, your "
            "Function cannot return more than one Tensor. This is not supported by the current "
            "autograd engine. You should either make sure the input is not a view (using "
            ".clone() for example) or make your Function only return one Tensor (potentially "
            "splitting it into two Functions: one doing the inplace that returns a single "
            "Tensor and a second one that does the other operations). You can ask on the forum "
            "https://discuss.pytorch.org/ if you need help to do this change.")
    base = view._base
    cs = CopySlices(base, view, ctx, gradient_edge(base))
    base._grad_fn, base._output_nr, base._requires_grad = cs, 0, True
    view._view_version = -1


class _PrimalsOnly:
    """A custom forward computes on primals, as in PyTorch: the dual level (if any) is set
    aside while it runs (the outputs' tangents come from the Function's jvp)."""

    def __enter__(self):
        self.level, dispatch.forward_ad = dispatch.forward_ad, None

    def __exit__(self, *exc):
        dispatch.forward_ad = self.level


class Error(Node):
    """The grad_fn of what a once_differentiable backward returned while its inputs
    required grad (PyTorch's DelayedError makes this node): differentiating it again raises
    PyTorch's error."""
    __slots__ = ()
    _nout = 1

    def apply(self, grads):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")


def once_differentiable(fn):
    """Decorates a Function's backward (PyTorch's): it runs without recording autograd
    history, and where its inputs require grad (create_graph), what it returns carries a
    node that raises when differentiated."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with grad_mode.no_grad():
            outputs = fn(ctx, *args)
        if not grad_mode.state.grad_enabled or \
                not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        # one node, with edges to what the gradients came from (as PyTorch's): a
        # differentiation through it reaches it and raises, never finds nothing to do
        node = Error()
        node.next_functions = tuple(gradient_edge(a) or (None, 0) for a in args
                                    if isinstance(a, Tensor) and a.requires_grad)
        wrapped = []
        for o in ((outputs,) if single else outputs):
            if isinstance(o, Tensor) and o._dtype._cat >= 2:
                o = o._alias()
                o._grad_fn, o._requires_grad = node, True
            wrapped.append(o)
        return wrapped[0] if single else tuple(wrapped)
    return wrapper
