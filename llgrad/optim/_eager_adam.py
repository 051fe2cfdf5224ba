"""Adam's and AdamW's eager update of one parameter without the dispatcher's per-op
bookkeeping: the same ops of the table as Adam.step's tensor calls (dispatch.run_impl on the
same operands and attributes, so the values are those of the tensor calls, bit for bit, native
kernels included), each in-place result written into its tensor with the version bump and
write location call_inplace gives it. It serves only the common case (no tracer, no vmap,
Python-number hyper-parameters, plain writable float tensors of one dtype and shape, no
maximize); anything else returns False before writing and Adam.step's tensor calls run
(their checks and messages included). A C-contiguous parameter takes one native
loop for all of it (compile/eager_optim.py), the same operations in the same order: the same
bits again; a parameter of _NATIVE_MIN elements or more starts the loop's build, which then
serves every size (a script of small parameters only never loads LLVM's code). AMSGrad is
served too (its running maximum of exp_avg_sq as max_sq.copy_(max_sq.maximum(...)) writes it:
PyTorch's DQN tutorial trains with it, and its tensor calls made the step 3x the plain one's)."""
import math

import numpy as np

from ..compile import eager_optim
from ..ir import OPS
from ..ir.np_address import data_pointer
from ..nn.parameter import Parameter
from ..runtime import dispatch, trace_state
from ..runtime.dtypes import float32, float64
from ..runtime.saved_tensor import user_position
from ..runtime.tensor import Tensor

_ADD, _MUL, _DIV, _SQRT, _LERP, _ADDCMUL, _MAXIMUM = (
    OPS[n] for n in ("add", "mul", "div", "sqrt", "lerp", "addcmul", "maximum"))
_FLOATS = (float32, float64)
_NUMBERS = (int, float)
_tstate = trace_state.state
_new = Tensor._from_array
_NATIVE_MIN = 4096      # (elements: below it the NumPy passes cost less than LLVM's load)
_PLAIN = (Tensor, Parameter)     # (a subclass of its own may override the tensor calls)
ENABLED = True          # (tests turn it off to compare with the tensor calls)
_DTYPE_NAMES = {}       # NumPy dtype -> its name (dtype.name is a Python property: ~3 us)


def usable(group):
    """Whether the group's hyper-parameters allow the update here (then the caller takes
    one write location for the step with where())."""
    if not ENABLED or _tstate.tracer is not None or dispatch.batching is not None or \
            group["maximize"]:
        return False
    beta1, beta2 = group["betas"]
    return all(type(v) in _NUMBERS for v in (group["lr"], group["eps"], group["weight_decay"],
                                             beta1, beta2))


def where():
    return user_position()


def _plain(t, dt, shape):
    return type(t) in _PLAIN and t._dtype is dt and t._data.shape == shape and \
        not t._inference


def _write(t, out, loc):
    t._data[...] = out
    st = t._storage
    st.version += 1
    st.write_loc = loc


def _same(tmp, out):
    """An in-place result written into a temporary of the update: out itself where the write
    would not change it (same dtype and shape)."""
    if out.dtype == tmp.dtype and out.shape == tmp.shape:
        return out
    tmp[...] = out
    return tmp


