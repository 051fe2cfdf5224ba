"""Sweep 14 (helper E): llgrad.compile of whole training steps (forward, loss, backward,
optimizer.step) against the same step in eager, with the state changed between calls.

- An optimiser's hyper-parameters are float64 0-d graph inputs while a step is traced (a
  schedule changes them without a new trace). Next to a 0-d parameter (a learnable
  temperature, CLIP's logit_scale) such an input made the update float64 where the eager
  step, reading a Python number, computes in float32: SGD's momentum and lr updates rounded
  differently (silently, by an ulp that training then amplifies), and Adam with
  weight_decay raised "expected dtype float for `end` but got dtype double" from the trace.
- RMSprop (with momentum), Adadelta and ASGD added the traced lr as t * lr, then + (two
  roundings), where the eager step with a number makes one fused multiply-add (alpha=): a
  compiled step differed from eager by an ulp on ordinary parameters, silently."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_G = [np.random.RandomState(k).standard_normal(9).astype(np.float32) for k in range(12)]


def _updates(opt_name, kw, shape, compiled):
    """The parameters after each of 12 steps of opt on given gradients (p of `shape`, q 1-d)."""
    p = llgrad.nn.Parameter(llgrad.ones(shape) * 0.7)
    q = llgrad.nn.Parameter(llgrad.tensor(np.linspace(-1, 1, 6).astype(np.float32)))
    opt = getattr(llgrad.optim, opt_name)([p, q], **kw)

    def step(gp, gq):
        p.grad, q.grad = gp.clone(), gq.clone()
        opt.step()

    fn = llgrad.compile(step) if compiled else step
    out = []
    for g in _G:
        gp = llgrad.tensor(g[:3]).reshape(shape) if shape else llgrad.tensor(g[0])
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # (a compiled step, not an eager fallback)
            fn(gp, llgrad.tensor(g[3:]))
        out.append(np.concatenate([p.detach().numpy().ravel(), q.detach().numpy()]))
    return np.array(out)


OPTIMISERS = {
    "sgd_momentum": ("SGD", dict(lr=0.037, momentum=0.9)),
    "sgd_nesterov": ("SGD", dict(lr=0.037, momentum=0.9, nesterov=True, weight_decay=0.1)),
    "sgd_dampening": ("SGD", dict(lr=0.037, momentum=0.9, dampening=0.3)),
    "adam_weight_decay": ("Adam", dict(lr=0.0123, weight_decay=0.1, amsgrad=True)),
    "adamw": ("AdamW", dict(lr=0.0123)),
    "asgd": ("ASGD", dict(lr=0.0123, t0=3)),
    "rmsprop_momentum": ("RMSprop", dict(lr=0.0123, momentum=0.5, centered=True)),
}


@pytest.mark.parametrize("name,shape", [(n, ()) for n in sorted(OPTIMISERS)] +
                         [("sgd_momentum", (3,)), ("adam_weight_decay", (3,))])
def test_compiled_optimizer_step_bitwise_equals_eager(name, shape):
    opt_name, kw = OPTIMISERS[name]
    eager = _updates(opt_name, kw, shape, compiled=False)
    compiled = _updates(opt_name, kw, shape, compiled=True)
    np.testing.assert_array_equal(compiled, eager)


@pytest.mark.slow      # (torch's first optimizer step imports its compiler: seconds)
def test_eager_sgd_on_zero_dim_param_matches_torch():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(()) * 0.7)
        opt = lib.optim.SGD([p], lr=0.037, momentum=0.9, nesterov=True)
        out = []
        for g in _G:
            p.grad = lib.tensor(g[0])
            opt.step()
            out.append(p.detach().numpy().copy())
        return np.array(out)
    np.testing.assert_array_equal(run(llgrad), run(torch))


@pytest.mark.parametrize("lr", [0.0123, "tensor"])
def test_rmsprop_momentum_compiled_equals_eager(lr):
    def run(compiled):
        p = llgrad.nn.Parameter(llgrad.tensor(np.linspace(-1, 1, 6).astype(np.float32)))
        opt = llgrad.optim.RMSprop([p], lr=llgrad.tensor(0.0123) if lr == "tensor" else lr,
                                   momentum=0.5)

        def step(g):
            p.grad = g.clone()
            opt.step()

        fn = llgrad.compile(step) if compiled else step
        out = []
        for g in _G:
            fn(llgrad.tensor(g[:6]))
            out.append(p.detach().numpy().copy())
        return np.array(out)
    np.testing.assert_array_equal(run(True), run(False))


# -- a whole training step of a module, the state changed between calls ----------------

class _Net(llgrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = llgrad.nn.Linear(4, 5)
        self.bn = llgrad.nn.BatchNorm1d(5)
        self.drop = llgrad.nn.Dropout(0.3)
        self.b = llgrad.nn.Linear(5, 3)
        self.scale = llgrad.nn.Parameter(llgrad.tensor(1.3))     # (a 0-d parameter)

    def forward(self, x):
        return self.b(self.drop(self.bn(self.a(x)))) * self.scale


def _change(i, m, opt, log):
    """The state change made before call i (the same on the eager and the compiled side)."""
    if i == 1:
        m.eval()
        opt.param_groups[0]["lr"] = 0.02
        m.a.register_forward_hook(lambda mod, inp, out: log.append(out.sum().item()) or out * 2)
    elif i == 2:
        m.train()
        m.bn.running_var.mul_(1.5)
        m.a.bias.requires_grad_(False)
    elif i == 3:
        m.b.weight = llgrad.nn.Parameter(m.b.weight.detach().t().contiguous().t() * 0.5)
        opt.param_groups[0]["params"][4] = m.b.weight
        m.a.bias.requires_grad_(True)


def _train(opt_name, compiled):
    llgrad.manual_seed(0)
    m = _Net()
    opt = (llgrad.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) if opt_name == "sgd"
           else llgrad.optim.Adam(m.parameters(), lr=0.01))
    cot = llgrad.tensor(np.random.RandomState(1).standard_normal((6, 3)).astype(np.float32))

    def step(x):
        opt.zero_grad()
        out = m(x)
        loss = (out * cot).sum()
        loss.backward()
        opt.step()
        return out, loss

    fn = llgrad.compile(step) if compiled else step
    log, seen = [], []
    for i in range(5):
        _change(i, m, opt, log)
        llgrad.manual_seed(10 + i)
        x = llgrad.tensor(np.random.RandomState(i).standard_normal((6, 4)).astype(np.float32))
        out, loss = fn(x)
        seen.append([out.detach().numpy().copy(), loss.detach().numpy().copy()] +
                    [t.detach().numpy().copy() for t in m.state_dict().values()] +
                    [p.grad.numpy().copy() for p in m.parameters() if p.grad is not None] +
                    [llgrad.get_rng_state().numpy().copy()])
    return seen, log


@pytest.mark.slow
@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_module_training_step_with_changing_state(opt_name):
    eager, log_e = _train(opt_name, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled, log_c = _train(opt_name, True)
    assert log_c == pytest.approx(log_e, rel=1e-6)
    for e_call, c_call in zip(eager, compiled):
        assert len(e_call) == len(c_call)
        for a, b in zip(e_call, c_call):
            np.testing.assert_allclose(b, a, rtol=2e-6, atol=2e-6)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_packed_sequence_training_step_compiled(kind):
    def run(compiled):
        llgrad.manual_seed(0)
        m = getattr(llgrad.nn, kind)(3, 5, num_layers=2, batch_first=True)
        opt = llgrad.optim.Adam(m.parameters(), lr=0.01)
        rnn = llgrad.nn.utils.rnn

        def step(x, lens):
            opt.zero_grad()
            out, _ = m(rnn.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False))
            pad, _ = rnn.pad_packed_sequence(out, batch_first=True)
            (pad * pad).sum().backward()
            llgrad.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
            return pad

        fn = llgrad.compile(step) if compiled else step
        res = []
        for i in range(4):
            t = 6 - i % 2
            x = llgrad.tensor(np.random.RandomState(i).standard_normal((4, t, 3)).astype(np.float32))
            res.append(fn(x, llgrad.tensor([2, t, 1, 4])).detach().numpy().copy())
        return res + [p.detach().numpy() for p in m.parameters()]
    for a, b in zip(run(False), run(True)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_spectral_norm_train_eval_switch_compiled():
    def run(compiled):
        llgrad.manual_seed(0)
        m = llgrad.nn.utils.parametrizations.spectral_norm(llgrad.nn.Linear(4, 3))
        opt = llgrad.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x):
            opt.zero_grad()
            out = m(x)
            (out * out).sum().backward()
            opt.step()
            return out

        fn = llgrad.compile(step) if compiled else step
        res = []
        for i in range(4):
            m.train(i != 2)
            x = llgrad.tensor(np.random.RandomState(i).standard_normal((5, 4)).astype(np.float32))
            res.append(fn(x).detach().numpy().copy())
        return res + [t.detach().numpy() for t in m.state_dict().values()]
    for a, b in zip(run(False), run(True)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
