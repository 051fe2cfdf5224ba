"""Sweep 12 (nn / optim / init surfaces, value for value with torch): seeded initialisation is
torch's bit for bit where ATen's kernels can be reproduced (uniform_ and normal_ map their
draws with a fused multiply-add; small and strided normal_ draws in float64 through C's
log1p; float16 uniform_ draws a float32 and maps it in float32), in eager and compiled code;
default parameters of the common layers; schedulers and optimizer state dicts; module API
corners. Float32 normal_ of 16+ values is ATen's Box-Muller with its vectorised log/sin/cos.
Differences left: add/sub with alpha, lerp and addcmul (fused in ATen's AVX2 / AVX-512
kernels)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _same(a, b):
    a, b = (x.detach().numpy() for x in (a, b))
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


def _seeded(make, seed=7):
    out = []
    for lib in (torch, llgrad):
        lib.manual_seed(seed)
        res = make(lib)
        out.append((res, lib.rand(1).item()))     # (and the generator left where torch's is)
    (t, tr), (l, lr) = out
    assert tr == lr
    return t, l


# ---- nn.init and Tensor fills ------------------------------------------------------------------

_UNIFORM_INITS = [
    ("kaiming_uniform_fan_in_relu", lambda I, t: I.kaiming_uniform_(t, nonlinearity="relu")),
    ("kaiming_uniform_fan_out_leaky", lambda I, t: I.kaiming_uniform_(
        t, a=0.2, mode="fan_out", nonlinearity="leaky_relu")),
    ("kaiming_uniform_tanh", lambda I, t: I.kaiming_uniform_(t, nonlinearity="tanh")),
    ("kaiming_uniform_selu_fan_out", lambda I, t: I.kaiming_uniform_(
        t, mode="fan_out", nonlinearity="selu")),
    ("xavier_uniform", lambda I, t: I.xavier_uniform_(t, gain=I.calculate_gain("tanh"))),
    ("uniform_ab", lambda I, t: I.uniform_(t, -2.0, 5.0)),
    ("uniform_generator", lambda I, t: I.uniform_(t, -0.3, 0.3,
                                                  generator=_gen(I))),
    ("normal_small", lambda I, t: I.normal_(t[:2, :3], 0.5, 3.0)),
    ("kaiming_normal_small", lambda I, t: I.kaiming_normal_(t[:3, :4])),
    ("xavier_normal_small", lambda I, t: I.xavier_normal_(t[:3, :4], gain=2.0)),
    ("normal_strided", lambda I, t: I.normal_(t.t(), 1.0, 0.02)),
]


def _gen(init_module):
    lib = torch if init_module is torch.nn.init else llgrad
    return lib.Generator().manual_seed(5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,fn", _UNIFORM_INITS, ids=[n for n, _ in _UNIFORM_INITS])
def test_init_functions_give_torchs_bits(name, fn, dtype):
    def make(lib):
        t = lib.zeros(8, 6, dtype=getattr(lib, dtype))
        fn(lib.nn.init, t)
        return t
    _same(*_seeded(make))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n,mean,std", [(1, 0.0, 1.0), (7, 1.0, 3.0), (15, 0.0, 0.02),
                                        (40, 0.5, 0.7)])
def test_normal_fill_values(n, mean, std, dtype):
    """normal_ is torch's to the bit: below 16 values the draw in float64 (C's log1p, not
    NumPy's), then n * std + mean fused; from 16 on Box-Muller by blocks of 16."""
    for seed in range(12):
        _same(*_seeded(lambda lib: lib.empty(n, dtype=getattr(lib, dtype)).normal_(mean, std),
                       seed))


def test_float64_randn_and_normal_functions():
    for seed in range(6):
        _same(*_seeded(lambda lib: lib.randn(50, dtype=lib.float64), seed))
        _same(*_seeded(lambda lib: lib.normal(1.0, 2.0, size=(33,), dtype=lib.float64), seed))
        _same(*_seeded(lambda lib: lib.empty(5, 4, dtype=lib.float64).t().normal_(2, 0.1),
                       seed))


