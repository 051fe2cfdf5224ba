"""Sweep 69 (t7), file a: course programs from fast.ai's 2022 part 2 ("miniai") and
Karpathy's micrograd lecture, run with PyTorch, with llgrad eagerly and with llgrad
compiling the whole training step through tutorial_harness.py.

- miniai's optimizers from scratch (12_accel_sgd): SGD with weight decay as `p *= 1 -
  lr*wd`, Momentum, RMSProp and Adam keeping their state as attributes set on the
  Parameters themselves (`if not hasattr(p, 'grad_avg'): p.grad_avg = ...`), Adam's bias
  correction from a Python step counter `self.i`, zero_grad through `p.grad.data.zero_()`;
- miniai's callback Learner (09_learner): the batch, predictions and loss kept as
  attributes of the learner, callbacks found by getattr, a metrics callback summing
  `.item()` counts, an exception cancelling the validation epoch, the whole `one_batch`
  compiled as a bound method reading its batch from `self.batch`;
- micrograd's sanity checks against torch (test_engine.py): `torch.Tensor([-4.0]).double()`
  leaves, requires_grad set after creation, the expression rebinding names, `.backward()`
  inside the compiled function and the leaves' .grad read after it."""
import functools

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _miniai_optimizers(torch):
    class SGD:
        def __init__(self, params, lr, wd=0.):
            self.params, self.lr, self.wd = list(params), lr, wd
            self.i = 0

        def step(self):
            with torch.no_grad():
                for p in self.params:
                    self.reg_step(p)
                    self.opt_step(p)
            self.i += 1

        def opt_step(self, p):
            p -= p.grad * self.lr

        def reg_step(self, p):
            if self.wd != 0:
                p *= 1 - self.lr * self.wd

        def zero_grad(self):
            for p in self.params:
                p.grad.data.zero_()

    class Momentum(SGD):
        def __init__(self, params, lr, wd=0., mom=0.9):
            super().__init__(params, lr=lr, wd=wd)
            self.mom = mom

        def opt_step(self, p):
            if not hasattr(p, 'grad_avg'):
                p.grad_avg = torch.zeros_like(p.grad)
            p.grad_avg = p.grad_avg * self.mom + p.grad * (1 - self.mom)
            p -= self.lr * p.grad_avg

    class RMSProp(SGD):
        def __init__(self, params, lr, wd=0., sqr_mom=0.99, eps=1e-5):
            super().__init__(params, lr=lr, wd=wd)
            self.sqr_mom, self.eps = sqr_mom, eps

        def opt_step(self, p):
            if not hasattr(p, 'sqr_avg'):
                p.sqr_avg = p.grad**2
            p.sqr_avg = p.sqr_avg * self.sqr_mom + p.grad**2 * (1 - self.sqr_mom)
            p -= self.lr * p.grad / (p.sqr_avg.sqrt() + self.eps)

    class Adam(SGD):
        def __init__(self, params, lr, wd=0., beta1=0.9, beta2=0.99, eps=1e-5):
            super().__init__(params, lr=lr, wd=wd)
            self.beta1, self.beta2, self.eps = beta1, beta2, eps

        def opt_step(self, p):
            if not hasattr(p, 'avg'):
                p.avg = torch.zeros_like(p.grad.data)
            if not hasattr(p, 'sqr_avg'):
                p.sqr_avg = torch.zeros_like(p.grad.data)
            p.avg = self.beta1 * p.avg + (1 - self.beta1) * p.grad
            unbias_avg = p.avg / (1 - (self.beta1**(self.i + 1)))
            p.sqr_avg = self.beta2 * p.sqr_avg + (1 - self.beta2) * (p.grad**2)
            unbias_sqr_avg = p.sqr_avg / (1 - (self.beta2**(self.i + 1)))
            p -= self.lr * unbias_avg / (unbias_sqr_avg + self.eps).sqrt()

    return {"sgd": (SGD, dict(lr=0.1, wd=1e-2)), "momentum": (Momentum, dict(lr=0.1)),
            "rmsprop": (RMSProp, dict(lr=3e-3, wd=1e-3)), "adam": (Adam, dict(lr=6e-3))}


