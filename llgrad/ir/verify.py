"""The verifier: runs after tracing, after every pass and before lowering. Its errors name
the node and the user's source line."""
from .graph import StackType, TensorType, Value
from .ops_control import CONTROL, control_types, regions
from .optable import OPS
from .printer import _names, operand
from .shape_rules import infer_types


class VerifyError(ValueError):
    """Raised by verify() for a malformed graph (a use before definition, a wrong type, ...)."""
    pass


class _Where:
    """`node i `op operands` (loc)`, operands named as the printer names them (built only
    when an error is raised: verify runs on every graph, errors are rare)."""

    def __init__(self, graph, i, node):
        self.graph, self.i, self.node = graph, i, node

    def __format__(self, spec):
        node, names = self.node, _names(self.graph)
        loc = f" ({node.loc})" if node.loc else ""
        ins = ", ".join(operand(x, names) if not isinstance(x, Value) or x in names
                        else "%?" for x in node.inputs)
        return f"node {self.i} `{node.op}{' ' if ins else ''}{ins}`{loc}"


def verify(graph):
    """Check graph and, under each control-flow node, its regions (a region's errors name
    the node that holds it too: `node 4 `cond ...` (f.py:3): region 'then': node 1 ...`)."""
    defined = set(graph.inputs)
    for v in graph.inputs:
        if not isinstance(v.type, (TensorType, StackType)):
            raise VerifyError(f"graph input %{v.name} has no tensor type")
    for i, node in enumerate(graph.nodes):
        where = _Where(graph, i, node)
        control = node.op in CONTROL
        if node.op != "constant" and node.op not in OPS and not control:
            raise VerifyError(f"{where}: unknown op {node.op!r}")
        for x in node.inputs:
            if isinstance(x, Value) and x not in defined:
                raise VerifyError(f"{where}: uses a value before it is defined")
        for key, region in regions(node) if control else ():
            try:
                verify(region)      # as deep as the user's source nests ifs and loops
            except VerifyError as e:
                raise VerifyError(f"{where}: region '{key}': {e}") from None
        in_types = [x.type if isinstance(x, Value) else x for x in node.inputs]
        try:
            expected = control_types(node.op, in_types, node.attrs) if control else \
                infer_types(node.op, in_types, node.attrs)
        except Exception as e:     # the op's own rule rejected its operands
            raise VerifyError(f"{where}: invalid operands: {e}") from None
        if len(expected) != len(node.outputs):
            raise VerifyError(f"{where}: has {len(node.outputs)} results, the op gives "
                              f"{len(expected)}")
        is_view = node.op in OPS and OPS[node.op].kind == "view"
        for out, exp in zip(node.outputs, expected):
            got = out.type
            if isinstance(got, StackType) or isinstance(exp, StackType):
                if got != exp:
                    raise VerifyError(f"{where}: result type {got} but the op's rule gives "
                                      f"{exp}")
                defined.add(out)
                continue
            if (got.dtype, got.shape) != (exp.dtype, exp.shape) or \
                    (is_view and (got.strides, got.offset) != (exp.strides, exp.offset)):
                raise VerifyError(f"{where}: result type {got} but the op's rule gives {exp}")
            defined.add(out)
        if is_view:
            base = node.inputs[0]
            if node.view_of is not base:
                raise VerifyError(f"{where}: a view must alias its first operand")
            for out in node.outputs:
                t = out.type
                if t.numel and t.offset < 0:
                    raise VerifyError(f"{where}: view starts before its base's storage")
        elif node.view_of is not None:
            raise VerifyError(f"{where}: only view ops may alias a value")
    for v in graph.outputs:
        if v not in defined:
            raise VerifyError(f"graph {graph.name}: returns an undefined value")
    for g in graph.guards:
        if g.value not in defined or not isinstance(g.value.type, TensorType) or \
                g.value.type.numel != 1:
            raise VerifyError(f"graph {graph.name}: a guard{' at ' + g.loc if g.loc else ''} "
                              "must test a defined one-element value")
    for i, v in graph.mutated.items():
        if not 0 <= i < len(graph.inputs) or v not in defined:
            raise VerifyError(f"graph {graph.name}: bad write-back of input {i}")
        if not isinstance(v.type, TensorType) or v.type.shape != graph.inputs[i].type.shape:
            raise VerifyError(f"graph {graph.name}: write-back of %{graph.inputs[i].name} "
                              "changes its shape")
    return graph


