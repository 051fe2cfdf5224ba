"""Session 74 (q), long training loops: 15-30 steps of a training program whose step is
compiled (llgrad.compile), run eagerly, and run in PyTorch, with state that changes over
the run (gradient accumulation with two compiled functions, schedulers stepped per step
and per epoch, ReduceLROnPlateau on a validation loss, clipping that sometimes bites,
GradScaler skipping a step on an injected inf, an EMA copy, BatchNorm with eval passes,
dropout reseeded per epoch, weight decay toggled mid-run, a checkpoint resumed in a fresh
model and optimiser, a ragged last batch, parameters frozen mid-run, a param group added
mid-run, a shuffling DataLoader over a float64 model). Observed: the loss at every step,
then the parameters, buffers and optimiser state_dict (torch == eager == compiled)."""
import warnings

import numpy as np
import pytest

import llgrad

pytest.importorskip("torch")
from stateful_harness_s70_a11 import _close, _seen, randn  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (15-30 steps a case: the slow set)


def same_fn(f):      # (the eager runs: the step as it is)
    return f

def three_way(prog, rtol=1e-4, atol=1e-5, warns=None):
    """prog(lib, comp) runs the whole loop, comp(step) giving the step it calls; it returns
    what is observed (losses per step, then the end state). warns: the text every warning of
    the compiled run about compiling or running eagerly must hold (none when None)."""
    import torch
    want = _seen(prog(torch, same_fn))
    eager = _seen(prog(llgrad, same_fn))
    _close(want, eager, rtol, atol, f"eager vs torch ({prog.__name__})")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _seen(prog(llgrad, llgrad.compile))
    msgs = [str(w.message) for w in caught if "compile" in str(w.message).lower()
            or "eager" in str(w.message).lower()]
    _close(eager, got, rtol, atol, f"compiled vs eager ({prog.__name__})")
    assert all(warns in m for m in msgs) if warns else not msgs, msgs


def init(lib, model, seed=0, scale=0.4):
    with lib.no_grad():
        for k, p in enumerate(model.parameters()):
            p.copy_(lib.tensor(randn(seed + k, *p.shape) * scale))
    return model


def data(seed, n, d, out=2):
    """n rows of inputs and regression targets."""
    x = randn(seed, n, d)
    y = np.tanh(x[:, :out] * 1.5 + 0.3).astype(np.float32) + 0.1 * randn(seed + 1, n, out)
    return x, y


def batches(lib, x, y, bs, dtype=None):
    """The epoch's batches in order, the last one ragged."""
    out = []
    for s in range(0, len(x), bs):
        a, b = lib.tensor(x[s:s + bs]), lib.tensor(y[s:s + bs])
        out.append((a, b) if dtype is None else (a.to(dtype), b.to(dtype)))
    return out


def opt_state(opt):
    sd = opt.state_dict()
    return [{k: sd["state"][k] for k in sorted(sd["state"])},
            [{k: g[k] for k in sorted(g)} for g in sd["param_groups"]]]


def mlp(lib, d=5, h=7, out=2, dtype=None):
    m = lib.nn.Sequential(lib.nn.Linear(d, h), lib.nn.Tanh(), lib.nn.Linear(h, out))
    m = init(lib, m)
    return m if dtype is None else m.to(dtype)


# ---- 1. gradient accumulation with two compiled functions, ragged last batch --------------

def accumulation(lib, comp, k=3):
    model = mlp(lib)
    opt = lib.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.05)
    x, y = data(1, 26, 5)

    def micro(a, b, n):
        loss = lib.nn.functional.mse_loss(model(a), b) / n
        loss.backward()
        return loss

    def update():
        opt.step()
        opt.zero_grad()

    micro_c, update_c = comp(micro), comp(update)
    losses = []
    for epoch in range(3):
        bs = batches(lib, x, y, 4)      # 6 full + one of 2
        for i, (a, b) in enumerate(bs):
            losses.append(micro_c(a, b, k))
            if (i + 1) % k == 0 or i + 1 == len(bs):
                update_c()
    return [losses, list(model.parameters()), opt_state(opt)]


def test_accumulation_two_functions():
    three_way(accumulation)


