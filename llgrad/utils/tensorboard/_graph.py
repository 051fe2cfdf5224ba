"""add_graph's GraphDef, drawn from the graph llgrad's tracer records of one forward call.

PyTorch draws TorchScript's trace; here the model runs once under llgrad's tracer (its
parameters and buffers, and the tensors of the example input, are the graph's inputs), and
each IR node becomes a NodeDef named `<Model>/<Child>[name]/.../<op>_<k>` (the scope of the
module whose forward recorded it, as PyTorch's `Net/Linear[fc1]/...`), its op the IR op's
name, its inputs the NodeDefs of its operands (`name:i` for a node's i-th output), its
attributes in the `attr` string and its output shapes in `_output_shapes`. The example
inputs are `input/<argument>`, the parameters `<scope>/<name>`, the results `output/output.<i>`
(PyTorch's IO nodes); inputs the forward leaves unused are left out, as PyTorch does."""
import contextlib
import inspect

from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.config_pb2 import RunMetadata
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.step_stats_pb2 import DeviceStepStats, StepStats
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.versions_pb2 import VersionDef

from ...ir.graph import Value
from ...runtime import trace_state
from ...runtime.tensor import Tensor
from ...tracer.pytree import flatten
from ...tracer.trace import trace_body

_ATTR_CHARS = 120     # longer attribute values (a constant's list, a region) are cut short


def node_def(name, op, inputs=(), shapes=None, attributes=""):
    """A NodeDef as PyTorch's tensorboard writes them: the attribute text in `attr`, the
    output shapes in `_output_shapes`."""
    attr = {"attr": AttrValue(s=attributes.encode("utf_8"))}
    if shapes is not None:
        attr["_output_shapes"] = AttrValue(list=AttrValue.ListValue(shape=[
            TensorShapeProto(dim=[TensorShapeProto.Dim(size=d) for d in shape])
            for shape in shapes]))
    return NodeDef(name=name, op=op, input=list(inputs), attr=attr)


def _attr_text(node):
    """The node's attributes and its constant operands (`input<i>`), as text."""
    items = [(f"input{i}", x) for i, x in enumerate(node.inputs)
             if not isinstance(x, Value) and x is not None]
    parts = []
    for k, v in items + list(node.attrs.items()):
        text = repr(v)
        if len(text) > _ATTR_CHARS:
            text = text[:_ATTR_CHARS] + "..."
        parts.append(f"{k} : {text}")
    # (PyTorch replaces quotes, which upset TensorBoard's display)
    return ("{" + ", ".join(parts) + "}").replace("'", " ")


def _class_name(module):
    """The module's class name (a scripted or traced module's: its original class's)."""
    return getattr(module, "original_name", None) or type(module).__name__


def _scopes(model):
    """(id(module) -> its scope name, module path -> its scope name)."""
    by_path = {"": _class_name(model)}
    by_module = {}
    for path, m in model.named_modules():
        if path:
            parent, _, leaf = path.rpartition(".")
            by_path[path] = f"{by_path[parent]}/{_class_name(m)}[{leaf}]"
        by_module.setdefault(id(m), by_path[path])
    return by_module, by_path


@contextlib.contextmanager
def _recording_scopes(model, by_module, node_scope):
    """While active, each node the tracer records is given (in node_scope, by id) the scope
    of the innermost module whose forward is running."""
    stack = [_class_name(model)]
    seen = {}       # id(a graph's node list) -> how many of its nodes have their scope

    def settle():
        # (the tracer active now: a region's, inside llgrad.cond / while_loop)
        nodes = trace_state.state.tracer.builder.graph.nodes
        for node in nodes[seen.get(id(nodes), 0):]:
            node_scope[id(node)] = stack[-1]
        seen[id(nodes)] = len(nodes)

    def enter(module, args):
        settle()
        stack.append(by_module[id(module)])

    def leave(module, args, result):
        settle()
        stack.pop()

    handles = []
    try:
        for _, m in model.named_modules():
            handles.append(m.register_forward_pre_hook(enter))
            handles.append(m.register_forward_hook(leave))
        yield
    finally:
        for h in handles:
            h.remove()


def _example_inputs(model, args):
    try:
        named = list(inspect.signature(model.forward).bind(*args).arguments.items())
    except (TypeError, ValueError):
        named = [(f"input.{i + 1}", a) for i, a in enumerate(args)]
    out = []
    for name, a in named:
        leaves, _ = flatten(a, name)
        out += [(path, leaf) for path, leaf in leaves if isinstance(leaf, Tensor)]
    return out


@contextlib.contextmanager
def _set_model_to_eval(model):
    was_training = model.training
    model.train(False)
    try:
        yield
    finally:
        model.train(was_training)


def _trace(model, args):
    """(the traced IR graph, the scope of each of its nodes by id, a (name, kind) per graph
    input): the parameters, then the buffers, then the example input's tensors."""
    by_module, by_path = _scopes(model)
    state = [(n, t, "Parameter") for n, t in model.named_parameters()]
    state += [(n, t, "Buffer") for n, t in model.named_buffers()]
    described = []
    for name, _, kind in state:
        owner, _, leaf = name.rpartition(".")
        described.append((f"{by_path[owner]}/{leaf}", kind))
    examples = _example_inputs(model, args)
    described += [(f"input/{path}", "IO Node") for path, _ in examples]
    node_scope = {}
    with _recording_scopes(model, by_module, node_scope):
        traced = trace_body(_class_name(model), [(n, t) for n, t, _ in state] + examples,
                            lambda: model(*args), examples=False)
    return traced, node_scope, described


def graph(model, args, verbose=False, use_strict_trace=True):
    """(GraphDef, RunMetadata) of model's forward on args: a tensor or a dict (the one
    argument), a tuple of arguments, or another iterable of them (as torch.jit.trace)."""
    with _set_model_to_eval(model):
        try:
            if args is None:
                raise RuntimeError("example_kwarg_inputs should be a dict")
            if isinstance(args, (Tensor, dict)):
                args = (args,)
            elif not isinstance(args, tuple):
                args = tuple(args)
            traced, node_scope, described = _trace(model, args)
        except RuntimeError as e:
            print(e)
            print("Error occurs, No graph saved")
            raise
    if verbose:
        print(traced)
    return _graph_def(traced, node_scope, described, _class_name(model)), \
        RunMetadata(step_stats=StepStats(dev_stats=[DeviceStepStats(device="/device:CPU:0")]))


def _graph_def(traced, node_scope, described, root):
    used = {id(x) for n in traced.nodes for x in n.inputs if isinstance(x, Value)}
    used.update(id(v) for v in traced.outputs)
    name_of = {}
    nodes = []
    for i, v in enumerate(traced.inputs):
        name, kind = described[i]
        name_of[id(v)] = name
        if id(v) in used:
            nodes.append(node_def(name, kind, shapes=[v.type.shape]))
    for k, node in enumerate(traced.nodes):
        name = f"{node_scope.get(id(node), root)}/{node.op}_{k}"
        for j, out in enumerate(node.outputs):
            name_of[id(out)] = name if j == 0 else f"{name}:{j}"
        operands = [name_of[id(x)] for x in node.inputs if isinstance(x, Value)]
        shapes = [getattr(o.type, "shape", ()) for o in node.outputs]
        nodes.append(node_def(name, node.op, operands, shapes, _attr_text(node)))
    for i, v in enumerate(traced.outputs):
        nodes.append(node_def(f"output/output.{i + 1}", "IO Node", [name_of[id(v)]],
                              [v.type.shape]))
    return GraphDef(node=nodes, versions=VersionDef(producer=22))
