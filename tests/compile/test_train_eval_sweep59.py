"""model.train() / model.eval() inside a compiled step (sweep 59, H4): the step sets each
module's `training` before anything reads it, so the flags it is entered with make no
difference to it and cost no trace of their own (one per batch size, not one per batch size
and flag state); a flag the step reads first, or sets only sometimes, stays guarded. Every
call is checked against eager: results, parameters, running statistics and each module's
`training` afterwards."""
import numpy as np
import pytest

import llgrad

nn = llgrad.nn


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(),
                                     nn.Dropout(0.3))
        self.head = nn.Sequential(nn.Linear(8, 3), nn.Dropout(0.2))

    def forward(self, x):
        return self.head(self.encoder(x))


def _state(model):
    """Everything a call can change: parameters, buffers, each module's flag."""
    return ([p.detach().numpy().copy() for p in model.parameters()] +
            [b.numpy().copy() for b in model.buffers()],
            [m.training for m in model.modules()])


def _check(got, want):
    (g_arrays, g_flags), (w_arrays, w_flags) = got, want
    assert g_flags == w_flags
    assert len(g_arrays) == len(w_arrays)
    for a, b in zip(g_arrays, w_arrays):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _inputs(sizes):
    rng = np.random.default_rng(0)
    return [(llgrad.tensor(rng.standard_normal((n, 5)).astype(np.float32)),
             llgrad.tensor(rng.integers(0, 3, n))) for n in sizes]


def _run(make_steps, calls, compiled):
    """Build the model and steps (seeded), make the calls [(step index, args)], and
    return each call's result and the state after it, and the steps."""
    llgrad.manual_seed(0)
    model, steps = make_steps()
    if compiled:
        steps = [llgrad.compile(s) for s in steps]
    out = []
    for k, args in calls:
        r = steps[k](*args)
        if compiled:
            steps[k].wait()     # (the native code from now on, in background build mode too)
        out.append((np.asarray(r.detach().numpy() if isinstance(r, llgrad.Tensor) else r).copy(),
                    _state(model)))
    return out, steps


def _compare(make_steps, calls):
    got, steps = _run(make_steps, calls, True)
    want, _ = _run(make_steps, calls, False)
    for (g, g_state), (w, w_state) in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        _check(g_state, w_state)
    return steps


def _train_eval(with_hook=False):
    model = _Net()
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if with_hook:       # (a hook reading the flag: after the step set it)
        model.head.register_forward_hook(lambda m, i, o: o * (2.0 if m.training else 0.5))

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    def eval_step(x, y):
        model.eval()
        with llgrad.no_grad():
            return nn.functional.cross_entropy(model(x), y)
    return model, [train_step, eval_step]


def test_alternating_train_and_eval_steps_trace_once_per_batch_size():
    sizes = [4, 6, 4, 3, 6, 3, 4]
    data = _inputs(sizes)
    calls = [c for xy in data for c in ((0, xy), (0, xy), (1, xy))]
    train_step, eval_step = _compare(_train_eval, calls)
    assert train_step.n_traces <= 3 and eval_step.n_traces <= 3, \
        (train_step.n_traces, eval_step.n_traces)


def test_a_hook_reading_the_flag_the_step_set():
    data = _inputs([4, 4, 5])
    calls = [c for xy in data for c in ((0, xy), (1, xy))]
    train_step, eval_step = _compare(lambda: _train_eval(with_hook=True), calls)
    assert train_step.n_traces <= 2 and eval_step.n_traces <= 2


def _reads_first():
    model = _Net()

    def step(x):
        was = model.training            # (read before the step sets it: stays guarded)
        model.train()
        out = model(x).sum()
        return out * (3.0 if was else 1.0)

    def switch(mode):
        model.train(mode)
        return llgrad.zeros(())
    return model, [step, switch]


def test_a_step_reading_the_flag_before_setting_it():
    (x, _), = _inputs([4])
    calls = [(1, (False,)), (0, (x,)), (0, (x,)), (1, (False,)), (0, (x,)), (0, (x,))]
    got, _ = _run(_reads_first, calls, True)
    want, _ = _run(_reads_first, calls, False)
    np.testing.assert_allclose([g for g, _ in got], [w for w, _ in want], rtol=1e-5)
    # (the two flag states give different results: the guard is still there)
    assert not np.allclose(got[1][0], got[2][0])
    for (_, g), (_, w) in zip(got, want):
        _check(g, w)


def _sets_sometimes():
    model = _Net()

    def step(x, train):
        if train:
            model.train()
        return model(x).sum()

    def switch(mode):
        model.train(mode)
        return llgrad.zeros(())
    return model, [step, switch]


def test_a_step_setting_the_flag_only_sometimes():
    (x, _), = _inputs([4])
    # (with train=False the step reads whatever flags it finds: those stay guarded)
    calls = [(1, (False,)), (0, (x, True)), (0, (x, False)), (1, (False,)), (0, (x, False)),
             (0, (x, True)), (1, (False,)), (0, (x, False)), (0, (x, True))]
    _compare(_sets_sometimes, calls)


def _sets_on_a_tensor():
    model = _Net()

    def step(x):
        if x.sum() > 0:             # (a tensor condition: the write depends on the data)
            model.eval()
        return model(x).sum()

    def switch(mode):
        model.train(mode)
        return llgrad.zeros(())
    return model, [step, switch]


def test_a_step_setting_the_flag_on_a_tensor_condition():
    # (the branch eager takes changes Python state: traced as plain Python, its condition a
    # value guard: tracer/control._stage_if)
    (x, _), = _inputs([4])
    pos, neg = x.abs() + 0.1, -x.abs() - 0.1
    calls = [(0, (pos,)), (1, (True,)), (0, (neg,)), (0, (pos,)), (1, (True,)), (0, (pos,)),
             (0, (neg,)), (1, (True,)), (0, (neg,))]
    _compare(_sets_on_a_tensor, calls)


def _submodules():
    model = _Net()
    opt = llgrad.optim.SGD(model.parameters(), lr=0.05)

    def finetune(x, y):
        model.train()
        model.encoder.eval()        # (frozen statistics, the head's dropout on)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    def evaluate(x, y):
        model.eval()
        with llgrad.no_grad():
            return nn.functional.cross_entropy(model(x), y)

    def warmup(x, y):               # (the encoder in training mode, the head not)
        model.head.eval()
        model.encoder.train()
        with llgrad.no_grad():
            return model(x).sum()
    return model, [finetune, evaluate, warmup]


def test_submodules_set_differently():
    data = _inputs([4, 5, 4, 5])
    calls = [c for xy in data for c in ((2, xy), (0, xy), (1, xy), (0, xy))]
    finetune, evaluate, warmup = _compare(_submodules, calls)
    assert max(finetune.n_traces, evaluate.n_traces, warmup.n_traces) <= 2


class _OwnFlag(nn.Linear):
    training = True     # (a class attribute of its own: its reads are not seen)


def _own_flag():
    model = nn.Sequential(_OwnFlag(5, 3), nn.Dropout(0.5))

    def step(x):
        model.train()
        return model(x).sum()

    def evaluate(x):
        model.eval()
        return model(x).sum()
    return model, [step, evaluate]


def test_a_module_overriding_training_stays_guarded():
    (x, _), = _inputs([4])
    step, evaluate = _compare(_own_flag, [(0, (x,)), (1, (x,))] * 3)
    assert (step.n_traces, evaluate.n_traces) == (2, 1)    # (its flag: a key item)
