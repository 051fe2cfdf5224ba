"""ctc_loss (Graves et al.'s connectionist temporal classification) as PyTorch's: the
checks of its arguments and lengths, concatenated targets padded to (N, S), then the
ctc_loss op (llgrad/ir/ops_ctc.py, torch's _ctc_loss: the log-space alpha recursion in
NumPy, and its backward op's beta recursion and PyTorch's gradient formula), zero_infinity
and the reduction as PyTorch's ctc_loss applies them.

An impossible alignment gives an infinite loss and NaN gradients at its steps t <
input_length, as in PyTorch (zero with zero_infinity=True, and then a zero gradient).
PyTorch's gradient is exp(log_probs) - posterior for the steps t < input_length (the
gradient through log_softmax's logits, not the derivative with respect to log_probs
itself): the op's backward returns that, so log_probs.grad equals PyTorch's."""
from ..runtime import trace_state
from ..runtime.creation import arange, tensor
from ..runtime.dispatch import scalar_type_name
from ..runtime.dtypes import bool_, float32, float64, int64
from ..runtime.functions import where
from ..runtime.tensor import Tensor
from .functional_loss import _reduction
from ..runtime.vmap_fallback import meta_on_mismatch
from ..runtime.autocast_cast import autocast_float32

__all__ = ["ctc_loss"]


def _check_length_kinds(input_lengths, target_lengths):
    """PyTorch's two signatures: both lengths tensors or both sequences of ints."""
    def is_ints(v):
        return isinstance(v, (list, tuple)) and all(
            hasattr(i, "__index__") and not isinstance(i, bool) for i in v)
    pair = (input_lengths, target_lengths)
    if not (all(isinstance(v, Tensor) for v in pair) or all(is_ints(v) for v in pair)):
        raise TypeError("ctc_loss() received an invalid combination of arguments - got "
                        f"({type(input_lengths).__name__}, {type(target_lengths).__name__}) "
                        "lengths, but expected two Tensors or two tuples of ints")


def _lengths(lengths, n, name):
    if isinstance(lengths, (list, tuple)):
        lengths = tensor([int(i) for i in lengths], dtype=int64)
    elif lengths.dtype.is_floating_point or lengths.dtype == bool_:
        raise RuntimeError(f"{name} must be integral")
    lengths = lengths.to(int64).reshape(-1)
    if lengths.numel() != n:
        raise RuntimeError(f"{name} must be of size batch_size")
    return lengths


def _check_lengths(log_probs, targets, input_lengths, target_lengths):
    """ctc_loss_allocate_outputs' checks of the lengths against the inputs (eagerly: a trace
    reads no lengths)."""
    where = " (while checking arguments for ctc_loss_allocate_outputs)"
    tl, il = target_lengths.tolist(), input_lengths.tolist()
    for n in tl:
        if n < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got "
                               f"value {n}{where}")
    want, dim = (sum(tl), 0) if targets.dim() == 1 else (len(tl), 0)
    if targets.shape[dim] != want:
        raise RuntimeError(f"Expected tensor to have size {want} at dimension {dim}, but got "
                           f"size {targets.shape[dim]} for argument #2 'targets'{where}")
    if targets.dim() == 2 and targets.shape[1] < max(tl, default=0):
        raise RuntimeError(f"Expected tensor to have size at least {max(tl)} at dimension 1, "
                           f"but got size {targets.shape[1]} for argument #2 'targets'{where}")
    for n in il:
        if not 0 <= n <= log_probs.shape[0]:
            bound = "least 0" if n < 0 else f"most {log_probs.shape[0]}"
            raise RuntimeError(f"Expected input_lengths to have value at {bound}, but got "
                               f"value {n}{where}")


def _lengths_fit(log_probs, targets, input_lengths, target_lengths):
    """_check_lengths' conditions as tensor ops (a 0-d bool): whether all pass."""
    il, tl = input_lengths, target_lengths
    fit = (il >= 0).all() & (il <= log_probs.shape[0]).all() & (tl >= 0).all()
    if targets.dim() == 1:
        return fit & (tl.sum() == targets.shape[0])
    return fit & (tl.shape[0] == targets.shape[0]) & (tl <= targets.shape[1]).all()


def _padded_targets(targets, target_lengths, given, n):
    """(N, S) targets from padded (N, S) or concatenated (sum(target_lengths),) ones."""
    if targets.dim() == 2:
        return targets
    if isinstance(given, (list, tuple)):
        s_max = max(given, default=0)
    elif trace_state.state.tracer is None:
        s_max = int(target_lengths.max()) if n else 0
    else:       # (a trace reads no lengths: an upper bound; the padding changes nothing)
        s_max = targets.numel()
    s_max = max(s_max, 1)
    offsets = target_lengths.cumsum(0) - target_lengths
    index = offsets.unsqueeze(1) + arange(s_max).unsqueeze(0)                 # (N, S)
    inside = arange(s_max).unsqueeze(0) < target_lengths.unsqueeze(1)
    flat = targets.reshape(-1)
    if flat.numel() == 0:
        return index.new_zeros((n, s_max))
    return flat[index.clamp(0, flat.numel() - 1)].masked_fill(~inside, 0)


@meta_on_mismatch
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """As torch.nn.functional.ctc_loss: log_probs (T, N, C) (or (T, C)), targets (N, S)
    padded or concatenated, lengths as tensors or sequences of ints."""
    log_probs, = autocast_float32(log_probs)
    reduction = _reduction(reduction)
    unbatched = log_probs.dim() != 3
    if log_probs.dtype not in (float32, float64):       # (ATen's kernel: float and double)
        raise NotImplementedError(f'"ctc_loss_cpu" not implemented for '
                                  f"'{scalar_type_name(log_probs.dtype)}'")
    if log_probs.dim() != 2 and unbatched:      # (ATen unsqueezes any but a 3-d one first)
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {log_probs.dim() + 1}-"
                           "dimensional tensor for argument #1 'log_probs' (while checking "
                           "arguments for ctc_loss_allocate_outputs)")
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.dim() == 1 else targets
    T, N, C = log_probs.shape
    if log_probs.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    given_targets = target_lengths
    _check_length_kinds(input_lengths, target_lengths)
    input_lengths = _lengths(input_lengths, N, "input_lengths")
    target_lengths = _lengths(target_lengths, N, "target_lengths")
    if trace_state.state.tracer is None or not bool(_lengths_fit(
            log_probs, targets, input_lengths, target_lengths)):
        # (traced, the checks are one value guard: a compiled call raises as eager does)
        _check_lengths(log_probs, targets, input_lengths, target_lengths)
    targets = _padded_targets(targets.to(int64), target_lengths, given_targets, N)
    nll, _ = log_probs._op("ctc_loss", targets, input_lengths, target_lengths,
                           blank=int(blank), zero_infinity=bool(zero_infinity))
    if zero_infinity:           # (PyTorch's: where(res == inf, 0, res))
        nll = where(nll == float("inf"), 0.0, nll)
    if reduction == "mean":
        return (nll / target_lengths.clamp_min(1).to(nll.dtype)).mean()
    if reduction == "sum":
        return nll.sum()
    return nll.squeeze(0) if unbatched else nll
