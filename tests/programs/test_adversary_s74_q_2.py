"""Session 74 (q), long training loops (continued from test_adversary_s74_q.py): a
checkpoint resumed in fresh objects, parameters frozen mid-run, param groups added mid-run,
a float64 model over 30 steps, recurrent and classification loops; the NAdam mu_product
regression (torch == llgrad eager == llgrad compiled, the loss at every step, the end
state)."""
import io

import numpy as np
import pytest

pytest.importorskip("torch")
from test_adversary_s74_q import batches, data, init, mlp, opt_state, three_way  # noqa: E402

pytestmark = pytest.mark.torch


# ---- 7. weight decay toggled for one param group mid-run, lr of the other stepped by
# MultiStepLR per epoch ------------------------------------------------------------------

def decay_toggle(lib, comp):
    model = mlp(lib)
    opt = lib.optim.AdamW([{"params": model[0].parameters(), "weight_decay": 0.0},
                           {"params": model[2].parameters(), "weight_decay": 0.3}], lr=0.03)
    sched = lib.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 3], gamma=0.3)
    x, y = data(13, 20, 5)

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        return loss

    step_c = comp(step)
    out = []
    for epoch in range(5):
        if epoch == 2:
            opt.param_groups[0]["weight_decay"] = 0.5
            opt.param_groups[1]["weight_decay"] = 0.0
        for a, b in batches(lib, x, y, 6):       # 3 of 6 + one of 2
            out.append(step_c(a, b))
        sched.step()
    return [out, list(model.parameters()), opt_state(opt), sched.get_last_lr()]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_weight_decay_toggled_mid_run():
    three_way(decay_toggle)


# ---- 8. a checkpoint saved mid-run (llgrad.save / torch.save to BytesIO) and the run
# resumed in a fresh model, optimiser and scheduler, compiled again -------------------------

def checkpoint_resume(lib, comp, save_at=9, total=20):
    x, y = data(14, 24, 5)

    def build():
        model = mlp(lib)
        opt = lib.optim.Adam(model.parameters(), lr=0.05, betas=(0.85, 0.95),
                             weight_decay=1e-3)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.6)

        def step(a, b):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(model(a), b)
            loss.backward()
            opt.step()
            sched.step()
            return loss
        return model, opt, sched, comp(step)

    bs = batches(lib, x, y, 7)            # 3 of 7 + one of 3
    model, opt, sched, step_c = build()
    out = []
    for n in range(total):
        if n == save_at:
            buf = io.BytesIO()
            lib.save({"model": model.state_dict(), "opt": opt.state_dict(),
                      "sched": sched.state_dict(), "n": n}, buf)
            buf.seek(0)
            ck = lib.load(buf, weights_only=True)
            model, opt, sched, step_c = build()      # fresh, with other initial values
            with lib.no_grad():
                for p in model.parameters():
                    p.mul_(3.0)
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["opt"])
            sched.load_state_dict(ck["sched"])
            out.append(ck["n"])
        a, b = bs[n % len(bs)]
        out.append(step_c(a, b))
    return [out, list(model.parameters()), opt_state(opt), sched.state_dict()]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_checkpoint_resumed_in_fresh_objects():
    three_way(checkpoint_resume)


# ---- 9. parameters frozen after N steps; a param group added mid-run ---------------------

def freeze(lib, comp):
    model = mlp(lib)
    opt = lib.optim.Adam(model.parameters(), lr=0.03)
    x, y = data(15, 20, 5)

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        return loss

    step_c = comp(step)
    out, n = [], 0
    for epoch in range(5):
        for a, b in batches(lib, x, y, 6):       # 3 of 6 + one of 2
            if n == 7:
                model[0].requires_grad_(False)
            if n == 14:
                model[0].bias.requires_grad_(True)
            out.append(step_c(a, b))
            n += 1
    return [out, list(model.parameters()), [p.grad for p in model.parameters()],
            opt_state(opt)]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_frozen_after_n_steps():
    three_way(freeze)


