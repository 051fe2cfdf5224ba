"""The VJP pass: from a forward graph and which of its inputs are differentiable, derive
the backward graph.

The forward graph is replayed through the dispatcher on example tensors while a tracer
records, and autograd.grad runs over the replay: so each op's VJP rule (the very rule eager
autograd uses, written with the Tensor API) is traced in reverse order, cotangents are summed
on fan-out by the engine, broadcasting is undone and views scatter into their base exactly
as in eager mode. The joint graph is then partitioned (ir/partition.py)."""

import numpy as np

from ..ir import OPS
from ..ir.graph import Value
from ..ir.ops_control import CONTROL
from ..ir.partition import partition
from ..ir.verify import verify
from ..runtime.autograd_api import grad as autograd_grad
from ..runtime import trace_state
from ..runtime.dispatch import call
from ..runtime.tensor import Tensor
from .trace import trace_body


def replay(graph, tensors):
    """Run graph's nodes through the dispatcher on tensors; returns the value map. Under a
    tracer, every recorded node keeps the source line of the node it replays. Control-flow
    nodes run through control_ops (with their own autograd node)."""
    env = dict(zip(graph.inputs, tensors))
    tracer = trace_state.state.tracer
    for node in graph.nodes:
        if tracer is not None:
            tracer.loc_override = node.loc or None
        if node.op == "constant":
            out = Tensor._from_array(np.array(node.attrs["value"], dtype=node.attrs["dtype"]))
        elif node.op in CONTROL:
            from .control_ops import apply_node
            out = apply_node(node, [env[x] if isinstance(x, Value) else x for x in node.inputs])
            out = out if len(node.outputs) > 1 else out[0]
        else:
            args = [env[x] if isinstance(x, Value) else x for x in node.inputs]
            out = call(OPS[node.op], args, node.attrs)
        for v, o in zip(node.outputs, out if len(node.outputs) > 1 else (out,)):
            env[v] = o
    if tracer is not None:
        tracer.loc_override = None
    return env


class VJP:
    """The VJP pass's result (plain data)."""

    def __init__(self, forward, backward, saved, diff_inputs, diff_outputs, joint=None,
                 notes=None):
        self.forward = forward              # Graph: primal inputs -> outputs + saved values
        self.backward = backward            # Graph: saved values + cotangents -> input grads
        self.saved = saved                  # SavedValue table
        self.diff_inputs = diff_inputs      # indices of the inputs gradients are taken for
        self.diff_outputs = diff_outputs    # indices of the outputs that take a cotangent
        self.joint = joint
        self.notes = [] if notes is None else notes

    @property
    def n_outputs(self):
        return len(self.forward.outputs) - sum(1 for s in self.saved if s.input_index is None)


def derive_vjp(graph, diff_inputs):
    """graph: a traced forward graph with graph.example_inputs. diff_inputs: input indices."""
    xs = [Tensor._from_array(np.array(a)) for a in graph.example_inputs]
    for i in diff_inputs:
        xs[i].requires_grad_(True)
    diff_outputs = [i for i, v in enumerate(graph.outputs) if v.type.dtype.startswith("float")]
    cts = [Tensor._from_array(np.ones(graph.outputs[i].type.shape,
                                      dtype=graph.outputs[i].type.dtype)) for i in diff_outputs]
    mutated = list(graph.mutated)

    def body():
        env = replay(graph, xs)
        outs = [env[v] for v in graph.outputs]
        pairs = [(outs[i], ct) for i, ct in zip(diff_outputs, cts) if outs[i].requires_grad]
        targets = [xs[i] for i in diff_inputs]
        grads = autograd_grad([o for o, _ in pairs], targets, [c for _, c in pairs],
                              allow_unused=True) if pairs and targets else [None] * len(targets)
        grads = [g if g is not None else t.new_zeros(t.shape) for g, t in zip(grads, targets)]
        return (outs + [env[graph.mutated[i]] for i in mutated]
                + [env[g.value] for g in graph.guards] + list(grads))

    inputs = [(v.name, x) for v, x in zip(graph.inputs, xs)] + \
             [(f"ct{k}", c) for k, c in enumerate(cts)]
    joint = trace_body(graph.name + "_joint", inputs, body)
    fwd, bwd, table = partition(joint, len(graph.inputs), len(graph.outputs), len(mutated),
                                len(graph.guards), graph.guards, mutated)
    verify(fwd)
    verify(bwd)
    return VJP(fwd, bwd, table, list(diff_inputs), diff_outputs, joint)


def saved_table_rows(saved):
    rows = [f"  {'name':8s} {'type':28s} {'bytes':>10s}  where"]
    for s in saved:
        rows.append(f"  {s.name:8s} {str(s.type):28s} {s.nbytes:>10,d}  {s.loc}")
    total = sum(s.nbytes for s in saved if s.input_index is None)
    rows.append(f"  total saved (excluding inputs): {total:,d} bytes")
    return "\n".join(rows)


def saved_table(vjp):
    return saved_table_rows(vjp.saved)
