"""Fixes found by the sweep-11 tutorial programs, each checked against torch: a compiled
function's dynamic numbers (a float or int argument that changes between calls) kept as
graph inputs where they used to become value guards (a trace per value, then eager at the
recompile limit), and Adam's weight decay read at each call as its lr is."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def _ema_run(lib, compiled, form):
    e = lib.tensor([0.5, -1.0, 2.0])
    p = lib.tensor([1.0, 0.25, -0.75])

    def update(decay):
        with lib.no_grad():
            if form == "alpha":
                e.mul_(decay).add_(p, alpha=1 - decay)
            elif form == "sub":
                e.sub_(p - e, alpha=-(1 - decay))
            else:
                e.lerp_(p, 1 - decay)
        p.mul_(1.1)

    f = lib.compile(update) if compiled else update
    out = []
    for k in range(10):
        f(min(0.99, (1 + k) / (10 + k)))
        out.append(e.numpy().copy())
    return f, np.array(out)


@pytest.mark.parametrize("form", ["alpha", "sub", "lerp"])
def test_dynamic_number_as_alpha_or_lerp_weight_keeps_one_trace(form):
    """timm's ModelEmaV2 / V3 updates (e.mul_(d).add_(p, alpha=1 - d), e.lerp_(p, 1 - d))
    with the decay warming up each call: add's alpha and lerp's weight read the number as
    a graph input (cast to the tensor's dtype, as PyTorch reads it), not a value guard."""
    _, ref = _ema_run(torch, False, form)
    cf, got = _ema_run(llgrad, True, form)
    _, eager = _ema_run(llgrad, False, form)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(got, eager)
    assert cf.n_traces <= 2, cf.n_traces


def _wd_schedule_run(lib, compiled):
    lib.manual_seed(0)
    model = lib.nn.Linear(3, 2)
    opt = lib.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.04)
    x = lib.tensor([[1.0, -2.0, 0.5], [0.3, 0.8, -1.2]])

    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.item()

    f = lib.compile(step, backend="interpret") if compiled else step
    losses = []
    for k in range(9):
        opt.param_groups[0]["weight_decay"] = 0.04 + 0.05 * k      # (DINO's wd schedule)
        losses.append(f(x))
    return f, losses, [p.detach().numpy().copy() for p in model.parameters()]


