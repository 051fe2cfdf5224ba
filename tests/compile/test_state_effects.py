"""Python-level effects of a compiled function (attributes it sets, lists it appends to,
draws from NumPy's or Python's generators) are eager's on every call: a traced run that
changed Python state is not kept as compiled code, one that drew from a generator other
than llgrad's runs eagerly; numbers only returned are outputs, not value guards."""
import random
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn

BACKENDS = ("llvm", "interpret")


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_attribute_the_function_toggles_follows_eager(backend):
    class Box:
        def __init__(self):
            self.flip = False

    def make():
        box = Box()

        def f(x):
            box.flip = not box.flip
            return x * (2.0 if box.flip else 3.0)
        return box, f

    (be, fe), (bc, fc) = make(), make()
    cf = llgrad.compile(fc, backend=backend)
    for k in range(6):
        x = llgrad.tensor([1.0, 2.0])
        want, got = fe(x), _quiet(cf, x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), err_msg=str(k))
        assert bc.flip == be.flip, k


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_the_function_appends_to_grows_on_every_call(backend):
    log_e, log_c = [], []

    def make(log):
        def f(x):
            log.append(len(log))
            return x * 2
        return f
    cf = llgrad.compile(make(log_c), backend=backend)
    fe = make(log_e)
    for _ in range(5):
        x = llgrad.tensor([1.0, 2.0])
        np.testing.assert_allclose(_quiet(cf, x).numpy(), fe(x).numpy())
    assert log_c == log_e == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("draw", ["numpy", "python"])
def test_draws_from_other_generators_run_eagerly(draw):
    sample = (lambda: float(np.random.rand())) if draw == "numpy" else random.random

    def f(x):
        return x * sample()
    cf = llgrad.compile(f)
    np.random.seed(0), random.seed(0)
    with pytest.warns(UserWarning, match="running eagerly: the function draws from"):
        got = [cf(llgrad.ones(1)).item() for _ in range(4)]
    np.random.seed(0), random.seed(0)
    want = [f(llgrad.ones(1)).item() for _ in range(4)]
    np.testing.assert_allclose(got, want)
    assert len(set(got)) == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_learning_rate_held_in_a_tensor_is_read_at_each_call(backend):
    def make():
        llgrad.manual_seed(0)
        w = nn.Parameter(llgrad.randn(3))
        opt = llgrad.optim.SGD([w], lr=llgrad.tensor(0.1))
        sched = llgrad.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)

        def step(x):
            opt.zero_grad()
            loss = (w * x).tanh().sum()
            loss.backward()
            opt.step()
            return loss.detach()
        return w, sched, step
    (we, se, fe), (wc, sc, fc) = make(), make()
    cf = llgrad.compile(fc, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # compiled, not run eagerly
        for _ in range(5):
            x = llgrad.tensor([0.5, -1.0, 2.0])
            np.testing.assert_allclose(cf(x).numpy(), fe(x).numpy(), rtol=1e-6)
            np.testing.assert_allclose(wc.detach().numpy(), we.detach().numpy(), rtol=1e-6)
            se.step(), sc.step()
    assert cf.n_traces <= 2


def _count_halvings(x):
    n = 0
    while x.abs().max() > 1:
        x = x * 0.5
        n += 1
    return x, n


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_count_only_returned_is_an_output_not_a_guard(backend):
    cf = llgrad.compile(_count_halvings, backend=backend)
    for scale in (3.0, 40.0, 0.5, 1000.0):
        got, want = cf(llgrad.tensor([scale, 1.0])), _count_halvings(llgrad.tensor([scale, 1.0]))
        assert type(got[1]) is int and got[1] == want[1]
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
    assert cf.n_traces == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_item_is_an_output_and_a_guarded_item_still_guards(backend):
    def returned(x):
        return (x * x).sum().item()

    def steering(x):
        return x * 2 if (x * x).sum().item() > 4 else x * 3

    cr, cs = llgrad.compile(returned, backend=backend), llgrad.compile(steering, backend=backend)
    for v in (1.0, 3.0, 0.5, 2.5):
        x = llgrad.tensor([v, 1.0])
        assert cr(x) == pytest.approx(returned(x)) and type(cr(x)) is float
        np.testing.assert_allclose(cs(x).numpy(), steering(x).numpy())
        cr.wait()
        cs.wait()       # (built: the next call checks the value guard)
    # (the comparison's outcome is guarded, not each value: tracer/item_reads.py)
    assert cr.n_traces == 1 and cs.n_traces == 2
