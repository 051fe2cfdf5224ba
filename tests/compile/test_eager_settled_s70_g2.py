"""A compiled function whose calls all run eagerly stops walking their guards
(compile/eager_settled.py): its calls then cost about eager's, give eager's results across
calls that change state, and a call every CHECK..MAX_CHECK skipped ones walks again, so a
program that becomes compilable is compiled."""
import random
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.compile import compiled_function, eager_settled


@pytest.fixture
def walks(monkeypatch):
    """The number of full guard walks (guards.collect) the calls make."""
    count = [0]
    real = compiled_function.collect

    def counting(*a, **k):
        count[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(compiled_function, "collect", counting)
    return count


def _replay_step(seed, memory):
    rng = random.Random(seed)
    w = llgrad.zeros(3, requires_grad=True)

    def step():
        batch = llgrad.from_numpy(np.stack(rng.sample(memory, 4)))
        loss = (batch @ w).pow(2).mean()
        w.grad = None
        loss.backward()
        with llgrad.no_grad():
            w.sub_(0.01 * w.grad)
        return loss.detach()
    return step, w


def test_an_always_eager_step_gives_eagers_values_without_walking(walks):
    memory = [np.arange(3, dtype=np.float32) * k for k in range(200)]
    step, w = _replay_step(5, memory)
    ref_step, ref_w = _replay_step(5, memory)
    f = llgrad.compile(step, backend="interpret")
    with pytest.warns(UserWarning, match="random.Random"):
        got = [f().item() for _ in range(eager_settled.SETTLE)]
    assert f._eager_streak.settled
    before = walks[0]
    got += [f().item() for _ in range(eager_settled.CHECK)]
    assert walks[0] == before           # (without eager_settled: one walk a call)
    f()                                 # (the check: walked, still eager; the memory's
    # small arrays are walked by a guard walker where one was made, without collect)
    assert walks[0] == before + 1 or f._walkers
    assert f._eager_streak.until_check == 2 * eager_settled.CHECK
    want = [ref_step().item() for _ in range(len(got) + 1)]
    assert got == want[:-1]
    np.testing.assert_array_equal(w.detach().numpy(), ref_w.detach().numpy())
    assert f.n_traces <= eager_settled.SETTLE and not f.entries


def test_a_step_that_becomes_compilable_is_compiled_at_the_next_check(walks):
    rng = random.Random(0)
    state = {"draw": True}
    x = llgrad.arange(4.0)

    def f(t):
        k = rng.random() if state["draw"] else 0.5
        return t * 2 + k
    cf = llgrad.compile(f, backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(eager_settled.SETTLE):
            cf(x)
        assert cf._eager_streak.settled and not cf.entries
        state["draw"] = False           # (compilable from now on)
        outs = [cf(x) for _ in range(eager_settled.CHECK + 3)]
    assert all(np.array_equal(o.numpy(), (x * 2 + 0.5).numpy()) for o in outs)
    assert cf.entries and not cf._eager_streak.settled
    n = walks[0]
    cf(x)
    assert walks[0] == n + 1 or cf._walkers or cf._fast   # (walked or on the fast path)


def test_a_function_with_a_compiled_entry_does_not_settle():
    rng = random.Random(0)
    x = llgrad.arange(4.0)

    def f(t, draw):
        return t + (rng.random() if draw else 1.0)
    cf = llgrad.compile(f, backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf(x, False)
        for _ in range(2 * eager_settled.SETTLE):
            cf(x, True)
    assert cf.entries and not cf._eager_streak.settled
    assert np.array_equal(cf(x, False).numpy(), (x + 1.0).numpy())


def test_reset_forgets_the_settling():
    rng = random.Random(0)
    cf = llgrad.compile(lambda t: t + rng.random(), backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(eager_settled.SETTLE):
            cf(llgrad.ones(2))
    assert cf._eager_streak.settled
    cf.reset()
    assert not cf._eager_streak.settled and cf._eager_streak.streak == 0
