"""Training programs (s79, E, c): DataLoaders with a seeded generator and shuffle, a ragged
last batch (drop_last=False), a custom collate_fn, WeightedRandomSampler and random_split;
early stopping on a validation loss under inference_mode with model.eval(); metrics from
.item() and argmax in running means; two optimizers (a GAN-like pair); EMA through _foreach
ops; a non-finite-norm skip; a custom-avg_fn SWA with update_bn."""


class RunningMean:
    """A torchmetrics-like running mean, fed tensors or floats."""
    def __init__(self):
        self.total, self.count = 0.0, 0

    def update(self, value, n=1):
        self.total += float(value) * n
        self.count += n

    def compute(self):
        return self.total / max(self.count, 1)


def shuffle_ragged_collate(torch, env):
    """A shuffled DataLoader (seeded generator) of dict samples, batch 8 over 30 samples
    (the last batch of 6), a collate_fn stacking and normalising."""
    nn, F, data = torch.nn, torch.nn.functional, torch.utils.data
    xs, ys = env.randn(30, 4), env.randint(0, 2, (30,))

    class DictSet(data.Dataset):
        def __len__(self):
            return 30

        def __getitem__(self, i):
            return {"x": xs[i], "y": ys[i], "id": i}

    def collate(batch):
        x = torch.stack([b["x"] for b in batch])
        x = (x - x.mean(0)) / (x.std(0) + 1e-5)
        return x, torch.stack([b["y"] for b in batch]), [b["id"] for b in batch]

    gen = torch.Generator().manual_seed(7)
    loader = data.DataLoader(DictSet(), batch_size=8, shuffle=True, generator=gen,
                             collate_fn=collate, drop_last=False)
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss.detach(), (logits.argmax(1) == y).sum()
    step = env.step(train_step)
    env.rec("n batches", len(loader))
    for epoch in range(9):
        acc, mean_loss = RunningMean(), RunningMean()
        for i, (x, y, ids) in enumerate(loader):
            loss, correct = step(x, y)
            mean_loss.update(loss.item(), len(ids))
            acc.update(correct.item() / len(ids), len(ids))
            env.rec(f"ids {epoch} {i}", ids)
        env.rec(f"epoch {epoch}", (mean_loss.compute(), acc.compute()))
    if env.compiled:
        assert step.n_traces == 2, step.n_traces    # (8-row batches and the last 6)
    env.rec("params", model.state_dict())


