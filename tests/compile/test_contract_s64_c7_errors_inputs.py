"""Compile-contract adversary s64 (c7), exceptions and changing inputs: each program runs with
torch (the oracle), llgrad eagerly and llgrad.compile in lockstep (contract_harness_sweep7.runs);
every observation must match. Exceptions: a NaN or grad-norm check raising after (or before)
optimizer.step(), assertions on tensor values after in-place writes to inputs and captured
buffers, a forward pre-hook raising after BatchNorm updated its running stats, data-dependent
errors of ops (indices out of range, non-positive-definite matrices, probabilities outside
[0, 1]) after a captured write, anomaly detection. Inputs: requires_grad flipping between
calls (on inputs, captured tensors and frozen layers), views and detached aliases of parameters
the step updates, keyword arguments and defaults changed between calls."""
import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _try(see, fn, *a, **kw):
    try:
        see(fn(*a, **kw))
    except Exception as e:     # (the type: torch's and llgrad's messages may differ)
        see(("raised", type(e).__name__))


def nan_check_after_step(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 1)
    opt = T.optim.Adam(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad(); l = (m(x) - y).pow(2).mean(); l.backward(); opt.step()
        if T.isnan(l):
            raise FloatingPointError("nan loss")
        return l
    s = C(step)
    for i in range(5):
        y = T.full((2, 1), float("nan") if i == 2 else float(i))
        _try(see, s, T.ones(2, 3) * i, y)
        see(list(m.parameters()), m.weight.grad, opt.state[m.weight]["exp_avg"])
        if i == 2:                             # the user repairs the model and goes on
            with T.no_grad():
                for p in m.parameters():
                    p.nan_to_num_(0.0)
            opt.state.clear()


def grad_norm_check_before_step(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 1)
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sched = T.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward()
        gn = T.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        if gn > 50:
            raise OverflowError("grad norm")
        opt.step(); sched.step()
        return l, gn
    s = C(step)
    for i in range(5):
        _try(see, s, T.ones(2, 3) * (10 if i == 2 else 1))
        see(m.weight, m.weight.grad, opt.param_groups[0]["lr"])


def assert_after_inplace_writes(T, C, see):
    w, buf, seen_sums = T.ones(3, requires_grad=True), T.zeros(3), []

    def f(x, acc):
        buf.add_(x); x.add_(1)
        acc.append(x.sum())
        y = x * w
        assert (y >= 0).all(), "negative"
        buf.mul_(2); x.mul_(2)
        return y.sum()
    s = C(f)
    for i in range(5):
        x = T.arange(3.0) - (4 if i in (2, 4) else 0)
        _try(see, lambda: s(x, seen_sums).backward())
        see(buf, x, w.grad, list(seen_sums))


def hook_raises_after_batchnorm(T, C, see):
    T.manual_seed(0)
    m = T.nn.Sequential(T.nn.BatchNorm1d(3), T.nn.Linear(3, 2))

    def pre(mod, a):
        if a[0].abs().max() > 1.5:
            raise ValueError("activation too big")
    m[1].register_forward_pre_hook(pre)
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l
    s = C(step)
    for i in range(5):
        x = T.tensor([[0.0, 1, 2], [1, 2, 3], [2, 3, 4]])
        if i in (2, 4):
            x = T.tensor([[0.0, 0, 0], [0, 0, 0], [9, 9, 9]])
        _try(see, s, x)
        see(m[0].running_mean, m[0].running_var, m[0].num_batches_tracked, m[1].weight)


def tensor_hook_raises_in_step(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 2)
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def h(g):
        if g.abs().max() > 5:
            raise RuntimeError("grad too big")
    m.weight.register_hook(h)

    def step(x):
        opt.zero_grad(); l = m(x).sum(); l.backward(); opt.step()
        return l
    s = C(step)
    for i in range(5):
        _try(see, s, T.ones(2, 3) * (i * 2))
        see(m.weight, m.bias, m.weight.grad, m.bias.grad)


OP_ERRORS = {
    "index": (lambda T, w, i: w[i] * 2, lambda T, k: T.tensor([0, 1, [2, 7, -1, -5][k]])),
    "gather+index_select": (lambda T, w, i: T.gather(w, 0, i) + w.index_select(0, i),
                            lambda T, k: T.tensor([0, [1, 9, 2, -1][k]])),
    "cross_entropy target": (lambda T, w, i: T.nn.functional.cross_entropy(w.reshape(1, 4), i),
                             lambda T, k: T.tensor([[3, 4, 0, -1][k]])),
    "embedding": (lambda T, w, i: T.nn.functional.embedding(i, w.reshape(4, 1)),
                  lambda T, k: T.tensor([[3, 4, 0, -1][k]])),
    "one_hot": (lambda T, w, i: T.nn.functional.one_hot(i, 4) * w,
                lambda T, k: T.tensor([[3, 4, 0, -1][k]])),
    "scatter_add_": (lambda T, w, i: T.zeros(4).scatter_add_(0, i, w[:2]),
                     lambda T, k: T.tensor([0, [1, 4, 3, -1][k]])),
    "cholesky": (lambda T, w, i: T.linalg.cholesky(T.diag(w) + i.float()),
                 lambda T, k: T.full((4, 4), [0.5, 9.0, 0.1, -9.0][k])),
    "binary_cross_entropy": (lambda T, w, i: T.nn.functional.binary_cross_entropy(
        i, T.ones(2)) * w.sum(), lambda T, k: T.tensor([0.5, [0.2, 1.5, 1.0, -0.5][k]])),
    "bincount": (lambda T, w, i: T.bincount(i, minlength=4) * w,
                 lambda T, k: T.tensor([0, [1, -1, 3, -2][k]])),
}


@pytest.mark.parametrize("op", list(OP_ERRORS))
def test_op_error_between_writes_and_draws(op):
    """The op raises midway: the writes and draws before it stay done, those after it undone."""
    fn, arg = OP_ERRORS[op]

    def prog(T, C, see):
        w, buf = T.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True), T.zeros(2)

        def f(x, i):
            buf.add_(1); x.mul_(3)
            a = T.rand(2)
            y = fn(T, w, i)
            buf.mul_(2); x.add_(100)
            return y, a, T.rand(2)
        s = C(f)
        for k in range(4):
            x = T.ones(2)
            _try(see, s, x, arg(T, k))
            see(buf, x, T.get_rng_state())
    runs(prog, torch)


