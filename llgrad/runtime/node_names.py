"""PyTorch's grad_fn names for ops llgrad computes as compositions of the op table's ops
(torch.median's MedianBackward0, where llgrad's last op is a where): the result's node, made
by that call, takes PyTorch's name; its rule (the last op's) and edges stay as they are."""
import functools

from .node import OpNode, node_class


def rename(out, name, inputs=()):
    """out (a tensor or a tuple of them) with each fresh node renamed `name` (a str, or
    fn(tensor) -> str); a result that is one of `inputs` (returned as it came) keeps its
    node."""
    for t in out if isinstance(out, tuple) else (out,):
        fn = getattr(t, "_grad_fn", None)
        if isinstance(fn, OpNode) and not any(t is x for x in inputs):
            n = name(t) if callable(name) else name
            if type(fn).__name__ != n:
                fn.__class__ = node_class(n)
    return out


def torch_node(name):
    """Decorator: the function's result gets the grad_fn name `name` (see rename); name may
    be fn(*args, **kwargs) -> str."""
    def wrap(fn):
        @functools.wraps(fn)
        def f(*args, **kwargs):
            n = name(*args, **kwargs) if callable(name) else name
            return rename(fn(*args, **kwargs), n, args + tuple(kwargs.values()))
        return f
    return wrap
