"""Control flow in the IR: `cond` and `while_loop`, whose regions are sub-Graphs held in the
node's attributes, and `stack_get`, which reads one iteration's entry of a loop's stack.

    %r.. = cond %pred, %a..                          then(%a..) {..}  else(%a..) {..}
        pred: one bool element. Both regions take the operands and give the results (same
        dtypes and shapes); only the region pred selects runs.
    %c.. = while_loop %c.., %k.. n_carried=N save=S  cond(%c.., %k..) {..}  body(%c.., %k..) {..}
        the first N operands are carried, the others are loop-invariant. cond gives one bool
        element; body gives the N carried values of the next iteration. With save=True the
        loop also gives its trip count (i64[]) and, per carried value, its stack: the value
        at the start of each iteration, which the loop's backward reads in reverse.
    %x = stack_get %stack, %i
        entry i of a stack.

Regions are closed: a region reads outer values only through the node's operands, so passes
that move or copy nodes never look inside them. These ops are not in the op table (OPS):
they have no Tensor-API VJP rule (the tracer builds their VJP from their regions' VJPs:
tracer/control_ops.py), their result types come from their regions rather than from running
the impl on stand-ins (a loop would run), and their LLVM lowering is codegen/control.py
(regions become internal functions). Each is declared here once: result types (which also
check the regions' signatures) and NumPy semantics. Running a region calls the interpreter on it:
recursion only as deep as the user's source nests its ifs and loops."""
import numpy as np

from .graph import Node, StackType, TensorType, Value
from .interpret import evaluate
from .optable import CONTROL


class ControlOp:
    __slots__ = ("name", "types", "impl", "regions")

    def __init__(self, name, types, impl, regions=()):
        self.name, self.types, self.impl, self.regions = name, types, impl, regions


def _declare(name, types, impl, regions=()):
    CONTROL[name] = ControlOp(name, types, impl, regions)


def signature(t):
    """What must agree between a region and its node: dtype and shape (strides are a
    region input's own business, as for any graph input)."""
    if isinstance(t, StackType):
        return ("stack", t.elem.dtype, t.elem.shape)
    return (t.dtype, t.shape)


def result_type(t):
    """A control node's results are fresh buffers: contiguous, whatever the region gave."""
    return t if isinstance(t, StackType) else TensorType(t.dtype, t.shape)


def _check_region(key, region, in_types):
    if len(region.inputs) != len(in_types):
        raise ValueError(f"region '{key}' takes {len(region.inputs)} inputs, the node passes "
                         f"{len(in_types)}")
    for k, (v, t) in enumerate(zip(region.inputs, in_types)):
        if not isinstance(t, (TensorType, StackType)):
            raise ValueError(f"operand {k} is a constant; control-flow operands are values")
        if signature(v.type) != signature(t):
            raise ValueError(f"region '{key}' input %{v.name} is {v.type}, operand {k} is {t}")


def _one_bool(t, what):
    if not isinstance(t, TensorType) or t.dtype != "bool" or t.numel != 1:
        raise ValueError(f"{what} must be one bool element, got {t}")


def _cond_types(in_types, attrs):
    _one_bool(in_types[0], "the predicate")
    then, other = attrs["then"], attrs["else"]
    _check_region("then", then, in_types[1:])
    _check_region("else", other, in_types[1:])
    if len(then.outputs) != len(other.outputs):
        raise ValueError(f"region 'then' gives {len(then.outputs)} results, region 'else' "
                         f"gives {len(other.outputs)}")
    for k, (a, b) in enumerate(zip(then.outputs, other.outputs)):
        if signature(a.type) != signature(b.type):
            raise ValueError(f"result {k}: region 'then' gives {a.type}, region 'else' "
                             f"gives {b.type}")
    return [result_type(v.type) for v in then.outputs]


def _first(values):
    return bool(np.asarray(values).reshape(-1)[0])


def _cond_impl(pred, *operands, **regions):
    outs, _ = evaluate(regions["then"] if _first(pred) else regions["else"], operands)
    return tuple(np.array(o) for o in outs)     # fresh buffers, never an operand's


def _while_types(in_types, attrs):
    n = attrs["n_carried"]
    if not 0 <= n <= len(in_types):
        raise ValueError(f"n_carried={n} but the node has {len(in_types)} operands")
    cond, body = attrs["cond"], attrs["body"]
    _check_region("cond", cond, in_types)
    _check_region("body", body, in_types)
    if len(cond.outputs) != 1:
        raise ValueError(f"region 'cond' gives {len(cond.outputs)} results, not 1")
    _one_bool(cond.outputs[0].type, "region 'cond''s result")
    if len(body.outputs) != n:
        raise ValueError(f"region 'body' gives {len(body.outputs)} results for {n} carried "
                         "values")
    for k, (v, t) in enumerate(zip(body.outputs, in_types)):
        if signature(v.type) != signature(t):
            raise ValueError(f"region 'body' gives {v.type} for carried value {k}, which is {t}")
    out = [result_type(t) for t in in_types[:n]]
    if attrs.get("save"):
        out += [TensorType("int64", ())] + [StackType(result_type(t)) for t in in_types[:n]]
    return out


def _while_impl(*operands, cond, body, n_carried, save=False):
    carried, rest = list(operands[:n_carried]), list(operands[n_carried:])
    history = [[] for _ in carried]
    trips = 0
    while True:
        (test,), _ = evaluate(cond, carried + rest)
        if not _first(test):
            break
        if save:
            for h, x in zip(history, carried):
                h.append(x)             # region results are never written to later
        carried = list(evaluate(body, carried + rest)[0])
        trips += 1
    outs = [np.array(x) for x in carried]
    if save:
        outs.append(np.array(trips, dtype=np.int64))
        for h, x in zip(history, operands[:n_carried]):
            x = np.asarray(x)
            outs.append(np.stack(h) if h else np.empty((0,) + x.shape, x.dtype))
    return tuple(outs)


def _stack_get_types(in_types, attrs):
    s, i = in_types
    if not isinstance(s, StackType):
        raise ValueError(f"operand 0 must be a stack, got {s}")
    if not isinstance(i, TensorType) or i.dtype != "int64" or i.numel != 1:
        raise ValueError(f"the index must be one int64 element, got {i}")
    return [s.elem]


def _stack_get_impl(stack, i):
    return (np.array(stack[int(np.asarray(i).reshape(-1)[0])]),)


_declare("cond", _cond_types, _cond_impl, ("then", "else"))
_declare("while_loop", _while_types, _while_impl, ("cond", "body"))
_declare("stack_get", _stack_get_types, _stack_get_impl)


def control_types(node_op, in_types, attrs):
    return CONTROL[node_op].types(in_types, attrs)


def regions(node):
    """[(key, Graph)] of a node's regions (none for ordinary nodes)."""
    op = CONTROL.get(node.op)
    return [(k, node.attrs[k]) for k in op.regions] if op is not None else []


def inline(graph, region, operands):
    """Append copies of region's nodes to graph, its inputs replaced by operands; returns
    the copies of its outputs. (A region's own regions are shared: graphs are not mutated.)"""
    subst = dict(zip(region.inputs, operands))
    for n in region.nodes:
        m = Node(n.op, [subst.get(x, x) if isinstance(x, Value) else x for x in n.inputs],
                 dict(n.attrs), [], n.loc, subst.get(n.view_of, n.view_of))
        m.outputs = [Value(o.type, m, o.index) for o in n.outputs]
        subst.update(zip(n.outputs, m.outputs))
        graph.nodes.append(m)
    return [subst.get(v, v) for v in region.outputs]
