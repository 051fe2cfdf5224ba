"""ctc_loss as PyTorch's ops of its own (LossCTC.cpp): ctc_loss (torch's _ctc_loss: each
sample's negative log likelihood and the log-alpha table, (N, T, 2 * S + 1)) and
ctc_loss_backward (torch's _ctc_loss_backward: the beta recursion and the gradient with
respect to log_probs), llgrad/nn/functional_ctc.py's F.ctc_loss around them.

The recursions run in NumPy over the batch and the blank-extended label axis at once, one
loop over time, with PyTorch's log-sum-exp (the max of the terms, 0 when all are -inf;
the terms' exps summed in its order). Targets are padded (N, S) (functional_ctc pads
concatenated ones); out-of-range labels are clamped into [0, C) (PyTorch reads outside
its buffer there). Entries PyTorch leaves unwritten (t >= input_length, s > 2 *
target_length) are -inf here.

The gradient is PyTorch's: exp(lp) - exp(logsumexp_s(alpha + beta) + nll - lp) per label
c at the steps t < input_length (the sum over the positions s whose label is c), 0 after,
times the incoming gradient of the sample; zero_infinity zeros an infinite sample's
gradient (without it that gradient is NaN, as PyTorch's). As in PyTorch, the backward is
not itself differentiable: a double backward through it raises PyTorch's error.

Both call back into NumPy from compiled code (native_host: codegen/lowerings/host_call.py)."""
import numpy as np

from .optable import defop, no_derivative

_NEG = -np.inf


