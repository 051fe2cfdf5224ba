"""The reference interpreter: read operands, apply the op's NumPy impl, write results.
Views are NumPy views of their base, so aliasing behaves as in eager mode. Control-flow
nodes (ops_control.py) run their regions through `evaluate`."""
import numpy as np

from .graph import StackType, Value
from .ops_copy import preserve_copy, relaid_by_arrays
from .optable import CONTROL, OPS, c_order, contiguous_result, iterator_layout_op, \
    unreduced_elementwise
from .shape_rules import operand_casts


def interpret(graph, *arrays):
    """Run graph on arrays; write mutated inputs back into them; return the outputs."""
    outs, env = evaluate(graph, arrays)
    for i, v in graph.mutated.items():
        arrays[i][...] = env[v]
    return outs


def evaluate(graph, arrays):
    """Run graph without side effects: (outputs, the value map). Callers read mutated
    inputs' new values and guard values from the map before committing anything."""
    if len(arrays) != len(graph.inputs):
        raise TypeError(f"graph {graph.name} takes {len(graph.inputs)} inputs, got "
                        f"{len(arrays)}")
    env = {}
    for v, a in zip(graph.inputs, arrays):
        a = np.asarray(a)
        if isinstance(v.type, StackType):       # (trip count, *entry shape)
            if a.shape[1:] != v.type.elem.shape:
                raise ValueError(f"input %{v.name}: expected a stack of {v.type.elem.shape}, "
                                 f"got shape {a.shape}")
        elif a.shape != v.type.shape:
            raise ValueError(f"input %{v.name}: expected shape {v.type.shape}, got {a.shape}")
        env[v] = a
    for node, impl, casts in _plan(graph):
        args = apply_casts([env[x] if isinstance(x, Value) else x for x in node.inputs], casts)
        out = impl(*args, **node.attrs)
        outs = out if len(node.outputs) > 1 else (out,)
        for v, o in zip(node.outputs, outs):
            o = np.asarray(o)
            if o.dtype != v.type.dtype:
                o = o.astype(v.type.dtype)
            env[v] = o
    return tuple(env[v] for v in graph.outputs), env


def _only(impl):
    return lambda *args, **attrs: impl(*args, **attrs)[0]


def _c_ordered(impl, several):
    if several:
        return lambda *args, **attrs: tuple(c_order(o) for o in impl(*args, **attrs))
    return lambda *args, **attrs: c_order(impl(*args, **attrs))


def _iterated(impl, row_major):
    return lambda *args, **attrs: relaid_by_arrays(impl(*args, **attrs), args, row_major)


def _constant(value, dtype):
    return np.array(value, dtype=dtype)


def _plan(graph):
    """Per node: its NumPy impl and the operand casts its dtype promotion needs, worked out
    once per graph (the graph is not changed after verification)."""
    plan = graph.__dict__.get("_interpret_plan")
    if plan is None or len(plan) != len(graph.nodes):
        plan = []
        for node in graph.nodes:
            if node.op == "constant":
                plan.append((node, _constant, ()))
                continue
            if node.op in CONTROL:      # its impl gives a tuple, whatever the result count
                impl = CONTROL[node.op].impl
                plan.append((node, impl if len(node.outputs) != 1 else _only(impl), ()))
                continue
            plan.append((node, *node_impl(node)))
        graph.__dict__["_interpret_plan"] = plan
    return plan


def node_impl(node):
    """(impl, operand casts) of a node of the op table: its NumPy implementation as the
    interpreter calls it (eager's result layouts) and the casts its dtype promotion needs
    (apply_casts)."""
    op = OPS[node.op]
    casts = operand_casts(op, [x.type if isinstance(x, Value) else x for x in node.inputs])
    # a split into one piece: the impl's sequence of pieces is the one output's
    impl = _only(op.impl) if op.nout != 1 and len(node.outputs) == 1 else op.impl
    # (a loss under reduction="none" is laid out as an elementwise op's)
    unreduced = unreduced_elementwise(op) and node.attrs.get("reduction") == "none"
    if contiguous_result(op) and not unreduced:     # (eager's layout: runtime/dispatch.py)
        impl = _c_ordered(impl, len(node.outputs) > 1)
    elif iterator_layout_op(op) or unreduced:
        impl = _iterated(impl, op.name == "pow" and not isinstance(node.inputs[0], Value))
    return impl, casts


def apply_casts(args, casts):
    """args with node_impl's operand casts applied (eager's copies: dispatch.py)."""
    for k, dt in casts or ():
        if args[k].dtype != dt:
            args[k] = preserve_copy(args[k], dt)
    return args
