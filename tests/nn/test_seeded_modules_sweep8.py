"""Sweep 8: modules built after manual_seed in both libraries have torch's parameters (every
configuration of the sweep-6 table, without copying state), and modules that draw random
numbers in train mode (dropouts, attention and transformer dropout) give torch's outputs
and gradients and leave the generator where torch does; MultiheadAttention over its masks
and flags, Transformer layers over activations (strings and callables), norm_first and
bias, normalisations over affine / track_running_stats / momentum, in-place activations
(tests/nn/oracle_sweep8.py)."""
import itertools
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from module_table_sweep6 import TABLE  # noqa: E402
from oracle_sweep8 import check  # noqa: E402
from test_modules_sweep6 import _build  # noqa: E402

_BY_NAME = {}
for _e in TABLE:
    _BY_NAME.setdefault(_e[0], []).append(_e)


def _x(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape).astype(
        np.float32)


@pytest.mark.parametrize("name", sorted(_BY_NAME))
def test_seeded_initialisation(name):
    for _, args, kwargs, _, opts in _BY_NAME[name]:
        if opts.get("ctor_error") or opts.get("lazy"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(3)
            tm = _build(torch, name, args, kwargs)
            llgrad.manual_seed(3)
            lm = _build(llgrad, name, args, kwargs)
        ts, ls = tm.state_dict(), lm.state_dict()
        assert list(ls) == list(ts), (name, kwargs)
        for k, v in ts.items():
            np.testing.assert_allclose(ls[k].detach().numpy().astype(np.float64),
                                       v.detach().numpy().astype(np.float64), rtol=1e-5,
                                       atol=1e-6, err_msg=f"{name} {kwargs} {k}")
        assert llgrad.rand(1).item() == pytest.approx(torch.rand(1).item(), abs=1e-7), name


DROPOUTS = [("Dropout", (4, 6)), ("Dropout1d", (2, 3, 4)), ("Dropout1d", (3, 4)),
            ("Dropout2d", (2, 3, 2, 2)), ("Dropout2d", (3, 2, 2)), ("Dropout3d", (2, 3, 2, 2, 2)),
            ("AlphaDropout", (4, 6)), ("FeatureAlphaDropout", (2, 3, 4))]


@pytest.mark.parametrize("name,shape", DROPOUTS, ids=str)
def test_dropout_train_mode(name, shape):
    for p in (0.3, 0.5, 1.0):
        check(lambda lib: getattr(lib.nn, name)(p), [_x(*shape)])
    check(lambda lib: getattr(lib.nn, name)(0.4, inplace=True), [_x(*shape)],
          lambda m, xs, lib: m(xs[0] * 1))


MHA = [dict(), dict(batch_first=True), dict(bias=False, add_bias_kv=True), dict(add_zero_attn=True),
       dict(kdim=5, vdim=6), dict(dropout=0.3), dict(dropout=0.3, batch_first=True)]


def _mha_masks(everything):
    """(key_padding_mask, attn_mask, need_weights, average_attn_weights) cases: every mask
    pair, with the flags cycled (everything: each pair with each pair of flags)."""
    kpm_b = np.array([[False, False, True, True], [False, False, False, True]])
    am_b = np.triu(np.ones((3, 4), bool), 1)
    am_f = np.where(am_b, -np.inf, 0.0).astype(np.float32)
    pairs = list(itertools.product(
        (None, kpm_b, np.where(kpm_b, -np.inf, 0).astype(np.float32),
         np.where(kpm_b, -1.5, 0).astype(np.float32)),
        (None, am_b, am_f, np.broadcast_to(am_f, (4, 3, 4)).copy())))
    flags = list(itertools.product((True, False), (True, False)))
    if everything:
        return [p + f for p in pairs for f in flags]
    return [p + flags[i % 4] for i, p in enumerate(pairs)]


@pytest.mark.parametrize("kw", MHA, ids=str)
def test_multihead_attention_masks(kw):
    _mha_check(kw, _mha_masks(False))


@pytest.mark.slow
@pytest.mark.parametrize("kw", MHA, ids=str)
def test_multihead_attention_masks_every_flag(kw):
    _mha_check(kw, _mha_masks(True))


def _mha_check(kw, cases):
    bf = kw.get("batch_first", False)
    shapes = [(3, 8), (4, kw.get("kdim", 8)), (4, kw.get("vdim", 8))]
    xs = [_x(*((2,) + s if bf else (s[0], 2, s[1]))) for s in shapes]
    for kpm, am, nw, avg in cases:
        def fwd(m, xs, lib, kpm=kpm, am=am, nw=nw, avg=avg):
            t = {k: lib.tensor(v) for k, v in (("key_padding_mask", kpm), ("attn_mask", am))
                 if v is not None}
            return m(*xs, need_weights=nw, average_attn_weights=avg, **t)
        check(lambda lib: lib.nn.MultiheadAttention(8, 2, **kw), xs, fwd)


def test_multihead_attention_causal_and_errors():
    causal = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, 0).astype(np.float32)
    for bf, nw in itertools.product((False, True), (True, False)):
        q = _x(2, 3, 8) if bf else _x(3, 2, 8)
        check(lambda lib: lib.nn.MultiheadAttention(8, 2, batch_first=bf), [q, q, q],
              lambda m, xs, lib: m(*xs, attn_mask=lib.tensor(causal), is_causal=True,
                                   need_weights=nw))
    build = lambda lib: lib.nn.MultiheadAttention(8, 2)  # noqa: E731
    q, k = _x(3, 2, 8), _x(4, 2, 8)
    for mask in (np.zeros((3, 3), np.float32), np.zeros((2, 3, 4), np.float32),
                 np.zeros((3, 4), np.int64)):
        check(build, [q, k, k], lambda m, xs, lib, mask=mask: m(*xs, attn_mask=lib.tensor(mask)))
    check(build, [q, k, k], lambda m, xs, lib: m(*xs, key_padding_mask=lib.zeros(2, 3).bool()))
    check(build, [_x(3, 2, 6), k, k])
    check(build, [_x(3, 8), _x(4, 8), _x(4, 8)],
          lambda m, xs, lib: m(*xs, key_padding_mask=lib.tensor([False, True, False, False])))


