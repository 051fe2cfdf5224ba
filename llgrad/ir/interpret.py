"""The reference interpreter: read operands, apply the op's NumPy impl, write results.
Views are NumPy views of their base, so aliasing behaves as in eager mode."""
import numpy as np

from .graph import Value
from .optable import OPS


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
        if a.shape != v.type.shape:
            raise ValueError(f"input %{v.name}: expected shape {v.type.shape}, got {a.shape}")
        env[v] = a
    for node in graph.nodes:
        args = [env[x] if isinstance(x, Value) else x for x in node.inputs]
        if node.op == "constant":
            out = np.array(node.attrs["value"], dtype=node.attrs["dtype"])
        else:
            op = OPS[node.op]
            out = op.impl(*_promoted(node, args), **node.attrs)
        outs = out if len(node.outputs) > 1 or (node.op in OPS and OPS[node.op].nout != 1) \
            else (out,)
        for v, o in zip(node.outputs, outs):
            o = np.asarray(o)
            if o.dtype != v.type.dtype:
                o = o.astype(v.type.dtype)
            env[v] = o
    return tuple(env[v] for v in graph.outputs), env


def _promoted(node, args):
    """Cast tensor operands of promoting ops to the dtype the node's type rule chose."""
    op = OPS[node.op]
    if not op.promote:
        return args
    from .shape_rules import _promote
    types = [x.type if isinstance(x, Value) else x for x in node.inputs]
    return _promote(op, types, args)
