"""The lean call path of a compiled function: a flat guard key for the common call.

`guards.collect` walks arguments, objects and their attributes and names every guard so
that a recompile can say which one changed; that costs tens of microseconds. Most calls
pass only tensors and Python numbers, positionally, to a plain function. For those,
`fast_key` builds one flat tuple, in a few microseconds, that determines the full guard key
(same tensors, dtypes, shapes, strides, requires_grad, .grad layouts, numbers, grad mode),
and the tensor inputs in the order collect() gives them. A CompiledFunction remembers
fast key -> full key after a full walk, so a repeated call skips the walk; anything else
(keyword arguments, containers, modules, a tensor passed twice) returns None and takes the
full walk."""
from . import grad_mode
from .tensor import Tensor

_NUMBERS = (int, float, bool)


def fast_key(args):
    """(flat key, tensor inputs) for positional tensors and numbers, else None."""
    parts, tensors, grads = [], [], None
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            g = a._grad
            rg = a._requires_grad or (a._base is not None and a.grad_fn is not None)
            if g is None:
                parts.append((d.dtype, d.shape, d.strides, rg))
            else:
                gd = g._data
                parts.append((d.dtype, d.shape, d.strides, rg, gd.dtype, gd.shape,
                              gd.strides))
                grads = [g] if grads is None else grads + [g]
            tensors.append(a)
        elif type(a) in _NUMBERS:
            parts.append((type(a), a))
        else:
            return None
    if len(tensors) > 1 and len(set(map(id, tensors))) != len(tensors):
        return None                  # a tensor passed twice: the full walk decides
    if grads is not None:
        everything = tensors + grads
        if len(set(map(id, everything))) != len(everything):
            return None              # a .grad that is also an input (or shared)
        tensors = everything
    st = grad_mode.state
    parts.append(st.grad_enabled)
    parts.append(st.inference)
    return tuple(parts), tensors


def plain_function(fn):
    """Whether fn's guards come from its arguments alone (not a bound method, a module or
    another object with state, whose attributes collect() must walk)."""
    import inspect
    if isinstance(getattr(fn, "_plain", None), bool):       # a CompiledFunction (a transform)
        return fn._plain
    return inspect.isfunction(fn) or (inspect.isbuiltin(fn) and
                                      getattr(fn, "__self__", None) is None)
