"""The source transformation of tensor-dependent control flow (AutoGraph's approach).

Before tracing, the function's AST is rewritten (converter.py; rules.py holds the analyses):

    if c: A else: B   ->  def if_true_1(y, z): A; return (y, z)
                          def if_false_1(y, z): B; return (y, z)
                          (y, z) = ag__.if_stmt(c, if_true_1, if_false_1, (y, z), ('y', 'z'), loc)
    while c: A        ->  def while_test_1(x, i): return c
                          def while_body_1(x, i): A; return (x, i)
                          (x, i) = ag__.while_stmt(while_test_1, while_body_1, (x, i), ..., loc)
    a if c else b     ->  ag__.if_exp(c, lambda: a, lambda: b, loc)
    a and b, a or b, not a (in a condition) -> ag__.and_(lambda: a, lambda: b), ag__.or_, ag__.not_
    a < b < c (in a condition) -> ag__.compare(('<', '<'), lambda: a, lambda: b, lambda: c)

where (y, z) are the variables the statement assigns that are read later (or read before
being assigned inside it), `ag__` is tracer/control.py, which decides at run time: a traced
tensor condition becomes a `cond` / `while_loop` node, anything else runs as Python.
`return` at the end of both branches (or of a branch and of the code after the if) becomes
an assignment and one return after the if. A statement holding what cannot be converted
(break, continue, another return, an attribute assignment, del, global) is left as Python
with its condition checked: a tensor there is an error naming both lines. An if holding
`raise` is left as Python (a tensor condition there stays a value guard).

The rewritten function keeps the user's file name and line numbers (source locations in the
IR are unchanged), globals (the function's own dict, live), closure cells, defaults and
keyword defaults. Methods, nested functions and closures convert; a decorator that wraps
with functools.wraps is seen through (the wrapped function is converted and put back into
the wrapper's closure). No source (a lambda typed at a prompt, a builtin): a one-line
warning, and the function is traced as it is. Functions the converted function calls are not
converted (AutoGraph's converted_call is not done): a tensor condition in one of them stays
a value guard, as without the transformation."""
import ast
import inspect
import types
import warnings

from ..runtime.user_frames import user_stacklevel
from . import control
from .rebuild import build, filled, function_node
from .converter import AG, _Converter
from .rules import branches, contains


def convert(fn, control_flow=True):
    """-> (the function to trace, its rewritten source or None when nothing changed).
    control_flow=False rewrites the returned `.item()` calls alone (if/while stay Python:
    the tracing of the converted control flow failed, its conditions become value guards)."""
    if isinstance(fn, types.MethodType):
        f, src = convert(fn.__func__, control_flow)
        return (fn if f is fn.__func__ else types.MethodType(f, fn.__self__)), src
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return _fallback(fn, "it is a builtin")
    if not isinstance(fn, types.FunctionType):
        return fn, None             # a module, a partial, ...: traced as it is
    inner = getattr(fn, "__wrapped__", None)
    if inner is not None:
        return _through_decorator(fn, inner, control_flow)
    if not branches(fn.__code__, ("item", "numpy", "tolist"), ("float", "int")):  # (returns)
        return fn, None             # nothing to rewrite: skip reading and parsing its source
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError) as e:
        return _fallback(fn, f"no source ({e})")
    try:
        fdef = function_node(fn, source)
    except SyntaxError as e:
        return _fallback(fn, f"its source does not parse alone ({e.msg})")
    if fdef is None:
        return _fallback(fn, "its definition could not be located in its source")
    if isinstance(fdef, ast.AsyncFunctionDef) or contains(fdef.body, (ast.Yield, ast.YieldFrom)):
        return fn, None             # generators and coroutines run as they are
    conv = _Converter(fdef, fn.__code__.co_filename, "__class__" in fn.__code__.co_freevars,
                      control_flow)
    fdef = conv.function(fdef)
    if not conv.changed:
        return fn, None
    import astunparse   # (only for a rewritten function: most have nothing to rewrite, and
    #                     astunparse and six cost ~3 ms of a warm process's first trace)
    return build(fn, fdef, AG, control), astunparse.unparse(fdef).strip() + "\n"


def _fallback(fn, why):
    name = getattr(fn, "__qualname__", repr(fn))
    warnings.warn(f"llgrad.compile: {name} is traced without converting its control flow "
                  f"({why}); tensor-dependent if/while in it become value guards",
                  RuntimeWarning, stacklevel=user_stacklevel())
    return fn, None


def _through_decorator(fn, inner, control_flow):
    conv, src = convert(inner, control_flow)
    if conv is inner:
        return fn, None
    cells = fn.__closure__ or ()
    if not any(c.cell_contents is inner for c in cells if filled(c)):
        return _fallback(fn, "its decorator does not hold the wrapped function in a closure")
    closure = tuple(types.CellType(conv) if filled(c) and c.cell_contents is inner else c
                    for c in cells)
    new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                             closure)
    new.__kwdefaults__, new.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    new.__wrapped__ = conv
    return new, src
