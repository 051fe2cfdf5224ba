"""Control-flow nodes at run time, and their VJPs.

`emit` runs a cond / while_loop / stack_get on tensors (the interpreter computes the
results) and records the node when a trace is active. `run_cond` / `run_while` also give the
node an autograd node whose backward emits the VJP as control flow again:

- cond: a cond on the same predicate whose regions are the branches' VJPs. Each VJP region
  recomputes its branch's forward from the operands (rematerialisation), so the forward
  saves only its operands and the predicate.
- while_loop: when a gradient is wanted the forward also gives its trip count and, per
  carried value, a stack of the values it had at the start of each iteration (save=True;
  see ir/ops_control.py). The VJP is a while_loop counting j down from trip count - 1 to 0
  whose body reads entry j of every stack, runs the body's VJP on it (recomputing that one
  iteration's forward), carries the cotangents of the carried values and accumulates those
  of the loop-invariant operands.

A region's VJP is derived as the whole graph's is: the region is replayed (replay, below) on
example values under a standalone region tracer while autograd.grad runs over the replay, so
it is made of the op table's VJP rules; nested control flow comes through its own autograd
node. Everything here also runs eagerly (no tracer): create_graph replays compiled graphs
(`replay`: each node through the dispatcher, as the eager op it records)."""
import numpy as np

from ..ir import OPS
from ..ir.builder import Builder
from ..ir.graph import StackType, TensorType, Value
from ..ir.ops_control import CONTROL, control_types, inline
from ..runtime import grad_mode, trace_state
from ..runtime.autograd_api import grad as autograd_grad
from ..runtime.creation import zeros
from ..runtime.dispatch import call
from ..runtime.node import Node, fix_grads, gradient_edge
from ..runtime.saved_tensor import SavedTensor, user_location
from ..runtime.tensor import Tensor
from .errors import ControlFlowError
from .region import Region


def _is_float(t):
    return isinstance(t, TensorType) and t.dtype.startswith("float")


def _diff(t):
    return t.requires_grad and t._dtype.is_floating_point


def _where():
    tracer = trace_state.state.tracer
    return tracer.current_loc() if tracer is not None else str(user_location())


def emit(opname, operands, attrs):
    """Run a control-flow op on tensors; record it when tracing. -> result tensors."""
    outs = CONTROL[opname].impl(*[t._data for t in operands], **attrs)
    results = [Tensor._from_array(o) for o in outs]
    tracer = trace_state.state.tracer
    if tracer is not None:
        if any(t._dtype.is_complex for t in (*operands, *results)):  # (its VJP: real values)
            raise ControlFlowError(f"{tracer.current_loc()}: complex values in tensor-"
                                   "dependent control flow")
        vals = [tracer.value_of(t) for t in operands]
        types = control_types(opname, [v.type for v in vals], attrs)
        node_outs = tracer.add(opname, vals, attrs, types=types)
        node_outs = node_outs if isinstance(node_outs, tuple) else (node_outs,)
        for r, v in zip(results, node_outs):
            tracer.bind(r, v)
    return results


def run_cond(pred, operands, then_g, else_g):
    results = emit("cond", [pred] + list(operands), {"then": then_g, "else": else_g})
    if grad_mode.state.grad_enabled and any(_diff(t) for t in operands):
        CondBackward(pred, operands, then_g, else_g, results)
    return results


def run_while(carried, rest, cond_g, body_g, save=False):
    """-> the final carried values, then (with save) the trip count and the stacks."""
    operands = list(carried) + list(rest)
    if grad_mode.state.grad_enabled and any(isinstance(v.type, StackType)
                                            for v in body_g.inputs):
        _no_higher_order()          # a loop's backward, run with create_graph
    want = grad_mode.state.grad_enabled and any(_diff(t) for t in operands)
    attrs = {"n_carried": len(carried), "save": bool(save) or want, "cond": cond_g,
             "body": body_g}
    results = emit("while_loop", operands, attrs)
    if want:
        WhileBackward(carried, rest, body_g, results)
    return results


