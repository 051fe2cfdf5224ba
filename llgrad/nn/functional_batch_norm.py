"""F.batch_norm's eager update of the running statistics from the batch statistics the
training forward has just computed (ir/ops_batch_norm.py: take_stats), in place of a mean and
a var over the input (a float64 var of a float32 batch was a second and a third pass over
it). Traced, F.batch_norm updates them by tensor ops instead (recorded in the graph)."""
import numpy as np

from ..ir.ops_batch_norm import take_stats
from ..runtime import buffer_update, grad_mode
from ..runtime.tensor import Tensor


def update_running_stats(input, running_mean, running_var, momentum):
    """running_mean / running_var (either may be None) = (1 - momentum) * themselves +
    momentum * the batch's mean / unbiased variance over (0, 2, ...), as F.batch_norm's
    tensor ops (the statistics in float64, rounded to the input's dtype, then to the
    buffer's); False (nothing done) where the forward does not compute them."""
    stats = None if input.is_meta else take_stats(input._data)
    if stats is None:       # (a meta input: the tensor ops, on meta buffers)
        return False
    mean, ss, count = stats
    dt = input._data.dtype
    with grad_mode.no_grad():
        if running_mean is not None:
            m = mean.astype(dt)
            if not buffer_update.blend(running_mean, m, momentum):
                running_mean.mul_(1 - momentum).add_(
                    Tensor._from_array(m).to(running_mean.dtype), alpha=momentum)
        if running_var is not None:
            v = np.asarray(ss / (count - 1)).astype(dt)
            if not buffer_update.blend(running_var, v, momentum):
                running_var.mul_(1 - momentum).add_(
                    Tensor._from_array(v).to(running_var.dtype), alpha=momentum)
    return True