def weighted_sampler(torch, env):
    """An imbalanced set drawn with a WeightedRandomSampler (seeded generator, inverse
    class frequency weights), class-weighted loss off, per-class recall at the end."""
    nn, F, data = torch.nn, torch.nn.functional, torch.utils.data
    x = env.randn(40, 3)
    y = (x[:, 0] > 0.8).long()
    counts = torch.bincount(y, minlength=2)
    weights = (1.0 / counts.float())[y]
    gen = torch.Generator().manual_seed(3)
    sampler = data.WeightedRandomSampler(weights, num_samples=40, replacement=True,
                                         generator=gen)
    loader = data.DataLoader(data.TensorDataset(x, y), batch_size=10, sampler=sampler)
    model = env.init(nn.Linear(3, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.3)

    def train_step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    env.rec("counts", counts)
    for epoch in range(10):
        for i, (xb, yb) in enumerate(loader):
            # (multinomial draws are each library's own stream: compared eager vs compiled)
            env.rec(f"loss {epoch} {i}", step(xb, yb), cross=False)
    with torch.no_grad():
        pred = model(x).argmax(1)
    recall = [((pred == c) & (y == c)).sum().item() / (y == c).sum().item() for c in (0, 1)]
    env.rec("recall", recall, cross=False)


def split_early_stop_inference(torch, env):
    """random_split into train / val (seeded), early stopping on the validation loss under
    inference_mode with model.eval() (dropout and BatchNorm switch), the best weights kept."""
    import copy
    nn, F, data = torch.nn, torch.nn.functional, torch.utils.data
    x = env.randn(36, 5)
    y = (x[:, :2].sum(1, keepdim=True) - x[:, 4:5]).tanh()
    train_set, val_set = data.random_split(data.TensorDataset(x, y), [24, 12],
                                           generator=torch.Generator().manual_seed(11))
    env.rec("split", (train_set.indices, val_set.indices))
    train_loader = data.DataLoader(train_set, batch_size=8)
    val_loader = data.DataLoader(val_set, batch_size=5)
    # (no bias before the BatchNorm: its gradient is zero up to rounding, which RMSprop's
    # normalised step would amplify)
    model = env.init(nn.Sequential(nn.Linear(5, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(),
                                   nn.Dropout(0.0), nn.Linear(16, 1)))
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-3)

    def train_step(xb, yb):
        opt.zero_grad()
        loss = F.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    best, best_state, patience, wait = float("inf"), None, 3, 0
    for epoch in range(20):
        model.train()
        for xb, yb in train_loader:
            env.rec(f"loss {epoch}", step(xb, yb))
        model.eval()
        val = RunningMean()
        with torch.inference_mode():
            for xb, yb in val_loader:
                val.update(F.mse_loss(model(xb), yb, reduction="sum").item())
        val_loss = val.total / len(val_set)
        env.rec(f"val {epoch}", val_loss)
        if val_loss < best:
            best, best_state, wait = val_loss, copy.deepcopy(model.state_dict()), 0
        else:
            wait += 1
            if wait >= patience:
                break
    env.rec("epochs", epoch)
    model.load_state_dict(best_state)
    env.rec("best", best_state)


def gan_two_optimizers(torch, env):
    """A tiny GAN: the discriminator steps on real and detached fake samples, the generator
    through the discriminator; two Adams with betas (0.5, 0.999), two StepLRs."""
    nn, F = torch.nn, torch.nn.functional
    G = env.init(nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 2)))
    D = env.init(nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)))
    g_opt = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    scheds = [torch.optim.lr_scheduler.StepLR(o, 10, 0.7) for o in (g_opt, d_opt)]
    bce = nn.BCEWithLogitsLoss()

    def train_step(real, z):
        fake = G(z)
        ones, zeros = torch.ones(real.shape[0], 1), torch.zeros(real.shape[0], 1)
        d_opt.zero_grad()
        d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
        d_loss.backward()
        d_opt.step()
        g_opt.zero_grad()
        g_loss = bce(D(fake), ones)
        g_loss.backward()
        g_opt.step()
        return d_loss.detach(), g_loss.detach()
    step = env.step(train_step)
    real = env.randn(16, 2) * 0.5 + 2.0
    z = env.randn(16, 2)
    for t in range(35):
        env.rec(f"step {t}", step(real, z))
        for s in scheds:
            s.step()
    env.rec("G", G.state_dict())
    env.rec("D", D.state_dict())


