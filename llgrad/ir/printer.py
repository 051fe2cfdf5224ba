"""The one text form of a Graph (deterministic), and the literal syntax of attributes."""

from .graph import Graph


_REPR_ITEMS = frozenset((int, float, bool, str, type(None)))


def literal(v):
    """Attribute and constant syntax: Python literals without spaces, `...` for Ellipsis."""
    if v is Ellipsis:
        return "..."
    if isinstance(v, tuple):
        # (a shape or an axis list, the common case: each item is its repr)
        inner = ",".join(map(repr, v)) if all(type(x) in _REPR_ITEMS for x in v) \
            else ",".join(literal(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ",".join(literal(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return repr(v)


def _names(graph):
    names = {}
    for v in graph.inputs:
        names[v] = v.name
    n = 0
    for node in graph.nodes:
        for out in node.outputs:
            names[out] = str(n)
            n += 1
    return names


def operand(x, names):
    return "%" + names[x] if x in names else literal(x)


def print_graph(graph):
    return "\n".join(_graph_lines(graph, f"graph {graph.name}", "", {}))


def _graph_lines(graph, head, indent, type_text):
    """The lines of graph (a region is printed under its node, indented two more spaces
    than the node, headed by its attribute name; its values are named in its own scope)."""
    names = _names(graph)

    def typ(t):                 # graphs repeat a few types many times
        s = type_text.get(t)
        if s is None:
            s = type_text[t] = str(t)
        return s

    args = ", ".join(f"%{v.name}: {v.type}" for v in graph.inputs)
    lines = [f"{indent}{head}({args}) {{"]
    pad = indent + "  "
    for node in graph.nodes:
        lhs = ", ".join("%" + names[o] for o in node.outputs)
        parts = [node.op]
        ops = ", ".join(operand(x, names) for x in node.inputs)
        if ops:
            parts.append(ops)
        parts += [f"{k}={literal(v)}" for k, v in node.attrs.items()
                  if not isinstance(v, Graph)]
        text = f"{pad}{lhs} = {' '.join(parts)}"
        types = ", ".join(typ(o.type) for o in node.outputs)
        text = f"{text:<{36 + len(pad)}s} : {types}"
        notes = []
        if node.view_of is not None:
            notes.append(f"view of %{names[node.view_of]}")
        if node.loc:
            notes.append(node.loc)
        if notes:
            text = f"{text:<{60 + len(pad)}s}  # {'; '.join(notes)}"
        lines.append(text)
        for k, v in node.attrs.items():
            if isinstance(v, Graph):
                lines += _graph_lines(v, k, pad + "  ", type_text)
    for g in graph.guards:
        text = f"{pad}guard %{names[g.value]} == {literal(g.expected)}"
        lines.append(f"{text:<{60 + len(pad)}s}  # {g.loc}" if g.loc else text)
    for i, v in graph.mutated.items():
        lines.append(f"{pad}mutate %{graph.inputs[i].name} = %{names[v]}")
    lines.append(f"{pad}return " + ", ".join("%" + names[v] for v in graph.outputs))
    lines.append(f"{indent}}}")
    return lines


Graph.__str__ = print_graph     # (the graph's one text form)