def requires_grad_flips(T, C, see):
    w, a = T.ones(3, requires_grad=True), T.ones(3)

    def f(x, y):
        return (x * a * w).exp().sum(), x * y
    s = C(f)
    for i in range(6):
        x, y = T.arange(3.0) / (i + 1), T.ones(3) * 2
        x.requires_grad_(i % 2 == 1); y.requires_grad_(i % 3 == 2); a.requires_grad_(i >= 4)
        l, z = s(x, y)
        l.backward()
        see(l, z, z.is_leaf, w.grad, x.grad, a.grad)
        a.grad = None; a.requires_grad_(False)
        with T.no_grad():
            a.add_(0.25)


def frozen_layers(T, C, see):
    T.manual_seed(0)
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Tanh(), T.nn.Linear(4, 1))
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).mean(); l.backward(); opt.step()
        return l
    s = C(step)
    for i in range(6):
        if i == 2:
            m[0].requires_grad_(False)
        if i == 4:
            m[0].weight.requires_grad_(True)
        see(s(T.ones(2, 3) * (i + 1)), list(m.parameters()), [p.grad for p in m.parameters()])


def parameter_aliases_as_inputs(T, C, see):
    """Views and detached aliases of the weight the step updates, passed as inputs."""
    T.manual_seed(0)
    m = T.nn.Linear(3, 2)
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def step(x, wd):
        before = wd.sum() * 1
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l, before, wd * 1
    s = C(step)
    for i in range(6):
        wd = [m.weight.detach(), m.weight.data[1], m.weight.detach().t(), m.bias.data,
              m.weight.detach(), m.weight.detach()][i]
        see(s(T.ones(2, 3) * (i + 1), wd), m.weight)
    f = C(lambda v, x: (v * x).sum())
    for i in range(4):
        l = f(m.weight[i % 2], T.ones(3) * (i + 1)); l.backward()
        see(l, m.weight.grad)


