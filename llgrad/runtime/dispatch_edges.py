"""Which inputs of an op get a next_functions edge in its backward node (PyTorch's rule,
optable's docstring: indices, masks, targets and Python numbers given as Scalars have
none), for the dispatcher's record when an op has nondiff arguments or a non-tensor
operand (its common case, every input a tensor, is inline there)."""
from .node import gradient_edge
from .saved_tensor import user_location
from .tensor import Tensor


_nondiff = {}


def _nondiff_positions(op, n):
    """Input positions of op's nondiff arguments, for n inputs (a variadic tail included)."""
    key = (op.name, n)
    pos = _nondiff.get(key)
    if pos is None:
        pos = []
        for i, a in enumerate(op.args):
            if a.lstrip("*") in op.nondiff:
                pos += range(i, n) if a.startswith("*") else [i]
        pos = _nondiff[key] = frozenset(pos)
    return pos


def nondiff_error(function, argument):
    """PyTorch's error for a tensor requiring grad where it is never differentiated (an
    nll_loss weight, batch_norm's running statistics), with the user's line."""
    return RuntimeError(f"The function '{function}' is not differentiable with respect to "
                        f"argument '{argument}'. This input cannot have requires_grad True. "
                        f"(at {user_location()})")


def _has_edge(op, inputs, i, x, nondiff):
    """PyTorch's rule (optable's docstring): which inputs get a next_functions edge."""
    if i in nondiff:
        if isinstance(x, Tensor) and x.requires_grad:     # (as PyTorch: no silent zero)
            raise nondiff_error(op.name, op.args[min(i, len(op.args) - 1)].lstrip("*"))
        return False
    if isinstance(x, Tensor):
        return True
    if x is None:
        scalars = op.scalar_args
        if not scalars or op.args[i] not in scalars:
            return True             # a missing optional tensor (weight=None)
        # a bound of clamp: a Scalar, unless another bound is a tensor (the Tensor overload)
        return any(isinstance(inputs[k], Tensor) for k, a in enumerate(op.args) if a in scalars)
    return op.number_edges


_NO_EDGE = (None, 0)


def node_edges(op, inputs):
    """(edges, meta, at) of record's node for any inputs: one edge per input that has one
    (_has_edge), each input's (shape, dtype) or None, and the input -> edge map (-1: no
    edge), or None where every input has its edge."""
    edges, meta, at = [], [], None
    nondiff = _nondiff_positions(op, len(inputs)) if op.nondiff else ()
    for i, x in enumerate(inputs):
        tensor = isinstance(x, Tensor)
        if (tensor and not nondiff) or _has_edge(op, inputs, i, x, nondiff):
            if at is not None:
                at.append(len(edges))
            if tensor and x._dtype._cat >= 2:
                edges.append(gradient_edge(x) or _NO_EDGE)
            else:
                edges.append(_NO_EDGE)
        else:
            if at is None:
                at = list(range(i))
            at.append(-1)
        meta.append((x._data.shape, x._dtype) if tensor else None)
    return edges, meta, at
