"""An object a compiled function reaches through a global name or a closure cell is walked
through the attributes its code (and the plain methods it calls on it) reads or writes
(captured_reads_narrow.py): a list the harness appends to between calls, which the
function never reads, no longer traces every call; whatever the function may read stays
guarded (an attribute it reads, one a helper method reads, a property, getattr, a class
with __getattr__, the object met again through another object). Each compiled result is
checked against the same function run eagerly and against NumPy."""
import warnings
import weakref

import numpy as np

import llgrad
from llgrad.compile import captured_reads_narrow
from llgrad.compile.function_reads import captured_reads


class Env:
    def __init__(self, factor=2.0):
        self.records = []
        self.factor = factor
        self.other = 1.0

    def scale(self):            # (a helper method: what it reads is read)
        return llgrad.tensor(np.float32(self.factor))


def _calls(cf, fn, x, between, n=5):
    """Calls cf(x) n times, between(i) after each; each result == fn(x) run eagerly then."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(n):
            want = fn(x).numpy()
            got = cf(x)
            cf.wait()
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
            between(i)


ENV_A = Env()


def step_a(x):
    return x * ENV_A.scale()


def test_unread_global_attribute_changes_trace_once():
    cf, x = llgrad.compile(step_a), llgrad.ones(3)
    _calls(cf, step_a, x, ENV_A.records.append)
    np.testing.assert_allclose(cf(x).numpy(), np.full(3, 2.0))
    assert cf.n_traces == 1
    uses = []
    captured_reads(step_a, uses)
    assert captured_reads_narrow.narrowing(uses)[id(ENV_A)][1] == {"scale", "factor"}


def test_unread_closure_attribute_changes_trace_once():
    env = Env(3.0)

    def step(x):
        return x * env.factor + env.other

    cf, x = llgrad.compile(step), llgrad.ones(3)
    _calls(cf, step, x, lambda i: env.records.append([i] * i))
    np.testing.assert_allclose(cf(x).numpy(), np.full(3, 4.0))
    assert cf.n_traces == 1


ENV_B = Env()


def step_b(x):
    return x * ENV_B.scale()


def test_attribute_a_helper_method_reads_is_guarded():
    cf, x = llgrad.compile(step_b), llgrad.ones(3)

    def between(i):
        ENV_B.records.append(i)
        ENV_B.factor = float(i + 3)     # (read by scale(): each value traces)

    _calls(cf, step_b, x, between)
    np.testing.assert_allclose(cf(x).numpy(), np.full(3, 7.0))
    assert cf.n_traces > 1              # (traced again, or the number made an input)


def test_attribute_the_function_reads_is_guarded():
    env = Env()

    def step(x):
        return x * env.other

    cf, x = llgrad.compile(step), llgrad.ones(3)
    _calls(cf, step, x, lambda i: setattr(env, "other", float(i % 2 + 5)), n=4)
    np.testing.assert_allclose(cf(x).numpy(), np.full(3, 6.0))
    assert cf.n_traces > 1


class WithProperty(Env):
    @property
    def k(self):                        # (may read anything: the whole object guarded)
        return self.other


class WithGetattr(Env):
    def __getattr__(self, name):
        return self.__dict__["other"] * 10


def test_reads_that_cannot_be_known_keep_the_whole_object():
    envs = [WithProperty(), WithGetattr(), Env(), Env(), Env()]
    p, g, e, f, w = envs
    w.fn = (lambda r: lambda: r().other)(weakref.ref(w))   # (as a scheduler wraps opt.step)
    steps = [lambda x: x * p.k, lambda x: x * g.missing, lambda x: x * getattr(e, "other"),
             lambda x: x * f.factor + _read(f), lambda x: x * w.fn()]
    for env, step in zip(envs, steps):
        cf, x = llgrad.compile(step), llgrad.ones(3)
        _calls(cf, step, x, lambda i: setattr(env, "other", float(i + 2)), n=3)
        assert cf.n_traces > 1


def _read(env):
    return env.other


HOLDER = Env()
ENV_C = Env()
HOLDER.ref = ENV_C                      # (ENV_C met again through HOLDER: walked whole)


def step_c(x):
    return x * ENV_C.factor + HOLDER.ref.other


def test_object_met_again_through_another_is_walked_whole():
    cf, x = llgrad.compile(step_c), llgrad.ones(3)
    _calls(cf, step_c, x, lambda i: setattr(ENV_C, "other", float(i + 2)), n=3)
    np.testing.assert_allclose(cf(x).numpy(), np.full(3, 6.0))
    assert cf.n_traces > 1


def test_iterated_list_and_written_attributes():
    env = Env()
    env.weights, env.count = [1.0, 2.0], 0

    def step(x):
        y = x
        for w in env.weights:           # (iterated: read)
            y = y * w
        env.last = y * 2.0              # (written: replayed by compiled calls)
        env.count = env.count + 1       # (read and written)
        return y

    cf, x = llgrad.compile(step), llgrad.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(6):
            got = cf(x)
            cf.wait()
            want = np.full(3, np.prod(env.weights), np.float32)
            np.testing.assert_allclose(got.numpy(), want)
            np.testing.assert_allclose(env.last.numpy(), 2 * want)
            assert env.count == i + 1
            env.records.append(i)
            if i == 2:
                env.weights.append(3.0)     # (traces again)
    assert 1 < cf.n_traces <= 3         # (not one per record appended)


def _sgd_run(compiled):
    llgrad.manual_seed(0)
    p = llgrad.nn.Parameter(llgrad.ones(3))
    opt = llgrad.optim.SGD([p], lr=0.5)
    sched = llgrad.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt.state[p] = {"momentum_buffer": None}    # (not fresh: the first call traces)

    def step(x):
        loss = (p * x).sum()
        loss.backward()
        opt.step()      # (the scheduler's wrapper, an instance attribute: reads param_groups)
        return loss.detach()

    fn = llgrad.compile(step) if compiled else step
    x, out = llgrad.ones(3), []
    for _ in range(4):
        out.append(fn(x).numpy())
        if compiled:
            fn.wait()
        sched.step()
        p.grad = None
        out.append(p.detach().numpy().copy())
    return out


def test_function_held_as_an_attribute_keeps_the_whole_object():
    for got, want in zip(_sgd_run(True), _sgd_run(False)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
