"""Inputs written in place by a kernel that also holds index checks (codegen/plan.py's
in_place_results, build.plan_graph): a failed check returns from the kernel before any
later group runs, so a final value computed after the last check may still be written into
its input's own buffer; only the writes before it are staged (computed in output buffers,
committed after the call). A training step with BatchNorm (its running statistics written
in the forward, before the loss's target check) had every write staged: a width-16
ResNet-18's step allocated and copied back 184 tensors (5.6 MB), 6% of its time.
Checked: the plan writes the optimiser's state in place and stages the statistics,
results and state equal eager's, and a step whose target check fails leaves everything as
eager leaves it."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen.lower import blas_available, plan_graph, simplify, small_gemm_bound


def _setup(seed=0):
    llgrad.manual_seed(seed)
    # (no bias before BatchNorm: its gradient would be rounding noise, which Adam scales to
    # lr-sized steps that differ with the order of a sum)
    model = nn.Sequential(nn.Linear(3, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4))
    opt = llgrad.optim.Adam(model.parameters(), lr=0.05)
    return model, opt


def step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def _state(model, opt):
    out = [t.detach().numpy().copy() for t in model.state_dict().values()]
    for s in opt.state.values():
        out += [v.numpy().copy() for v in s.values() if isinstance(v, llgrad.Tensor)]
    return out


def _plan(entry):
    return plan_graph(simplify(entry.forward), {"blas": blas_available(),
                                                "small_gemm": small_gemm_bound()})


def test_optimiser_writes_after_the_last_check_are_in_place():
    (m0, o0), (m1, o1) = _setup(), _setup()
    x, y = llgrad.randn(16, 3), llgrad.randint(0, 4, (16,))
    cstep = llgrad.compile(step)
    for _ in range(4):
        want, got = step(m0, o0, x, y), cstep(m1, o1, x, y)
        cstep.wait()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for a, b in zip(_state(m1, o1), _state(m0, o0)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    entry = cstep.entries[-1]
    plan = _plan(entry)
    assert plan.flags, "the step has no index check: the test no longer tests anything"
    last_check = max(b.first for b, _ in plan.flags)
    where = {v: grp.index for grp in plan.groups for v in grp.results}
    # 5 parameters, each with two moments and a step count: after the check, in place
    assert len(plan.in_place) >= 5 * 4, plan.describe()
    assert all(where[v] > last_check for v in plan.in_place)
    # the running statistics are written before the check: staged, never in place
    assert len(plan.in_place) < len(entry.forward.mutated)


def test_a_failed_check_leaves_inputs_as_eager_leaves_them():
    (m0, o0), (m1, o1) = _setup(), _setup()
    x, y = llgrad.randn(16, 3), llgrad.randint(0, 4, (16,))
    cstep = llgrad.compile(step)
    for _ in range(3):
        step(m0, o0, x, y), cstep(m1, o1, x, y)
        cstep.wait()
    bad = y.clone()
    bad[5] = 7                      # (out of range for 4 classes: the kernel's check fails)
    with pytest.raises(IndexError) as want:
        step(m0, o0, x, bad)
    with pytest.raises(IndexError) as got:
        cstep(m1, o1, x, bad)
    assert str(got.value) == str(want.value)
    for a, b in zip(_state(m1, o1), _state(m0, o0)):   # (BatchNorm's statistics moved once)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cstep(m1, o1, x, y).item(), step(m0, o0, x, y).item(), rtol=1e-5)