@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (-2.0, 5.0), (-0.3, 0.3), (1e-3, 7.7)])
def test_float16_uniform_and_rand(lo, hi):
    """torch 2.x draws a float32 for a float16 uniform_, maps it in float32, rounds once and
    turns a value rounded up to `high` into `low`."""
    for seed in range(8):
        _same(*_seeded(lambda lib: lib.empty(300, dtype=lib.float16).uniform_(lo, hi), seed))
    _same(*_seeded(lambda lib: lib.rand(300, dtype=lib.float16)))


def test_float16_small_normal():
    for seed in range(10):
        _same(*_seeded(lambda lib: lib.empty(7, dtype=lib.float16).normal_(1.0, 3.0), seed))


def test_compiled_fills_replay_eagers_and_torchs_numbers():
    def fills(lib, h, k):
        h.uniform_(-0.3, 0.3)       # (float16: on the interpreter, the op's NumPy values)
        k.normal_(1.0, 3.0)
        return (lib.empty(40).uniform_(-0.3, 0.7), lib.empty(7).normal_(1.0, 3.0),
                lib.empty(40, dtype=lib.float64).normal_(0.5, 2.0),
                lib.empty(5, dtype=lib.float64).uniform_(-1, 1), h * 1, k * 1)

    compiled = llgrad.compile(lambda h, k: fills(llgrad, h, k))
    torch.manual_seed(3)
    want = fills(torch, torch.zeros(30, dtype=torch.float16), torch.zeros(6, dtype=torch.float16))
    for _ in range(2):
        llgrad.manual_seed(3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # (float16 runs on the interpreter)
            got = compiled(llgrad.zeros(30, dtype=llgrad.float16),
                           llgrad.zeros(6, dtype=llgrad.float16))
        for a, b in zip(want, got):
            _same(a, b)
    compiled32 = llgrad.compile(lambda x: fills(llgrad, x, x)[:4])
    llgrad.manual_seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # (native code, no eager fallback)
        got = compiled32(llgrad.zeros(3))
    torch.manual_seed(3)
    for a, b in zip(fills(torch, torch.zeros(3), torch.zeros(3))[:4], got):
        _same(a, b)


_LAYERS = [
    ("Linear", lambda nn: nn.Linear(7, 5)),
    ("Bilinear", lambda nn: nn.Bilinear(3, 4, 5)),
    ("Conv1d", lambda nn: nn.Conv1d(3, 4, 3)),
    ("Conv2d_groups", lambda nn: nn.Conv2d(4, 6, 3, groups=2)),
    ("Conv3d", lambda nn: nn.Conv3d(2, 3, 2)),
    ("ConvTranspose2d", lambda nn: nn.ConvTranspose2d(4, 6, 3, groups=2)),
    ("LSTM", lambda nn: nn.LSTM(3, 4, num_layers=2, bidirectional=True)),
    ("LSTM_proj", lambda nn: nn.LSTM(3, 4, proj_size=2)),
    ("GRU", lambda nn: nn.GRU(3, 4, bias=False)),
    ("RNNCell", lambda nn: nn.RNNCell(3, 4)),
    ("MultiheadAttention", lambda nn: nn.MultiheadAttention(8, 2, kdim=5, vdim=3,
                                                            add_bias_kv=True)),
    ("TransformerEncoderLayer", lambda nn: nn.TransformerEncoderLayer(8, 2, 16)),
    ("TransformerDecoderLayer", lambda nn: nn.TransformerDecoderLayer(8, 2, 16)),
    ("PReLU_LayerNorm_BatchNorm", lambda nn: nn.Sequential(nn.PReLU(3), nn.LayerNorm(4),
                                                           nn.BatchNorm1d(4))),
    ("Embedding_f64", lambda nn: nn.Embedding(10, 40, dtype=_f64(nn))),
    ("Embedding", lambda nn: nn.Embedding(30, 7)),
]


def _f64(nn):
    return torch.float64 if nn is torch.nn else llgrad.float64


@pytest.mark.parametrize("name,make", _LAYERS, ids=[n for n, _ in _LAYERS])
def test_default_initialisation_is_torchs_bit_for_bit(name, make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, l = _seeded(lambda lib: make(lib.nn).state_dict())
    assert list(t) == list(l)
    for k in t:
        _same(t[k], l[k])


# ---- differences left (ATen's fused kernels, vectorised transcendental functions) -------

@pytest.mark.parametrize("n", [16, 48, 1025])
def test_float32_normal_fill_of_16_or_more(n):
    """ATen's Box-Muller over blocks of 16 with its vectorised log/sin/cos and their fused
    multiply-adds (ir/torch_vecmath.py), the ragged end drawn afresh: torch's bits."""
    for seed in range(3):
        _same(*_seeded(lambda lib: lib.randn(n), seed))
        _same(*_seeded(lambda lib: lib.empty(n).normal_(0.3, 1.7), seed))
    _same(*_seeded(lambda lib: lib.nn.Embedding(100, 32).weight))
    _same(*_seeded(lambda lib: lib.nn.init.kaiming_normal_(lib.empty(8, 6), mode="fan_out")))


def _alpha_ops(lib, a, b, c):
    A, B, C = (lib.tensor(x) for x in (a, b, c))
    return [A.add(B, alpha=-0.1), A.sub(B, alpha=0.3), A.clone().add_(B, alpha=-0.1),
            A.lerp(B, 0.1), A.lerp(B, 0.7), A.addcmul(B, C, value=0.3)]


def test_add_alpha_lerp_addcmul_are_fused_as_atens():
    """ATen's kernels compute add / sub's alpha * other + self, lerp and addcmul as one FMA
    (vec::fmadd): llgrad too, so SGD / Adam steps keep torch's bits."""
    g = np.random.RandomState(0)
    a, b, c = (g.randn(2000).astype(np.float32) for _ in range(3))
    for x, y in zip(_alpha_ops(torch, a, b, c), _alpha_ops(llgrad, a, b, c)):
        _same(x, y)


def test_poisson_draws():
    _same(*_seeded(lambda lib: lib.poisson(lib.ones(20) * 3)))


# ---- schedulers, optimizers, module API ----------------------------------------------------

def _sched_run(lib, make, metric=None, steps=25):
    ps = [lib.nn.Parameter(lib.zeros(2)) for _ in range(2)]
    opt = lib.optim.SGD([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)],
                        lr=0.1, momentum=0.9)
    s = make(lib.optim.lr_scheduler, opt)
    out = []
    for i in range(steps):
        opt.step()
        s.step(metric[i % len(metric)]) if metric else s.step()
        out.append([(g["lr"], g["momentum"]) for g in opt.param_groups])
    sd = s.state_dict()
    opt2 = lib.optim.SGD([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)],
                         lr=0.1, momentum=0.9)
    s2 = make(lib.optim.lr_scheduler, opt2)
    s2.load_state_dict(sd)
    for i in range(4):
        s.step(metric[i]) if metric else s.step()
        s2.step(metric[i]) if metric else s2.step()
        out.append([g["lr"] for g in opt.param_groups] + [g["lr"] for g in opt2.param_groups])
    return out, sorted(sd)