def apply_node(node, args):
    """Replay a control-flow node of a graph on tensors (replay)."""
    a = node.attrs
    if node.op == "cond":
        return run_cond(args[0], args[1:], a["then"], a["else"])
    if node.op == "while_loop":
        n = a["n_carried"]
        return run_while(args[:n], args[n:], a["cond"], a["body"], a.get("save"))
    return emit(node.op, args, dict(a))


def region_vjp(graph, examples, name, loc=None):
    """The VJP of a region as a region: inputs are graph's inputs then one cotangent per
    floating-point output; outputs are the gradients of its floating-point inputs."""
    xs = [Tensor._from_array(np.array(a)) for a in examples]
    wrt = [i for i, v in enumerate(graph.inputs) if _is_float(v.type)]
    outs_f = [k for k, v in enumerate(graph.outputs) if _is_float(v.type)]
    cts = [Tensor._from_array(np.zeros(graph.outputs[k].type.shape,
                                       graph.outputs[k].type.dtype)) for k in outs_f]

    def body():
        for i in wrt:
            xs[i].requires_grad_(True)
        with grad_mode.enable_grad():
            env = replay(graph, xs)
            outs = [env[v] for v in graph.outputs]
            pairs = [(outs[k], ct) for k, ct in zip(outs_f, cts) if outs[k].requires_grad]
            targets = [xs[i] for i in wrt]
            grads = autograd_grad([o for o, _ in pairs], targets, [c for _, c in pairs],
                                  allow_unused=True) if pairs and targets else \
                [None] * len(targets)
        return [g if g is not None else (0, graph.inputs[i].type.dtype,
                                         graph.inputs[i].type.shape)
                for g, i in zip(grads, wrt)]

    region = Region(name, f"the backward of region '{graph.name}'", standalone=True)
    inputs = [(v.name, x, v.type if isinstance(v.type, StackType) else None)
              for v, x in zip(graph.inputs, xs)]
    inputs += [(f"ct{k}", c, None) for k, c in enumerate(cts)]
    return region.finish(region.run(body, inputs=inputs), loc)


class _ControlBackward(Node):
    """An autograd node for a whole control-flow node: edges to its operands."""

    def _setup(self, operands, results, live):
        """live[k]: some region reads operand k in a way a gradient can flow through (an
        operand read only by a condition gets no edge: its .grad stays None, as in eager)."""
        self._where = _where()
        self.next_functions = tuple(
            (gradient_edge(t) if t._dtype.is_floating_point and ok else None) or (None, 0)
            for t, ok in zip(operands, live))
        self._in_meta = tuple((t._data.shape, t._dtype) for t in operands)
        self._out_meta = [(r._data.shape, r._dtype) for r in results]
        self._saved = [SavedTensor(t) for t in operands]
        self.examples = [np.array(t._data) for t in operands]
        for i, r in enumerate(results):
            if r._dtype.is_floating_point:
                r._grad_fn, r._output_nr, r._requires_grad = self, i, True

    @property
    def _nout(self):
        return len(self._out_meta)

    def _operands(self):
        return [s.unpack(self) for s in self._saved]

    def _cotangents(self, grads, which):
        return [grads[k] if grads[k] is not None else
                Tensor._from_array(np.zeros(self._out_meta[k][0], self._out_meta[k][1].np))
                for k in which]


class CondBackward(_ControlBackward):
    def __init__(self, pred, operands, then_g, else_g, results):
        super().__init__()
        self.then_g, self.else_g = then_g, else_g
        self._pred = SavedTensor(pred)
        read = _reads(then_g) | _reads(else_g)
        self._setup(operands, results, [v in read or w in read for v, w in
                                        zip(then_g.inputs, else_g.inputs)])

    def apply(self, grads):
        ops = self._operands()
        floats = [k for k, v in enumerate(self.then_g.outputs) if _is_float(v.type)]
        cts = self._cotangents(grads, floats)
        then_v = region_vjp(self.then_g, self.examples, "then", self._where)
        else_v = region_vjp(self.else_g, self.examples, "else", self._where)
        outs = run_cond(self._pred.unpack(self), ops + cts, then_v, else_v)
        res = [None] * len(ops)
        for k, i in enumerate(i for i, v in enumerate(self.then_g.inputs) if _is_float(v.type)):
            res[i] = outs[k]
        return fix_grads(res, self.next_functions, self._in_meta)


