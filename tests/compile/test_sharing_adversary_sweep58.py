"""Adversary of code sharing (H3, sweep 58): a fused loop that reads a buffer only at offsets
above 0 takes it from its lowest offset on, so a time loop's steps share one function
(schedule/dedupe.read_bases), and code shared between sizes gives numbers equal at both sizes
it was derived from one table slot (codegen/size_params.py). Every case compares native code
with the IR interpreter or with eager, at offsets, distances and sizes chosen so that a key
missing an offset, or a slot shared by numbers that part at a third size, gives another
answer. (The suite runs with LLGRAD_CHECK_DEDUPE=1: a key hit whose code differs raises.)"""
import math

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.lower import lower
from llgrad.ir.interpret import evaluate


def _steps_rnn(x, w):
    h = x[0] * 0
    outs = []
    for t in range(x.shape[0]):
        h = (x[t] + h @ w).tanh()
        outs.append(h)
    return llgrad.stack(outs)


def _next_and_prev(x, w):
    # three rows a step at distances -1, 0, +1 from the step's lowest
    h = x[0] * 0
    outs = []
    for t in range(1, x.shape[0] - 1):
        h = (x[t + 1] - x[t - 1] + h @ w).tanh() + x[t] * 0.5
        outs.append(h)
    return llgrad.stack(outs)


def _chain(x, w, step, first=0, stop=0):
    # h @ w between the steps keeps each step a group of its own (steps with no dependence
    # between them fuse into one loop over all of them)
    h = x[0] * 0
    outs = []
    for t in range(first, x.shape[0] - stop):
        h = step(x, t, h @ w)
        outs.append(h)
    return llgrad.stack(outs)


