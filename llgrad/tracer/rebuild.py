"""The function a source rewrite starts from and the one it ends with: fn's definition
located in its source (with the user's line numbers), and a rewritten definition compiled
back into a function on fn's own globals, closure cells and defaults (convert.py)."""
import ast
import textwrap
import types


def filled(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def function_node(fn, source):
    """The FunctionDef of fn, with the user's line numbers; a lambda becomes a def."""
    tree = ast.parse(textwrap.dedent(source))
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    name = fn.__code__.co_name          # (__name__ may have been reassigned)
    if name != "<lambda>":
        node = tree.body[0] if tree.body else None
        return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
            node.name == name else None
    argnames = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
             and tuple(a.arg for a in n.args.args) == argnames]
    if len(found) != 1:
        return None
    lam = found[0]
    fdef = ast.FunctionDef("lambda_", lam.args, [ast.Return(lam.body)], [], None)
    return ast.fix_missing_locations(ast.copy_location(fdef, lam))


def build(fn, fdef, ag_name, ag_module):
    """The rewritten function: compiled inside a factory whose parameters are ag_name (bound
    to ag_module) and fn's free variables, then rebuilt on fn's own globals and closure
    cells."""
    fdef.decorator_list, fdef.returns = [], None
    a = fdef.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None
    a.defaults = [ast.Constant(None) for _ in a.defaults]     # fn.__defaults__ are used
    a.kw_defaults = [None if d is None else ast.Constant(None) for d in a.kw_defaults]
    free = fn.__code__.co_freevars
    params = ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in (ag_name,) + free],
                           vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    factory = ast.FunctionDef("llgrad_factory__", params, [fdef], [], None)
    module = ast.fix_missing_locations(ast.Module([ast.copy_location(factory, fdef)], []))
    ns, own = {}, fdef.name
    fdef.name = "llgrad_converted__"    # (fn's own name as the factory's local would make a
    try:                                #  call of fn in its body read an unfilled cell)
        exec(compile(module, fn.__code__.co_filename, "exec"), fn.__globals__, ns)  # noqa: S102
    finally:
        fdef.name = own
    code = next(c for c in ns["llgrad_factory__"].__code__.co_consts
                if isinstance(c, types.CodeType) and c.co_name == "llgrad_converted__")
    names = {"co_name": fn.__code__.co_name}
    if hasattr(code, "co_qualname"):                  # (Python 3.11+)
        names["co_qualname"] = fn.__code__.co_qualname
    code = code.replace(**names)
    cells = dict(zip(free, fn.__closure__ or ()))
    cells[ag_name] = types.CellType(ag_module)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells[n] for n in code.co_freevars))
    new.__kwdefaults__, new.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    new.__module__, new.__doc__ = fn.__module__, fn.__doc__
    return new