def _miniai_program(opt_name):
    def program(torch, env):
        nn, F = torch.nn, torch.nn.functional
        opt_cls, kw = _miniai_optimizers(torch)[opt_name]
        model = env.init(nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 5)))
        opt = opt_cls(model.parameters(), **kw)
        xb, yb = env.randn(40, 12), env.randint(0, 5, (40,))
        # (the first zero_grad needs a .grad: miniai's fit runs the first backward first)
        F.cross_entropy(model(xb[:4]), yb[:4]).backward()
        opt.zero_grad()

        def train_step(x, y):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        step = env.step(train_step)
        losses = []
        for epoch in range(3):
            for i in range(0, 40, 10):
                losses.append(step(xb[i:i + 10], yb[i:i + 10]).item())
        env.rec("losses", losses)
        env.rec("i", opt.i)
        env.rec("params", dict(model.state_dict()))
        for n, p in model.named_parameters():
            for attr in ("grad_avg", "sqr_avg", "avg"):
                if hasattr(p, attr):
                    env.rec(f"{n}.{attr}", getattr(p, attr))
            env.rec(f"{n}.grad", p.grad)
        if env.compiled:
            assert step.n_traces <= 2, step.n_traces
    program.__name__ = f"miniai_{opt_name}"
    return program


def miniai_learner(torch, env, n_epochs=3, max_traces=None):
    """09_learner's Learner with callbacks, one_batch compiled."""
    nn, F = torch.nn, torch.nn.functional
    from operator import attrgetter

    class CancelEpochException(Exception):
        pass

    class Callback:
        order = 0

    def run_cbs(cbs, method_nm, learn=None):
        for cb in sorted(cbs, key=attrgetter('order')):
            method = getattr(cb, method_nm, None)
            if method is not None:
                method(learn)

    class MetricsCB(Callback):
        def before_epoch(self, learn):
            self.n, self.correct, self.total = 0, 0, 0.

        def after_batch(self, learn):
            x, y = learn.batch
            self.correct += (learn.preds.argmax(dim=1) == y).sum().item()
            self.total += learn.loss.item() * len(x)
            self.n += len(x)

        def after_epoch(self, learn):
            log.append(f"{'train' if learn.model.training else 'eval'} "
                       f"loss {self.total / self.n:.4f} acc {self.correct / self.n:.3f}")

    class StopAfterCB(Callback):
        order = 1

        def after_batch(self, learn):
            if learn.iter >= 2 and not learn.model.training:
                raise CancelEpochException()

    class Learner:
        def __init__(self, model, dls, loss_func, lr, cbs, opt_func=torch.optim.SGD):
            self.model, self.dls, self.loss_func = model, dls, loss_func
            self.lr, self.cbs, self.opt_func = lr, cbs, opt_func

        def one_batch(self):
            self.preds = self.model(self.batch[0])
            self.loss = self.loss_func(self.preds, self.batch[1])
            if self.model.training:
                self.loss.backward()
                self.opt.step()
                self.opt.zero_grad()

        def one_epoch(self, train):
            self.model.train(train)
            self.dl = self.dls[0] if train else self.dls[1]
            try:
                run_cbs(self.cbs, 'before_epoch', self)
                for self.iter, self.batch in enumerate(self.dl):
                    self.compiled_batch()
                    run_cbs(self.cbs, 'after_batch', self)
            except CancelEpochException:
                pass
            run_cbs(self.cbs, 'after_epoch', self)

        def fit(self, n_epochs):
            self.opt = self.opt_func(self.model.parameters(), self.lr, momentum=0.9)
            self.compiled_batch = env.step(self.one_batch)
            for self.epoch in range(n_epochs):
                self.one_epoch(True)
                with torch.no_grad():
                    self.one_epoch(False)

    log = []
    model = env.init(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.0),
                                   nn.Linear(32, 4)))
    xt, yt = env.randn(48, 10), env.randint(0, 4, (48,))
    xv, yv = env.randn(40, 10), env.randint(0, 4, (40,))
    data = torch.utils.data
    train_dl = data.DataLoader(data.TensorDataset(xt, yt), batch_size=12)
    valid_dl = data.DataLoader(data.TensorDataset(xv, yv), batch_size=8)
    learn = Learner(model, (train_dl, valid_dl), F.cross_entropy, 0.05,
                    [StopAfterCB(), MetricsCB()])
    learn.fit(n_epochs)
    env.rec("log", log)
    env.rec("params", dict(model.state_dict()))
    env.rec("last preds", learn.preds)
    env.rec("last loss", learn.loss)
    if env.compiled and max_traces is not None:
        assert learn.compiled_batch.n_traces <= max_traces, learn.compiled_batch.n_traces


