"""Sweep 58 (H2, c): what the sweep's programs found, each in small. A user's Optimizer
subclass under a schedule (a Lion with a warm-up) compiled once, not once per lr; SAM's
`self.state[p]["old_p"] = p.data.clone()` ... `p.data = self.state[p]["old_p"]` (a
parameter given the memory of a tensor the step also keeps) compiled, leaving the two
sharing memory as eager does, and the next call's two inputs over one Storage traced as
one memory. Each against eager (and torch where the program is torch's)."""
import warnings

import numpy as np
import pytest

import llgrad


def _user_sgd(lib):
    class SignSGD(lib.optim.Optimizer):
        def __init__(self, params, lr=0.1, weight_decay=0.0):
            super().__init__(params, dict(lr=lr, weight_decay=weight_decay))

        @lib.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    p.data.mul_(1 - g["lr"] * g["weight_decay"])
                    p.add_(p.grad.sign(), alpha=-g["lr"])
    return SignSGD


def _schedule_run(lib, compiled, n=10):
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    with lib.no_grad():
        m.weight.copy_(lib.tensor([[0.5, -0.2, 0.1], [0.3, 0.8, -0.6]]))
        m.bias.copy_(lib.tensor([0.1, -0.1]))
    opt = _user_sgd(lib)(m.parameters(), lr=0.1, weight_decay=0.1)
    sched = lib.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (s + 1))

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss.detach()

    f = llgrad.compile(step) if compiled else step
    x = lib.tensor([[1.0, 2.0, -1.0], [0.5, -0.5, 2.0]])
    losses = []
    for _ in range(n):
        losses.append(float(f(x)))
        sched.step()
    return f, losses, [p.detach().numpy().copy() for p in m.parameters()]


def test_user_optimizer_schedule_compiles_once():
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no recompile-limit warning, no fallback)
        f, losses, params = _schedule_run(llgrad, True)
    assert f.n_traces == 1
    _, e_losses, e_params = _schedule_run(llgrad, False)
    np.testing.assert_allclose(losses, e_losses, rtol=1e-6)
    for a, b in zip(params, e_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    torch = pytest.importorskip("torch")
    _, t_losses, t_params = _schedule_run(torch, False)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-5)
    for a, b in zip(params, t_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _sam_like(compiled, n=5, apart_at=None):
    """A step that keeps p's value, perturbs p, backpropagates again, then gives p the kept
    tensor's memory (`p.data = old`) and lets SGD update it in place."""
    w = llgrad.nn.Parameter(llgrad.tensor([1.0, 2.0, 3.0]))
    opt = llgrad.optim.SGD([w], lr=0.1, momentum=0.9)
    state = {}

    def step(x):
        loss = (w * w * x).sum()
        loss.backward()
        with llgrad.no_grad():
            state["old"] = w.data.clone()
            w.add_(w.grad * 0.5)
        w.grad = None
        (w * w * x).sum().backward()
        with llgrad.no_grad():
            w.data = state["old"]
        opt.step()
        return loss.detach()

    f = llgrad.compile(step) if compiled else step
    x = llgrad.tensor([1.0, -1.0, 0.5])
    out = []
    for i in range(n):
        if i == apart_at:       # (the kept tensor no longer p's memory)
            state["old"] = state["old"].clone()
        out.append((float(f(x)), w.detach().numpy().copy(), state["old"].numpy().copy(),
                    w._storage is state["old"]._storage))
    return f, out


@pytest.mark.parametrize("apart_at", [None, 3])
def test_data_assign_of_a_kept_tensor(apart_at):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f, got = _sam_like(True, apart_at=apart_at)
    _, want = _sam_like(False, apart_at=apart_at)
    assert f.entries and f.n_traces <= 3
    for (l1, w1, o1, s1), (l2, w2, o2, s2) in zip(got, want):
        np.testing.assert_allclose(l1, l2, rtol=1e-6)
        np.testing.assert_allclose(w1, w2, rtol=1e-6)
        np.testing.assert_allclose(o1, o2, rtol=1e-6)
        assert s1 == s2


def _aliased_write(compiled):
    """Inputs over one Storage (after `w.data = kept` outside): a write through one name
    is read through the other."""
    w = llgrad.nn.Parameter(llgrad.tensor([1.0, 2.0, 3.0]))
    kept = {"t": w.data.clone()}
    w.data = kept["t"]

    def f(x):
        with llgrad.no_grad():
            kept["t"].mul_(2)
            w.add_(x)
        return w.detach() * kept["t"]

    g = llgrad.compile(f) if compiled else f
    x = llgrad.tensor([1.0, 0.5, -1.0])
    return g, [g(x).numpy().copy() for _ in range(4)], w.detach().numpy().copy(), \
        w._version


def test_aliased_inputs_written_through_either_name():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g, got, w_got, v_got = _aliased_write(True)
    _, want, w_want, v_want = _aliased_write(False)
    assert g.entries
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(w_got, w_want, rtol=1e-6)
    assert v_got == v_want


def test_aliased_inputs_with_results_that_require_grad_run_eagerly():
    w = llgrad.nn.Parameter(llgrad.tensor([1.0, 2.0, 3.0]))
    kept = {"t": w.data.clone()}
    w.data = kept["t"]

    def f(x):
        with llgrad.no_grad():
            kept["t"].add_(x)
        return (w * w).sum()

    g = llgrad.compile(f)
    x = llgrad.tensor([1.0, 0.5, -1.0])
    with pytest.warns(UserWarning, match="share"):
        for _ in range(3):
            g(x).backward()
    np.testing.assert_allclose(w.detach().numpy(), [4.0, 3.5, 0.0])
    np.testing.assert_allclose(w.grad.numpy(), [2.0 * 2 + 2 * 3 + 2 * 4,
                                                2 * 2.5 + 2 * 3 + 2 * 3.5,
                                                2 * 2 + 2 * 1 + 0.0])


def test_data_assign_of_the_returned_tensor():
    """`p.data = y; return y`: the result is p's memory, in compiled calls as in eager."""
    def run(compiled):
        p = llgrad.ones(2, 3)

        def step(s):
            with llgrad.no_grad():
                y = p * s
                p.data = y
                return y

        f = llgrad.compile(step) if compiled else step
        out = []
        for s in (2.0, 3.0, 0.5):
            y = f(llgrad.tensor(s))
            y.add_(1)           # (written through the result: p sees it)
            out.append((p.numpy().copy(), y._storage is p._storage, p._version))
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(True)
    for (a, s1, v1), (b, s2, v2) in zip(got, run(False)):
        np.testing.assert_allclose(a, b)
        assert s1 == s2 is True and v1 == v2
