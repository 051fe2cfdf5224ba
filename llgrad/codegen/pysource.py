"""Any graph as a readable Python function over NumPy.

The function is built as an AST and unparsed with astunparse; each statement carries a
comment with the user's source line, and the source is registered in `linecache`, so
tracebacks and pdb show the generated lines. Running it gives the interpreter's results.

Control flow reads as Python: a `cond` node is an if/else whose branches are its regions'
statements, a `while_loop` a `while True:` loop (its cond region, a `break`, its body
region; with save=True it also appends each iteration's carried values to lists that become
the stacks). A region's inputs take the names of the node's operands (or of the loop
variables), so nothing is copied going in; results that could alias an operand are
copied, as the interpreter's are."""
import ast
import itertools
import keyword
import linecache
import types

import astunparse
import numpy as np

from ..ir.graph import Value
from ..ir.ops_copy import preserve_copy, relaid_by_arrays
from ..ir.optable import OPS, c_order, contiguous_result, iterator_layout_op, \
    unreduced_elementwise
from ..ir.shape_rules import operand_casts

_counter = itertools.count()


class _Ops:
    """The namespace the generated code calls: `ops.mul(a, b)` is the op's NumPy impl;
    `ops.cast(a, dtype)` an operand's promotion."""
    cast = staticmethod(preserve_copy)      # (eager's cast: runtime/dispatch.py)

    def __getattr__(self, name):
        impl = OPS[name].impl
        # (eager's layout of results: runtime/dispatch.py)
        contig = contiguous_result(OPS[name])
        iterated = iterator_layout_op(OPS[name])
        unreduced = unreduced_elementwise(OPS[name])   # (reduction="none": elementwise's)

        def call(*args, **kwargs):
            out = impl(*args, **kwargs)
            flat = unreduced and kwargs.get("reduction") == "none"
            if iterated or flat:
                out = relaid_by_arrays(out, args, name == "pow" and
                                       type(args[0]) is not np.ndarray)
            c = c_order if contig and not flat else (lambda a: a)
            return tuple(c(np.asarray(o)) for o in out) if OPS[name].nout != 1 \
                else c(np.asarray(out))
        call.__name__ = name
        setattr(self, name, call)
        return call


class _Names:
    """Python names for the values of a graph and of its regions (one namespace: a region's
    statements are inlined into the function)."""

    def __init__(self, graph):
        self.map, self.used, self.k = {}, set(), 0
        for v in graph.inputs:
            n = v.name if v.name and v.name.isidentifier() and not keyword.iskeyword(v.name) \
                and v.name not in ("ops", "np") and v.name not in self.used \
                else f"in{len(self.map)}"
            self.map[v] = n
            self.used.add(n)

    def fresh(self, prefix="v"):
        while f"{prefix}{self.k}" in self.used:
            self.k += 1
        name = f"{prefix}{self.k}"
        self.used.add(name)
        self.k += 1
        return name

    def __getitem__(self, v):
        n = self.map.get(v)
        if n is None:
            n = self.map[v] = self.fresh()
        return n

    def __setitem__(self, v, name):
        self.map[v] = name


def _literal(x):
    if x is Ellipsis:
        return ast.Constant(Ellipsis)
    if isinstance(x, tuple):
        return ast.Tuple([_literal(e) for e in x], ast.Load())
    if isinstance(x, list):
        return ast.List([_literal(e) for e in x], ast.Load())
    if isinstance(x, float) and not np.isfinite(x):
        return ast.parse(f"float('{x}')", mode="eval").body
    return ast.Constant(x)


def _operand(x, names, cast):
    e = ast.Name(names[x], ast.Load()) if isinstance(x, Value) else _literal(x)
    if cast is not None:
        e = ast.Call(ast.Attribute(ast.Name("ops", ast.Load()), "cast", ast.Load()),
                     [e, ast.Constant(cast)], [])
    return e


def _statement(node, names):
    outs = [ast.Name(names[o], ast.Store()) for o in node.outputs]
    pieces = node.op in OPS and OPS[node.op].nout != 1     # a sequence, even of one piece
    target = outs[0] if len(outs) == 1 and not pieces else ast.Tuple(outs, ast.Store())
    if node.op == "constant":
        call = ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "array", ast.Load()),
                        [_literal(node.attrs["value"])],
                        [ast.keyword("dtype", ast.Constant(node.attrs["dtype"]))])
    elif node.op == "stack_get":        # entry i of a stack: stack[int(i)]
        s, i = (ast.Name(names[x], ast.Load()) for x in node.inputs)
        call = ast.Subscript(s, ast.Call(ast.Name("int", ast.Load()), [i], []), ast.Load())
    else:
        casts = dict(operand_casts(OPS[node.op], [x.type if isinstance(x, Value) else x
                                                  for x in node.inputs]))
        args = [_operand(x, names, casts.get(i)) for i, x in enumerate(node.inputs)]
        kwargs = [ast.keyword(k, _literal(v)) for k, v in node.attrs.items()]
        call = ast.Call(ast.Attribute(ast.Name("ops", ast.Load()), node.op, ast.Load()),
                        args, kwargs)
    return ast.Assign([target], call, lineno=0)


def _text(stmt):
    return astunparse.unparse(ast.fix_missing_locations(stmt)).strip()


def _header(stmt):
    """The first line of a compound statement (its body unparsed as `pass`)."""
    return _text(stmt).splitlines()[0]


def _parse(src):
    return ast.parse(src).body[0]


