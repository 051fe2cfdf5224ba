"""PyTorch's grad_fn names for ops llgrad computes as compositions of the op table's ops
(torch.median's MedianBackward0, where llgrad's last op is a where): the result's node, made
by that call, takes PyTorch's name; its rule (the last op's) and edges stay as they are."""
import functools

from .node import OpNode, grad_enabled, node_class


def rename(out, name, inputs=()):
    """out (a tensor or a tuple of them) with each fresh node renamed `name` (a str, or
    fn(tensor) -> str); a result that is one of `inputs` (returned as it came) keeps its
    node."""
    for t in out if isinstance(out, tuple) else (out,):
        fn = getattr(t, "_grad_fn", None)
        if isinstance(fn, OpNode) and not any(t is x for x in inputs):
            n = name(t) if callable(name) else name
            if type(fn).__name__ != n:
                fn.__class__ = node_class(n)
    return out


def torch_node(name):
    """Decorator: the function's result gets the grad_fn name `name` (see rename); name may
    be fn(*args, **kwargs) -> str."""
    def wrap(fn):
        @functools.wraps(fn)
        def f(*args, **kwargs):
            n = name(*args, **kwargs) if callable(name) else name
            return rename(fn(*args, **kwargs), n, args + tuple(kwargs.values()))
        return f
    return wrap


def _no_derivative(self, grads):
    raise RuntimeError(f"derivative for aten::{self._aten} is not implemented")


_no_derivative_classes = {}


def no_derivative(out, aten):
    """out with its fresh node made PyTorch's NotImplemented node, as torch gives an op
    with no derivative (floor_divide): the forward runs, a backward through it raises
    "derivative for aten::<aten> is not implemented" (compile runs such a call eagerly:
    tracer/errors.py later_error)."""
    cls = _no_derivative_classes.get(aten)
    if cls is None:
        cls = _no_derivative_classes[aten] = type(
            "NotImplemented", (OpNode,), {"__slots__": (), "_aten": aten,
                                          "apply": _no_derivative,
                                          "name": lambda self: "llgrad::autograd::NotImplemented"})
    fn = getattr(out, "_grad_fn", None)
    if isinstance(fn, OpNode):
        fn.__class__ = cls
    return out


def no_derivative_from(out, inputs, aten):
    """out (computed off the graph, on NumPy values) as PyTorch gives an op with no
    derivative when one of inputs requires grad: a result that requires grad, on a node
    raising "derivative for aten::<aten> is not implemented" in a backward (no_derivative).
    The link to inputs is out minus an empty sum of them (+0: every value, -0 too, kept)."""
    grads = [t for t in inputs if getattr(t, "requires_grad", False)]
    if not grads or not grad_enabled():
        return out
    zero = None
    for t in grads:
        z = t.reshape(-1)[:0].sum().to(out.dtype)
        zero = z if zero is None else zero + z
    return no_derivative(out - zero, aten)


def _raise_message(self, grads):
    raise self._error(self._message)


_failing_classes = {}


def failing_node(out, name, message, error=NotImplementedError):
    """out with its fresh node renamed `name` and made to raise error(message) (by default
    NotImplementedError) when a backward reaches it: PyTorch's nodes for ops with no
    derivative that keep their own names (torch.unique's Unique2Backward0)."""
    cls = _failing_classes.get((name, message, error))
    if cls is None:
        cls = _failing_classes[name, message, error] = type(name, (OpNode,), {
            "__slots__": (), "_message": message, "_error": error, "apply": _raise_message})
    fn = getattr(out, "_grad_fn", None)
    if isinstance(fn, OpNode):
        fn.__class__ = cls
    return out


def rename_copy(self, out):
    """self after self.copy_(out), the write of an in-place method computed out of place
    (out): its copy node takes out's node's name, as PyTorch's x.renorm_() has
    RenormBackward0 (a write into a view keeps CopySlices, as PyTorch's)."""
    fn, src = self._grad_fn, getattr(out, "_grad_fn", None)
    if src is not None and isinstance(fn, OpNode) and type(fn).__name__ == "CopyBackwards":
        fn.__class__ = node_class(type(src).__name__)
    return self
