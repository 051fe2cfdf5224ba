"""Default argument values, passed explicitly to the compiled function's trace and guard
walk."""
import inspect


def default_filler(fn):
    """None for a callable that is not a Python function (or a method of one), else
    fill(args, kwargs) -> (args, kwargs) with every default value the call leaves out
    passed explicitly, read from fn at the call: the guards walk them as arguments (a list
    default changed in place, a tensor default written, `fn.__defaults__ = ...`), and the
    traced function, a rewritten copy of fn (tracer/convert.py), never reads its own."""
    f = getattr(fn, "__func__", fn) if inspect.ismethod(fn) else fn
    if not inspect.isfunction(f):
        return None
    argc = f.__code__.co_argcount - (f is not fn)

    def fill(args, kwargs):
        d, kd = f.__defaults__, f.__kwdefaults__
        if not kwargs and kd is None:
            n = argc - len(args)            # (the common call: positional arguments)
            if d is None or n <= 0 or n > len(d):
                return args, kwargs         # (n > len(d): eager's TypeError)
            return args + d[len(d) - n:], kwargs
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return args, kwargs
        bound.apply_defaults()
        return bound.args, bound.kwargs
    return fill
