"""copy.deepcopy(model) between compiled training steps (an EMA copy, a best-so-far
checkpoint) sets `__slotnames__` on the model's class, Python's copyreg cache: that is not
the user's class state, so it changes no guard and the next step runs the compiled code
rather than tracing again. A class attribute the user sets still does."""
import copy

import numpy as np

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


class Net(nn.Module):
    SCALE = 1.0

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x) * self.SCALE


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def test_deepcopy_of_the_model_does_not_trace_again(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    llgrad.manual_seed(0)
    model = Net()
    llgrad.manual_seed(0)
    eager_model = Net()             # (not a deepcopy: the first one sets the cache below)
    assert "__slotnames__" not in vars(Net)
    eager_opt = llgrad.optim.SGD(eager_model.parameters(), lr=0.1)
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
    f = llgrad.compile(train_step)
    x, y = llgrad.randn(5, 4), llgrad.tensor([0, 1, 2, 0, 1])
    copies = []
    for k in range(5):
        np.testing.assert_allclose(f(model, opt, x, y).item(),
                                   train_step(eager_model, eager_opt, x, y).item(), rtol=1e-6)
        if k == 2:                              # (after the trace: an EMA or checkpoint copy)
            copies.append(copy.deepcopy(model))
    assert f.n_traces == 1
    Net.SCALE = 2.0                             # (the user's class state: traced again)
    try:
        np.testing.assert_allclose(f(model, opt, x, y).item(),
                                   train_step(eager_model, eager_opt, x, y).item(), rtol=1e-6)
        assert f.n_traces == 2
    finally:
        Net.SCALE = 1.0