def keyword_arguments_and_defaults(T, C, see):
    w, d, cfg = T.ones(3, requires_grad=True), T.ones(3), {"s": 1.0}

    def f(x, scale=2.0, mode="sum", b=d, c=cfg, *, flag=False):
        y = (x * w * scale + b) * c["s"]
        y = y.relu() if flag else y
        return y.sum() if mode == "sum" else y.mean()
    s = C(f)
    calls = [{}, {"scale": 3.0}, {"mode": "mean"}, {"flag": True}, {}, {"b": T.zeros(3)},
             {"b": 1.5}, {"scale": 3, "mode": "mean"}, {}]
    for i, kw in enumerate(calls):
        l = s(T.arange(3.0) - 1, **kw); l.backward()
        see(l, w.grad)
        d.add_(1)
        cfg["s"] += 0.5
        if i == 5:
            f.__defaults__ = (0.5, "sum", d, cfg)
        if i == 6:
            f.__kwdefaults__ = {"flag": True}


def train_eval_and_grad_modes(T, C, see):
    T.manual_seed(0)
    m = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.Dropout(0.5), T.nn.BatchNorm1d(8),
                        T.nn.Linear(8, 1))

    def step(x, on):
        with T.set_grad_enabled(on):
            l = m(x).pow(2).mean()
        if on:
            l.backward()
        return l, l.requires_grad
    s = C(step)
    for i in range(6):
        m.train(i % 3 != 2)
        see(s(T.arange(12.0).reshape(3, 4) * (i + 1), i != 4), m[2].running_mean,
            m[2].num_batches_tracked, m[0].weight.grad)


def anomaly_detection(T, C, see):
    w = T.tensor([1.0, -1.0, 2.0], requires_grad=True)

    def f(x):
        l = ((x * w).sqrt() * 0).sum()
        l.backward()
        return l
    s = C(f)
    for i in range(4):
        with T.autograd.set_detect_anomaly(i % 2 == 1):
            _try(see, s, T.ones(3) * (i + 1))
        see(w.grad, T.is_anomaly_enabled())
        w.grad = None


class _Stop(BaseException):
    """Not an Exception: a compiled call must not swallow it or leave its modes set."""


def base_exceptions_leave_modes(T, C, see):
    T.manual_seed(0)
    m, cnt = T.nn.Linear(3, 1), [0]

    def pre(mod, a):
        cnt[0] += 1
        if cnt[0] in (2, 4):
            raise KeyboardInterrupt
    m.register_forward_pre_hook(pre)

    def step(x, stop):
        with T.no_grad():
            y = x * 2
            if stop:
                raise _Stop()
        l = m(y).sum(); l.backward()
        return l
    s = C(step)
    for i, stop in enumerate([True, False, False, False, True, False, False]):
        try:
            see(s(T.ones(2, 3) * (i + 1), stop))
        except (KeyboardInterrupt, _Stop) as e:
            see(("raised", type(e).__name__))
        see(T.is_grad_enabled(), m.weight.grad, cnt[0], (m(T.ones(1, 3)) * 2).requires_grad)


PROGRAMS = [nan_check_after_step, grad_norm_check_before_step, assert_after_inplace_writes,
            hook_raises_after_batchnorm, tensor_hook_raises_in_step, requires_grad_flips,
            frozen_layers, parameter_aliases_as_inputs, keyword_arguments_and_defaults,
            train_eval_and_grad_modes, anomaly_detection, base_exceptions_leave_modes]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_compiled_program_equals_eager_and_torch(prog):
    runs(lambda T, C, see: prog(T, C, see), torch)


@pytest.mark.parametrize("prog", [nan_check_after_step, parameter_aliases_as_inputs],
                         ids=lambda p: p.__name__)
def test_native_program_equals_eager_and_torch(prog):
    runs(lambda T, C, see: prog(T, C, see), torch, backend="llvm")
