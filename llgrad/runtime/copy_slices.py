"""In-place ops on views: PyTorch's CopySlices on the base, and the AsStridedBackward0 node
a view gets once its base has been modified in place."""
import re

from ..ir import OPS
from ..ir.geometry import geometry_span
from .node import Node, gradient_edge, node_class


def geometry(t):
    return (tuple(t._data.shape), t.stride(), t._storage_offset())


def _span(*geoms):
    return max(geometry_span(*g) for g in geoms)


# edge 0 of an in-place node on a view without history of its own: CopySlices calls the node
# itself, the edge only says that the view's gradient is wanted (needs(0), fix_grads). One
# shared marker, not (node, 0): that reference cycle left every such node, its saved tensors
# and the graph behind it to the garbage collector (~1,700 objects a step of an ODE solver
# writing its solution[j] = ...)
VIEW_GRAD_WANTED = (Node(), 0)


class CopySlices(Node):
    """Gradient of `base` after `view.op_(...)`: outside the view it passes through; inside
    it is the in-place op's own VJP (fn) applied to the view's slice of the gradient."""
    __slots__ = ("fn", "base_geom", "view_geom", "span")

    def __init__(self, base, view, fn, base_edge):
        Node.__init__(self)
        self.fn = fn
        self.base_geom = geometry(base)
        self.view_geom = geometry(view)
        self.span = _span(self.base_geom, self.view_geom)
        self.next_functions = (base_edge or (None, 0),) + fn.next_functions[1:]

    def apply(self, grads):
        shape, strides, _ = self.view_geom
        if any(st == 0 and n > 1 for n, st in zip(shape, strides)):
            # (PyTorch's CopySlices copies the gradient into the view's geometry, whose
            # internal-overlap check fails: x.expand(3, 4).zero_() runs, its backward not)
            raise RuntimeError("unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location. Please "
                               "clone() the tensor before performing the operation.")
        g = grads[0]
        flat = g._op("strided_scatter", geom=self.base_geom, span=self.span)
        g_view = flat._op("strided_gather", geom=self.view_geom)
        fn = self.fn
        op = getattr(fn, "_op", None)
        if op is not None:
            res = fn.edge_grads(op.vjp(fn, g_view))
        else:       # a custom Function's node (mark_dirty on a view): its own backward
            res = fn.apply([g_view] + [None] * (fn._nout - 1))
        r0 = res[0] if res[0] is not None else g_view.new_zeros(g_view.shape)
        flat = flat._op("strided_put", r0, geom=self.view_geom)
        return [flat._op("strided_gather", geom=self.base_geom)] + list(res[1:])

    def release(self):
        self.fn.release()


def regenerate_view_grad_fn(t):
    """A view whose base changed in place gets AsStridedBackward0 into the base's new
    history (PyTorch does the same, lazily, when grad_fn is read)."""
    base = t._base
    t._view_version = t._storage.version
    if not (base._requires_grad and t._dtype._cat >= 2):
        return
    shape, strides, offset = geometry(t)
    _, base_strides, base_offset = geometry(base)
    attrs = {"size": shape, "stride": strides, "storage_offset": offset,
             "in_strides": base_strides, "in_offset": base_offset}
    node = node_class("AsStridedBackward0")(OPS["as_strided"], attrs)
    node.next_functions = (gradient_edge(base) or (None, 0),)
    node._in_meta = ((base._data.shape, base._dtype),)
    old, old_nr = t._grad_fn, t._output_nr
    t._grad_fn, t._output_nr, t._requires_grad = node, 0, True
    # retain_grad() follows the view to its new history (its tensor hooks stay behind,
    # as in PyTorch)
    ref = old._retained.pop(old_nr, None) if old is not None and old._retained else None
    if ref is not None:
        node._retained = {0: ref}


def view_fn_name(grad_fn_name):
    """The name PyTorch's view errors give a grad_fn: without "Backward", and without the
    overload number 0 (SplitBackward0: Split; SqueezeBackward1: Squeeze1)."""
    head, found, tail = grad_fn_name.rpartition("Backward")
    return head + ("" if tail == "0" else tail) if found else grad_fn_name


def multi_view_error(t, rebase=False):
    """PyTorch's error for an output of split / unbind / chunk (or a view of one:
    t._multi_view) modified in place, or used after its base or another view of the base
    was (rebase: its grad_fn cannot be regenerated)."""
    op, nr = t._multi_view if type(t._multi_view) is tuple else (
        view_fn_name(type(t._grad_fn).__name__), t._output_nr)
    what = "its base or another view of its base has been modified inplace" if rebase else \
        "is being modified inplace"
    return RuntimeError(
        f"Output {nr} of {op} is a view and {what}. This view is the output of a function "
        "that returns multiple views. Such functions do not allow the output views to be "
        "modified inplace. You should replace the inplace operation by an out-of-place one.")


_CREATION_TEXT = {
    "no_grad": ("no_grad mode", "with grad mode enabled", "no_grad block"),
    "inference": ("inference mode", "in normal mode", "inference_mode block"),
}


def creation_error(t, rebase=False):
    """PyTorch's error for a view made under no_grad / inference_mode (t._creation) that is
    modified in place with grad mode on (or whose base was: rebase)."""
    fn = t._grad_fn
    name = re.sub(r"Backward\d*$", "", type(fn).__name__) if fn is not None else None
    what = "its base or another view of its base has been modified inplace" if rebase else \
        "is being modified inplace"
    if t._creation == "custom_function":
        head = (f"Output {t._output_nr} of {name} is a view and {what}." if fn is not None else
                f"A view was created in no_grad mode and {what} with grad mode enabled.")
        return RuntimeError(
            f"{head} This view was created inside a custom Function (or because an input was "
            "returned as-is) and the autograd logic to handle view+inplace would override the "
            "custom backward associated with the custom Function, leading to incorrect "
            "gradients. This behavior is forbidden. You can fix this by cloning the output of "
            "the custom Function.")
    made, now, block = _CREATION_TEXT[t._creation]
    if fn is None:
        head = "A view was created in "
    else:
        head = f"Output {t._output_nr} of {name} is a view of a view which was created in "
    return RuntimeError(
        f"{head}{made} and {what} {now}. Given that this use case is ambiguous and "
        "error-prone, it is forbidden. You can clarify your code by moving both the view and "
        f"the inplace either both inside the {block} (if you don't want the inplace to be "
        "tracked) or both outside (if you want the inplace to be tracked).")
