"""Seeded parity of common modules with PyTorch (session 63, p10): modules built after the same
manual_seed have torch's repr, state_dict keys (buffers included), parameter order and values;
their outputs and the gradients of inputs and of every parameter are torch's (train and eval,
dropout draws included); buffers after the step are torch's; a compiled call equals eager.
Cases are drawn from seeded generators over convolutions (groups, dilation, 'same' and the
padding modes, transposed with output_padding) and recurrent layers (layers, directions,
batch_first, dropout, proj_size, packed input, given h0 / c0)."""
import random
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _x(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _np(t):
    return t.detach().numpy()


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in _flat(x)]
    return [] if o is None else [o]


def _check(ctor, inputs, fwd=None, train=True, seed=0, compiled=False):
    fwd = fwd or (lambda lib, m, *a: m(*a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mods, outs, ins = [], [], []
        for lib in (torch, llgrad):
            lib.manual_seed(seed)
            m = ctor(lib)
            m.train(train)
            xs = [lib.tensor(x, requires_grad=True) for x in inputs]
            lib.manual_seed(5)
            outs.append(_flat(fwd(lib, m, *xs)))
            mods.append(m)
            ins.append(xs)
        tm, lm = mods
        assert repr(lm) == repr(tm)
        assert [n for n, _ in lm.named_parameters()] == [n for n, _ in tm.named_parameters()]
        assert [n for n, _ in lm.named_buffers()] == [n for n, _ in tm.named_buffers()]
        assert list(lm.state_dict()) == list(tm.state_dict())
        assert len(outs[0]) == len(outs[1])
        rng = np.random.default_rng(1)
        loss = [0, 0]
        for a, b in zip(*outs):
            np.testing.assert_allclose(_np(b), _np(a), rtol=1e-4, atol=1e-5)
            w = rng.standard_normal(tuple(a.shape))
            if a.is_floating_point():
                loss[0] = loss[0] + (a.double() * torch.tensor(w)).sum()
                loss[1] = loss[1] + (b.double() * llgrad.tensor(w)).sum()
        loss[0].backward()
        loss[1].backward()
        for a, b in zip(*ins):
            np.testing.assert_allclose(_np(b.grad), _np(a.grad), rtol=1e-4, atol=1e-5)
        lp = dict(lm.named_parameters())
        for n, p in tm.named_parameters():
            assert (lp[n].grad is None) == (p.grad is None), n
            if p.grad is not None:
                np.testing.assert_allclose(_np(lp[n].grad), _np(p.grad), rtol=1e-4, atol=1e-5,
                                           err_msg=n)
        ls = lm.state_dict()
        for k, v in tm.state_dict().items():
            assert str(ls[k].dtype).split(".")[-1] == str(v.dtype).split(".")[-1], k
            np.testing.assert_allclose(_np(ls[k]), _np(v), rtol=1e-5, atol=1e-6, err_msg=k)
        if compiled:
            res = []
            for step in (lambda f: f, llgrad.compile):
                llgrad.manual_seed(seed)
                m = ctor(llgrad)
                m.train(train)
                f = step(lambda *a: fwd(llgrad, m, *a))
                llgrad.manual_seed(5)
                res.append(([_np(o) for o in _flat(f(*[llgrad.tensor(x) for x in inputs]))],
                            {k: _np(v) for k, v in m.state_dict().items()}))
            for a, b in zip(res[0][0], res[1][0]):
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
            for k in res[0][1]:
                np.testing.assert_allclose(res[1][1][k], res[0][1][k], rtol=1e-5, atol=1e-6)


def _conv_cases(n):
    r = random.Random(63)
    for i in range(n):
        d, g = r.choice([1, 2, 3]), r.choice([1, 2])
        cin, cout = g * r.choice([1, 2]), g * r.choice([1, 2, 3])
        k = tuple(r.choice([1, 2, 3]) for _ in range(d))
        dil = tuple(r.choice([1, 2]) for _ in range(d))
        sizes = tuple(r.choice([5, 6, 7]) for _ in range(d))
        if r.random() < 0.35:
            st = tuple(r.choice([1, 2, 3]) for _ in range(d))
            op = tuple(r.randrange(0, max(s, dl)) for s, dl in zip(st, dil))
            name = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")[d - 1]
            kw = dict(stride=st, padding=tuple(r.choice([0, 1]) for _ in range(d)),
                      output_padding=op, groups=g, dilation=dil, bias=r.random() < 0.7)
        else:
            mode = r.choice(["zeros", "reflect", "replicate", "circular"])
            if r.random() < 0.4:
                pad, st = "same", 1
            else:
                pad = tuple(r.choice([0, 1, 2]) for _ in range(d))
                st = tuple(r.choice([1, 2]) for _ in range(d))
            name = ("Conv1d", "Conv2d", "Conv3d")[d - 1]
            kw = dict(stride=st, padding=pad, groups=g, dilation=dil, padding_mode=mode,
                      bias=r.random() < 0.7)
        shape = ((2,) if r.random() < 0.8 else ()) + (cin,) + sizes
        yield i, name, (cin, cout, k), kw, shape


@pytest.mark.parametrize("i,name,args,kw,shape", list(_conv_cases(16)), ids=str)
def test_seeded_convolutions(i, name, args, kw, shape):
    _check(lambda lib: getattr(lib.nn, name)(*args, **kw), [_x(shape, i)], seed=i,
           compiled=i % 8 == 0)


def _rnn_cases(n):
    r = random.Random(7)
    for i in range(n):
        name = r.choice(["LSTM", "GRU", "RNN"])
        nl, bi, bf, hid = r.choice([1, 2]), r.random() < 0.5, r.random() < 0.5, r.choice([3, 4])
        kw = dict(num_layers=nl, bidirectional=bi, batch_first=bf, bias=r.random() < 0.8,
                  dropout=0.4 if nl > 1 and r.random() < 0.5 else 0.0)
        if name == "LSTM" and r.random() < 0.4:
            kw["proj_size"] = 2
        if name == "RNN":
            kw["nonlinearity"] = r.choice(["tanh", "relu"])
        yield i, name, hid, kw, r.random() < 0.4, r.random() < 0.5


@pytest.mark.parametrize("i,name,hid,kw,packed,give_h", list(_rnn_cases(8)), ids=str)
def test_seeded_recurrent_layers(i, name, hid, kw, packed, give_h):
    bf, d = kw["batch_first"], (2 if kw["bidirectional"] else 1) * kw["num_layers"]
    x = _x((2, 4, 3) if bf else (4, 2, 3), i)
    h0 = _x((d, 2, kw.get("proj_size") or hid), i + 1)
    c0 = _x((d, 2, hid), i + 2)

    def fwd(lib, m, x):
        if packed:
            x = lib.nn.utils.rnn.pack_padded_sequence(x, lib.tensor([4, 2]), batch_first=bf)
        h = None
        if give_h:
            h = (lib.tensor(h0), lib.tensor(c0)) if name == "LSTM" else lib.tensor(h0)
        out, hn = m(x, h)
        if packed:
            out = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first=bf)[0]
        return out, hn
    for train in (True, False):
        _check(lambda lib: getattr(lib.nn, name)(3, hid, **kw), [x], fwd, train=train, seed=i,
               compiled=train and i % 4 == 0)


NORMS = [
    lambda lib: lib.nn.BatchNorm1d(3, momentum=None),
    lambda lib: lib.nn.BatchNorm2d(3, track_running_stats=False),
    lambda lib: lib.nn.BatchNorm2d(3, affine=False, momentum=0.3),
    lambda lib: lib.nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=None),
    lambda lib: lib.nn.GroupNorm(3, 3, affine=False),
    lambda lib: lib.nn.LayerNorm([3, 4], bias=False),
]


