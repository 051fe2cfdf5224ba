"""Bool-mask indexing under the tracer: x[mask] has as many elements as the mask has Trues,
a number the IR's static types must hold.

When the tracer records `index` (or `index_put`) with bool masks it adds the attribute
`counts` (each mask's True count, read from the example) so the shape rule gives the
result its true length (ir/ops_index.py `_fit_masks`). A mask that is a constant of the
graph (made inside the function from literals) needs nothing more. A mask that is data (an
input, or computed from one) makes its count a value guard of the trace, the way
`bool(t)` / `.item()` guard what they read: a later call whose mask selects another
number of elements misses the guard and retraces, so every call gives eager's result.
Inside tensor-dependent control flow (an if/while traced as IR regions) there is no guard
to fall back on: a mask computed there is an error, as in JAX (use llgrad.where).

`index_put` (x[mask] = v) needs the count only when the values' shape depends on it (a
values tensor with the mask's length), when the values take a gradient (their VJP is
g[mask]) or when other index tensors broadcast with the mask (x[mask, i] = 0): x[x < 0] = 0
stays valid for every mask and is not specialised."""
import numpy as np

from ..ir.graph import Guard, Value
from ..ir.shape_rules import infer_types
from ..runtime.saved_tensor import user_location
from ..runtime.tensor import Tensor
from .errors import ControlFlowError


def mask_attrs(tracer, op, tensors, operands, attrs):
    """attrs, with `counts` added (and the data masks' counts guarded) when op indexes with
    a bool mask. tensors: the op's concrete operands (None where unknown), operands: their
    Values, aligned."""
    if op.name not in ("index", "index_put") or "counts" in attrs:
        return attrs          # (a replay of a traced node: its counts are already fixed)
    first = 1 if op.name == "index" else 2
    masks = [(t, v) for t, v in zip(tensors[first:], operands[first:])
             if isinstance(v, Value) and v.type.dtype == "bool"]
    if not masks:
        return attrs
    if any(t is None for t, _ in masks):
        raise RuntimeError(f"{op.name}: a bool mask the tracer cannot read")  # (a bug)
    counts = tuple(int(np.count_nonzero(t._data)) for t, _ in masks)
    if op.name == "index_put" and not _values_need_counts(tensors[1], operands, attrs,
                                                         counts):
        return attrs
    for (t, v), n in zip(masks, counts):
        if t._data.size and not _static(v):
            _guard_count(tracer, t, v, n)
    return dict(attrs, counts=counts)


def tensors_of(tracer, operands):
    """The concrete tensors behind Values of this trace (for record_inplace, which is given
    Values only): a reverse look-up, done only when a bool operand is there."""
    want = {id(v) for v in operands if isinstance(v, Value)}
    found = {}
    if any(isinstance(v, Value) and v.type.dtype == "bool" for v in operands):
        for t, v in tracer.live_values():
            if id(v) in want:
                found[id(v)] = t
    return [found.get(id(v)) if isinstance(v, Value) else None for v in operands]


def _values_need_counts(values, operands, attrs, counts):
    if isinstance(values, Tensor) and values.requires_grad:
        return True           # the values' gradient g[mask] has the mask's length
    if sum(isinstance(x, Value) for x in operands[2:]) > 1:
        return True           # a mask beside other index tensors broadcasts with them
    vt = operands[1].type if isinstance(operands[1], Value) else None
    if vt is None or vt.numel == 1:
        return False          # one element broadcasts to any count (an empty one may not)
    # the indexed shape with every count 0, then 1: the dims that differ are the count's
    ins = [operands[0]] + list(operands[2:])
    types = [x.type if isinstance(x, Value) else x for x in ins]
    if any(isinstance(x, Value) and x.type.dtype == "bool" and x.type.numel == 0
           for x in ins):
        return False          # an empty mask selects nothing, always
    try:
        s0, s1 = (infer_types("index", types, dict(spec=attrs["spec"],
                                                   counts=(k,) * len(counts)))[0].shape
                  for k in (0, 1))
    except Exception:
        return True           # (masks that cannot all select one element: stay safe)
    lead = len(s0) - len(vt.shape)
    return any(a != b and 0 <= d - lead < len(vt.shape) and vt.shape[d - lead] != 1
               for d, (a, b) in enumerate(zip(s0, s1)))


def _static(v, seen=None):
    """Whether Value v depends on no graph input (a constant, or computed from constants:
    its value is the same on every call)."""
    seen = {} if seen is None else seen
    stack = [v]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen[id(x)] = True
        if x.node is None:            # a graph input (random ops read the RNG state input)
            return False
        stack.extend(i for i in x.node.inputs if isinstance(i, Value))
    return True


def _guard_count(tracer, t, v, count):
    parent = getattr(tracer, "parent", False)
    if parent is not False:                 # a region of tensor-dependent control flow
        if tracer._owns(t) or parent is None:
            raise _region_error(tracer)
        return _guard_count(parent, t, parent.value_of(t), count)
    n = tracer.add("sum", [v], {})           # (a bool sum counts in int64)
    tracer.builder.graph.guards.append(Guard(n, count, tracer.current_loc()))


def _region_error(tracer):
    return ControlFlowError(
        f"{user_location()}: indexing with a bool mask computed inside {tracer.what}: the "
        "result's length is the mask's number of Trues, which may differ between branches "
        "or iterations, and a traced value must have one shape. Compute the mask outside "
        "the if/while, or keep the shape fixed with llgrad.where(mask, x, 0).")
