"""Session 67 (p5): a method that names `type` keeps a compiled function's numbers guarded
by value only where a trace runs it (compile/type_reads.py), not because the class of an
object the step reaches defines it.

Fixes (each failed before: a trace per call, then eager calls with the recompile-limit
warning): a Trainer whose `__repr__` names `type(self)` with a compiled `train_step` that
counts `self.step_count += 1`; a model whose init helper asks `type(m) == nn.Linear` with
a loss weight passed as a changing float.

Soundness (each is a silent wrong answer if the watched method's check is left out): a
method naming `type` that does run sees the number, the optimiser's lr, an .item() number,
or a formatted text, as eager does (not their stand-ins); one held as a bound method is
counted as code the call runs. The oracle is the same program run eagerly."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F

nn = llgrad.nn


class Trainer:
    def __init__(self):
        llgrad.manual_seed(0)
        self.model = nn.Linear(3, 2)
        self.opt = llgrad.optim.SGD(self.model.parameters(), lr=0.1)
        self.step_count = 0

    def __repr__(self):
        return f"{type(self).__name__}(step_count={self.step_count})"

    def train_step(self, x, y):
        self.step_count += 1
        loss = F.mse_loss(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()


def _data():
    x = llgrad.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    return x, llgrad.tensor(np.linspace(0, 1, 8, dtype=np.float32).reshape(4, 2))


def _no_warnings(run):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return run()


def test_trainer_repr_naming_type_keeps_one_trace():
    x, y = _data()
    eager, comp = Trainer(), Trainer()
    step = llgrad.compile(comp.train_step, backend="interpret")
    want = [eager.train_step(x, y).item() for _ in range(11)]
    got = _no_warnings(lambda: [step(x, y).item() for _ in range(11)])
    assert step.n_traces <= 2, step.n_traces
    assert got == want
    assert comp.step_count == eager.step_count == 11
    assert repr(comp) == "Trainer(step_count=11)"
    np.testing.assert_array_equal(comp.model.weight.detach().numpy(),
                                  eager.model.weight.detach().numpy())


class InitNet(nn.Module):
    def __init__(self):
        super().__init__()
        llgrad.manual_seed(1)
        self.fc1, self.fc2 = nn.Linear(3, 5), nn.Linear(5, 2)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if type(m) == nn.Linear:
            nn.init.constant_(m.bias, 0.1)

    def forward(self, x):
        return self.fc2(self.fc1(x).tanh())


def _annealed(compiled):
    model = InitNet()
    opt = llgrad.optim.Adam(model.parameters(), lr=0.01)

    def step(x, y, beta):
        loss = F.mse_loss(model(x), y) * beta
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    f = llgrad.compile(step, backend="interpret") if compiled else step
    x, y = _data()
    out = [f(x, y, 0.25 + 0.1 * i).item() for i in range(11)]
    return out, model, f


def test_init_helper_naming_type_leaves_a_float_argument_dynamic():
    want, m_eager, _ = _annealed(False)
    got, m_comp, f = _no_warnings(lambda: _annealed(True))
    assert f.n_traces <= 2, f.n_traces
    assert got == want
    for a, b in zip(m_comp.parameters(), m_eager.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


class Reader:
    """A step whose methods name type(): `kind` picks which one runs, on what."""

    def __init__(self, kind):
        llgrad.manual_seed(0)
        self.kind = kind
        self.model = nn.Linear(3, 2)
        self.opt = llgrad.optim.SGD(self.model.parameters(), lr=0.1)
        self.seen = 0.0
        if kind == "bound":             # (a bound method held: called not via the class)
            self.cb = self.weight

    def weight(self, beta):
        return 2.0 if type(beta) is float else 3.0

    def lr_kind(self):
        return 1.0 if type(self.opt.param_groups[0]["lr"]) is float else 0.5

    def number_kind(self, n):
        return 1.0 if type(n) is float else 0.25

    def text_kind(self, s):
        return 1.0 if type(s) is str else 0.125

    def step(self, x, y, beta):
        loss = F.mse_loss(self.model(x), y)
        kind = self.kind
        if kind == "argument":
            loss = loss * self.weight(beta)
        elif kind == "slot":            # (the number stored on the object, then read)
            self.seen = beta
            loss = loss * self.weight(self.seen)
        elif kind == "lr":
            loss = loss * self.lr_kind()
        elif kind == "lr_only":         # (no number argument steers: beta stays fixed)
            loss = loss * self.lr_kind()
        elif kind == "item":
            loss = loss * self.number_kind(loss.item())
        elif kind == "item_text":
            loss = loss * self.text_kind(f"{loss.item():.3f}")
        elif kind == "tensor_text":
            loss = loss * self.text_kind(f"{loss.detach()}")
        elif kind == "bound":
            loss = loss * self.cb(beta)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()


def _reader_run(kind, compiled, n=6):
    r = Reader(kind)
    f = llgrad.compile(r.step, backend="interpret") if compiled else r.step
    x, y = _data()
    out = []
    for i in range(n):
        out.append(f(x, y, 0.5 if kind == "lr_only" else 0.5 + 0.125 * i).item())
        r.opt.param_groups[0]["lr"] *= 0.9      # (a schedule between the calls)
    return out, r.model.weight.detach().numpy().copy()


@pytest.mark.parametrize("kind", ["argument", "slot", "lr", "lr_only", "item", "item_text",
                                  "tensor_text", "bound"])
def test_a_method_naming_type_that_runs_sees_eagers_values(kind):
    want, w_want = _reader_run(kind, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (a trace per value may reach the limit)
        got, w_got = _reader_run(kind, True)
    assert got == want
    np.testing.assert_array_equal(w_got, w_want)


class Sometimes:
    """A step that runs its method naming type() only every third call, after traces that
    did not run it made its counter and scale inputs."""

    def __init__(self):
        llgrad.manual_seed(0)
        self.model = nn.Linear(3, 2)
        self.opt = llgrad.optim.SGD(self.model.parameters(), lr=0.1)
        self.n, self.scale = 0, 1.0

    def factor(self):
        return 2.0 if type(self.scale) is float else 5.0

    def step(self, x, y):
        self.n += 1
        loss = F.mse_loss(self.model(x), y) * self.scale
        if self.n % 3 == 0:
            loss = loss * self.factor()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()


def test_a_method_naming_type_first_run_by_a_later_trace():
    def run(compiled):
        t = Sometimes()
        f = llgrad.compile(t.step, backend="interpret") if compiled else t.step
        x, y = _data()
        out = []
        for i in range(10):
            t.scale = 1.0 + 0.5 * i
            out.append(f(x, y).item())
        return out, t.model.weight.detach().numpy().copy()

    want, w_want = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (a trace per value reaches the limit)
        got, w_got = run(True)
    assert got == want
    np.testing.assert_array_equal(w_got, w_want)
