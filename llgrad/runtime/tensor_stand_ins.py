"""torch.tensor of a compiled function's changing Python numbers (SymbolicScalars, which
stand for them while it is traced: symbolic_scalar.py): a reward or an action given as a
Python number (the DQN tutorial's `torch.tensor([reward])`, `torch.tensor([[action]],
dtype=torch.long)`), a draw from the random module (`torch.tensor([random.random()])`,
compile/py_draws.py) or a number read with .item(), in nested lists of Python numbers.

torch.tensor (creation.tensor, wrapped by wrap_tensor_stand_ins) makes the constant tensor
eager makes of this call's numbers, and the stand-ins' graph values are put at their places,
cast as torch.full casts its fill value (symbolic_uses.fill_value_fits, which guards the cast
exact for every number the guards let through, or reads the number: then the value is
guarded). So one trace serves every value, where reading the numbers would trace each new
value again (and a draw could not be replayed at all)."""
import functools

import numpy as np

from ..ir import OPS
from . import creation, symbolic_uses, trace_state
from .dispatch import call
from .symbolic_scalar import SymbolicScalar
from .tensor import Tensor


class _NotPlain(Exception):
    """A leaf of torch.tensor's data other than a Python number or a stand-in."""


def stand_ins_in(data):
    """(data with each stand-in replaced by this call's number, [the stand-in or None per
    leaf, in order]) where data (a number or nested lists / tuples of Python numbers) holds
    a stand-in; None otherwise (tensors, NumPy numbers: the plain path reads them)."""
    if type(data) not in (list, tuple, SymbolicScalar):
        return None
    leaves = []

    def plain(x):
        if type(x) in (list, tuple):
            return [plain(v) for v in x]
        if type(x) is SymbolicScalar:
            leaves.append(x)
            return x.value
        if type(x) not in (int, float, bool):
            raise _NotPlain
        leaves.append(None)
        return x
    try:
        numbers = plain(data)
    except _NotPlain:
        return None
    return (numbers, leaves) if any(x is not None for x in leaves) else None


def put_stand_ins(base, leaves):
    """base (the tensor of this call's numbers) with the stand-ins' graph values in place of
    theirs (leaves: per element of base, in order, the stand-in or None)."""
    if base.numel() != len(leaves):
        return base
    d = base.dtype
    flat = base.reshape(-1)
    for k, s in enumerate(leaves):
        if s is not None:
            value = call(OPS["full"], (), {"shape": (1,), "dtype": d.name,
                                           "value": symbolic_uses.fill_value_fits(s, d)})
            flat = flat.index_put((Tensor._from_array(np.array([k], np.int64)),), value)
    return flat.reshape(base.shape)


def wrap_tensor_stand_ins():
    """creation.tensor (llgrad.tensor) taking stand-ins in a trace (not for a tensor that
    requires grad: a leaf made inside a compiled function keeps its eager fallback)."""
    plain_tensor = creation.tensor

    @functools.wraps(plain_tensor)
    def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
        if trace_state.state.tracer is not None and not requires_grad:
            found = stand_ins_in(data)
            if found is not None:
                return put_stand_ins(plain_tensor(found[0], dtype, device, False, pin_memory),
                                     found[1])
        return plain_tensor(data, dtype, device, requires_grad, pin_memory)
    creation.tensor = tensor