def _assign(targets, values, copy=()):
    """`t0, t1 = e0, e1` (names); a value in copy is copied (np.array) first."""
    lhs = [ast.Name(t, ast.Store()) for t in targets]
    rhs = [ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "array", ast.Load()),
                    [ast.Name(v, ast.Load())], []) if v in copy else ast.Name(v, ast.Load())
           for v in values]
    if len(lhs) == 1:
        return ast.Assign(lhs, rhs[0], lineno=0)
    return ast.Assign([ast.Tuple(lhs, ast.Store())], ast.Tuple(rhs, ast.Load()), lineno=0)


class _Body:
    """The lines of a graph's statements, regions inlined: [(indent, text, comment)]."""

    def __init__(self, names):
        self.names, self.lines = names, []

    def add(self, depth, stmt, comment=""):
        self.lines.append((depth, stmt if isinstance(stmt, str) else _text(stmt), comment))

    def graph(self, graph, depth):
        for node in graph.nodes:
            if node.op == "cond":
                self.cond(node, depth)
            elif node.op == "while_loop":
                self.while_loop(node, depth)
            else:
                self.add(depth, _statement(node, self.names), node.loc)

    def region(self, region, operands, results, depth):
        """Inline region with its inputs named as operands; assign its outputs to results."""
        names = self.names
        for v, name in zip(region.inputs, operands):
            names[v] = name
        self.graph(region, depth)
        outs = [names[v] for v in region.outputs]
        self.add(depth, _assign(results, outs, copy=set(operands)))

    def cond(self, node, depth):
        names = self.names
        ops = [names[x] for x in node.inputs[1:]]
        results = [names[o] for o in node.outputs]
        head = ast.If(_parse(f"bool({names[node.inputs[0]]})").value, [ast.Pass()], [])
        self.add(depth, _header(head), f"cond; {node.loc}" if node.loc else "cond")
        self.region(node.attrs["then"], ops, results, depth + 1)
        self.add(depth, "else:")
        self.region(node.attrs["else"], ops, results, depth + 1)

    def while_loop(self, node, depth):
        names, a = self.names, node.attrs
        n, save = a["n_carried"], a.get("save")
        ops = [names[x] for x in node.inputs]
        loop = [names.fresh("w") for _ in range(n)]
        note = f"while_loop; {node.loc}" if node.loc else "while_loop"
        self.add(depth, _assign(loop, ops[:n]), note + ": the carried values")
        if save:
            trips, hist = names.fresh("trips"), [names.fresh("h") for _ in range(n)]
            self.add(depth, _parse(f"{', '.join([trips] + hist)} = 0{', []' * n}"),
                     "the trip count; each carried value per iteration")
        self.add(depth, _header(ast.While(ast.Constant(True), [ast.Pass()], [])), note)
        inner = loop + ops[n:]
        cond = a["cond"]
        for v, name in zip(cond.inputs, inner):
            names[v] = name
        self.graph(cond, depth + 1)
        self.add(depth + 1, _header(_parse(f"if not bool({names[cond.outputs[0]]}):\n"
                                           "    break")))
        self.add(depth + 2, "break")
        if save:
            for h, w in zip(hist, loop):
                self.add(depth + 1, _parse(f"{h}.append({w})"))
            self.add(depth + 1, _parse(f"{trips} += 1"))
        self.region(a["body"], inner, loop, depth + 1)
        outs = [names[o] for o in node.outputs]
        self.add(depth, _assign(outs[:n], loop, copy=set(loop)))
        if save:
            self.add(depth, _parse(f"{outs[n]} = np.array({trips}, dtype='int64')"))
            for out, h, x in zip(outs[n + 1:], hist, node.inputs[:n]):
                t = x.type
                empty = f"np.empty({(0,) + tuple(t.shape)!r}, dtype={t.dtype!r})"
                self.add(depth, _parse(f"{out} = np.stack({h}) if {h} else {empty}"))


def graph_source(graph, write_back=True, extra=()):
    """-> the Python source of graph as one function (a string). write_back: assign mutated
    inputs in place (as the interpreter does); extra: more values to return."""
    names = _Names(graph)
    body = _Body(names)
    body.graph(graph, 1)
    for i, v in (graph.mutated.items() if write_back else ()):
        sub = ast.Subscript(ast.Name(names[graph.inputs[i]], ast.Load()),
                            ast.Constant(Ellipsis), ast.Store())
        body.add(1, ast.Assign([sub], ast.Name(names[v], ast.Load()), lineno=0), "write back")
    ret = ast.Return(ast.Tuple([ast.Name(names[v], ast.Load())
                                for v in list(graph.outputs) + list(extra)], ast.Load()))
    body.add(1, ret)
    args = ast.arguments(posonlyargs=[], args=[ast.arg(names[v]) for v in graph.inputs],
                         vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    fname = graph.name if graph.name.isidentifier() and not keyword.iskeyword(graph.name) \
        else f"{graph.name}_fn" if graph.name.isidentifier() else "f"
    header = ast.FunctionDef(fname, args, [ast.Pass()], [], lineno=0)
    lines = [_header(header)]
    for depth, text, comment in body.lines:
        lines.append("    " * depth + text + (f"  # {comment}" if comment else ""))
    return "\n".join(lines) + "\n"


def compile_source(graph, write_back=True, extra=()):
    """-> a Python function running graph on NumPy arrays (returns a tuple of outputs)."""
    src = graph_source(graph, write_back, extra)
    filename = f"<llgrad-{graph.name}-{next(_counter)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    scope = {"ops": _Ops(), "np": np}
    exec(compile(src, filename, "exec"), scope)        # noqa: S102 (our own generated code)
    fn = next(v for v in scope.values() if isinstance(v, types.FunctionType))
    fn.source = src
    return fn
