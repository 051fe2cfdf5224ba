"""Lists a compiled function only appends to (compile/appended_lists.py): `losses.append(
loss.item())` in a training step is replayed by compiled calls (two traces, one entry) with
eager's values; a list the code also reads is guarded by its items as before."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn


def _step_parts():
    llgrad.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
    x, y = llgrad.randn(16, 4), llgrad.randn(16, 1)

    def loss_step():
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return m, loss_step


LOSSES = []


def test_global_losses_equal_eager():
    results = []
    for compiled in (False, True):
        LOSSES.clear()
        m, loss_step = _step_parts()

        def step():
            loss = loss_step()
            LOSSES.append(loss.item())
            return loss
        fn = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(6):
                fn()
        results.append((list(LOSSES), [p.detach().numpy().copy() for p in m.parameters()]))
    (le, pe), (lc, pc) = results
    assert len(lc) == 6 and all(type(v) is float for v in lc)
    np.testing.assert_allclose(lc, le, rtol=1e-6)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    # the first call runs eagerly (the optimiser's first step); the list it grew is marked
    # before the trace (compile/caller_lists.py), so the first traced run is kept
    assert fn.n_traces == 1 and len(fn.entries) == 1
    assert fn._walkers, "calls after the trace take a compiled guard walk"


class Trainer:
    def __init__(self):
        self.m, self.loss_step = _step_parts()
        self.history, self.outputs = [], []

    def step(self, x):
        loss = self.loss_step()
        self.history.append(loss.item())
        self.outputs.append((self.m(x).detach(), "out"))
        return loss


def test_attribute_lists_of_numbers_and_tensors():
    runs = []
    for compiled in (False, True):
        t = Trainer()
        fn = llgrad.compile(t.step) if compiled else t.step
        x = llgrad.ones(2, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for i in range(5):
                fn(x * i)
        runs.append(t)
    e, c = runs
    np.testing.assert_allclose(c.history, e.history, rtol=1e-6)
    assert len(c.outputs) == 5 and all(tag == "out" for _, tag in c.outputs)
    assert len({id(o) for o, _ in c.outputs}) == 5          # (a tensor of each call's own)
    for (a, _), (b, _) in zip(e.outputs, c.outputs):
        assert not b.requires_grad
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)


def test_closure_list_of_constants_and_a_list_argument():
    def make():
        llgrad.manual_seed(0)
        sizes, model = [], nn.Linear(5, 2)

        def fwd(x, log):
            out = model(x)
            sizes.append(("In Model", tuple(x.size()), tuple(out.size())))
            log.extend([out.sum().item(), 7])
            return out
        return fwd, sizes
    runs = []
    for compiled in (False, True):
        fwd, sizes = make()
        fn = llgrad.compile(fwd) if compiled else fwd
        logs = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for i in range(5):
                logs.append([])
                fn(llgrad.ones(3, 5) * i, logs[-1])
        runs.append((sizes, logs))
    (se, le), (sc, lc) = runs
    assert sc == se == [("In Model", (3, 5), (3, 2))] * 5
    assert [v for _, v in lc] == [7] * 5
    np.testing.assert_allclose([v for v, _ in lc], [v for v, _ in le], rtol=1e-6)
    assert fn.n_traces == 2 and len(fn.entries) == 1, (fn.n_traces, len(fn.entries))


def test_a_counter_appended_each_call():
    class Clock:
        def __init__(self):
            self.t, self.ticks = 0, []

        def tick(self, x):
            self.t += 1
            self.ticks.append(self.t)
            return x * self.t
    runs = []
    for compiled in (False, True):
        c = Clock()
        fn = llgrad.compile(c.tick) if compiled else c.tick
        outs = [fn(llgrad.ones(2)).numpy().copy() for _ in range(6)]
        runs.append((c.ticks, c.t, outs))
    assert runs[1][0] == runs[0][0] == [1, 2, 3, 4, 5, 6]
    assert runs[1][1] == 6
    np.testing.assert_array_equal(runs[1][2], runs[0][2])


# ---- lists the code reads: guarded by their items, as before ----------------------------------
READ = []


def test_a_list_whose_length_the_code_reads_is_not_replayed():
    def step(x):
        READ.append(x.sum().item())
        return x * len(READ)
    READ.clear()
    fn = llgrad.compile(step, recompile_limit=100)
    outs = [fn(llgrad.ones(2)).numpy().copy() for _ in range(4)]
    assert [o[0] for o in outs] == [1, 2, 3, 4]
    assert fn.n_traces == 4         # (each call's list is another: traced again)


def test_a_list_another_method_reads_is_not_replayed():
    class Log:
        def __init__(self):
            self.items = []

        def last(self):
            return self.items[-1] if self.items else 0.0

        def step(self, x):
            y = x * (1 + self.last())
            self.items.append(2.0)
            return y
    lg = Log()
    fn = llgrad.compile(lg.step, recompile_limit=100)
    outs = [fn(llgrad.ones(2)).numpy()[0] for _ in range(3)]
    assert outs == [1.0, 3.0, 3.0] and lg.items == [2.0] * 3
    assert fn.n_traces == 3


def test_a_list_read_by_name_as_a_string_is_not_replayed():
    class Log:
        def __init__(self):
            self.items = []

        def step(self, x):
            self.items.append(1)
            return x * len(getattr(self, "items"))
    lg = Log()
    fn = llgrad.compile(lg.step, recompile_limit=100)
    assert [fn(llgrad.ones(1)).item() for _ in range(3)] == [1.0, 2.0, 3.0]


HOOK = None
SEEN = []


def _hook():
    pass


def test_code_that_starts_reading_a_marked_list_runs_eagerly():
    global HOOK
    SEEN.clear()
    HOOK = _hook

    def step(x):
        SEEN.append(1)
        HOOK()
        return x + 1
    fn = llgrad.compile(step)
    for _ in range(3):
        fn(llgrad.ones(1))
    assert fn.n_traces == 2 and len(SEEN) == 3
    got = []
    HOOK = lambda: got.append(len(SEEN))        # noqa: E731  (now reads it)
    try:
        with pytest.warns(UserWarning, match="now reads the list captured SEEN"):
            fn(llgrad.ones(1))
        fn(llgrad.ones(1))
    finally:
        HOOK = _hook
    assert got == [4, 5] and len(SEEN) == 5


def test_appending_an_object_calls_cannot_replay_runs_eagerly():
    events = []

    def step(x):
        events.append(object())
        return x + 1
    fn = llgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(4):
            fn(llgrad.ones(1))
    assert len(events) == 4 and len({id(e) for e in events}) == 4


def test_a_marked_list_emptied_between_calls():
    log = []

    def step(x):
        log.append(x.sum().item())
        return x * 2
    fn = llgrad.compile(step)
    for i in range(3):
        fn(llgrad.ones(2) * i)
    log.clear()
    fn(llgrad.ones(2) * 5)
    assert log == [10.0] and fn.n_traces == 2


def _appending(compiled, body):
    hist = []
    llgrad.manual_seed(0)
    lin = nn.Linear(3, 2)
    fn = llgrad.compile(body(hist, lin)) if compiled else body(hist, lin)
    return hist, lin, fn


def test_appended_inputs_and_views_are_eager_s_own_objects():
    def body(hist, lin):
        def f(x):
            hist.append(x)
            hist.append(x[1:])
            return x * 2
        return f
    for compiled in (False, True):
        hist, _, fn = _appending(compiled, body)
        xs = [llgrad.ones(3) * i for i in range(4)]
        for x in xs:
            fn(x)
        xs[-1].add_(100)
        assert all(h is xs[i // 2] for i, h in enumerate(hist) if i % 2 == 0)
        assert all(h._base is xs[i // 2] for i, h in enumerate(hist) if i % 2 == 1)
        assert hist[-1].tolist() == [103.0, 103.0]
    assert fn.n_traces == 2


def test_gradients_flow_through_appended_outputs():
    def body(outs, lin):
        def f(x):
            y = lin(x).tanh()
            outs.append(y)
            return y.sum()
        return f
    grads = []
    for compiled in (False, True):
        outs, lin, fn = _appending(compiled, body)
        for i in range(4):
            fn(llgrad.ones(2, 3) * i)
        (llgrad.stack(outs) ** 2).sum().backward()
        grads.append(lin.weight.grad.numpy().copy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)
    assert fn.n_traces == 2


def test_a_forward_hook_collecting_activations():
    """Feature extraction as tutorials write it: a forward hook appends each output."""
    runs = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        feats = []
        m[1].register_forward_hook(lambda mod, inputs, out: feats.append(out.detach()))
        fn = llgrad.compile(m) if compiled else m
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for i in range(5):
                fn(llgrad.ones(2, 3) * i)
        runs.append(([f.numpy().copy() for f in feats], fn))
    (fe, _), (fc, cm) = runs
    assert len(fc) == 5
    for a, b in zip(fe, fc):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    assert [cf.n_traces for cf in vars(cm).values() if hasattr(cf, "n_traces")] == [2]


def _eager_and_compiled(make, inputs):
    out = []
    for compiled in (False, True):
        log, f = make()
        fn = llgrad.compile(f) if compiled else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = [fn(x).tolist() for x in inputs]
        out.append((log, results))
    assert out[1] == out[0]


def test_appends_under_a_tensor_condition_and_loop():
    def branch():
        log = []

        def f(x):
            y = x * 2
            if y.sum() > 0:
                log.append(1)
                y = y + 1
            else:
                log.append(-1)
            return y
        return log, f

    def loop():
        log = []

        def f(x):
            y = x
            while y.sum() < 10:
                log.append(y.sum().item())
                y = y * 2
            return y
        return log, f
    _eager_and_compiled(branch, [llgrad.ones(2) * s for s in (1, -1, 1, 1, -1, -1, 1)])
    _eager_and_compiled(loop, [llgrad.ones(2) * s for s in (1, 0.5, 1, 3, 0.1, 1)])


def test_walkers_made_before_a_list_is_marked_are_dropped():
    """A guard walker made while a list was still guarded by its items (calls that did not
    append yet) would give each later call another key: marking drops the fast paths."""
    log = []

    def f(x, flag):
        if flag:
            log.append(x.sum().item())
        return x * 2
    fn = llgrad.compile(f)
    for i in range(4):
        fn(llgrad.ones(2) * i, False)
    for i in range(4):
        fn(llgrad.ones(2) * i, True)
    assert fn._walkers and len(log) == 4
    for walk in fn._walkers:
        first = walk((llgrad.ones(2), True), {})
        log.append(0.0)
        assert first is not None and walk((llgrad.ones(2), True), {})[0] == first[0]
