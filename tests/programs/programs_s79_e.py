"""Training programs (s79, E) that combine the loop features real code uses: gradient
accumulation over micro-batches with loss / n, clip_grad_norm_ / clip_grad_value_ with the
returned norm logged, chained and sequential LR schedulers (SequentialLR, ChainedScheduler,
LambdaLR per group, ReduceLROnPlateau fed the validation loss, CosineAnnealingWarmRestarts
stepped with fractional epochs, OneCycleLR), parameter groups without weight decay on
biases and norms, each run for 30-60 steps."""


def _mlp(nn, d_in=6, d_h=12, d_out=3, norm=False):
    layers = [nn.Linear(d_in, d_h)]
    if norm:
        layers.append(nn.LayerNorm(d_h))
    layers += [nn.Tanh(), nn.Linear(d_h, d_out)]
    return nn.Sequential(*layers)


def accum_clip_norm(torch, env):
    """Four micro-batches a step, loss / n, clip_grad_norm_ (its norm logged), SGD."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(_mlp(nn))
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True)
    n_micro = 4

    def train_step(xs, ys):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for i in range(n_micro):
            loss = F.cross_entropy(model(xs[i]), ys[i]) / n_micro
            loss.backward()
            total += loss.item()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        opt.step()
        return total, norm
    step = env.step(train_step)
    x, y = env.randn(n_micro, 5, 6), env.randint(0, 3, (n_micro, 5))
    for t in range(40):
        total, norm = step(x, y)
        env.rec(f"loss {t}", total)
        env.rec(f"norm {t}", norm)
    env.rec("params", model.state_dict())


def accum_micro_step(torch, env):
    """The compiled micro-step does forward + backward only; the optimizer steps outside
    every n micro-batches (uneven: the last micro-batch is smaller, weighted by count)."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(_mlp(nn, norm=True))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def micro(xb, yb, weight):
        loss = F.mse_loss(model(xb), yb, reduction="sum") * weight
        loss.backward()
        return loss.detach()
    micro = env.step(micro)
    x, y = env.randn(14, 6), env.randn(14, 3)
    chunks = [(0, 5), (5, 10), (10, 14)]
    for t in range(30):
        opt.zero_grad()
        run = 0.0
        for a, b in chunks:
            run += micro(x[a:b], y[a:b], 1.0 / 14).item()
        opt.step()
        env.rec(f"loss {t}", run)
    if env.compiled:
        # (.grad None at the first micro-batch, accumulated after; the ragged last one)
        assert micro.n_traces <= 3, micro.n_traces
    env.rec("params", model.state_dict())


def clip_value_groups_adamw(torch, env):
    """clip_grad_value_, then AdamW with no decay on biases and LayerNorm weights."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(_mlp(nn, norm=True))
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim == 1 or "bias" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-2,
                            betas=(0.9, 0.95))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=0.05)
        gmax = max(p.grad.abs().max() for p in model.parameters())
        opt.step()
        return loss.detach(), gmax
    step = env.step(train_step)
    x, y = env.randn(12, 6), env.randint(0, 3, (12,))
    for t in range(40):
        env.rec(f"step {t}", step(x, y))
    env.rec("groups", [len(g["params"]) for g in opt.param_groups])
    env.rec("params", model.state_dict())


def sequential_warmup_cosine(torch, env):
    """SequentialLR: LinearLR warm-up then CosineAnnealingLR, stepped every batch."""
    nn, F = torch.nn, torch.nn.functional
    sch = torch.optim.lr_scheduler
    model = env.init(_mlp(nn))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    warm = sch.LinearLR(opt, start_factor=0.1, total_iters=8)
    cos = sch.CosineAnnealingLR(opt, T_max=32, eta_min=1e-3)
    scheduler = sch.SequentialLR(opt, [warm, cos], milestones=[8])

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(10, 6), env.randint(0, 3, (10,))
    for t in range(40):
        env.rec(f"loss {t}", step(x, y))
        scheduler.step()
        env.rec(f"lr {t}", scheduler.get_last_lr())
    if env.compiled:
        assert step.n_traces == 1, step.n_traces
    env.rec("params", model.state_dict())


def chained_exp_multistep(torch, env):
    """ChainedScheduler of ExponentialLR and MultiStepLR on two param groups (Adam)."""
    nn, F = torch.nn, torch.nn.functional
    sch = torch.optim.lr_scheduler
    model = env.init(_mlp(nn))
    opt = torch.optim.Adam([{"params": model[0].parameters()},
                            {"params": model[2].parameters(), "lr": 3e-3}], lr=1e-2)
    scheduler = sch.ChainedScheduler([sch.ExponentialLR(opt, gamma=0.97),
                                      sch.MultiStepLR(opt, milestones=[10, 25], gamma=0.5)])

    def train_step(x, y):
        opt.zero_grad()
        loss = F.smooth_l1_loss(model(x), y, beta=0.5)
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(10, 6), env.randn(10, 3)
    for t in range(36):
        env.rec(f"loss {t}", step(x, y))
        scheduler.step()
        env.rec(f"lr {t}", [g["lr"] for g in opt.param_groups])
    env.rec("params", model.state_dict())


def lambda_per_group(torch, env):
    """LambdaLR with one lambda per group: inverse-sqrt warm-up and a layer-wise decay."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(_mlp(nn, norm=True))
    opt = torch.optim.AdamW([{"params": model[0].parameters(), "lr": 2e-3},
                             {"params": list(model[1].parameters())
                              + list(model[3].parameters()), "lr": 5e-3}])
    warmup = 6

    def inv_sqrt(s):
        s = s + 1
        return min(s / warmup, (warmup / s) ** 0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, [inv_sqrt, lambda s: 0.95 ** s])

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        scheduler.step()
        return loss.detach()
    # (the scheduler steps inside the compiled step: its lr is a Python float read there)
    step = env.step(train_step)
    x, y = env.randn(9, 6), env.randint(0, 3, (9,))
    for t in range(35):
        env.rec(f"loss {t}", step(x, y))
    env.rec("lr", scheduler.get_last_lr())
    env.rec("params", model.state_dict())