ACTIVATIONS = ["relu", "gelu", lambda lib: lib.nn.functional.gelu,
               lambda lib: lib.nn.GELU(approximate="tanh"), lambda lib: lib.nn.SiLU()]


@pytest.mark.parametrize("act", range(len(ACTIVATIONS)))
@pytest.mark.parametrize("norm_first", (False, True))
def test_transformer_layers(act, norm_first):
    a = ACTIVATIONS[act]
    activation = (lambda lib: a) if isinstance(a, str) else a
    kpm = np.array([[False, False, True, True], [False, False, False, True]])
    for bias, drop in itertools.product((True, False), (0.0, 0.1)):
        check(lambda lib: lib.nn.TransformerEncoderLayer(
            8, 2, 16, drop, activation=activation(lib), norm_first=norm_first, bias=bias),
            [_x(4, 2, 8)], lambda m, xs, lib: m(xs[0], src_key_padding_mask=lib.tensor(kpm)))
        check(lambda lib: lib.nn.TransformerDecoderLayer(
            8, 2, 16, drop, activation=activation(lib), norm_first=norm_first, bias=bias),
            [_x(3, 2, 8), _x(4, 2, 8)],
            lambda m, xs, lib: m(*xs, tgt_mask=lib.nn.Transformer.generate_square_subsequent_mask(
                3), memory_key_padding_mask=lib.tensor(kpm), tgt_is_causal=True))


def test_transformer_with_dropout():
    kpm = np.array([[False, False, True, True], [False, False, False, True]])
    check(lambda lib: lib.nn.Transformer(8, 2, 2, 2, 16, 0.1, activation="gelu",
                                         batch_first=True),
          [_x(2, 4, 8), _x(2, 3, 8)],
          lambda m, xs, lib: m(*xs, tgt_mask=lib.nn.Transformer.generate_square_subsequent_mask(3),
                               src_key_padding_mask=lib.tensor(kpm),
                               memory_key_padding_mask=lib.tensor(kpm), tgt_is_causal=True))

    def evaluate(m, xs, lib):
        m.eval()
        with lib.no_grad():
            return m(xs[0], src_key_padding_mask=lib.tensor(kpm))
    check(lambda lib: lib.nn.TransformerEncoder(
        lib.nn.TransformerEncoderLayer(8, 2, 16, 0.1, batch_first=True), 2), [_x(2, 4, 8)], evaluate)


NORMS = [("BatchNorm1d", (4, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (2, 3, 2, 2)),
         ("BatchNorm3d", (2, 3, 2, 1, 2)), ("InstanceNorm1d", (2, 3, 5)),
         ("InstanceNorm2d", (2, 3, 2, 3)), ("InstanceNorm3d", (2, 3, 2, 2, 2))]


@pytest.mark.parametrize("name,shape", NORMS, ids=str)
def test_normalisation_options(name, shape):
    def three_calls(m, xs, lib):
        a, b = m(xs[0]), m(xs[0] * 2 + 1)
        m.eval()
        return a, b, m(xs[0])
    for affine, track, momentum in itertools.product((False, True), (False, True),
                                                     (0.1, None, 0.0, 1.0)):
        check(lambda lib: getattr(lib.nn, name)(3, affine=affine, track_running_stats=track,
                                                momentum=momentum), [_x(*shape)], three_calls)


INPLACE = [("ReLU", ()), ("ReLU6", ()), ("ELU", (0.5,)), ("SELU", ()), ("CELU", (1.2,)),
           ("LeakyReLU", (0.1,)), ("Hardtanh", (-0.5, 0.5)), ("Hardsigmoid", ()),
           ("Hardswish", ()), ("SiLU", ()), ("Mish", ()), ("Threshold", (0.1, 5.0)),
           ("RReLU", (0.1, 0.3))]


@pytest.mark.parametrize("name,args", INPLACE, ids=str)
def test_inplace_activations(name, args):
    build = lambda lib: getattr(lib.nn, name)(*args, inplace=True).eval()  # noqa: E731
    check(build, [_x(3, 4)], lambda m, xs, lib: m(xs[0] * 1))
    check(build, [_x(3, 4)], lambda m, xs, lib: m(xs[0][1:] * 1))
    check(build, [_x(3, 4)], lambda m, xs, lib: m((xs[0] * 1)[:, 1:]))
