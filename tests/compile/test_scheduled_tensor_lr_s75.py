"""A scheduler stepped inside a compiled step fills a tensor lr (Adam(lr=torch.tensor(...)))
with a number made from its step count: Tensor.fill_ of that changing number takes its graph
value (runtime/methods.py fill_), so the step count stays an input and one trace serves
every step (it was guarded by value: a trace a step, then eager at the recompile limit)."""
import copy

import numpy as np
import pytest

import llgrad


def _program(three_phase):
    llgrad.manual_seed(0)
    model = llgrad.nn.Sequential(llgrad.nn.Linear(4, 6), llgrad.nn.ReLU(),
                                 llgrad.nn.Linear(6, 2))
    opt = llgrad.optim.Adam(model.parameters(), lr=llgrad.tensor(0.01))
    sched = llgrad.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=20,
                                                 three_phase=three_phase)

    def step(x, y):
        loss = llgrad.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()
    return model, opt, step


@pytest.mark.parametrize("three_phase", [False, True])
def test_one_cycle_on_a_tensor_lr_compiles_once(three_phase):
    rng = np.random.default_rng(1)
    batches = [(llgrad.tensor(rng.standard_normal((5, 4)), dtype=llgrad.float32),
                llgrad.tensor(rng.integers(0, 2, 5))) for _ in range(12)]
    runs = []
    for compiled in (False, True):
        model, opt, step = _program(three_phase)
        f = llgrad.compile(step) if compiled else step
        seen = [(f(x, y).item(), opt.param_groups[0]["lr"].item(),
                 opt.param_groups[0]["betas"][0]) for x, y in batches]
        runs.append((seen, copy.deepcopy(model.state_dict()), f))
    (want, want_state, _), (got, got_state, f) = runs
    # (the schedule exactly; losses and weights within float32 rounding: compiled products
    # and fused updates round apart from eager's by an ulp, with a float lr as well)
    assert [w[1:] for w in got] == [w[1:] for w in want]
    np.testing.assert_allclose([w[0] for w in got], [w[0] for w in want], rtol=1e-5)
    for k in want_state:
        np.testing.assert_allclose(got_state[k].numpy(), want_state[k].numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=k)
    # (a trace a phase: its `step_num <= end_step` is a branch on the count)
    assert f.n_traces <= (3 if three_phase else 2), f.n_traces