def accumulation_flag(lib, comp, k=2):
    """One compiled step taking a Python flag: step the optimiser or only accumulate."""
    model = mlp(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    x, y = data(2, 20, 5)

    def step(a, b, do_step):
        loss = lib.nn.functional.smooth_l1_loss(model(a), b, beta=0.5) / k
        loss.backward()
        if do_step:
            opt.step()
            opt.zero_grad(set_to_none=False)
        return loss

    step_c = comp(step)
    losses = []
    for epoch in range(3):
        for i, (a, b) in enumerate(batches(lib, x, y, 3)):     # 6 of 3 + one of 2
            losses.append(step_c(a, b, (i + 1) % k == 0))
    return [losses, list(model.parameters()), [p.grad for p in model.parameters()],
            opt_state(opt)]


def test_accumulation_flag():
    three_way(accumulation_flag)


# ---- 2. schedulers: OneCycleLR per step inside, warm restarts with float epochs outside,
# ReduceLROnPlateau on a compiled validation loss ------------------------------------------

def one_cycle(lib, comp):
    model = mlp(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-3)
    x, y = data(3, 25, 5)
    sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.3, epochs=4, steps_per_epoch=4,
                                              pct_start=0.3, three_phase=True)

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        sched.step()
        return loss, sched.get_last_lr()[0]

    step_c = comp(step)
    out = []
    for epoch in range(4):
        for a, b in batches(lib, x, y, 7):      # 3 of 7 + one of 4
            out.append(step_c(a, b))
    return [out, list(model.parameters()), opt_state(opt), sched.state_dict()["last_epoch"]]


def test_one_cycle_inside_step():
    three_way(one_cycle)


def warm_restarts(lib, comp):
    model = mlp(lib)
    opt = lib.optim.Adam(model.parameters(), lr=0.05, amsgrad=True)
    x, y = data(4, 18, 5)
    sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2,
                                                               eta_min=1e-3)

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.l1_loss(model(a), b)
        loss.backward()
        opt.step()
        return loss

    step_c = comp(step)
    out = []
    for epoch in range(5):
        bs = batches(lib, x, y, 5)      # 3 of 5 + one of 3
        for i, (a, b) in enumerate(bs):
            out.append(step_c(a, b))
            sched.step(epoch + (i + 1) / len(bs))
            out.append(opt.param_groups[0]["lr"])
    return [out, list(model.parameters()), opt_state(opt)]


def test_warm_restarts_float_epochs():
    three_way(warm_restarts)


def plateau(lib, comp):
    model = mlp(lib)
    opt = lib.optim.RMSprop(model.parameters(), lr=0.05, momentum=0.5)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0,
                                                     threshold=0.05, cooldown=1)
    x, y = data(5, 20, 5)
    vx, vy = data(6, 9, 5)
    vx, vy = lib.tensor(vx), lib.tensor(vy)

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        return loss

    def val(a, b):
        with lib.no_grad():
            return lib.nn.functional.mse_loss(model(a), b)

    step_c, val_c = comp(step), comp(val)
    out = []
    for epoch in range(7):
        for a, b in batches(lib, x, y, 6):       # 3 of 6 + one of 2
            out.append(step_c(a, b))
        v = val_c(vx, vy)
        sched.step(v.item())
        out += [v, opt.param_groups[0]["lr"], sched.num_bad_epochs]
    return [out, list(model.parameters()), opt_state(opt)]


def test_plateau_on_validation_loss():
    three_way(plateau)


# ---- 3. clipping that bites on some steps, returning the total norm ------------------------

def clipping(lib, comp):
    model = mlp(lib, h=6)
    opt = lib.optim.Adam(model.parameters(), lr=0.03, betas=(0.8, 0.9))
    x, y = data(7, 24, 5)
    y = y * np.float32(4)                # large early gradients

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        norm = lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm=3.5)
        opt.step()
        return loss, norm

    step_c = comp(step)
    out = []
    for epoch in range(4):
        for a, b in batches(lib, x, y, 5):      # 4 of 5 + one of 4
            out.append(step_c(a, b))
    norms = [float(n) for _, n in out]
    assert min(norms) < 3.5 < max(norms)     # (the clip bites on some steps only)
    return [out, list(model.parameters()), opt_state(opt)]


def test_clip_sometimes_bites():
    three_way(clipping)


# ---- 4. GradScaler: an inf injected on two steps (the step skipped, the scale backed off,
# grown again every 3 clean steps), clipping after unscale_ ---------------------------------

