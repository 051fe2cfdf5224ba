"""Sweep 58 (H4): adversary of compiled calls over aliased inputs (two inputs over one
Storage, bound by the trace as one memory: tracer/bindings.py `_input_alias`, checked each
call by compile/moved_data.py `aliases_hold`), of `p.data = y` replayed, and of a user's
Optimizer subclass reading its lr as an input. Each compiled run against eager's."""
import warnings

import numpy as np
import pytest

import llgrad


def _runs(fn, arg_seq, state):
    """Eager then compiled runs of fn over the argument tuples arg_seq(i) -> results, and
    the state() after each call."""
    out = []
    for compiled in (False, True):
        args_of, look = state()
        f = llgrad.compile(fn(*look)) if compiled else fn(*look)
        seen = []
        for i in range(len(arg_seq)):
            r = f(*args_of(arg_seq[i]))
            seen.append([np.array(x.detach().numpy()) for x in (r if isinstance(r, tuple) else (r,))])
            seen.append([np.array(t.detach().numpy()) for t in look])
        out.append(seen)
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            np.testing.assert_allclose(u, v, rtol=1e-6)


@pytest.mark.parametrize("alias", ["slice", "detach", "view"])
def test_alias_written_through_data_then_apart(alias):
    """Two inputs over one Storage, written only through `.data` (whose version counter is
    its own, so the Storage's did not move): the trace reads the second through the first's
    memory; a later call with the two apart must not reuse that (it returned a's value)."""
    make = {"slice": lambda x: x[:], "detach": lambda x: x.detach(),
            "view": lambda x: x.view(4)}[alias]

    def fn(a, other):
        def step(x, y):
            x.data.add_(1)
            return y * 1
        return step

    def state():
        a = llgrad.tensor([1.0, 2.0, 3.0, 4.0])
        other = llgrad.tensor([5.0, 6.0, 7.0, 8.0])
        return (lambda apart: (a, other) if apart else (a, make(a))), (a, other)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, comp = _runs(fn, [False, True, False, True, True, False], state)
    _same(eager, comp)


def _scaled(lr):
    # (a helper the optimiser's step calls: a stand-in for lr is no float here)
    return lr if type(lr) is float else 1.0


class _HelperSGD(llgrad.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @llgrad.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                p.add_(p.grad, alpha=-_scaled(g["lr"]))


def _train(make_opt, compiled, n):
    """n steps of a Linear under make_opt(params) -> (optimizer, scheduler), compiled or
    eager: (the step function, the losses, the parameters after)."""
    llgrad.manual_seed(0)
    m = llgrad.nn.Linear(3, 2)
    opt, sched = make_opt(m.parameters())
    x = llgrad.tensor([[1.0, 2.0, -1.0], [0.5, -0.5, 2.0]])

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss.detach()

    f = llgrad.compile(step) if compiled else step
    losses = []
    for _ in range(n):
        losses.append(float(f(x)))
        sched.step()
    return f, losses, [p.detach().numpy().copy() for p in m.parameters()]


def _helper_run(compiled, n=6):
    def make(params):
        opt = _HelperSGD(params, lr=0.1)
        return opt, llgrad.optim.lr_scheduler.StepLR(opt, 2, 0.3)
    return _train(make, compiled, n)[1:]


def test_user_optimizer_helper_reads_the_type_of_lr():
    """`type(lr) is float` in a function the user's step calls (not a method of the class):
    the step read the lr as a stand-in, took the other branch, and compiled calls stepped
    by 1.0 instead of the lr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c_losses, c_params = _helper_run(True)
    e_losses, e_params = _helper_run(False)
    np.testing.assert_allclose(c_losses, e_losses, rtol=1e-6)
    for a, b in zip(c_params, e_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("late", ["sum", "amax"])
def test_alias_read_in_a_group_after_the_in_place_write(late):
    """`c = b * 2; a.mul_(3); return c.sum()` with b = a[:]: the trace read b as an input
    of its own, so code generation wrote a's final value into a's buffer (in place) and
    then ran the reduction, fused with b * 2, over that buffer: the result was 3x eager's."""
    def fn(a):
        def step(x, y):
            c = y * 2
            x.mul_(3)
            return getattr(c, late)(0)
        return step

    def state():
        llgrad.manual_seed(0)
        a = llgrad.randn(16, 16)
        return (lambda _: (a, a[:])), (a,)

    eager, comp = _runs(fn, [0, 1, 2], state)
    _same(eager, comp)


class _Wrapper(llgrad.optim.Optimizer):
    """SAM's shape: a user's optimiser whose groups a base optimiser steps."""
    def __init__(self, params, **kwargs):
        super().__init__(params, dict(kwargs))
        self.base_optimizer = llgrad.optim.SGD(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @llgrad.no_grad()
    def step(self):
        self.base_optimizer.step()


def _wrapped_run(compiled, n=8):
    def make(params):
        opt = _Wrapper(params, lr=0.1, momentum=0.9)
        return opt, llgrad.optim.lr_scheduler.OneCycleLR(opt.base_optimizer, max_lr=0.2,
                                                         total_steps=20)
    return _train(make, compiled, n)


def test_wrapped_base_optimizer_keeps_its_dynamic_momentum():
    """The user's wrapper made the groups ParamGroups knowing its own dynamic keys (lr);
    SGD, given those groups, kept them as they were, so OneCycleLR's momentum was a guard:
    a trace per step, then eager calls at the recompile limit."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no recompile-limit warning)
        f, losses, params = _wrapped_run(True)
    assert f.n_traces <= 2
    _, e_losses, e_params = _wrapped_run(False)
    np.testing.assert_allclose(losses, e_losses, rtol=1e-6)
    for a, b in zip(params, e_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
