"""A list an object's __init__ makes (`self.history = []`) and a compiled step only appends
to is replayed (compile/appended_lists.py): the class's __init__, which the guard walk meets
among the class's functions, binds the list when the object is made, not during a call.
Before, its store counted as a rebinding, so every call traced again and the ninth ran
eagerly with a recompile-limit warning (a Trainer whose compiled bound method logs
`self.history.append(loss.item())`). A call that runs an __init__ by name still counts."""
import warnings

import numpy as np

import llgrad
import llgrad.nn as nn

N_CALLS = 12    # (past the recompile limit, 8: a trace per call would warn)


class Trainer:
    def __init__(self):
        llgrad.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        self.opt = llgrad.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.5)
        self.history = []
        self.outputs = []

    def step(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.history.append(loss.item())
        self.outputs.append(loss.detach())
        return loss.detach()


def _data():
    rng = np.random.default_rng(0)
    return [(llgrad.tensor(rng.standard_normal((6, 4)).astype(np.float32)),
             llgrad.tensor(rng.standard_normal((6, 1)).astype(np.float32)))
            for _ in range(N_CALLS)]


def test_trainer_history_of_a_compiled_bound_method():
    runs = []
    for compiled in (False, True):
        t = Trainer()
        fn = llgrad.compile(t.step) if compiled else t.step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for x, y in _data():
                fn(x, y)
        runs.append(t)
    e, c = runs
    assert len(c.history) == N_CALLS and all(type(v) is float for v in c.history)
    np.testing.assert_allclose(c.history, e.history, rtol=1e-6)
    np.testing.assert_allclose([o.item() for o in c.outputs], e.history, rtol=1e-6)
    for a, b in zip(e.model.parameters(), c.model.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)
    # the first call runs eagerly (the optimiser's first step); the lists it grew are marked
    # before the trace (compile/caller_lists.py), so the first traced run is kept
    assert fn.n_traces == 1 and len(fn.entries) == 1, (fn.n_traces, len(fn.entries))


def test_a_step_that_calls_init_again_is_not_replayed():
    class Restarting:
        def __init__(self):
            self.values = []

        def step(self, x, restart):
            if restart:
                self.__init__()
            self.values.append(x.sum().item())
            return x * 2

    r = Restarting()
    fn = llgrad.compile(r.step, recompile_limit=100)
    for i in range(5):
        fn(llgrad.ones(2) * i, i == 3)
    assert r.values == [6.0, 8.0]       # (eager's: the restart at the fourth call)
    assert fn.n_traces > 2              # (guarded by its items: traced again, as before)