def scaler_skip(lib, comp, inf_steps=(4, 11)):
    model = mlp(lib)
    opt = lib.optim.Adam(model.parameters(), lr=0.02)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3)
    x, y = data(8, 22, 5)

    def step(a, b, poison):
        opt.zero_grad()
        out = model(a)
        loss = lib.nn.functional.mse_loss(out, b)
        scaler.scale(loss * poison).backward()
        scaler.unscale_(opt)
        norm = lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)
        scaler.step(opt)
        scaler.update()
        return loss, norm

    step_c = comp(step)
    out, n = [], 0
    for epoch in range(3):
        for a, b in batches(lib, x, y, 6):      # 3 of 6 + one of 4
            poison = lib.tensor(float("inf") if n in inf_steps else 1.0)
            out.append(step_c(a, b, poison))
            out.append(scaler.get_scale())
            n += 1
    return [out, list(model.parameters()), opt_state(opt), scaler.state_dict()]


def test_grad_scaler_skips_inf_steps():
    three_way(scaler_skip)


# ---- 5. an EMA copy updated inside the step; AveragedModel's EMA beside it -----------------

def ema(lib, comp, decay=0.8):
    model = mlp(lib)
    shadow = [p.detach().clone() for p in model.parameters()]
    avg = lib.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    opt = lib.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    x, y = data(9, 21, 5)

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        with lib.no_grad():
            for s, p in zip(shadow, model.parameters()):
                s.mul_(decay).add_(p, alpha=1 - decay)
        avg.update_parameters(model)
        return loss

    def ema_eval(a, b):
        with lib.no_grad():
            return lib.nn.functional.mse_loss(avg(a), b)

    step_c, eval_c = comp(step), comp(ema_eval)
    out = []
    vx, vy = (lib.tensor(v) for v in data(10, 7, 5))
    for epoch in range(4):
        for a, b in batches(lib, x, y, 5):      # 4 of 5 + one of 1
            out.append(step_c(a, b))
        out.append(eval_c(vx, vy))
    return [out, shadow, list(avg.parameters()), avg.n_averaged, opt_state(opt)]


def test_ema_in_step():
    three_way(ema)


# ---- 6. BatchNorm with eval passes between epochs, dropout reseeded per epoch -------------

def bn_dropout(lib, comp):
    nn = lib.nn
    model = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8, momentum=0.3), nn.ReLU(),
                          nn.Dropout(0.25), nn.Linear(8, 2))
    init(lib, model)
    opt = lib.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-2)
    x, y = data(11, 23, 5)
    vx, vy = (lib.tensor(v) for v in data(12, 6, 5))

    def step(a, b):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        return loss

    def val(a, b):
        with lib.no_grad():
            return nn.functional.mse_loss(model(a), b)

    step_c, val_c = comp(step), comp(val)
    out = []
    for epoch in range(4):
        lib.manual_seed(100 + epoch)
        model.train()
        for a, b in batches(lib, x, y, 6):      # 3 of 6 + one of 5
            out.append(step_c(a, b))
        model.eval()
        out.append(val_c(vx, vy))
    bn = model[1]
    return [out, list(model.parameters()), bn.running_mean, bn.running_var,
            bn.num_batches_tracked, opt_state(opt)]


def test_batchnorm_eval_between_epochs_dropout_reseeded():
    three_way(bn_dropout)


# ---- a shuffling DataLoader (its own Generator) over a float64 model with dropout --------

def loader_float64(lib, comp):
    nn = lib.nn
    model = init(lib, nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Dropout(0.2),
                                    nn.Linear(8, 2))).double()
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    x, y = data(11, 23, 5)
    ds = lib.utils.data.TensorDataset(lib.tensor(x).double(), lib.tensor(y).double())
    g = lib.Generator().manual_seed(5)
    dl = lib.utils.data.DataLoader(ds, batch_size=6, shuffle=True, generator=g)

    def step(a, b):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        return loss

    step_c, _ = comp(step), lib.manual_seed(3)
    out = [step_c(a, b) for epoch in range(4) for a, b in dl]
    return [out, list(model.parameters())]


def test_shuffled_loader_float64_dropout():
    three_way(loader_float64, rtol=1e-10, atol=1e-12)
