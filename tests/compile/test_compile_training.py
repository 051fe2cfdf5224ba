"""A whole training step (forward, backward, update) compiled as one function: parameters
held by an object, .grad set inside the step, in-place updates written back."""
import numpy as np

import llgrad
import llgrad.nn.functional as F


class Net:
    def __init__(self, seed):
        llgrad.manual_seed(seed)
        self.w1 = (llgrad.randn(3, 8) * 0.5).requires_grad_()
        self.b1 = llgrad.zeros(8, requires_grad=True)
        self.w2 = (llgrad.randn(8, 2) * 0.5).requires_grad_()

    def params(self):
        return [self.w1, self.b1, self.w2]

    def forward(self, x):
        return (x @ self.w1 + self.b1).tanh() @ self.w2


def sgd_step(net, x, y, lr):
    for p in net.params():
        p.grad = None
    loss = F.cross_entropy(net.forward(x), y)
    loss.backward()
    with llgrad.no_grad():
        for p in net.params():
            p.sub_(lr * p.grad)
    return loss.detach()


def accumulate_step(net, x, y):
    # no zero_grad: gradients accumulate into the existing .grad, as in eager
    F.cross_entropy(net.forward(x), y).backward()
    return net.w1.grad.sum()


def data():
    llgrad.manual_seed(1)
    x = llgrad.randn(16, 3)
    return x, (x[:, 0] > 0).long()


def test_compiled_sgd_step_follows_eager_trajectory():
    x, y = data()
    eager_net, comp_net = Net(0), Net(0)
    step = llgrad.compile(sgd_step)
    for _ in range(6):
        le = sgd_step(eager_net, x, y, 0.5)
        lc = step(comp_net, x, y, 0.5)
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5)
        for pe, pc in zip(eager_net.params(), comp_net.params()):
            np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(),
                                       rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-5, atol=1e-6)
    # (one trace: the step sets each .grad to None before its backward, so the .grad it
    # meets does not matter: the first trace serves the calls that find one)
    assert step.n_traces == 1
    assert not lc.requires_grad


def test_gradients_accumulate_across_compiled_calls():
    x, y = data()
    eager_net, comp_net = Net(0), Net(0)
    step = llgrad.compile(accumulate_step)
    for _ in range(4):
        e = accumulate_step(eager_net, x, y)
        c = step(comp_net, x, y)
        np.testing.assert_allclose(c.numpy(), e.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(comp_net.w2.grad.numpy(), eager_net.w2.grad.numpy(), rtol=1e-5)


# ---- entries that do not depend on .grad -------------------------------------------------------
def _loss(net, x, y):
    return F.cross_entropy(net.forward(x), y)


def test_a_forward_that_never_reads_grad_is_traced_once_across_backwards():
    # the first backward makes the .grad a second call sees: a forward that neither reads
    # nor sets them runs its first trace's entry (no second trace), with the fast path
    x, y = data()
    eager_net, comp_net = Net(0), Net(0)
    loss = llgrad.compile(_loss)
    for k in range(5):
        le, lc = _loss(eager_net, x, y), loss(comp_net, x, y)
        le.backward()
        lc.backward()
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
        for pe, pc in zip(eager_net.params(), comp_net.params()):   # accumulated k + 1 times
            np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert loss.n_traces == 1


def test_positional_forward_with_grads_takes_the_grad_free_entry_on_the_fast_path(monkeypatch):
    from test_fastpath import _walks
    f = llgrad.compile(lambda x, w: (x @ w).tanh().sum())
    x, w = llgrad.randn(4, 3), llgrad.randn(3, 2, requires_grad=True)
    f(x, w).backward()                  # traced with w.grad None
    f.wait()
    f(x, w).backward()                  # w.grad exists: the same entry, compiled now
    walks = _walks(monkeypatch)
    for _ in range(3):
        f(x, w).backward()
    want = 5 * (x.T @ (1 - (x @ w).tanh() ** 2)).detach().numpy()
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5)
    assert f.n_traces == 1 and not walks


def test_a_function_that_reads_grad_is_traced_per_grad_state():
    def f(w):
        g = w.grad
        return w * 2 if g is None else w * 2 + g

    cf = llgrad.compile(f)
    w = llgrad.tensor([1.0, 2.0], requires_grad=True)
    for k in range(3):
        out = cf(w)
        np.testing.assert_allclose(out.detach().numpy(), f(w).detach().numpy())
        out.sum().backward()            # w.grad: 2, then 2 + 3, ...
    assert cf.n_traces == 2             # .grad None, then a .grad of w's layout
    cf.dump(w)                          # (finds the entry of the call's key)


def test_grad_free_entry_keeps_value_guards():
    def f(x, w):
        if (x * w).sum() > 0:           # transform=False: a value guard
            return (x * w).sum()
        return (x * w * 3).sum()

    cf = llgrad.compile(f, transform=False)
    w = llgrad.tensor([1.0, 1.0], requires_grad=True)
    pos, neg = llgrad.tensor([1.0, 2.0]), llgrad.tensor([-1.0, -2.0])
    cf(pos, w).backward()
    cf.wait()           # (built: the next calls check the value guard)
    cf(neg, w).backward()               # w.grad exists from here on
    for x in (pos, neg, pos):
        cf.wait()
        before = w.grad.numpy().copy()
        out = cf(x, w)
        out.backward()
        np.testing.assert_allclose(out.item(), f(x, w).item())
        np.testing.assert_allclose(w.grad.numpy() - before, x.numpy() * (1 if x is pos else 3))
    assert cf.n_traces == 2
