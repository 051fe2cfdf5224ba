"""ctc_loss (Graves et al.'s connectionist temporal classification) as PyTorch's: the
log-space forward recursion over the blank-extended targets, written with differentiable
ops so that autograd (and a compiled step's trace) derives the backward pass.

Impossible alignments are carried as a large finite negative number rather than -inf: a
log-sum-exp over -inf terms has NaN gradients, which would reach the other samples of the
batch through the shared ops. A sample whose likelihood stays at that floor has an
infinite loss and NaN gradients, as in PyTorch (zero with zero_infinity=True, and then no
gradient).

PyTorch's backward (LossCTC.cpp) returns exp(log_probs) - posterior for the steps t <
input_length, the gradient through log_softmax's logits, not the derivative with respect
to log_probs itself (-posterior): the extra exp(log_probs) term is added with a zero-valued
term of that gradient, so log_probs.grad equals PyTorch's whatever produced log_probs."""
from ..runtime import trace_state
from ..runtime.creation import arange, tensor
from ..runtime.dtypes import bool_, int64
from ..runtime.functions import cat, stack, where
from ..runtime.node_names import rename
from ..runtime.tensor import Tensor
from .functional_loss import _reduction
from ..runtime.vmap_fallback import meta_on_mismatch
from ..runtime.autocast_cast import autocast_float32

__all__ = ["ctc_loss"]

_FLOOR = -1e30          # log 0 of an unreachable state (finite: see the module's doc)


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


def _logsumexp(*terms):
    m = terms[0]
    for t in terms[1:]:
        m = m.maximum(t)
    m = m.detach()
    total = (terms[0] - m).exp()
    for t in terms[1:]:
        total = total + (t - m).exp()
    return m + total.log()


def _nan_grad_inf(log_probs, valid, impossible):
    """inf for each impossible sample, with PyTorch's NaN gradient at its steps t <
    input_length (whatever the incoming gradient, zero included): -log(0 * z) of a
    zero-valued z, where 0 * (-g / 0) is NaN; the other samples see -log(1) and no gradient."""
    lp = log_probs.detach()
    z = (where(valid, log_probs, lp) - lp).sum((0, 2)) * 0.0
    return -where(impossible, z, 1.0).log()


@meta_on_mismatch
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """As torch.nn.functional.ctc_loss: log_probs (T, N, C) (or (T, C)), targets (N, S)
    padded or concatenated, lengths as tensors or sequences of ints."""
    log_probs, = autocast_float32(log_probs)
    reduction = _reduction(reduction)
    unbatched = log_probs.dim() != 3
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
    S = targets.shape[1]
    L = 2 * S + 1
    pos = arange(L)
    label_at = ((pos - 1) // 2).clamp(0, max(S - 1, 0))
    is_label = (pos % 2 == 1).unsqueeze(0)
    ext = where(is_label, targets[:, label_at], blank) if S else \
        targets.new_zeros((N, L)) + blank                                       # (N, L)
    ext = ext.clamp(0, C - 1)
    # a label may follow the label two positions back unless the two are equal
    ext_back2 = cat([ext.new_full((N, 2), -1), ext[:, :-2]], 1)
    skip = is_label & (pos >= 2).unsqueeze(0) & (ext != ext_back2)
    floor2 = log_probs.new_full((N, 2), _FLOOR)
    # a step is a few ops whatever L (eagerly each op costs its dispatch and its node): the
    # windows (alpha[s-2], alpha[s-1], alpha[s]) as one unfold view, the skip's ban as a
    # FLOOR added to the first (exp of it is 0 all the same), one logsumexp; the emissions
    # gathered for all steps at once, read by unbind (one StackBackward, not T scatters
    # into zeros of log_probs' size)
    ban = log_probs.new_full((N, L), _FLOOR).masked_fill(skip, 0.0)
    ban = stack([ban, ban.new_zeros((N, L)), ban.new_zeros((N, L))], 2)            # (N, L, 3)
    emit = log_probs.gather(2, ext.unsqueeze(0).expand(T, N, L)).unbind(0)
    active = (arange(T).unsqueeze(1) < input_lengths.unsqueeze(0)).unsqueeze(2).unbind(0)

    start = pos.unsqueeze(0) < (target_lengths.unsqueeze(1) > 0).to(int64) + 1     # s in {0,1}
    alpha = where(start, emit[0], _FLOOR)
    for t in range(1, T):
        windows = cat([floor2, alpha], 1).unfold(1, 3, 1) + ban
        alpha = where(active[t], windows.logsumexp(2) + emit[t], alpha)
    last = (2 * target_lengths).unsqueeze(1)
    end_blank = alpha.gather(1, last).squeeze(1)
    end_label = where(target_lengths > 0, alpha.gather(1, (last - 1).clamp_min(0)).squeeze(1),
                      _FLOOR)
    log_likelihood = _logsumexp(end_blank, end_label)
    # no input steps: alpha above read step 0 all the same; only the empty target aligns
    log_likelihood = where(input_lengths > 0, log_likelihood,
                           where(target_lengths > 0, _FLOOR, 0.0))
    impossible = log_likelihood < _FLOOR / 2
    # (zero-valued: adds exp(log_probs) to the gradient of the steps t < input_length)
    valid = (arange(T).unsqueeze(1) < input_lengths.unsqueeze(0)).unsqueeze(2)    # (T, N, 1)
    probs = log_probs.exp()
    softmax_term = ((probs - probs.detach()) * valid).sum((0, 2))
    inf = float("inf") if zero_infinity else _nan_grad_inf(log_probs, valid, impossible)
    nll = rename(where(impossible, inf, -log_likelihood + softmax_term), "CtcLossBackward0")
    if zero_infinity:
        nll = where(impossible, 0.0, nll)
    if reduction == "mean":
        return (nll / target_lengths.clamp_min(1).to(nll.dtype)).mean()
    if reduction == "sum":
        return nll.sum()
    return nll.squeeze(0) if unbatched else nll