def update(p, grad, state, group, loc):
    """Adam.step's update of p (its gradient grad, its state), or False (nothing written)."""
    dt = p._dtype
    if dt not in _FLOATS:
        return False
    shape = p._data.shape
    step_t, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
    max_sq = state["max_exp_avg_sq"] if group["amsgrad"] else None
    if not (_plain(p, dt, shape) and _plain(grad, dt, shape) and _plain(exp_avg, dt, shape)
            and _plain(exp_avg_sq, dt, shape) and type(step_t) is Tensor
            and (max_sq is None or _plain(max_sq, dt, shape))
            and step_t._data.size == 1 and step_t._dtype._cat == 2 and not step_t._inference):
        return False
    for t in (p, exp_avg, exp_avg_sq, step_t) + (() if max_sq is None else (max_sq,)):
        if not t._data.flags.writeable:
            return False
    run = dispatch.run_impl
    beta1, beta2 = group["betas"]
    lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
    # (the calls of Adam.step, in order: each comment is the tensor call it stands for)
    _write(step_t, run(_ADD, (step_t, 1), {"alpha": 1}), loc)          # step.add_(1)
    if _native(p, grad, exp_avg, exp_avg_sq, max_sq, group, step_t, loc):
        return True
    if weight_decay != 0:
        if group["decoupled_weight_decay"]:
            _write(p, run(_MUL, (p, 1 - lr * weight_decay), {}), loc)  # p.mul_(1 - lr * wd)
        else:                                                          # grad.add(p, alpha=wd)
            grad = _new(run(_ADD, (grad, p), {"alpha": weight_decay}))
    _write(exp_avg, run(_LERP, (exp_avg, grad, 1 - beta1), {}), loc)
    _write(exp_avg_sq, run(_MUL, (exp_avg_sq, beta2), {}), loc)
    _write(exp_avg_sq, run(_ADDCMUL, (exp_avg_sq, grad, grad), {"value": 1 - beta2}), loc)
    step = step_t.item()
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    step_size = lr / bias_correction1
    if max_sq is not None:                      # max_sq.copy_(max_sq.maximum(exp_avg_sq))
        _write(max_sq, run(_MAXIMUM, (max_sq, exp_avg_sq), {}), loc)
    denom = _new(run(_SQRT, (exp_avg_sq if max_sq is None else max_sq,), {}))     # .sqrt()
    denom = _new(run(_DIV, (denom, bias_correction2_sqrt), {}))        # / bias_correction2
    denom = _new(_same(denom._data, run(_ADD, (denom, eps), {"alpha": 1})))     # .add_(eps)
    upd = _new(run(_MUL, (exp_avg, -step_size), {}))                   # exp_avg.mul(-size)
    upd = _new(_same(upd._data, run(_DIV, (upd, denom), {})))          # .div_(denom)
    _write(p, run(_ADD, (p, upd), {"alpha": 1}), loc)                  # p.add_(...)
    return True


def _native(p, grad, exp_avg, exp_avg_sq, max_sq, group, step_t, loc):
    """The rest of the update (after the step count's) as one native loop
    (compile/eager_optim.py), when the four (AMSGrad: five) arrays are C-contiguous, the
    constants finite in the dtype and the kernel ready; False otherwise (nothing written)."""
    arrays = (p._data, grad._data, exp_avg._data, exp_avg_sq._data) + \
        (() if max_sq is None else (max_sq._data,))
    if not all(a.flags.c_contiguous for a in arrays):
        return False
    for i, a in enumerate(arrays):      # (the loop's pointers are noalias)
        for b in arrays[i + 1:]:
            if np.may_share_memory(a, b):
                return False
    beta1, beta2 = group["betas"]
    lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
    decay = "none" if weight_decay == 0 else \
        "decoupled" if group["decoupled_weight_decay"] else "l2"
    near = abs(1 - beta1) < 0.5         # (lerp's formula for this weight: _lerp's choice)
    dt = arrays[0].dtype
    name = _DTYPE_NAMES.get(dt) or _DTYPE_NAMES.setdefault(dt, dt.name)
    fn = eager_optim.adam_kernel(name, near, decay, start=arrays[0].size >= _NATIVE_MIN,
                                 amsgrad=max_sq is not None)
    if fn is None:
        return False
    step = step_t.item()
    bias_correction1 = 1 - beta1 ** step
    if bias_correction1 == 0:   # (beta1 == 1: the loop's path writes the moments, then raises
        return False            # ZeroDivisionError as PyTorch's step does)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    # each constant as the tensor calls' NumPy ops take a Python number: the dtype's value
    ty = arrays[0].dtype.type
    with np.errstate(over="ignore"):
        consts = [ty(v) for v in (
            (1 - lr * weight_decay) if decay == "decoupled" else weight_decay,
            (1 - beta1) if near else ty(1) - ty(1 - beta1), beta2, 1 - beta2,   # (as _lerp)
            bias_correction2_sqrt, eps, -(lr / bias_correction1))]
    # (math.isfinite of each: np.isfinite's answers, without an array and .all()'s wrapper;
    # data_pointer: a.ctypes.data without the ctypes object made per read)
    if not all(map(math.isfinite, consts)) or consts[4] == 0:
        return False
    fn(*map(data_pointer, arrays), arrays[0].size, *consts)
    written = ((p, 2 if decay == "decoupled" else 1), (exp_avg, 1), (exp_avg_sq, 2)) + \
        (() if max_sq is None else ((max_sq, 1),))
    for t, writes in written:
        st = t._storage
        st.version += writes
        st.write_loc = loc
    return True