def _extended(targets, target_lengths, blank, n_labels):
    """(ext (N, L) labels of the blank-extended targets, skip (N, L): s may follow s - 2,
    valid (N, L): s < 2 * target_length + 1)."""
    n, s = targets.shape
    ext = np.full((n, 2 * s + 1), blank, np.int64)
    ext[:, 1::2] = targets
    np.clip(ext, 0, n_labels - 1, out=ext)
    skip = np.zeros(ext.shape, bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    valid = np.arange(2 * s + 1)[None, :] < (2 * target_lengths + 1)[:, None]
    return ext, skip, valid


def _setup(log_probs, targets, input_lengths, target_lengths, blank):
    T, N, C = log_probs.shape
    il = np.asarray(input_lengths, np.int64).reshape(-1)
    tl = np.asarray(target_lengths, np.int64).reshape(-1)
    ext, skip, valid = _extended(np.asarray(targets, np.int64).reshape(N, -1), tl, blank, C)
    lp = log_probs.transpose(1, 0, 2)                                        # (N, T, C)
    emit = lp[np.arange(N)[:, None, None], np.arange(T)[None, :, None], ext[:, None, :]]
    return T, N, C, il, tl, ext, skip, valid, lp, emit                      # emit (N, T, L)


def _windows(table, step):
    """The (T, 3, N, L) view of a (N, T, L + 2) table padded with two -inf columns that holds
    at [t] the three terms of the recursion at each s in PyTorch's order: (s, s-1, s-2) for
    alpha (step -1, the padding in front), (s, s+1, s+2) for beta (step 1, behind)."""
    (n, t, l2), st, it = table.shape, table.strides, table.itemsize
    base = table[:, :, 2:] if step < 0 else table
    return np.lib.stride_tricks.as_strided(base, (t, 3, n, l2 - 2), (st[1], step * it, st[0], it),
                                           writeable=False)


def _step(terms, ban, emit_t, out, buf):
    """out = logsumexp(terms + ban) + emit_t over the first axis of terms, PyTorch's way: the
    max of the terms (0 where all are -inf), their exps summed in order, the log, plus the
    max. (Slices of one (3, N, L) buffer: NumPy's reductions over a 3-long axis are slow.)"""
    w, m, total = buf
    np.add(terms, ban, out=w)
    np.maximum(w[0], w[1], out=m)
    np.maximum(m, w[2], out=m)
    # (all -inf: the dtype's lowest in place of PyTorch's 0, the same -inf result)
    np.maximum(m, np.finfo(w.dtype).min, out=m)
    np.subtract(w, m, out=w)
    np.exp(w, out=w)
    np.add(w[0], w[1], out=total)
    np.add(total, w[2], out=total)
    np.log(total, out=total)
    np.add(total, m, out=total)
    np.add(total, emit_t, out=out)


def _buffers(n, l, dt):
    return np.empty((3, n, l), dt), np.empty((n, l), dt), np.empty((n, l), dt)


def _ban(skip, dt):
    """(3, N, L): 0, and -inf at the third term where it may not be taken."""
    ban = np.zeros((3,) + skip.shape, dt)
    ban[2] = np.where(skip, 0, _NEG)
    return ban


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    T, N, C, il, tl, ext, skip, valid, lp, emit = _setup(
        log_probs, targets, input_lengths, target_lengths, blank)
    dt, L = log_probs.dtype, ext.shape[1]
    table = np.full((N, T, L + 2), _NEG, dt)
    alpha, windows, ban = table[:, :, 2:], _windows(table, -1), _ban(skip, dt)
    buf = _buffers(N, L, dt)
    with np.errstate(all="ignore"):
        live = valid[:, None, :] & (np.arange(T)[None, :] < il[:, None])[:, :, None]
        emit_a = np.where(live, emit, _NEG).astype(dt, copy=False)
        alpha[:, 0, 0] = emit_a[:, 0, 0]
        if L > 1:
            alpha[:, 0, 1] = emit_a[:, 0, 1]
        for t in range(1, T):
            _step(windows[t - 1], ban, emit_a[:, t], alpha[:, t], buf)
        rows = np.arange(N)
        last = np.maximum(il - 1, 0)
        l1 = alpha[rows, last, np.minimum(2 * tl, L - 1)]
        l2 = np.where(tl > 0, alpha[rows, last, np.maximum(2 * tl - 1, 0)], _NEG)
        m = np.maximum(l1, l2)
        m[m == _NEG] = 0
        ll = np.log(np.exp(l1 - m) + np.exp(l2 - m)) + m
        # (no input steps: only the empty target aligns, as PyTorch's input_length == 0 case)
        ll = np.where(il > 0, ll, np.where(tl > 0, _NEG, 0.0)).astype(dt)
    return np.ascontiguousarray(-ll), np.ascontiguousarray(alpha)


def _beta(T, N, il, tl, skip, emit, dt):
    L = skip.shape[1]
    table = np.full((N, T, L + 2), _NEG, dt)
    beta, windows = table[:, :, :L], _windows(table, 1)
    after = np.zeros(skip.shape, bool)      # (s + 2 may follow s unless their labels are equal)
    after[:, :-2] = skip[:, 2:]
    ban = _ban(after, dt)
    pos = np.arange(L)[None, :]
    ends = (pos == 2 * tl[:, None]) | ((pos == 2 * tl[:, None] - 1) & (tl[:, None] > 0))
    buf, starts = _buffers(N, L, dt), set((il - 1).tolist())
    for t in range(T - 1, -1, -1):
        if t < T - 1:           # (rows t >= input_length stay -inf: all their terms are)
            _step(windows[t + 1], ban, emit[:, t], beta[:, t], buf)
        if t in starts:
            np.copyto(beta[:, t], emit[:, t], where=(t == il - 1)[:, None] & ends)
    return beta


def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, nll, log_alpha,
                       blank=0, zero_infinity=False):
    T, N, C, il, tl, ext, skip, valid, lp, emit = _setup(
        log_probs, targets, input_lengths, target_lengths, blank)
    dt, L = log_probs.dtype, ext.shape[1]
    with np.errstate(all="ignore"):
        beta = _beta(T, N, il, tl, skip, emit, dt)
        steps = (np.arange(T)[None, :] < il[:, None])[:, :, None]           # (N, T, 1)
        ab = np.where(steps & valid[:, None, :], log_alpha + beta, _NEG)    # (N, T, L)
        # logsumexp over the positions s of each label c: per (n, t, c) max, then sums
        idx = ((np.arange(N)[:, None, None] * T + np.arange(T)[None, :, None]) * C
               + ext[:, None, :]).reshape(-1)
        flat = ab.reshape(-1)
        top = np.full(N * T * C, _NEG, dt)
        np.maximum.at(top, idx, flat)
        top[top == _NEG] = 0
        total = np.bincount(idx, np.exp(flat - top[idx]), minlength=N * T * C)
        res = (np.log(total.astype(dt)) + top).reshape(N, T, C)
        nll = np.asarray(nll, dt).reshape(N, 1, 1)
        g = (np.exp(lp) - np.exp(res + nll - lp)) * np.asarray(grad, dt).reshape(N, 1, 1)
        g = np.where(steps, g, 0)
        if zero_infinity:
            g = np.where(nll == np.inf, 0, g)
    return np.ascontiguousarray(g.astype(dt, copy=False).transpose(1, 0, 2))


def _ctc_loss_vjp(c, gs):
    if not c.needs(0) or gs[0] is None:
        return (None, None, None, None)
    g = gs[0]._op("ctc_loss_backward", c.self, c.targets, c.input_lengths, c.target_lengths,
                  c.result0, c.result1, blank=c.blank, zero_infinity=c.zero_infinity)
    return (g, None, None, None)


_ARGS = ("self", "targets", "input_lengths", "target_lengths")
defop("ctc_loss", _ctc_loss, args=_ARGS, nout=2, kind="other",
      save=_ARGS + ("result0", "result1"), nondiff=_ARGS[1:], vjp=_ctc_loss_vjp,
      vjp_reads=(0,), grad_fn="CtcLossBackward0", native_host=True)
defop("ctc_loss_backward", _ctc_loss_backward,
      args=("grad",) + _ARGS + ("neg_log_likelihood", "log_alpha"), kind="other",
      nondiff=_ARGS[1:], vjp=no_derivative("_ctc_loss_backward"), grad_fn="NotImplemented",
      native_host=True)
