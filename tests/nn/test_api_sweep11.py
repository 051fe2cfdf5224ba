"""Sweep 11 (nn / optim / utils APIs as tutorial code uses them), against torch: the
randomised leaky ReLU's draws (PyTorch's: a double per non-positive element), eagerly and
compiled; optimizers' flags with a state_dict round trip mid-training; schedulers (chained,
sequential, cyclic) with theirs; losses' reductions; the module API's odd corners. The
DataLoader's workers are in test_api_sweep11_data.py."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _rrelu_input(dtype):
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(dtype)
    x[0, 0], x[1, 1], x[2, 2] = 0.0, np.nan, -0.0       # (0 and -0 draw; NaN does not)
    return x


def _rrelu_run(lib, x, transpose, fn):
    lib.manual_seed(3)
    t = lib.tensor(x, requires_grad=True)
    y = fn(lib, t.t() if transpose else t)
    y.backward(lib.tensor(np.arange(y.numel(), dtype=x.dtype).reshape(tuple(y.shape))))
    g = np.nan_to_num(t.grad.numpy(), nan=7.0)
    return y.detach().numpy(), g, lib.rand(2).numpy()


RRELUS = {
    "functional": lambda lib, x: lib.nn.functional.rrelu(x, 0.1, 0.4, training=True),
    "module": lambda lib, x: lib.nn.RReLU().train()(x),
    "inplace": lambda lib, x: lib.nn.functional.rrelu_(x * 1, training=True),
    "torch.rrelu": lambda lib, x: lib.rrelu(x, training=True),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("kind", list(RRELUS))
def test_rrelu_training_draws_pytorchs_numbers(kind, transpose, dtype):
    """A seed gives PyTorch's slopes bit for bit (one double uniform per element <= 0 in C
    order, the bounds rounded to float for float32), its gradient and its generator state
    after (was: a float uniform for every element)."""
    x = _rrelu_input(dtype)
    ref = _rrelu_run(torch, x, transpose, RRELUS[kind])
    got = _rrelu_run(llgrad, x, transpose, RRELUS[kind])
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)


def test_rrelu_with_a_generator_draws_from_it():
    x = _rrelu_input(np.float32)
    out = []
    for lib in (torch, llgrad):
        g = lib.Generator().manual_seed(5)
        lib.manual_seed(0)
        y = lib.rrelu(lib.tensor(x), training=True, generator=g)
        out.append((y.numpy(), lib.rand(1, generator=g).numpy(), lib.rand(1).numpy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_rrelu_half_errors_in_training_only():
    """ATen's draw loop has no Half kernel (was: llgrad drew for float16)."""
    res = []
    for lib in (torch, llgrad):
        x = lib.tensor([-1.0, 2.0], dtype=lib.float16)
        with pytest.raises(NotImplementedError) as e:
            lib.nn.functional.rrelu(x, training=True)
        res.append((str(e.value), lib.nn.functional.rrelu(x).tolist()))
    assert res[1] == res[0]


def test_traced_rrelu_replays_eagers_draws():
    """The interpreter runs the traced draw (its count read from the values at run time)."""
    f = llgrad.compile(lambda x: llgrad.nn.functional.rrelu(x * 2, training=True),
                       backend="interpret")
    for seed in (0, 1):
        x = llgrad.tensor(_rrelu_input(np.float32))
        x = x + seed        # (another count of non-positive elements: the same graph)
        llgrad.manual_seed(seed)
        got, after = f(x).numpy(), llgrad.rand(1).numpy()
        torch.manual_seed(seed)
        ref = torch.nn.functional.rrelu(torch.tensor(x.numpy()) * 2, training=True).numpy()
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(after, torch.rand(1).numpy())
    assert f.n_traces == 1