@pytest.mark.parametrize("i", range(len(NORMS)))
def test_normalisations_train_eval_and_compiled(i):
    x = _x((4, 3, 4, 4), i)[..., :4] if i != 0 else _x((4, 3, 5), i)
    if i == 5:
        x = _x((2, 5, 3, 4), i)
    for train in (True, False):
        _check(NORMS[i], [x], train=train, compiled=train)


def test_embedding_max_norm_renormalises_weight_as_torch():
    idx = np.array([[1, 2, 3], [1, 1, 9]])
    for kw in (dict(padding_idx=2, max_norm=1.0), dict(max_norm=0.5, norm_type=1.0)):
        _check(lambda lib: lib.nn.Embedding(10, 4, **kw), [],
               lambda lib, m: m(lib.tensor(idx)), compiled=True)


KPM = np.array([[False, False, True, True, False], [False, True, False, False, False]])


@pytest.mark.parametrize("bf", [False, True])
def test_multihead_attention_masks_kdim_vdim(bf):
    q = _x((2, 4, 8) if bf else (4, 2, 8), 0)
    k, v = (_x((2, 5, n) if bf else (5, 2, n), n) for n in (3, 6))
    am = _x((4, 4, 5), 9)

    def fwd(lib, m, q, k, v):
        return m(q, k, v, key_padding_mask=lib.tensor(KPM), attn_mask=lib.tensor(am),
                 average_attn_weights=False)
    _check(lambda lib: lib.nn.MultiheadAttention(8, 2, kdim=3, vdim=6, batch_first=bf,
                                                 add_zero_attn=True), [q, k, v], fwd)


# PyTorch's inference fast path (eval, no autograd, batch_first self-attention, an even number
# of heads, bool masks, more than one sequence, need_weights=False) gives NaN for a sequence
# whose keys are all masked, and so does an eval-mode encoder layer; its ordinary path and
# llgrad give zeros / finite numbers
@pytest.mark.xfail(strict=True, reason="torch's fast path: NaN for a fully masked sequence")
def test_fast_path_fully_masked_sequence_is_nan_as_torch():
    x = _x((2, 5, 8), 0)
    kpm = np.zeros((2, 5), bool)
    kpm[1] = True
    outs = []
    for lib in (torch, llgrad):
        lib.manual_seed(0)
        m = lib.nn.MultiheadAttention(8, 2, batch_first=True).eval()
        with lib.no_grad():
            t = lib.tensor(x)
            outs.append(_np(m(t, t, t, key_padding_mask=lib.tensor(kpm),
                              need_weights=False)[0]))
    assert np.isnan(outs[0][1]).all() and not np.isnan(outs[0][0]).any()
    np.testing.assert_array_equal(outs[1], outs[0])
