"""Reads back what printer.py writes."""
import ast
import functools
import re  # noqa: I001

from .graph import SHORT_DTYPE, Graph, Guard, Node, StackType, TensorType, Value

_TYPE = re.compile(r"(\w+)\[([\d,]*)\]\{([-\d,]*)\}(?:\+(\d+))?")
_HEADER = re.compile(r"graph (\w+)\((.*)\) \{$")
_REGION = re.compile(r"(\w+)\((.*)\) \{$")        # a node's region: `then(%a: f32[3]{1}) {`
_NESTING = re.compile(r"[][(){}'\"]")
_WORD = re.compile(r"\w+")


class ParseError(ValueError):
    pass


@functools.lru_cache(maxsize=4096)     # TensorTypes are immutable; graphs repeat types
def parse_type(text):
    text = text.strip()
    if text.startswith("stack(") and text.endswith(")"):
        return StackType(parse_type(text[len("stack("):-1]))
    m = _TYPE.fullmatch(text)
    if not m:
        raise ParseError(f"bad type {text!r}")
    ints = lambda s: tuple(int(x) for x in s.split(",") if x)  # noqa: E731
    return TensorType(SHORT_DTYPE[m.group(1)], ints(m.group(2)), ints(m.group(3)),
                      int(m.group(4) or 0))


def _split_top(text, sep):
    """Split on sep outside brackets and quotes."""
    if sep not in text:
        return [text]
    if not _NESTING.search(text):
        return text.split(sep)
    out, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


_NAMED = {"None": None, "True": True, "False": False}


def _eval_literal(text):
    if text in _NAMED:
        return _NAMED[text]
    for number in (int, float):       # the common operands, without compiling them
        try:
            return number(text)
        except ValueError:
            pass
    tree = ast.parse(text, mode="eval")

    def conv(n):
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Tuple):
            return tuple(conv(e) for e in n.elts)
        if isinstance(n, ast.List):
            return [conv(e) for e in n.elts]
        if isinstance(n, ast.Name) and n.id in ("inf", "nan"):    # repr of such floats
            return float(n.id)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -conv(n.operand)
        if isinstance(n, ast.Dict):
            return {conv(k): conv(v) for k, v in zip(n.keys, n.values)}
        raise ParseError(f"not a literal: {text!r}")
    return conv(tree.body)


def parse_graph(text):
    """A Graph from its printed text (the inverse of str(graph))."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    m = _HEADER.match(lines[0])
    if not m:
        raise ParseError(f"bad graph header: {lines[0]!r}")
    graph, _ = _parse_block(lines, 1, m.group(1), m.group(2))
    return graph


def _parse_block(lines, pos, name, args):
    """Parse a graph's body from lines[pos] up to its closing brace: (graph, the position
    after it). A node's regions follow the node's line; each is parsed the same way
    (recursion as deep as regions nest, which is as deep as the user's source nests)."""
    env = {}
    inputs = []
    for i, arg in enumerate(a for a in _split_top(args, ",") if a.strip()):
        vname, typ = arg.split(":", 1)
        v = Value(parse_type(typ), None, i, vname.strip()[1:])
        env[v.name] = v
        inputs.append(v)
    graph = Graph(name, inputs, [], [])

    def ref(tok):
        tok = tok.strip()
        if tok.startswith("%"):
            if tok[1:] not in env:
                raise ParseError(f"use of undefined value {tok}")
            return env[tok[1:]]
        return _eval_literal(tok)

    node = None
    while pos < len(lines):
        s = lines[pos]
        pos += 1
        if s == "}":
            return graph, pos
        region = _REGION.fullmatch(s) if s.endswith("{") else None
        if region is not None:
            if node is None:
                raise ParseError(f"a region before any node: {s!r}")
            node.attrs[region.group(1)], pos = _parse_block(lines, pos, region.group(1),
                                                            region.group(2))
            continue
        if s.startswith("return"):
            rest = s[len("return"):].strip()
            graph.outputs = [ref(t) for t in rest.split(",") if t.strip()]
            continue
        if s.startswith("guard "):
            body, _, loc = s[len("guard "):].partition("  # ")
            lhs, _, rhs = body.partition(" == ")
            graph.guards.append(Guard(ref(lhs), _eval_literal(rhs), loc.strip()))
            continue
        if s.startswith("mutate "):
            lhs, rhs = s[len("mutate "):].split("=")
            graph.mutated[[v.name for v in inputs].index(lhs.strip()[1:])] = ref(rhs)
            continue
        node = _parse_node(s, env, ref)
        graph.nodes.append(node)
    raise ParseError(f"graph {name}: missing closing brace")


def _parse_node(s, env, ref):
    body, _, comment = s.partition("  # ")
    lhs, _, rhs = body.partition(" = ")
    rhs, _, types = rhs.rpartition(" : ")
    fields = rhs.split(None, 1)
    op = fields[0]
    operands, attrs = [], {}
    if len(fields) > 1:
        for tok in _split_top(fields[1], ","):
            for piece in _split_top(tok.strip(), " "):
                piece = piece.strip()
                if not piece:
                    continue
                key, eq, val = piece.partition("=")
                if eq and _WORD.fullmatch(key):
                    attrs[key] = _eval_literal(val)
                else:
                    operands.append(ref(piece))
    view_of, loc = None, ""
    for note in (c.strip() for c in comment.split(";") if c.strip()):
        if note.startswith("view of %"):
            view_of = env[note[len("view of %"):]]
        else:
            loc = note
    node = Node(op, operands, attrs, [], loc, view_of)
    out_types = [parse_type(t) for t in _split_top(types, ",")]
    names = [n.strip()[1:] for n in lhs.split(",")]
    node.outputs = [Value(t, node, i, n) for i, (t, n) in enumerate(zip(out_types, names))]
    for v in node.outputs:
        env[v.name] = v
    return node
