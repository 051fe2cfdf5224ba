"""Shared pieces of the optimisers' state: the step counter (a 0-d float32 tensor, as
PyTorch keeps it when capturable=False), the conversion of old checkpoints whose step
is a number, and the real views an optimiser updates a complex parameter through."""
from ..runtime.creation import tensor
from ..runtime.tensor import Tensor


def new_step(value=0.0):
    return tensor(float(value), device="cpu")     # (under `with device("meta")` too)


def tensor_steps(opt, keys=("step",)):
    """__setstate__: state values saved as numbers (old PyTorch checkpoints) become tensors."""
    for group in opt.param_groups:
        for p in group["params"]:
            s = opt.state.get(p)
            if not s:
                continue
            for k in keys:
                if k in s and not isinstance(s[k], Tensor):
                    s[k] = new_step(s[k])


def real_views(p, grad, state):
    """(p, grad, state) of a complex parameter as PyTorch's optimisers take them: the real
    views (view_as_real) of the parameter, its gradient and its state tensors of its shape,
    so the update treats real and imaginary parts as two real numbers; updates in place
    through them reach the complex tensors. A real parameter's are returned as they are."""
    if not p._dtype.is_complex:
        return p, grad, state
    views = {k: v._op("view_as_real") if isinstance(v, Tensor) and v._dtype.is_complex else v
             for k, v in state.items()}
    return p._op("view_as_real"), grad._op("view_as_real"), views