@pytest.mark.slow
def test_compiled_rrelu_training_step_is_native_and_pytorchs():
    """The draw's count depends on the values: compiled code calls the draw back (one
    rng_rrelu_noise op, no interpreter), and a training step gives torch's numbers."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((6, 4)).astype(np.float32)
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.RReLU(), torch.nn.Linear(5, 1))
    sd = {k: v.detach().numpy().copy() for k, v in tm.state_dict().items()}
    res = {}
    for mode in ("torch", "compiled"):
        lib = torch if mode == "torch" else llgrad
        m = tm if lib is torch else llgrad.nn.Sequential(
            llgrad.nn.Linear(4, 5), llgrad.nn.RReLU(), llgrad.nn.Linear(5, 1))
        if lib is llgrad:
            m.load_state_dict({k: llgrad.tensor(v) for k, v in sd.items()})
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        if lib is llgrad:
            step = llgrad.compile(step)
        lib.manual_seed(4)
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # (no eager fallback, no interpreter)
            losses = [step(lib.tensor(X)).item() for _ in range(3)]
        res[mode] = (losses, [p.detach().numpy().copy() for p in m.parameters()],
                     lib.rand(1).item())
    np.testing.assert_allclose(res["compiled"][0], res["torch"][0], rtol=1e-5)
    for a, b in zip(res["compiled"][1], res["torch"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert res["compiled"][2] == res["torch"][2]
    assert "rng_rrelu_noise" in step.dump(llgrad.tensor(X))


# ---- optimizers: flags, a state_dict round trip mid-training ----

OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, maximize=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.9), decoupled_weight_decay=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True, foreach=False)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
    ("NAdam", dict(lr=0.01, momentum_decay=0.005, decoupled_weight_decay=True,
                   weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1)),
    ("Adadelta", dict(lr=1.0, rho=0.8)),
    ("ASGD", dict(lr=0.01, t0=2)),
    ("Rprop", dict(lr=0.01, etas=(0.4, 1.3))),
]


def _optimize(lib, name, kw, dtype):
    rng = np.random.default_rng(0)
    ps = [lib.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True)
          for s in ((3, 4), (4,))]
    opt = getattr(lib.optim, name)([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.05}], **kw)
    for i in range(6):
        for p in ps:
            p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)).astype(dtype))
        opt.step()
        if i == 2:                          # a checkpoint loaded into a new optimizer
            sd = opt.state_dict()
            opt = getattr(lib.optim, name)([{"params": ps[:1]}, {"params": ps[1:]}], **kw)
            opt.load_state_dict(sd)
    sd = opt.state_dict()
    state = {k: {n: (v.numpy() if isinstance(v, lib.Tensor) else v) for n, v in s.items()}
             for k, s in sd["state"].items()}
    groups = [{k: v for k, v in g.items()} for g in sd["param_groups"]]
    return [p.detach().numpy() for p in ps], state, groups


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=lambda v: v if isinstance(v, str) else "")
def test_optimizer_flags_and_checkpoint_round_trip(name, kw, dtype):
    got, ref = _optimize(llgrad, name, kw, dtype), _optimize(torch, name, kw, dtype)
    for a, b in zip(got[0], ref[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert got[1].keys() == ref[1].keys() and got[2] == ref[2]
    for k in ref[1]:
        assert list(got[1][k]) == list(ref[1][k])
        for n in ref[1][k]:
            np.testing.assert_allclose(got[1][k][n], ref[1][k][n], rtol=1e-5, atol=1e-6)


# ---- schedulers ----

def _S(lib):
    return lib.optim.lr_scheduler


SCHEDULERS = {
    "sequential": lambda lib, o: _S(lib).SequentialLR(
        o, [_S(lib).ConstantLR(o, 0.1, total_iters=2), _S(lib).CosineAnnealingLR(o, 4),
            _S(lib).StepLR(o, 2)], milestones=[2, 6]),
    "chained": lambda lib, o: _S(lib).ChainedScheduler(
        [_S(lib).ConstantLR(o, 0.1, total_iters=2), _S(lib).ExponentialLR(o, 0.9)]),
    "polynomial": lambda lib, o: _S(lib).PolynomialLR(o, total_iters=6, power=2.0),
    "cyclic_triangular2": lambda lib, o: _S(lib).CyclicLR(
        o, [0.01, 0.02], [0.1, 0.3], step_size_up=2, step_size_down=4, mode="triangular2"),
    "cyclic_exp_range": lambda lib, o: _S(lib).CyclicLR(
        o, 0.01, 0.1, step_size_up=2, mode="exp_range", gamma=0.9),
    "onecycle_three_phase": lambda lib, o: _S(lib).OneCycleLR(
        o, [1.0, 2.0], epochs=3, steps_per_epoch=10, anneal_strategy="linear",
        three_phase=True),
    "warm_restarts": lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 3, 2, 0.001),
}


def _schedule(lib, make):
    p, q = lib.nn.Parameter(lib.zeros(2)), lib.nn.Parameter(lib.zeros(2))
    opt = lib.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=0.1, momentum=0.9)
    s, out = make(lib, opt), []
    for i in range(25):
        opt.step()
        s.step()
        out.append(s.get_last_lr() + [g[k] for g in opt.param_groups for k in ("lr", "momentum")])
        if i == 7:                                  # resumed from its state_dict
            sd = s.state_dict()
            s = make(lib, opt)
            s.load_state_dict(sd)
    return np.array(out), sorted(s.state_dict())


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_schedule_and_resume(name):
    got, ref = _schedule(llgrad, SCHEDULERS[name]), _schedule(torch, SCHEDULERS[name])
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-7, atol=1e-12)
    assert got[1] == ref[1]


# ---- losses: reductions, weights, ignore_index, label smoothing ----

def _loss_cases():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    p = rng.uniform(0.05, 0.95, (4, 5)).astype(np.float32)
    soft = p / p.sum(1, keepdims=True)
    w = rng.uniform(0.5, 2, 5).astype(np.float32)
    b = rng.integers(0, 2, (4, 5)).astype(np.float32)
    t = np.array([1, 3, 4, 0])
    y = np.array([1.0, -1.0, -1.0, 1.0], np.float32)
    N = lambda lib: lib.nn      # noqa: E731
    T = lambda lib, a: lib.tensor(a)    # noqa: E731
    return [
        ("ce_weight_ignore_smooth", lambda lib, r: N(lib).CrossEntropyLoss(
            weight=T(lib, w), ignore_index=3, label_smoothing=0.2, reduction=r), [x, t]),
        ("ce_soft_targets", lambda lib, r: N(lib).CrossEntropyLoss(
            weight=T(lib, w), label_smoothing=0.1, reduction=r), [x, soft]),
        ("bce_logits_pos_weight", lambda lib, r: N(lib).BCEWithLogitsLoss(
            pos_weight=T(lib, w), weight=T(lib, w[:1]), reduction=r), [x, b]),
        ("kl_log_target", lambda lib, r: N(lib).KLDivLoss(reduction=r, log_target=True),
         [np.log(soft), np.log(soft[::-1].copy())]),
        ("huber_delta", lambda lib, r: N(lib).HuberLoss(reduction=r, delta=0.5), [x, p]),
        ("poisson_full", lambda lib, r: N(lib).PoissonNLLLoss(
            log_input=False, full=True, reduction=r), [p, 3 * soft]),
        ("margin_ranking", lambda lib, r: N(lib).MarginRankingLoss(0.3, reduction=r),
         [x[:, 0].copy(), x[:, 1].copy(), y]),
        ("multilabel_soft_margin", lambda lib, r: N(lib).MultiLabelSoftMarginLoss(
            weight=T(lib, w), reduction=r), [x, b]),
        ("cosine_embedding", lambda lib, r: N(lib).CosineEmbeddingLoss(0.2, reduction=r),
         [x, p, y]),
    ]


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("case", _loss_cases(), ids=lambda c: c[0])
def test_loss_reductions_and_gradients(case, reduction):
    _, make, args = case
    res = []
    for lib in (torch, llgrad):
        xs = [lib.tensor(a, requires_grad=k == 0) for k, a in enumerate(args)]
        out = make(lib, reduction)(*xs)
        out.backward(lib.ones_like(out) * 1.5)
        res.append((out.detach().numpy(), xs[0].grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.slow                   # (torch.compile imports dynamo: seconds)
@pytest.mark.xfail(strict=True, reason="llgrad.compile(module).state_dict() / named_parameters() "
                   "are the module's own (llgrad/compile/module.py, by design), torch's "
                   "OptimizedModule prefixes every key with '_orig_mod.' (a torch checkpoint of a "
                   "compiled model does not load into llgrad's compiled model without renaming)")
def test_compiled_module_state_dict_keys():
    keys = []
    for lib in (torch, llgrad):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = lib.compile(lib.nn.Sequential(lib.nn.Linear(2, 2)))
        keys.append((list(m.state_dict()), [k for k, _ in m.named_parameters()]))
    assert keys[1] == keys[0]