def test_adam_weight_decay_schedule_is_read_at_each_call():
    """DINO sets param_groups[i]['weight_decay'] from a cosine schedule before each step:
    Adam / AdamW read it as a graph input (as lr and betas), not a value guard."""
    _, t_losses, t_params = _wd_schedule_run(torch, False)
    cf, losses, params = _wd_schedule_run(llgrad, True)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-6)
    for a, b in zip(params, t_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert cf.n_traces <= 2, cf.n_traces


def test_comparisons_of_dynamic_numbers_guard_their_outcome():
    """`if (i + 1) % k == 0`, `if i < warmup`, `if m >= 0.5`: a comparison of a dynamic
    number with a Python number gives this call's outcome and guards it (a trace per
    outcome, not per value); // and % of ints are Python's (floor) for negative ints too."""
    def f(lib, x, i, m):
        y = (x * 2).sum()
        if (i + 1) % 3 == 0:
            y = y * 2
        if i < 4:
            y = y + 1
        if m >= 0.5:
            y = y - m
        return y * ((i // 2) * 1.0 + ((-i) % 4) - (7 // (i + 20))), i >= 2.5

    # (the guards are the subject: the reference interpreter spares seven LLVM builds)
    cf = llgrad.compile(lambda x, i, m: f(llgrad, x, i, m), backend="interpret")
    for i in [0, 1, 2, 5, -3, 8, 4, 3, 11, -7]:
        m = 0.125 * abs(i)
        got = cf(llgrad.ones(3), i, m)
        ref = f(torch, torch.ones(3), i, m)
        assert got[0].item() == ref[0].item() and got[1] is ref[1], (i, got, ref)
    assert cf.n_traces <= 7, cf.n_traces


def _accumulate_run(lib, compiled):
    lib.manual_seed(0)
    model = lib.nn.Linear(4, 2)
    opt = lib.optim.Adam(model.parameters(), lr=1e-2)
    xs = lib.linspace(-1, 1, 36).reshape(9, 2, 2).repeat(1, 1, 2)

    def step(x, i):
        loss = model(x).pow(2).mean()
        (loss / 3).backward()
        if (i + 1) % 3 == 0:        # (Adam's state is made by the third call)
            opt.step()
            opt.zero_grad()
        return loss.detach()

    f = lib.compile(step, backend="interpret") if compiled else step
    losses = [f(xs[i], i).item() for i in range(9)]
    return f, losses, [p.detach().numpy().copy() for p in model.parameters()]


def test_dynamic_number_survives_a_traced_run_that_makes_optimizer_state():
    """Gradient accumulation in the step: the optimiser's first step (which makes its
    state, Python state a trace cannot keep) comes in the first call where the index is a
    dynamic number; that call runs eagerly and the index stays an input."""
    _, t_losses, t_params = _accumulate_run(torch, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf, losses, params = _accumulate_run(llgrad, True)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-6)
    for a, b in zip(params, t_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert cf.n_traces <= 5, cf.n_traces


def test_dynamic_number_stays_an_input_when_control_flow_is_left_as_python():
    """A tensor `if` the conversion refuses (an in-place write to an outside tensor, DINO's
    clip_gradients) is traced again as plain Python; the float argument of that call (the
    teacher momentum) stays a graph input instead of becoming a value guard for good."""
    def f(lib, g, k, m):
        c = 3.0 / (g.norm() + 1e-6)
        if c < 1:
            g.mul_(c)
        with lib.no_grad():
            k.mul_(m).add_(g * (1 - m))

    ref_g, ref_k = torch.full((3,), 2.0), torch.zeros(3)
    got_g, got_k = llgrad.full((3,), 2.0), llgrad.zeros(3)
    cf = llgrad.compile(lambda g, k, m: f(llgrad, g, k, m))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (the one warning: control flow left as Python)
        for n in range(10):
            m = 0.9 + n / 200
            f(torch, ref_g, ref_k, m)
            cf(got_g, got_k, m)
    np.testing.assert_allclose(got_k.numpy(), ref_k.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got_g.numpy(), ref_g.numpy(), rtol=1e-6)
    assert cf.n_traces <= 4, cf.n_traces


def _ppo_run(lib, compiled):
    lib.manual_seed(0)
    policy = lib.nn.Linear(3, 2)
    opt = lib.optim.SGD(policy.parameters(), lr=0.5)
    obs = lib.tensor([[0.5, -1.0, 2.0], [1.5, 0.2, -0.3], [-0.7, 0.9, 0.1], [0.0, 1.0, -1.0]])
    act, adv = lib.tensor([0, 1, 1, 0]), lib.tensor([1.0, -0.5, 2.0, -1.5])
    old_logp = lib.tensor([-0.9, -0.6, -0.8, -0.5])

    def step(clip_range):
        logp = policy(obs).log_softmax(-1).gather(1, act.unsqueeze(1)).squeeze(1)
        ratio = (logp - old_logp).exp()
        loss = -lib.min(ratio * adv, lib.clamp(ratio, 1 - clip_range, 1 + clip_range) * adv)
        loss = loss.mean() + 0.01 * ratio.clamp(max=clip_range * 10).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    f = lib.compile(step, backend="interpret") if compiled else step
    losses = [f(0.3 * (1 - k / 10)).item() for k in range(9)]
    return f, losses, [p.detach().numpy().copy() for p in policy.parameters()]


def test_dynamic_clamp_bounds_keep_one_trace():
    """Stable-Baselines3's PPO anneals the clip range and clamps the ratio with
    th.clamp(ratio, 1 - clip_range, 1 + clip_range): clamp's number bounds read a dynamic
    number as a graph input in the tensor's dtype (as PyTorch reads it)."""
    _, t_losses, t_params = _ppo_run(torch, False)
    cf, losses, params = _ppo_run(llgrad, True)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-6)
    for a, b in zip(params, t_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert cf.n_traces <= 2, cf.n_traces


def test_dynamic_number_inside_a_tensor_if_gives_no_warning():
    """A dynamic int used inside a converted tensor `if` (its range check there would be a
    guard of the region's own): the number is guarded by value, the `if` stays converted
    and nothing warns (a tensor `if` left as Python would)."""
    def f(lib, x, step):
        y = x * 2
        if x.sum() > 0:
            y = y * (step + 1)
        return y

    cf = llgrad.compile(lambda x, step: f(llgrad, x, step), backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(6):
            for step in (3, 4):
                sign = 1.0 if k % 2 else -1.0
                got = cf(llgrad.ones(3) * sign, step)
                np.testing.assert_array_equal(got.numpy(), f(torch, torch.ones(3) * sign,
                                                             step).numpy())
    assert cf.n_traces <= 3, cf.n_traces
