"""Shared pieces of the optimisers' state: the step counter (a 0-d float32 tensor, as
PyTorch keeps it when capturable=False) and the conversion of old checkpoints whose step
is a number."""
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