def micrograd_sanity(torch, env):
    """micrograd/test/test_engine.py's test_sanity_check and test_more_ops."""
    def sanity(x):
        z = 2 * x + 2 + x
        q = z.relu() + z * x
        h = (z * z).relu()
        y = h + q + q * x
        y.backward()
        return y

    def more_ops(a, b):
        c = a + b
        d = a * b + b**3
        c = c + c + 1
        c = c + 1 + c + (-a)
        d = d + d * 2 + (b + a).relu()
        d = d + 3 * d + (b - a).relu()
        e = c - d
        f = e**2
        g = f / 2.0
        g = g + 10.0 / f
        g.backward()
        return g

    sanity, more_ops = env.step(sanity), env.step(more_ops)
    for v in (-4.0, 1.5, -0.25):
        x = torch.Tensor([v]).double()
        x.requires_grad = True
        y = sanity(x)
        env.rec(f"sanity {v}", (y.data.item(), x.grad.item()))
    for va, vb in ((-4.0, 2.0), (0.5, -3.0), (3.0, 1.0)):
        a = torch.Tensor([va]).double()
        b = torch.Tensor([vb]).double()
        a.requires_grad = True
        b.requires_grad = True
        g = more_ops(a, b)
        env.rec(f"more_ops {va} {vb}", (g.data.item(), a.grad.item(), b.grad.item()))
        assert isinstance(g.data.item(), float)
    if env.compiled:
        assert sanity.n_traces == 1 and more_ops.n_traces == 1, (sanity.n_traces,
                                                                 more_ops.n_traces)


PROGRAMS = {f"miniai_{n}": _miniai_program(n) for n in ("sgd", "momentum", "rmsprop", "adam")}
PROGRAMS.update(miniai_learner=functools.partial(miniai_learner, max_traces=2),
                micrograd_sanity=micrograd_sanity)


# (miniai_learner: ~5 s cold; test_trainer_holding_its_batches_traces_once below and
# tests/compile/test_self_reads_s69_t7.py show its bug in the default run)
@pytest.mark.parametrize("name, program", program_params(PROGRAMS, slow=("miniai_learner",)))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)


# The guard walk entered everything reachable from a bound method's `self`, read or not: the
# tensors the previous call left in self.loss / self.preds (their requires_grad and batch
# size), self.epoch's value and the length of a log list a callback appends to were
# guarded, so each epoch's first train and eval batches traced again (7 traces in 3 epochs)
# and a fourth epoch reached the recompile limit: the step then ran eagerly with a warning.
# Now `self` is walked through what one_batch reads (compile/self_reads.py): 2 traces.
@pytest.mark.slow
def test_miniai_learner_traces_stay_bounded_over_epochs():
    run_tutorial(lambda torch, env: miniai_learner(torch, env, n_epochs=5, max_traces=2))


class _Trainer:
    """A trainer holding its pre-made batches, its step a method given one batch."""
    def __init__(self, torch, seed):
        torch.manual_seed(seed)
        self.model = torch.nn.Linear(4, 2)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.batches = [(torch.randn(8, 4), torch.randn(8, 2)) for _ in range(10)]

    def step(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss


# (x is self.batches[k][0]: the walk of `self` met the argument again inside self.batches,
# and which element it is (the aliasing of two inputs) was part of the key: a trace per
# batch, then the recompile limit's eager fallback with a warning)
def test_trainer_holding_its_batches_traces_once():
    import warnings

    import llgrad
    tr = _Trainer(llgrad, 0)
    step = llgrad.compile(tr.step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (the recompile limit's eager fallback warns)
        losses = [step(x, y).item() for _ in range(2) for x, y in tr.batches]
    ref = _Trainer(llgrad, 0)       # (eager llgrad, same seed: the same draws)
    assert losses == pytest.approx([ref.step(x, y).item() for _ in range(2)
                                    for x, y in ref.batches], rel=1e-6)
    assert step.n_traces == 1, step.n_traces