def foreach_ema_skip_nonfinite(torch, env):
    """An EMA kept with torch._foreach_lerp_ under no_grad; a step whose gradient norm is not
    finite is skipped (clip_grad_norm_ with error_if_nonfinite=False)."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 1)))
    ema = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y, scale):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y) * scale
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0,
                                              error_if_nonfinite=False)
        skipped = not torch.isfinite(norm)
        if not skipped:
            opt.step()
            with torch.no_grad():
                torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 0.1)
        return loss.detach(), norm, skipped
    step = env.step(train_step)
    x, y = env.randn(8, 3), env.randn(8, 1)
    for t in range(30):
        scale = float("inf") if t in (7, 19) else 1.0
        env.rec(f"step {t}", step(x, y, scale))
    env.rec("ema", ema)
    env.rec("params", model.state_dict())


def swa_custom_avg(torch, env):
    """AveragedModel with a custom avg_fn (a Polyak average), a BatchNorm model, SWALR and
    update_bn over a loader of (x, y) pairs; a CosineAnnealingLR before SWA starts."""
    nn, F = torch.nn, torch.nn.functional
    swa_utils = torch.optim.swa_utils
    model = env.init(nn.Sequential(nn.Linear(4, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(),
                                   nn.Linear(8, 2)))

    def polyak(avg, new, n):
        return 0.7 * avg + 0.3 * new
    swa = swa_utils.AveragedModel(model, avg_fn=polyak)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    swalr = swa_utils.SWALR(opt, swa_lr=0.03, anneal_epochs=2)
    x, y = env.randn(18, 4), env.randint(0, 2, (18,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=6)

    def train_step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    for epoch in range(12):
        model.train()
        for xb, yb in loader:
            env.rec(f"loss {epoch}", step(xb, yb))
        if epoch >= 5:
            swa.update_parameters(model)
            swalr.step()
        else:
            cos.step()
        env.rec(f"lr {epoch}", opt.param_groups[0]["lr"])
    swa_utils.update_bn(loader, swa)
    env.rec("swa", swa.module.state_dict())
    swa.eval()
    with torch.no_grad():
        env.rec("swa acc", (swa(x).argmax(1) == y).float().mean().item())


def layerwise_lr_groups(torch, env):
    """Layer-wise learning-rate decay: one param group per layer (lr scaled by depth), no
    decay on biases, a LinearLR warm-up; the lr of each group logged."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.Linear(8, 8), nn.GELU(),
                                   nn.Linear(8, 2)))
    layers = [model[0], model[2], model[4]]
    groups = []
    for depth, layer in enumerate(layers):
        scale = 0.5 ** (len(layers) - 1 - depth)
        groups.append({"params": [layer.weight], "lr": 1e-2 * scale, "weight_decay": 0.01})
        groups.append({"params": [layer.bias], "lr": 1e-2 * scale, "weight_decay": 0.0})
    opt = torch.optim.AdamW(groups)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.2, end_factor=1.0,
                                             total_iters=10)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(10, 5), env.randint(0, 2, (10,))
    for t in range(30):
        env.rec(f"loss {t}", step(x, y))
        warm.step()
        env.rec(f"lrs {t}", [g["lr"] for g in opt.param_groups])
    env.rec("params", model.state_dict())


def accum_metrics_eval_loop(torch, env):
    """A complete epoch loop: accumulation over 3 batches (loss / 3) with the optimizer
    stepping every 3rd batch and at the epoch's end, top-1 / top-2 accuracy, and an eval
    pass each epoch whose argmax confusion matrix is logged."""
    nn, F, data = torch.nn, torch.nn.functional, torch.utils.data
    x, y = env.randn(28, 6), env.randint(0, 4, (28,))
    loader = data.DataLoader(data.TensorDataset(x, y), batch_size=4)
    model = env.init(nn.Sequential(nn.Linear(6, 10), nn.SiLU(), nn.Linear(10, 4)))
    opt = torch.optim.NAdam(model.parameters(), lr=5e-3)
    accum = 3

    def micro(xb, yb):
        logits = model(xb)
        loss = F.cross_entropy(logits, yb) / accum
        loss.backward()
        top2 = logits.topk(2, dim=1).indices
        return (loss.detach(), (top2[:, 0] == yb).sum(),
                (top2 == yb[:, None]).any(1).sum())
    micro = env.step(micro)
    for epoch in range(5):
        model.train()
        top1, top2, losses = RunningMean(), RunningMean(), RunningMean()
        for i, (xb, yb) in enumerate(loader):
            loss, c1, c2 = micro(xb, yb)
            losses.update(loss.item() * accum)
            top1.update(c1.item(), len(yb))
            top2.update(c2.item(), len(yb))
            if (i + 1) % accum == 0 or i + 1 == len(loader):
                opt.step()
                opt.zero_grad()
        env.rec(f"epoch {epoch}", (losses.compute(), top1.total / len(x),
                                   top2.total / len(x)))
        model.eval()
        with torch.no_grad():
            pred = model(x).argmax(1)
        conf = torch.zeros(4, 4, dtype=torch.long)
        conf.index_put_((y, pred), torch.ones_like(y), accumulate=True)
        env.rec(f"confusion {epoch}", conf)
    env.rec("params", model.state_dict())


PROGRAMS = {
    "shuffle_ragged_collate": shuffle_ragged_collate,
    "weighted_sampler": weighted_sampler,
    "split_early_stop_inference": split_early_stop_inference,
    "gan_two_optimizers": gan_two_optimizers,
    "foreach_ema_skip_nonfinite": foreach_ema_skip_nonfinite,
    "swa_custom_avg": swa_custom_avg,
    "layerwise_lr_groups": layerwise_lr_groups,
    "accum_metrics_eval_loop": accum_metrics_eval_loop,
}
