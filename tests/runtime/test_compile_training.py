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
    assert step.n_traces == 2        # without, then with an existing .grad
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