class WhileBackward(_ControlBackward):
    def __init__(self, carried, rest, body_g, results):
        super().__init__()
        n = len(carried)
        self.body_g, self.n = body_g, n
        self._trips = SavedTensor(results[n])
        self._stacks = [SavedTensor(s) for s in results[n + 1:]]
        read = _reads(body_g)
        self._setup(list(carried) + list(rest), results[:n],
                    [k < n or v in read for k, v in enumerate(body_g.inputs)])

    def apply(self, grads):
        if grad_mode.state.grad_enabled:
            _no_higher_order(self._where)
        ops = self._operands()
        n, body = self.n, self.body_g
        rest = ops[n:]
        fc = [k for k in range(n) if _is_float(body.inputs[k].type)]
        fr = [m for m in range(len(rest)) if _is_float(body.inputs[n + m].type)]
        body_v = region_vjp(body, self.examples, "body", self._where)
        cond_g, body_g = _reverse_loop(body, body_v, fc, fr, n, self._where)
        trips = self._trips.unpack(self)
        cts = self._cotangents(grads, fc)
        accs = [zeros(rest[m]._data.shape, dtype=rest[m]._dtype) for m in fr]
        stacks = [s.unpack(self) for s in self._stacks]
        out = run_while([trips - 1] + cts + accs, stacks + rest, cond_g, body_g)
        res = [None] * len(ops)
        for k, g in zip(fc, out[1:1 + len(fc)]):
            res[k] = g
        for m, g in zip(fr, out[1 + len(fc):1 + len(fc) + len(fr)]):
            res[n + m] = g
        return fix_grads(res, self.next_functions, self._in_meta)


def _no_higher_order(where=None):
    raise RuntimeError(f"{where or _where()}: higher-order gradients (create_graph=True) through "
                       "a tensor-dependent while loop are not supported yet: its backward reads "
                       "the saved per-iteration values as constants")


def _reads(graph):
    """The inputs of graph its nodes or outputs use."""
    used = set(graph.outputs)
    for n in graph.nodes:
        used.update(n.inputs if n.view_of is None else list(n.inputs) + [n.view_of])
    return {v for v in graph.inputs if v in used}


def _plain(t):
    return t if isinstance(t, StackType) else TensorType(t.dtype, t.shape)


def _reverse_loop(body, body_v, fc, fr, n, loc):
    """The regions of the backward loop. Carried: j, the carried values' cotangents (fc),
    the loop-invariant operands' gradient sums (fr); then the stacks and those operands."""
    types = [_plain(v.type) for v in body.inputs]
    carried = [TensorType("int64", ())] + [types[k] for k in fc] + [types[n + m] for m in fr]
    consts = [StackType(types[k]) for k in range(n)] + types[n:]

    def region(name):
        b = Builder(name)
        ins = [b.input(t, nm) for t, nm in zip(
            carried + consts, ["j"] + [f"ct{k}" for k in fc] + [f"acc{m}" for m in fr]
            + [f"stack{k}" for k in range(n)] + [f"c{m}" for m in range(len(types) - n)])]
        return b, ins

    cb, ins = region("cond")
    cb.ret(cb.add("ge", [ins[0], 0], loc=loc))
    bb, ins = region("body")
    j, ct = ins[0], ins[1:1 + len(fc)]
    acc = ins[1 + len(fc):len(carried)]
    stacks, rest = ins[len(carried):len(carried) + n], ins[len(carried) + n:]
    xs = [bb.add("stack_get", [s, j], types=[types[k]], loc=loc) for k, s in enumerate(stacks)]
    grads = inline(bb.graph, body_v, xs + rest + ct)
    new_ct = grads[:len(fc)]
    new_acc = [bb.add("add", [a, g], loc=loc) for a, g in zip(acc, grads[len(fc):])]
    bb.ret(bb.add("sub", [j, 1], loc=loc), *new_ct, *new_acc)
    return cb.graph, bb.graph


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
