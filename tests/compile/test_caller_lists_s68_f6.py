"""Session 68 (f6): lists the loop grows between the calls of a compiled step, reached from
the step's state but only appended to by the code compile follows (a History callback held
by the trainer), are guarded as appended to, not by their items (compile/caller_lists.py):
a trace or two, not one per call; a step that reads such a list (its length, its items, by
getattr) keeps it guarded by its items, its results eager's. Results against PyTorch and
eager."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


class History:
    def __init__(self):
        self.losses, self.epochs = [], []

    def on_batch_end(self, logs):
        self.losses.append(logs["loss"])

    def on_epoch_end(self, logs):
        self.epochs.append(dict(logs))


def _loss(self, x, y):
    loss = ((x @ self.w - y) ** 2).mean()
    self.opt.zero_grad()
    loss.backward()
    self.opt.step()
    return loss.detach()


def _step_none(self, x, y):
    return _loss(self, x, y)


def _step_len(self, x, y):
    return _loss(self, x, y) * len(self.history.losses)


def _step_getattr(self, x, y):
    return _loss(self, x, y) + sum(getattr(self.history, "losses"))


_STEPS = {"none": _step_none, "len": _step_len, "getattr": _step_getattr}


def _trainer(lib, read):
    class Trainer:
        def __init__(self):
            lib.manual_seed(0)
            self.w = lib.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.2]], requires_grad=True)
            self.opt = lib.optim.SGD([self.w], lr=0.1)
            self.history = History()

        step = _STEPS[read]     # (one function each: compile reads the code it follows)

        def fit(self, step, epochs):        # (a local `epochs`: no read of History.epochs)
            for epoch in range(epochs):
                for i in range(3):
                    g = np.random.default_rng(epoch * 3 + i)
                    x = lib.tensor(g.standard_normal((4, 3)).astype(np.float32))
                    y = lib.tensor(g.standard_normal((4, 2)).astype(np.float32))
                    last = step(x, y).item()
                    self.history.on_batch_end({"loss": last})
                # (code compile follows that read History.losses, as `losses[-1]` here
                # would, keep it guarded by its items)
                self.history.on_epoch_end({"epoch": epoch, "last": last})
    return Trainer()


def _run(lib, read, compiled):
    tr = _trainer(lib, read)
    step = llgrad.compile(tr.step) if compiled else tr.step
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tr.fit(step, 3)
    warned = [str(w.message) for w in caught if "llgrad" in str(w.message)]
    return tr.history.losses, tr.w.detach().numpy().copy(), step, warned


@pytest.mark.parametrize("read", ["none", "len", "getattr"])
def test_lists_grown_by_the_loop(read):
    t_losses, t_w, _, _ = _run(torch, read, False)
    e_losses, e_w, _, _ = _run(llgrad, read, False)
    c_losses, c_w, step, warned = _run(llgrad, read, True)
    np.testing.assert_allclose(t_losses, e_losses, rtol=1e-5)
    np.testing.assert_allclose(e_losses, c_losses, rtol=1e-6)
    np.testing.assert_allclose(t_w, c_w, rtol=1e-5)
    if read == "none":      # (marked after it grew: a second trace, then none)
        assert not warned and step.n_traces <= 2, (step.n_traces, warned)
    else:                   # (read: guarded by its items, a trace per call until the limit)
        assert step.n_traces >= 8
