"""Steps that re-traced without need (s76 task C: the remaining harness programs).

A training step that clears .grad (zero_grad) before its backward, traced on a call where
every .grad was None (a fresh model, an optimiser loaded or warmed elsewhere, a zero_grad
between epochs), was keyed on those None: the next call, its .grad filled by the last
backward, traced again (`guard failed: model[0].weight.grad is None (now a float32
tensor)`). Such a trace reads no .grad the call came with (the optimiser's reads are of
the .grad its own backward made after the clear), so it serves any .grad state, as an
eval step's clearing trace already did (entry.grad_free); a step whose backward
accumulates into the .grad it came with stays keyed on it."""
import numpy as np
import pytest

import llgrad

nn, F = llgrad.nn, llgrad.nn.functional


def _train(compiled, clear):
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        if clear == "first":
            opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if clear == "read":     # (reads the .grad the call came with, summed into)
            loss = loss + sum(p.grad.sum() for p in model.parameters()) * 0
        opt.step()
        return loss.detach()

    rng = np.random.default_rng(0)

    def batch():
        return (llgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32)),
                llgrad.tensor(rng.integers(0, 2, (5,))))
    train_step(*batch())        # (the optimiser warmed: the compiled calls trace at once)
    opt.zero_grad()
    fn = llgrad.compile(train_step) if compiled else train_step
    out = []
    for _ in range(2):          # (epochs, every .grad None at each one's start)
        for _ in range(3):
            out.append(fn(*batch()).numpy().copy())
            out.append([p.grad.numpy().copy() for p in model.parameters()])
        opt.zero_grad()
    out.append([p.detach().numpy().copy() for p in model.parameters()])
    return fn, out


def _close(a, b):
    if isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    else:
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_step_clearing_grads_first_serves_any_grad_state():
    _, eager = _train(False, "first")
    cf, got = _train(True, "first")
    # (traced once, with every .grad None; the calls with .grad filled run that entry)
    assert cf.n_traces == 1 and len(cf.entries) == 1, (cf.n_traces, len(cf.entries))
    assert cf.graph_breaks == []
    _close(eager, got)


@pytest.mark.parametrize("clear", ["none", pytest.param("read", marks=pytest.mark.slow)])
def test_step_using_the_grads_it_came_with_stays_keyed_on_them(clear):
    """A backward that accumulates into the .grad the call came with (no zero_grad), or a
    read of them: a trace with None cannot serve a call with .grad filled."""
    _, eager = _train(False, clear)
    cf, got = _train(True, clear)
    assert cf.n_traces == 2 and len(cf.entries) == 2, (cf.n_traces, len(cf.entries))
    _close(eager, got)


# ---- a method of the step's object decorated with @torch.no_grad() -----------------------
# A DQN agent's `learn_step(self, ...)` calls `self.td_target(...)`, decorated with
# `@torch.no_grad()`: the decorator's wrapper made the walk of `self` a full one
# (self_reads._reads took any wrapper as able to read anything), so the agent's replay
# memory, a list the step never reads that grows by one each step, was guarded: each step
# traced again (`len(self.memory) == 5 (now 6)`), up to the recompile limit. A grad-mode
# decorator's wrapper passes its arguments on and reads nothing else: its function is
# followed as the method itself.

class _Agent:
    def __init__(self):
        llgrad.manual_seed(0)
        self.net = nn.Linear(4, 3)
        self.opt = llgrad.optim.SGD(self.net.parameters(), lr=0.1)
        self.memory = []
        self.gamma = 0.9

    @llgrad.no_grad()
    def target(self, r, x2):
        return r + self.gamma * self.net(x2).max(1).values

    def learn(self, x, a, r, x2):
        q = self.net(x).gather(1, a[:, None])[:, 0]
        loss = F.mse_loss(q, self.target(r, x2))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()


def _agent(compiled):
    ag = _Agent()
    fn = llgrad.compile(ag.learn) if compiled else ag.learn
    rng = np.random.default_rng(0)
    out = []
    for _ in range(5):
        ag.memory.append(dict(s=llgrad.tensor(rng.standard_normal(4).astype(np.float32))))
        x, x2 = (llgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32)) for _ in "ab")
        a = llgrad.tensor(rng.integers(0, 3, (5,)))
        r = llgrad.tensor(rng.standard_normal(5).astype(np.float32))
        out.append(fn(x, a, r, x2).numpy().copy())
    out.append([p.detach().numpy().copy() for p in ag.net.parameters()])
    return fn, out


def test_no_grad_method_keeps_the_walk_to_what_it_reads():
    _, eager = _agent(False)
    cf, got = _agent(True)
    assert cf.n_traces == 1 and len(cf.entries) == 1, (cf.n_traces, len(cf.entries))
    _close(eager, got)


def test_other_decorators_still_walk_the_whole_object():
    import functools
    from llgrad.compile import self_reads

    def logged(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return f(*args, **kwargs)
        return wrapper

    class Other(_Agent):
        target = logged(_Agent.target)

    assert self_reads.read_names(_Agent().learn) == {"net", "target", "gamma", "opt"}
    assert self_reads.read_names(Other().learn) is None
    assert self_reads.read_names(_Agent().target) == {"gamma", "net"}