def add_group(lib, comp):
    nn = lib.nn
    body = init(lib, nn.Sequential(nn.Linear(5, 6), nn.GELU()))
    head = init(lib, nn.Linear(6, 2), seed=10)
    extra = init(lib, nn.Linear(5, 2), seed=20)
    head.requires_grad_(True)
    opt = lib.optim.SGD(body.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-2)
    x, y = data(16, 20, 5)
    use_extra = [False]

    def step(a, b):
        opt.zero_grad()
        out = head(body(a))
        if use_extra[0]:
            out = out + extra(a)
        loss = nn.functional.mse_loss(out, b)
        loss.backward()
        opt.step()
        return loss

    step_c = comp(step)
    out, n = [], 0
    for epoch in range(5):
        for a, b in batches(lib, x, y, 7):       # 2 of 7 + one of 6
            if n == 4:
                opt.add_param_group({"params": head.parameters(), "lr": 0.05})
            if n == 9:
                use_extra[0] = True
                opt.add_param_group({"params": extra.parameters(), "lr": 0.02,
                                     "momentum": 0.0, "nesterov": False})
            out.append(step_c(a, b))
            n += 1
    return [out, list(body.parameters()), list(head.parameters()), list(extra.parameters()),
            opt_state(opt)]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_param_groups_added_mid_run():
    three_way(add_group)


# ---- 10. float64 model: drift that float32 would hide ------------------------------------

def float64_long(lib, comp):
    model = mlp(lib, h=9, dtype=lib.float64)
    opt = lib.optim.NAdam(model.parameters(), lr=0.02, weight_decay=1e-2,
                          decoupled_weight_decay=True)
    sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=1e-3)
    x, y = data(17, 26, 5)

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.huber_loss(model(a), b, delta=0.3)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.2)
        opt.step()
        return loss

    step_c = comp(step)
    out = []
    for epoch in range(8):
        for a, b in batches(lib, x, y, 8, dtype=lib.float64):    # 3 of 8 + one of 2
            out.append(step_c(a, b))
        sched.step()
    return [out, list(model.parameters()), opt_state(opt)]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_float64_thirty_steps():
    three_way(float64_long, rtol=1e-10, atol=1e-12)


# regression (s74 q): NAdam's traced step multiplied the float32 mu_product by mu as a
# float64 0-d tensor (the product rounded once), eager by mu as a number cast to float32
# first; one float32 ulp of mu_product a step, visible in a float64 model's parameters
def nadam_mu_product(lib, comp):
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64))
    opt = lib.optim.NAdam([p], lr=0.1)

    def step():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        opt.step()
        return loss

    step_c = comp(step)
    out = [step_c() for _ in range(5)]
    return [out, p, opt_state(opt)]


def test_nadam_mu_product_rounded_as_eager():
    three_way(nadam_mu_product, rtol=1e-13, atol=0)


# ---- 11. frozen with zero_grad(set_to_none=False): the frozen parameter keeps a zero .grad,
# so SGD still moves it by momentum and weight decay --------------------------------------

def freeze_zeroed(lib, comp):
    model = mlp(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0.1)
    x, y = data(18, 16, 5)

    def step(a, b):
        opt.zero_grad(set_to_none=False)
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        return loss

    step_c = comp(step)
    out, n = [], 0
    for epoch in range(4):
        for a, b in batches(lib, x, y, 5):       # 3 of 5 + one of 1
            if n == 5:
                model[2].weight.requires_grad_(False)
            out.append(step_c(a, b))
            n += 1
    return [out, list(model.parameters()), [p.grad for p in model.parameters()],
            opt_state(opt)]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_frozen_keeps_zero_grad_and_momentum():
    three_way(freeze_zeroed)


# ---- 12. a recurrent model: LSTM over sequences, clip_grad_value_, ExponentialLR per epoch -

def lstm_loop(lib, comp):
    nn = lib.nn
    lstm, head = nn.LSTM(3, 5, batch_first=True), nn.Linear(5, 1)
    init(lib, lstm, scale=0.3)
    init(lib, head, seed=40)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = lib.optim.Adam(params, lr=0.03)
    sched = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)
    x = np.random.default_rng(19).standard_normal((14, 6, 3)).astype(np.float32)
    y = x.sum(axis=(1, 2))[:, None].astype(np.float32) * np.float32(0.3)

    def step(a, b):
        opt.zero_grad()
        out, (h, c) = lstm(a)
        loss = nn.functional.mse_loss(head(out[:, -1]), b)
        loss.backward()
        nn.utils.clip_grad_value_(params, 0.05)
        opt.step()
        return loss, h

    step_c = comp(step)
    out = []
    for epoch in range(5):
        for a, b in batches(lib, x, y, 4):       # 3 of 4 + one of 2
            out.append(step_c(a, b))
        sched.step()
    return [out, params, opt_state(opt)]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_lstm_clip_value_exponential():
    three_way(lstm_loop)