def _reversed_and_doubled(x, w):
    n = x.shape[0]
    return _chain(x, w, lambda x, t, hw: (x[n - 1 - t] * 2 + x[2 * (t // 2)] + hw).sigmoid())


def _distance_changes(x, w):
    # the same expression over rows (t, t+1) and (t, t+2): equal up to the distance
    return _chain(x, w, lambda x, t, hw: (x[t] * x[t + 1 + t % 2] + hw).tanh(), stop=2)


def _row_zero_and_row_t(x, w):
    # row 0 read by every step: the buffer stays at its start, the other read moves
    return _chain(x, w, lambda x, t, hw: (x[0] * x[t] + x[t].exp() + hw).tanh())


def _reduction_steps(x, w):
    def step(x, t, hw):
        h = x[t] + hw
        return h * (h * x[t + 1]).sum().tanh()
    return _chain(x, w, step, stop=1)


def _softmax_steps(x, w):
    return _chain(x, w, lambda x, t, hw: (x[t + 1] + hw).softmax(-1) + x[t] * x[t + 1],
                  stop=1)


def _flat_windows(x, w):
    z = x.reshape(-1)
    n = x.shape[1] * x.shape[2]
    return _chain(x, w, lambda x, t, hw: (z[t * n + 1:t * n + 1 + n].reshape(x.shape[1:])
                                          + hw).tanh(), stop=1)


def _int_and_float_rows(x, w):
    xi = (x * 10).to(llgrad.int32)
    return _chain(x, w, lambda x, t, hw: (xi[t + 1] % 3) * x[t] + (xi[t] * 2).float() + hw,
                  stop=1)


def _columns(x, w):
    y = x.permute(1, 0, 2)
    h = y[:, 0] * 0
    outs = []
    for t in range(y.shape[1]):
        h = (y[:, t] + h @ w).tanh()
        outs.append(h)
    return llgrad.stack(outs, 1)


def _rows_groups(x, w):
    outs, h = [], x[0] * 0
    for t in range(x.shape[0]):
        h = F.layer_norm(x[t] + h, (x.shape[-1],))
        outs.append(h.softmax(-1) + x[x.shape[0] - 1 - t].log_softmax(0))
    return llgrad.stack(outs)


def _views_of_views(x, w):
    z = x.reshape(-1)
    a = [z[t::7][:4] + z[t + 1::7][:4] for t in range(5)]
    b = [x[t:][0][1:].narrow(0, 0, 2).tanh() + x[t][:2] for t in range(1, x.shape[0])]
    return llgrad.stack(a), llgrad.stack(b)


def _pieces(x, w):
    ps, cs = x.unbind(0), x.chunk(3, 0)
    return llgrad.stack([p.exp() * 2 for p in ps]), llgrad.cat([q.sum(0) for q in cs])


STEPS = [_steps_rnn, _next_and_prev, _reversed_and_doubled, _distance_changes,
         _row_zero_and_row_t, _reduction_steps, _softmax_steps, _flat_windows,
         _int_and_float_rows, _columns, _rows_groups, _views_of_views, _pieces]


@pytest.mark.parametrize("f", STEPS, ids=[f.__name__.strip("_") for f in STEPS])
def test_steps_reading_moving_rows_compute_what_the_interpreter_does(f):
    llgrad.manual_seed(0)
    x, w = llgrad.randn(6, 3, 5), llgrad.randn(5, 5) * 0.3
    g = llgrad.trace(f, x, w)
    arrays = [x.numpy(), w.numpy()]
    k = lower(g)
    got = k(arrays)
    want, _ = evaluate(g, arrays)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_time_loop_s_steps_share_one_function():
    # (the test above must exercise shared step code, not one function a step)
    x, w = llgrad.randn(12, 3, 5), llgrad.randn(5, 5) * 0.3
    k = lower(llgrad.trace(_steps_rnn, x, w))
    assert k.ir_before.count("\ndefine") < len(k.plan.groups) // 2


def _ceil_pad(x):
    n = x.shape[0]
    k = math.ceil(n / 8)
    p = F.pad(x, (0, 0, 0, k * 8 - n))
    return p.reshape(k, 8, -1).sum(1), x[: n // 2].exp().sum(0), x.chunk(3, 0)[0].tanh()


def _halves(x):
    n = x.shape[0]
    return x[: n // 4].sum(0) * (n % 3) + x[n - 1] + x.reshape(-1)[n:2 * n].exp().sum(), \
        (x.reshape(-1, 8) * 2).softmax(-1)


@pytest.mark.parametrize("f,sizes", [
    (_ceil_pad, [16, 32, 24, 20, 17, 16, 32]),     # ceil(n/8) == n//8 at 16, 32 and 24
    (_halves, [16, 32, 24, 4, 8, 6, 16]),
], ids=["ceil_pad", "halves"])
def test_sizes_whose_numbers_coincide_at_two_sizes_match_eager_at_a_third(f, sizes):
    llgrad.manual_seed(1)
    cf = llgrad.compile(f, recompile_limit=16)
    for n in sizes:
        x = llgrad.randn(n, 8)
        for _ in range(2):                          # (the second call runs native code)
            for a, b in zip(cf(x), f(x)):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
            cf.wait()                               # (in the background mode too)
    shared = [k for e in cf.entries for k in e.kernels.values()
              if getattr(k, "shares_sizes", False)]
    assert shared                                   # (code shared between sizes ran)
    assert not cf.graph_breaks


def _gated_steps(x, w):
    y = x.transpose(0, 1)
    h, hs = y[:, 0] * 0, []
    for t in range(y.shape[1]):
        r, u = (y[:, t] @ w).chunk(2, -1)
        h = r.sigmoid() * h + u.tanh() if t else u.tanh()
        hs.append(F.layer_norm(h, (h.shape[-1],)))
    return llgrad.cat(hs, -1).pow(2).mean() + (y[:, 1:] * y[:, :-1]).sum()


def test_gated_steps_backward_across_batch_sizes_matches_eager():
    llgrad.manual_seed(2)
    cf = llgrad.compile(_gated_steps, recompile_limit=16)
    for b in (4, 8, 6, 4):
        x = llgrad.randn(4, b, 6, requires_grad=True)
        w = (llgrad.randn(6, 6) * 0.3).requires_grad_()
        for _ in range(2):
            l0 = _gated_steps(x, w)
            g0 = llgrad.autograd.grad(l0, [x, w])
            l1 = cf(x, w)
            g1 = llgrad.autograd.grad(l1, [x, w])
            np.testing.assert_allclose(l1.item(), l0.item(), rtol=1e-5)
            for a, c in zip(g1, g0):
                np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-4, atol=1e-6)


def _diff_steps(x, w):
    h, outs = x[0] * 0, []
    for t in range(x.shape[0] - 1):
        h = (x[t + 1] - x[t] + h @ w).tanh()
        outs.append(h)
    return llgrad.stack(outs)


def _rows_in_place(x, w):
    for t in range(1, x.shape[0]):
        x[t] = (x[t] + x[t - 1] @ w).tanh()
    return x[-1].sum()


def test_step_code_given_inputs_at_other_offsets_and_written_in_place_matches_eager():
    llgrad.manual_seed(3)
    big, w = llgrad.randn(12, 4, 5), llgrad.randn(5, 5) * 0.3
    cf = llgrad.compile(_diff_steps, recompile_limit=16)
    for x in (big[1:6], big[2:7], big[:, 1:], big[2:8:2], big[1:6]):
        for _ in range(2):
            np.testing.assert_allclose(cf(x, w).numpy(), _diff_steps(x, w).numpy(),
                                       rtol=1e-5, atol=1e-6)
    cg = llgrad.compile(_rows_in_place, recompile_limit=16)
    for sl in (slice(1, 6), slice(2, 7), slice(0, 5), slice(1, 6)):
        for _ in range(2):
            a, b = big.clone(), big.clone()
            want, got = _rows_in_place(a[sl], w), cg(b[sl], w)
            np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    assert not cf.graph_breaks and not cg.graph_breaks


@pytest.mark.slow
@pytest.mark.parametrize("cls", ["GRU", "LSTM"])
def test_recurrent_layers_backward_across_batch_and_sequence_sizes(cls):
    import llgrad.nn as nn
    llgrad.manual_seed(4)
    m = getattr(nn, cls)(4, 6, num_layers=2, batch_first=True, bidirectional=True,
                         dropout=0.0)
    params = list(m.parameters())

    def loss(x):
        y, _ = m(x)
        return (y * y).sum() + y[..., -1].exp().sum()

    cf = llgrad.compile(loss, recompile_limit=16)
    for t, b in ((5, 16), (5, 32), (5, 24), (3, 4), (3, 8), (3, 6), (5, 16)):
        x = llgrad.randn(b, t, 4, requires_grad=True)
        for _ in range(2):
            grads = []
            for fn in (loss, cf):
                for p in params + [x]:
                    p.grad = None
                fn(x).backward()
                grads.append([p.grad.numpy().copy() for p in params + [x]])
            for a, c in zip(*grads):
                np.testing.assert_allclose(c, a, rtol=1e-3, atol=1e-5)