_PLATEAU = [1.0, 0.9, 0.9, 0.91, 0.9, 0.9, 0.5, 0.5, 0.5, 0.5, 0.5]
_SCHEDULERS = [
    ("cawr", lambda S, o: S.CosineAnnealingWarmRestarts(o, 5, T_mult=2, eta_min=0.001), None),
    ("onecycle_three_phase", lambda S, o: S.OneCycleLR(o, [1.0, 2.0], total_steps=40,
                                                        three_phase=True,
                                                        anneal_strategy="linear"), None),
    ("cyclic_exp_range", lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=4,
                                                 step_size_down=3, mode="exp_range",
                                                 gamma=0.9), None),
    ("plateau_cooldown_abs", lambda S, o: S.ReduceLROnPlateau(
        o, cooldown=2, patience=1, threshold_mode="abs", threshold=0.05,
        min_lr=[0.01, 0.02]), _PLATEAU),
    ("plateau_max_eps", lambda S, o: S.ReduceLROnPlateau(o, mode="max", eps=0.05,
                                                         factor=0.1, patience=0), _PLATEAU),
    ("sequential", lambda S, o: S.SequentialLR(o, [S.ConstantLR(o, 0.5, total_iters=3),
                                                   S.StepLR(o, 3), S.CosineAnnealingLR(o, 6)],
                                               milestones=[4, 12]), None),
    ("chained", lambda S, o: S.ChainedScheduler([S.LinearLR(o, 0.5, total_iters=3),
                                                 S.MultiStepLR(o, [4, 8])], optimizer=o), None),
    ("polynomial", lambda S, o: S.PolynomialLR(o, total_iters=8, power=2.0), None),
]