def plateau_early_stop(torch, env):
    """ReduceLROnPlateau fed the validation loss (eval + no_grad), early stopping with the
    best state restored."""
    import copy
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.0),
                                   nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5,
                                                           patience=2, cooldown=1,
                                                           threshold=1e-3, min_lr=1e-3)

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(16, 4), env.randn(16, 1)
    vx, vy = env.randn(8, 4), env.randn(8, 1)
    best, best_state, bad, stopped = float("inf"), None, 0, None
    for epoch in range(60):
        env.rec(f"loss {epoch}", step(x, y))
        model.eval()
        with torch.no_grad():
            val = F.mse_loss(model(vx), vy).item()
        scheduler.step(val)
        env.rec(f"val {epoch}", val)
        env.rec(f"lr {epoch}", opt.param_groups[0]["lr"])
        if val < best - 1e-4:
            best, best_state, bad = val, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= 6:
                stopped = epoch
                break
    env.rec("stopped", stopped)
    model.load_state_dict(best_state)
    with torch.inference_mode():
        env.rec("best val", F.mse_loss(model.eval()(vx), vy))


def warm_restarts_fractional(torch, env):
    """CosineAnnealingWarmRestarts stepped with fractional epochs (epoch + i / iters)."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(_mlp(nn))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2,
                                                                     eta_min=0.01)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(20, 6), env.randint(0, 3, (20,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    iters = len(loader)
    for epoch in range(8):
        for i, (xb, yb) in enumerate(loader):
            env.rec(f"loss {epoch} {i}", step(xb, yb))
            scheduler.step(epoch + i / iters)
        env.rec(f"lr {epoch}", scheduler.get_last_lr())
    env.rec("params", model.state_dict())


def onecycle_accum_clip(torch, env):
    """OneCycleLR (momentum cycled) stepped per optimizer step, 2 micro-batches each,
    clip_grad_norm_ with a non-default norm type."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(_mlp(nn, d_h=10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=30,
                                                    pct_start=0.3, anneal_strategy="cos")

    def train_step(x1, y1, x2, y2):
        opt.zero_grad()
        l1 = F.cross_entropy(model(x1), y1) / 2
        l1.backward()
        l2 = F.cross_entropy(model(x2), y2) / 2
        l2.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=1.0)
        opt.step()
        return (l1 + l2).detach(), norm
    step = env.step(train_step)
    x, y = env.randn(16, 6), env.randint(0, 3, (16,))
    for t in range(30):
        env.rec(f"step {t}", step(x[:8], y[:8], x[8:], y[8:]))
        scheduler.step()
        env.rec(f"lr {t}", (opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]))
    env.rec("params", model.state_dict())


def ce_weights_ignore_smooth(torch, env):
    """cross_entropy with class weights, ignore_index and label smoothing over a sequence
    tagger, the token accuracy from argmax over the non-ignored tokens."""
    nn, F = torch.nn, torch.nn.functional
    V, C, T = 10, 4, 6
    emb = env.init(nn.Embedding(V, 8))
    head = env.init(nn.Linear(8, C))
    params = list(emb.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    crit = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.5]), ignore_index=-100,
                               label_smoothing=0.05)

    def train_step(tokens, tags):
        logits = head(torch.tanh(emb(tokens)))
        loss = crit(logits.view(-1, C), tags.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            mask = tags != -100
            correct = ((logits.argmax(-1) == tags) & mask).sum()
        return loss.detach(), correct, mask.sum()
    step = env.step(train_step)
    tokens = env.randint(0, V, (5, T))
    tags = env.randint(0, C, (5, T))
    tags[0, 4:] = -100
    tags[3, 2:] = -100
    for t in range(40):
        loss, correct, n = step(tokens, tags)
        env.rec(f"loss {t}", loss)
        env.rec(f"acc {t}", correct.item() / n.item())
    env.rec("params", [p for p in params])


PROGRAMS = {
    "accum_clip_norm": accum_clip_norm,
    "accum_micro_step": accum_micro_step,
    "clip_value_groups_adamw": clip_value_groups_adamw,
    "sequential_warmup_cosine": sequential_warmup_cosine,
    "chained_exp_multistep": chained_exp_multistep,
    "lambda_per_group": lambda_per_group,
    "plateau_early_stop": plateau_early_stop,
    "warm_restarts_fractional": warm_restarts_fractional,
    "onecycle_accum_clip": onecycle_accum_clip,
    "ce_weights_ignore_smooth": ce_weights_ignore_smooth,
}
