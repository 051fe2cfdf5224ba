"""Sweep 15 (g5): MultiheadAttention (kdim / vdim, key_padding_mask and attn_mask of both
kinds, need_weights / average_attn_weights, batch_first, add_bias_kv, add_zero_attn,
unbatched inputs) and PackedSequence (enforce_sorted, total_length, unsorted indices),
checked side by side with torch (tests/nn/oracle_sweep15_g.py) after the topics of
PyTorch's test/nn/test_multihead_attention.py and test_packed_sequence.py."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
import oracle_sweep15_g as o  # noqa: E402
from oracle_sweep15_g import check  # noqa: E402


def _x(lib, *shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lib.tensor(a, requires_grad=True)


def _mha_run(lib, mha, q, k, v, **kw):
    y, w = mha(q, k, v, **kw)
    loss = (y * lib.tensor(np.random.default_rng(4).standard_normal(tuple(y.shape))
                           .astype(np.float32))).sum()
    loss.backward()
    return y, w, q.grad, k.grad, v.grad, [(n, p.grad) for n, p in mha.named_parameters()]


@pytest.mark.parametrize("kw", [
    dict(), dict(bias=False), dict(add_bias_kv=True), dict(add_zero_attn=True),
    dict(add_bias_kv=True, add_zero_attn=True), dict(kdim=3, vdim=5),
    dict(kdim=3, vdim=5, add_bias_kv=True, add_zero_attn=True), dict(batch_first=True),
])
def test_mha_constructor_options_forward_and_grads(kw):
    def s(lib):
        mha = lib.nn.MultiheadAttention(8, 2, **kw)
        kd, vd = kw.get("kdim", 8), kw.get("vdim", 8)
        q, k, v = _x(lib, 4, 2, 8, seed=1), _x(lib, 5, 2, kd, seed=2), _x(lib, 5, 2, vd, seed=3)
        return _mha_run(lib, mha, q, k, v)
    check(s, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mha_key_padding_and_attn_masks(kind):
    def s(lib):
        mha = lib.nn.MultiheadAttention(6, 3, batch_first=True)
        q, k, v = _x(lib, 2, 3, 6, seed=1), _x(lib, 2, 4, 6, seed=2), _x(lib, 2, 4, 6, seed=3)
        kpm = lib.tensor([[False, False, True, True], [False, True, False, False]])
        am = lib.tensor([[False, True, False, False], [False, False, False, True],
                         [True, False, False, False]])
        if kind == "float":
            kpm = lib.zeros(2, 4).masked_fill(kpm, float("-inf"))
            am = lib.zeros(3, 4).masked_fill(am, -2.5)
        return _mha_run(lib, mha, q, k, v, key_padding_mask=kpm, attn_mask=am)
    check(s, rtol=1e-4, atol=1e-5)


def test_mha_3d_attn_mask_and_per_head_weights():
    def s(lib):
        mha = lib.nn.MultiheadAttention(4, 2, add_bias_kv=True, add_zero_attn=True)
        q, k = _x(lib, 3, 2, 4, seed=1), _x(lib, 5, 2, 4, seed=2)
        am = lib.tensor(np.random.default_rng(0).random((4, 3, 5)) < 0.3)
        return _mha_run(lib, mha, q, k, k, attn_mask=am, average_attn_weights=False)
    check(s, rtol=1e-4, atol=1e-5)


def test_mha_need_weights_false_unbatched_and_causal():
    def s(lib):
        mha = lib.nn.MultiheadAttention(4, 2)
        q = _x(lib, 3, 4)
        out = list(_mha_run(lib, mha, q, q, q, need_weights=False))
        mask = lib.nn.Transformer.generate_square_subsequent_mask(3)
        q2 = _x(lib, 3, 1, 4, seed=5)
        y, w = mha(q2, q2, q2, attn_mask=mask, is_causal=True)
        mha.eval()
        with lib.no_grad():
            y3, w3 = mha(q2, q2, q2, key_padding_mask=lib.tensor([[False, False, True]]))
        return out, y, w, y3, w3
    check(s, rtol=1e-4, atol=1e-5)


def test_mha_mask_errors():
    def s(lib):
        mha = lib.nn.MultiheadAttention(4, 2)
        q = lib.ones(3, 2, 4)
        out = []
        for kw in (dict(attn_mask=lib.zeros(2, 3)), dict(attn_mask=lib.zeros(5, 3, 3)),
                   dict(key_padding_mask=lib.zeros(3, 2)),
                   dict(attn_mask=lib.zeros(3, 3, dtype=lib.int64)),
                   dict(is_causal=True)):
            try:
                out.append(mha(q, q, q, **kw)[0].shape)
            except Exception as ex:      # noqa: BLE001
                out.append(type(ex).__name__)
        for f in (lambda: lib.nn.MultiheadAttention(5, 2), lambda: mha(q, q[:2], q),
                  lambda: mha(q, lib.ones(3, 2, 3), lib.ones(3, 2, 3))):
            try:
                f()
                out.append("ok")
            except Exception as ex:      # noqa: BLE001
                out.append(type(ex).__name__)
        return out
    check(s)


def test_mha_functional_with_separate_projection_weights():
    def s(lib):
        F = lib.nn.functional
        q, k, v = _x(lib, 2, 1, 4, seed=1), _x(lib, 3, 1, 4, seed=2), _x(lib, 3, 1, 4, seed=3)
        ws = [_x(lib, 4, 4, seed=10 + i) for i in range(4)]
        y, w = F.multi_head_attention_forward(
            q, k, v, 4, 2, None, lib.zeros(12), None, None, False, 0.0, ws[3], None,
            use_separate_proj_weight=True, q_proj_weight=ws[0], k_proj_weight=ws[1],
            v_proj_weight=ws[2])
        y.sum().backward()
        return y, w, [t.grad for t in ws]
    check(s, rtol=1e-4, atol=1e-5)


def test_mha_training_step_eager_and_compiled():
    def run(lib, compiled):
        lib.manual_seed(0)
        mha = lib.nn.MultiheadAttention(4, 2, batch_first=True, kdim=3, vdim=3)
        opt = lib.optim.SGD(mha.parameters(), lr=0.1, momentum=0.9)
        kpm = lib.tensor([[False, False, True], [False, False, False]])

        def step(q, k):
            opt.zero_grad()
            y, w = mha(q, k, k, key_padding_mask=kpm)
            loss = y.pow(2).mean() + w.sum()
            loss.backward()
            opt.step()
            return loss
        f = llgrad.compile(step) if compiled else step
        q = lib.arange(16.0).reshape(2, 2, 4) / 16
        k = lib.arange(18.0).reshape(2, 3, 3) / 18
        return [f(q, k) for _ in range(3)] + list(mha.parameters())
    want = o._norm(run(torch, False))
    eager = o._norm(run(llgrad, False))
    comp = o._norm(run(llgrad, True))
    o._same(eager, want, 1e-4, 1e-5, ())
    o._same(comp, eager, 1e-4, 1e-5, ())


# ---- PackedSequence ----

def _packed_view(p):
    return (p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices)


def test_pack_padded_sequence_enforce_sorted_and_unsorted_indices():
    def s(lib):
        R = lib.nn.utils.rnn
        x = _x(lib, 4, 3, 2)
        lengths = [2, 4, 1]
        out = []
        try:
            R.pack_padded_sequence(x, lengths)
        except Exception as ex:      # noqa: BLE001
            out.append(type(ex).__name__)
        p = R.pack_padded_sequence(x, lengths, enforce_sorted=False)
        out.append(_packed_view(p))
        for tl, bf, pv in ((None, False, 0.0), (6, False, -1.0), (5, True, 9.0)):
            y, ls = R.pad_packed_sequence(p, batch_first=bf, padding_value=pv, total_length=tl)
            out += [y, ls]
        y.sum().backward()
        out.append(x.grad)
        try:
            R.pad_packed_sequence(p, total_length=3)
        except Exception as ex:      # noqa: BLE001
            out.append(type(ex).__name__)
        return out
    check(s)


def test_pack_sequence_and_unpack_round_trips():
    def s(lib):
        R = lib.nn.utils.rnn
        seqs = [_x(lib, n, 2, seed=n) for n in (3, 5, 1)]
        p = R.pack_sequence(seqs, enforce_sorted=False)
        back = R.unpack_sequence(p)
        padded = R.pad_sequence(seqs, batch_first=True, padding_value=-2.0)
        left = R.pad_sequence(seqs, padding_side="left")
        unpad = R.unpad_sequence(padded, lib.tensor([3, 5, 1]), batch_first=True)
        out = [_packed_view(p), back, padded, left, unpad]
        try:
            R.pack_sequence(seqs)
        except Exception as ex:      # noqa: BLE001
            out.append(type(ex).__name__)
        return out
    check(s)


def test_packed_sequence_methods_and_lengths_errors():
    def s(lib):
        R = lib.nn.utils.rnn
        x = _x(lib, 3, 2, 2)
        p = R.pack_padded_sequence(x, lib.tensor([3, 2]))
        q = p.double()
        out = [q.data.dtype, q.batch_sizes.dtype, p.is_cuda, p.to(lib.float64).data.dtype,
               type(p).__name__, len(p), p[1], p.cpu() is p, p.is_pinned()]
        for lengths in ([3, 0], [2, 3], lib.tensor([[3, 2]])):
            try:
                R.pack_padded_sequence(x, lengths)
                out.append("ok")
            except Exception as ex:      # noqa: BLE001
                out.append(type(ex).__name__)
        return out
    check(s)


def test_packed_lstm_with_unsorted_batch_matches():
    def s(lib):
        R = lib.nn.utils.rnn
        lstm = lib.nn.LSTM(2, 3, batch_first=True, bidirectional=True)
        x = _x(lib, 3, 4, 2)
        p = R.pack_padded_sequence(x, [2, 4, 3], batch_first=True, enforce_sorted=False)
        y, (h, c) = lstm(p)
        yp, ls = R.pad_packed_sequence(y, batch_first=True)
        (yp.sum() + h.sum() * 2 + c.sum()).backward()
        return yp, ls, h, c, x.grad, [p.grad for p in lstm.parameters()]
    check(s, rtol=1e-4, atol=1e-5)