@pytest.mark.parametrize("name,make,metric", _SCHEDULERS, ids=[s[0] for s in _SCHEDULERS])
def test_schedulers_follow_torch(name, make, metric):
    (t, tk), (l, lk) = (_sched_run(lib, make, metric) for lib in (torch, llgrad))
    assert tk == lk
    assert l == t


_OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, maximize=True, weight_decay=0.01)),
    ("AdamW", dict(lr=0.01)), ("RAdam", dict(lr=0.01, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
    ("Adadelta", dict(rho=0.8)), ("Adamax", dict(weight_decay=0.01)),
    ("ASGD", dict(t0=2)), ("Rprop", dict(etas=(0.4, 1.3))),
    ("RMSprop", dict(centered=True, momentum=0.9)), ("Adafactor", dict(lr=0.01)),
]


def _desc(v):
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        return ("tensor", str(v.dtype).split(".")[-1], tuple(v.shape))
    return repr(v)


@pytest.mark.parametrize("name,kw", _OPTIMIZERS, ids=[o[0] for o in _OPTIMIZERS])
def test_optimizer_state_dict_structure(name, kw):
    """Values within float32 rounding (see the add/lerp xfail), structure exactly torch's:
    state keys, 'step' a float32 scalar tensor, every param_groups field."""
    got = []
    for lib in (torch, llgrad):
        g = np.random.RandomState(0)
        w = lib.nn.Parameter(lib.tensor(g.randn(3, 4).astype(np.float32)))
        b = lib.nn.Parameter(lib.tensor(g.randn(4).astype(np.float32)))
        opt = getattr(lib.optim, name)([{"params": [w]}, {"params": [b], "lr": 0.03}], **kw)
        for _ in range(3):
            w.grad = lib.tensor(g.randn(3, 4).astype(np.float32))
            b.grad = lib.tensor(g.randn(4).astype(np.float32))
            opt.step()
        sd = opt.state_dict()
        got.append(({k: {kk: _desc(vv) for kk, vv in v.items()} for k, v in sd["state"].items()},
                    repr(sd["param_groups"]), w.detach().numpy().copy()))
    (ts, tp, tw), (ls, lp, lw) = got
    assert ls == ts
    assert lp == tp
    np.testing.assert_allclose(lw, tw, rtol=1e-5, atol=1e-6)


def test_non_persistent_buffers_set():
    """PyTorch's private name for the set (code written for torch reads and adds to it)."""
    for lib in (torch, llgrad):
        m = lib.nn.Module()
        m.register_buffer("a", lib.ones(2))
        m.register_buffer("b", lib.zeros(2), persistent=False)
        assert m._non_persistent_buffers_set == {"b"}
        m._non_persistent_buffers_set.add("a")
        assert list(m.state_dict()) == []
