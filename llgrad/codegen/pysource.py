"""Any graph as a readable Python function over NumPy.

The function is built as an AST and unparsed with astunparse; each statement carries a
comment with the user's source line, and the source is registered in `linecache`, so
tracebacks and pdb show the generated lines. Running it gives the interpreter's results."""
import ast
import itertools
import keyword
import linecache
import types

import astunparse
import numpy as np

from ..ir.graph import Value
from ..ir.optable import OPS
from ..ir.shape_rules import promoted_dtype

_counter = itertools.count()


class _Ops:
    """The namespace the generated code calls: `ops.mul(a, b)` is the op's NumPy impl."""

    def __getattr__(self, name):
        impl = OPS[name].impl

        def call(*args, **kwargs):
            out = impl(*args, **kwargs)
            return tuple(np.asarray(o) for o in out) if OPS[name].nout != 1 \
                else np.asarray(out)
        call.__name__ = name
        setattr(self, name, call)
        return call


def _names(graph):
    names, used = {}, set()
    for v in graph.inputs:
        n = v.name if v.name and v.name.isidentifier() and not keyword.iskeyword(v.name) \
            and v.name not in ("ops", "np") else f"in{len(names)}"
        names[v] = n
        used.add(n)
    k = 0
    for node in graph.nodes:
        for o in node.outputs:
            while f"v{k}" in used:
                k += 1
            names[o] = f"v{k}"
            k += 1
    return names


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
        e = ast.Call(ast.Attribute(e, "astype", ast.Load()), [ast.Constant(cast)], [])
    return e


def _statement(node, names):
    outs = [ast.Name(names[o], ast.Store()) for o in node.outputs]
    target = outs[0] if len(outs) == 1 else ast.Tuple(outs, ast.Store())
    if node.op == "constant":
        call = ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "array", ast.Load()),
                        [_literal(node.attrs["value"])],
                        [ast.keyword("dtype", ast.Constant(node.attrs["dtype"]))])
    else:
        op = OPS[node.op]
        want = promoted_dtype(op, [x.type if isinstance(x, Value) else x for x in node.inputs])
        pos = range(len(node.inputs)) if op.promote == "all" else op.promote
        args = [_operand(x, names, want if (isinstance(x, Value) and i in pos and want
                                            and x.type.dtype != want) else None)
                for i, x in enumerate(node.inputs)]
        kwargs = [ast.keyword(k, _literal(v)) for k, v in node.attrs.items()]
        call = ast.Call(ast.Attribute(ast.Name("ops", ast.Load()), node.op, ast.Load()),
                        args, kwargs)
    return ast.Assign([target], call, lineno=0)


def graph_source(graph, write_back=True, extra=()):
    """-> the Python source of graph as one function (a string). write_back: assign mutated
    inputs in place (as the interpreter does); extra: more values to return."""
    names = _names(graph)
    body = [(_statement(n, names), n.loc) for n in graph.nodes]
    for i, v in (graph.mutated.items() if write_back else ()):
        sub = ast.Subscript(ast.Name(names[graph.inputs[i]], ast.Load()),
                            ast.Constant(Ellipsis), ast.Store())
        body.append((ast.Assign([sub], ast.Name(names[v], ast.Load()), lineno=0),
                     "write back"))
    ret = ast.Return(ast.Tuple([ast.Name(names[v], ast.Load())
                                for v in list(graph.outputs) + list(extra)], ast.Load()))
    args = ast.arguments(posonlyargs=[], args=[ast.arg(names[v]) for v in graph.inputs],
                         vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    fname = graph.name if graph.name.isidentifier() and not keyword.iskeyword(graph.name) \
        else f"{graph.name}_fn" if graph.name.isidentifier() else "f"
    header = ast.FunctionDef(fname, args,
                             [ast.Pass()], [], lineno=0)
    first = astunparse.unparse(header).strip().splitlines()[0]
    lines = [first]
    for stmt, loc in body:
        text = astunparse.unparse(ast.fix_missing_locations(stmt)).strip()
        lines.append(f"    {text}" + (f"  # {loc}" if loc else ""))
    lines.append("    " + astunparse.unparse(ast.fix_missing_locations(ret)).strip())
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
