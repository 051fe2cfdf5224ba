"""NumPy VJPs of the 2-D matrix products (mm, addmm) for the common eager backward: no
create_graph, no tracer, no vmap, plain float Tensors of one dtype. They make exactly the
NumPy calls the op table's rules make through the dispatcher (np.matmul of the gradient and
a transposed operand), without the dispatch of the transposes and products, so the values
are identical; anything else returns None and the rule runs (OpNode.apply).

`summed_to` does the same for the sum of a broadcast gradient back to its input's shape (a
bias's gradient: every Linear's backward), which the engine asks of sum_to_size."""

from ..ir import ops_nn  # noqa: F401  (mm and addmm declared)
from ..ir.ops_nn import column_major
from ..ir.np_matmul import matmul
from ..ir.optable import OPS, c_order
from . import dispatch, fast_vjp_small, fast_vjp_views, grad_mode, trace_state  # noqa: F401
from . import fast_vjp_arith  # noqa: F401  (mul's and sub's NumPy VJPs)
from . import fast_vjp_norm  # noqa: F401  (layer_norm's, below its shaped kernel's sizes)
from . import fast_vjp_picks  # noqa: F401  (where's and the picking views' NumPy VJPs)
from . import fast_vjp_pointwise  # noqa: F401  (relu's, sigmoid's, masked_fill's, mse_loss's)
from .meta_tensor import is_meta
from .node import fast_vjps
from .tensor import Tensor

_grad = grad_mode.state
_tstate = trace_state.state
_new = Tensor._from_array
_matmul = matmul


def _plain(g):
    return not _grad.grad_enabled and _tstate.tracer is None and dispatch.batching is None \
        and type(g) is Tensor and dispatch.forward_ad is None and not is_meta(g)


def _mm(node, g, names, ia):
    """(grad of a, grad of b) of a @ b (inputs ia and ia + 1, saved under names), or None
    where the rule must run. Each operand is unpacked (version-checked) only where the
    other's gradient is wanted, as the rule does (PyTorch's saves)."""
    dt = g._dtype
    need_a, need_b = node.needs(ia), node.needs(ia + 1)
    b = getattr(node, names[1]) if need_a else None
    a = getattr(node, names[0]) if need_b else None
    if any(x is not None and (type(x) is not Tensor or x._dtype is not dt) for x in (a, b)) \
            or dt._cat != 2 or g._data.ndim != 2:
        return None
    # (in the operand's layout where it was column-major, as the rule: ops_nn.column_major)
    jobs = []
    if need_a:
        jobs.append((b._data, g._data.T, True) if _column_major(node, names[0]) else
                    (g._data, b._data.T, False))
    if need_b:
        jobs.append((g._data.T, a._data, True) if _column_major(node, names[1]) else
                    (a._data.T, g._data, False))
    outs = [_matmul(x, y) for x, y, _ in jobs]
    grads = iter(_new(o.T if flip else o) for o, (_, _, flip) in zip(outs, jobs))
    return (next(grads) if need_a else None), (next(grads) if need_b else None)


def _column_major(node, name):
    """ops_nn.column_major(node, name), read from the saved tensor's array where it is a
    plain 2-D one with elements (the same test on the same strides, without Tensor.stride's
    tuple and Size; outside a trace, as every rule here runs)."""
    t = getattr(node._saved.get(name), "tensor", None)
    if type(t) is not Tensor:
        return column_major(node, name)
    d = t._data
    shape = d.shape
    if len(shape) != 2 or 0 in shape:
        return column_major(node, name)
    item = d.itemsize
    s0, s1 = d.strides
    return s0 // item == 1 and s1 // item == shape[0]


def mm_vjp(node, g):
    """ops_nn._mm_vjp: (g @ mat2^T, self^T @ g)."""
    if not _plain(g):
        return None
    return _mm(node, g, ("self", "mat2"), 0)


def addmm_vjp(node, g):
    """ops_nn._addmm_vjp with alpha = beta = 1: (g, g @ mat2^T, mat1^T @ g)."""
    if not _plain(g):
        return None
    attrs = node.attrs
    if attrs and (attrs.get("alpha", 1) != 1 or attrs.get("beta", 1) != 1):
        return None
    res = _mm(node, g, ("mat1", "mat2"), 1)
    if res is None:
        return None
    gs = None
    if node.needs(0):
        gs = g
        shape = node._in_meta[0][0]
        if shape and shape != g._data.shape:    # (a Linear's bias: summed_to here, as the
            s = summed_to(g, shape)             # sum_to_size of fix_grads would do it)
            gs = g if s is None else s
    return (gs,) + res


fast_vjps[OPS["mm"]] = mm_vjp
fast_vjps[OPS["addmm"]] = addmm_vjp


_sum = OPS["sum"]


def summed_to(g, shape):
    """sum_to_shape(g, shape) of a plain float gradient as one call of the sum op's NumPy
    implementation (the call g.sum(dims, keepdim=True) makes) and, where inner dims are
    summed too, a reshape: the same values without two dispatches and a view node; None
    where the general path must run (other dtypes, a profiler recording ops, shapes that do
    not broadcast: it raises there)."""
    if not _plain(g) or dispatch.profiler is not None or g._dtype._cat != 2:
        return None
    have = g._data.shape
    lead = len(have) - len(shape)
    if lead < 0:
        return None
    dims = tuple(range(lead))
    for i, n in enumerate(shape):
        m = have[lead + i]
        if n == 1 and m != 1:
            dims += (lead + i,)
        elif n != m:
            return None
    if not dims:
        return None
    # (the values do not depend on keepdim; without it, summing only the leading dims gives
    # the shape itself, no reshape needed)
    keep = len(dims) != lead
    out = c_order(dispatch.run_impl(_sum, [g], {"dim": dims, "keepdim": keep}))
    return _new(out.reshape(shape) if keep and lead else out)