# ---- 13. classification: embeddings, LayerNorm, cross entropy with label smoothing and an
# ignored index, AdamW with a no-decay group, SequentialLR (linear warm-up then cosine)
# stepped per step ------------------------------------------------------------------------

def classify(lib, comp):
    nn = lib.nn
    emb, norm, head = nn.Embedding(11, 6), nn.LayerNorm(6), nn.Linear(6, 4)
    for k, m in enumerate((emb, norm, head)):
        init(lib, m, seed=50 + 5 * k)
    decay = [emb.weight, head.weight]
    no_decay = [norm.weight, norm.bias, head.bias]
    opt = lib.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                           {"params": no_decay, "weight_decay": 0.0}], lr=0.05)
    S = lib.optim.lr_scheduler
    sched = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.2, total_iters=4),
                                 S.CosineAnnealingLR(opt, T_max=10, eta_min=0.005)],
                           milestones=[4])
    rng = np.random.default_rng(21)
    tok = rng.integers(0, 11, (19, 5))
    lab = (tok.sum(1) % 4).astype(np.int64)
    lab[::6] = -100                                      # ignored rows

    def step(t, c):
        opt.zero_grad()
        logits = head(norm(emb(t).mean(1)))
        loss = nn.functional.cross_entropy(logits, c, label_smoothing=0.1, ignore_index=-100)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    step_c = comp(step)
    out = []
    for epoch in range(4):
        for s in range(0, 19, 4):                        # 4 of 4 + one of 3
            out.append(step_c(lib.tensor(tok[s:s + 4]), lib.tensor(lab[s:s + 4])))
            out.append(opt.param_groups[1]["lr"])
    return [out, decay + no_decay, opt_state(opt)]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_classifier_warmup_cosine_per_step():
    three_way(classify)


# ---- 14. a checkpoint of the model, optimiser, GradScaler and EMA shadow, resumed in fresh
# objects after a skipped (inf) step -------------------------------------------------------

def scaler_resume(lib, comp, total=16, save_at=7, inf_at=5):
    x, y = data(22, 18, 5)
    bs = batches(lib, x, y, 5)                           # 3 of 5 + one of 3

    def build():
        model = mlp(lib)
        shadow = [p.detach().clone() for p in model.parameters()]
        opt = lib.optim.RAdam(model.parameters(), lr=0.05)
        scaler = lib.amp.GradScaler("cpu", init_scale=256.0, growth_interval=2)

        def step(a, b, poison):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(model(a), b)
            scaler.scale(loss * poison).backward()
            scaler.step(opt)
            scaler.update()
            with lib.no_grad():
                for s, p in zip(shadow, model.parameters()):
                    s.lerp_(p, 0.25)
            return loss
        return model, shadow, opt, scaler, comp(step)

    model, shadow, opt, scaler, step_c = build()
    out = []
    for n in range(total):
        if n == save_at:
            buf = io.BytesIO()
            lib.save({"model": model.state_dict(), "opt": opt.state_dict(),
                      "scaler": scaler.state_dict(), "shadow": shadow}, buf)
            buf.seek(0)
            ck = lib.load(buf)
            model, shadow, opt, scaler, step_c = build()
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["opt"])
            scaler.load_state_dict(ck["scaler"])
            with lib.no_grad():
                for s, v in zip(shadow, ck["shadow"]):
                    s.copy_(v)
        a, b = bs[n % len(bs)]
        poison = lib.tensor(float("inf") if n == inf_at else 1.0)
        out += [step_c(a, b, poison), scaler.get_scale()]
    return [out, list(model.parameters()), shadow, opt_state(opt), scaler.state_dict()]


@pytest.mark.slow       # (15-30 steps: the slow set; the NAdam fix's case runs by default)
def test_scaler_ema_checkpoint_resumed():
    three_way(scaler_resume)
