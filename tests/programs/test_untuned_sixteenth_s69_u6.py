"""bench/untuned_models_sixteenth.py's five models (BYOL with its EMA target updated in the
step, knowledge distillation from an eval-mode teacher, second-order MAML on sinusoid tasks
drawn in the step, a SAC update with three optimisers and a Polyak target, a CycleGAN step
with InstanceNorm, ReflectionPad2d and set_requires_grad), at small sizes, train a few steps
in torch, llgrad eager and llgrad compiled, seeded alike: losses and every parameter and
buffer against torch's, compiled against eager, one graph, no retrace once warm (SAC: the
reason it runs eagerly, named once, and no trace per update count: the fix the set made)."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_sixteenth as models     # noqa: E402

STEPS = 4      # (the first may run eagerly (a fresh optimiser), the second traces)
# (a Linear's bias before BatchNorm1d (BYOL's MLPs) or a convolution's before InstanceNorm2d
# (CycleGAN's) has a gradient of rounding noise around zero that Adam turns into whole steps
# of lr, in torch too; float64 keeps it at 1e-16)
DTYPE = {"byol": "float64", "cyclegan": "float64"}
# (and CycleGAN's biases before InstanceNorm2d drift by 5e-8 even so: checked at 1e-5)
NOISE = {"cyclegan": lambda k: k.endswith(".bias")}
# SAC's update runs eagerly, saying why: its policy loss's backward reaches the graph of the
# alpha = log_alpha.exp() the previous update made (and past that, it samples its replay
# memory by random.sample and np.stack, which a compiled call cannot replay either)
EAGER = {"sac": "reaches the graph that made one of its inputs"}


def _run(lib, name, compiled, small, dtype):
    old = lib.get_default_dtype()
    lib.set_default_dtype(getattr(lib, dtype))
    try:
        return run_steps(models.build, lib, name, compiled, STEPS, small)
    finally:
        lib.set_default_dtype(old)


def _check(name, small=True, rtol=2e-5):
    dtype = DTYPE.get(name, "float32")
    rtol = 1e-9 if dtype == "float64" else rtol
    t_loss, t_state, _ = _run(torch, name, False, small, dtype)
    e_loss, e_state, e_notes = _run(llgrad, name, False, small, dtype)
    c_loss, c_state, c_notes = _run(llgrad, name, True, small, dtype)
    assert not e_notes, e_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    noise = NOISE.get(name, lambda k: False)
    close(e_state, t_state, 50 * rtol, "eager vs torch", noise)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(c_state, e_state, 50 * rtol, "compiled vs eager", noise)
    if name in NOISE:
        close(e_state, t_state, 1e-5, "eager vs torch")
        close(c_state, e_state, 1e-5, "compiled vs eager")
    if name in EAGER:
        assert c_notes and all(EAGER[name] in n for n in c_notes), c_notes
    else:
        assert not c_notes, c_notes


@pytest.mark.slow
@pytest.mark.parametrize("name", models.NAMES)
def test_small_trains_as_torch_eager_and_compiled(name):
    _check(name)


def _sac_like(lib, compiled):
    """SAC's shape in little: a step given its count, whose loss reads the alpha the previous
    step made by log_alpha.exp() (its graph reached by this step's backward), then makes the
    next; -> (losses, w and log_alpha after them, traces, warnings)."""
    import warnings
    lib.manual_seed(0)
    w = lib.randn(3, requires_grad=True)
    log_alpha = lib.zeros(1, requires_grad=True)
    agent = {"alpha": 0.2}
    x = lib.randn(4, 3)

    def update(updates):
        loss = (agent["alpha"] * (x @ w).tanh()).mean() + (x @ w).pow(2).mean()
        w.grad = log_alpha.grad = None
        loss.backward()
        with lib.no_grad():
            w.sub_(0.1 * w.grad)
            if updates % 2 == 0:
                w.mul_(0.99)
            if log_alpha.grad is not None:      # (SAC's alpha_optim: its grad zeroed after)
                log_alpha.sub_(0.1 * log_alpha.grad)
        log_alpha.grad = None
        agent["alpha"] = log_alpha.exp() * (1 + 0.1 * updates)
        return loss.detach()
    f = llgrad.compile(update) if compiled else update
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [float(f(i)) for i in range(8)]
    notes = [str(c.message) for c in caught if "llgrad" in str(c.message)]
    state = np.concatenate([w.detach().numpy(), log_alpha.detach().numpy()])
    return losses, state, f.n_traces if compiled else 0, notes


def test_a_graph_break_not_made_by_a_counted_number_is_not_retraced_per_count():
    # (SAC's update_parameters(memory, batch_size, updates): its step count became a value
    # guard when the trace with it as an input broke the graph, so every call traced again
    # and broke again, up to the recompile limit; the eager runs were right, the traces waste)
    t_loss, t_state, _, _ = _sac_like(torch, False)
    c_loss, c_state, traces, notes = _sac_like(llgrad, True)
    np.testing.assert_allclose(c_loss, t_loss, rtol=1e-6)
    np.testing.assert_allclose(c_state, t_state, rtol=1e-5, atol=1e-7)
    assert traces <= 3, traces
    assert any("reaches the graph that made one of its inputs" in n for n in notes), notes
    assert not any("recompile limit" in n for n in notes), notes


def test_arrays_a_step_reads_are_told_apart_by_their_bytes_in_log_time():
    # (SAC's replay memory: 2,500 transitions of NumPy arrays the step samples; each call
    # tested every array against every one before it, 28 million np.may_share_memory tests,
    # 8 s a call of a step eager runs in 20 ms)
    from llgrad.compile import arrays
    rng = np.random.default_rng(0)
    buffers = [np.zeros(64, np.float32) for _ in range(4)]
    items = []
    for k in range(400):     # (views: slices, reversed, strided, empty, 2-d; fresh arrays)
        b = buffers[rng.integers(4)]
        i, j = sorted(rng.integers(0, 65, 2))
        pick = rng.integers(5)
        x = (b[i:j] if pick == 0 else b[i:j][::-1] if pick == 1 else b[i:j:3] if pick == 2
             else b[:0] if pick == 3 else np.ones((2, 3), np.float64))
        items.append((f"a{k}", x))
    items.insert(7, ("t", llgrad.from_numpy(buffers[2][10:20])))
    want, bases = [], [buffers[2][10:20]]       # (the test the walk made pairwise)
    for path, x in items:
        if isinstance(x, np.ndarray):
            if any(np.may_share_memory(x, b) for b in bases):
                continue
            bases.append(x)
        want.append(path)
    tested = []
    real = np.may_share_memory
    np.may_share_memory = lambda a, b, *r: tested.append(1) or real(a, b, *r)
    try:
        got = arrays.arrays_as_tensors(items)
    finally:
        np.may_share_memory = real
    assert [p for p, _ in got] == want
    for (_, t), (_, x) in zip(got, [(p, x) for p, x in items if p in set(want)]):
        if isinstance(x, np.ndarray) and x.size:
            assert isinstance(t, llgrad.Tensor) and np.shares_memory(t.numpy(), x)
    assert len(tested) < 50, len(tested)


def test_a_step_that_always_runs_eagerly_does_not_walk_its_replay_memory_every_call():
    import random
    from llgrad.compile import guards
    rng = random.Random(0)
    memory = [np.full(3, k, np.float32) for k in range(500)]
    w = llgrad.zeros(3, requires_grad=True)

    def step():
        batch = llgrad.from_numpy(np.stack(rng.sample(memory, 4)))
        loss = (batch @ w).pow(2).mean()
        w.grad = None
        loss.backward()
        with llgrad.no_grad():
            w.sub_(0.01 * w.grad)
        return loss.detach()
    f = llgrad.compile(step)
    with pytest.warns(UserWarning, match="running eagerly"):
        for _ in range(3):
            f()
    walked, real = [], guards.arrays_as_tensors
    guards.arrays_as_tensors = lambda items: walked.append(len(items)) or real(items)
    try:
        for _ in range(3):
            f()
    finally:
        guards.arrays_as_tensors = real
    assert sum(walked) < 50, walked
