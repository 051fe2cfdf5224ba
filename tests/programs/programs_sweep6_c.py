"""Training-loop programs of the kinds tutorials and Kaggle notebooks write: a checkpoint saved
with torch.save into an io.BytesIO and resumed (model, optimizer, scheduler, epoch), the
resumed run continuing exactly; gradual unfreezing with optimizer.add_param_group and
discriminative learning rates, early stopping on a deep-copied best state_dict;
gradient accumulation with clip_grad_norm_'s returned norm and OneCycleLR stepped per
optimiser step, CosineAnnealingWarmRestarts stepped with fractional epochs; train() versus
eval() (BatchNorm1d running statistics, momentum=None averaging, track_running_stats=False,
Dropout) under no_grad, inference_mode and set_grad_enabled; a Kaggle tabular regression with
entity embeddings, StandardScaler-like normalisation, a log1p target, HuberLoss and RMSE / R2
metrics; CutMix with soft-target cross entropy. Programs `f(torch, env)`, see
tutorial_harness.py."""
import copy
import io
import math


def checkpoint_bytesio(torch, env):
    nn, optim = torch.nn, torch.optim

    def make():
        model = nn.Sequential(nn.Linear(6, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(),
                              nn.Linear(16, 3))
        optimizer = optim.Adam(model.parameters(), lr=1e-2, betas=(0.8, 0.99))
        scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return model, optimizer, scheduler

    model, optimizer, scheduler = make()
    env.init(model)
    x, y = env.randn(12, 6), env.randint(0, 3, (12,))
    criterion = nn.CrossEntropyLoss()

    def make_step(model, optimizer):
        def train_step(x, y):
            model.train()
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()
        return env.step(train_step)

    step = make_step(model, optimizer)
    for epoch in range(3):
        loss = step(x, y)
        scheduler.step()
    buffer = io.BytesIO()
    torch.save({"epoch": epoch, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(),
                "scheduler_state_dict": scheduler.state_dict(), "loss": loss}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)
    env.rec("checkpoint", (checkpoint["epoch"], checkpoint["loss"],
                           sorted(checkpoint["model_state_dict"]),
                           checkpoint["optimizer_state_dict"]["param_groups"][0]["lr"],
                           checkpoint["scheduler_state_dict"]["last_epoch"]))
    model2, optimizer2, scheduler2 = make()
    model2.load_state_dict(checkpoint["model_state_dict"])
    optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
    scheduler2.load_state_dict(checkpoint["scheduler_state_dict"])
    start_epoch = checkpoint["epoch"] + 1
    step2 = make_step(model2, optimizer2)
    for epoch in range(start_epoch, start_epoch + 3):
        a, b = step(x, y), step2(x, y)
        scheduler.step()
        scheduler2.step()
        env.rec(f"resumed {epoch}", (a, b, abs(a - b) < 1e-6, scheduler2.get_last_lr()))
    model2.eval()
    with torch.no_grad():
        env.rec("resumed model", model2(x))
    env.rec("same", all((p.double() - q.double()).abs().max().item() < 1e-6
                        for p, q in zip(model.state_dict().values(),
                                        model2.state_dict().values())))
    # a bare tensor and a list of tensors, through one buffer
    buffer = io.BytesIO()
    torch.save([x[:2], {"w": model2[0].weight}], buffer)
    buffer.seek(0)
    back = torch.load(buffer)
    env.rec("tensors", (back[0], back[1]["w"], back[1]["w"].requires_grad))


def unfreeze_early_stopping(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
    head = nn.Linear(16, 4)
    model = env.init(nn.Sequential(backbone, head))
    for p in backbone.parameters():
        p.requires_grad = False
    optimizer = optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5,
                                                     patience=0)
    x, y = env.randn(16, 8), env.randint(0, 4, (16,))
    xv, yv = env.randn(8, 8), env.randint(0, 4, (8,))

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    best_loss, best_state, patience, bad_epochs, stopped = math.inf, None, 2, 0, None
    for epoch in range(8):
        if epoch == 2:                  # unfreeze the backbone with a smaller learning rate
            for p in backbone.parameters():
                p.requires_grad = True
            optimizer.add_param_group({"params": backbone.parameters(), "lr": 0.01})
        loss = train_step(x, y)
        model.eval()
        with torch.no_grad():
            val_loss = F.cross_entropy(model(xv), yv).item()
        scheduler.step(val_loss)
        env.rec(f"epoch {epoch}", (loss, val_loss, [g["lr"] for g in optimizer.param_groups]))
        if val_loss < best_loss:
            best_loss, bad_epochs = val_loss, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad_epochs += 1
            if bad_epochs >= patience:
                stopped = epoch
                break
    env.rec("stopped", stopped)
    model.load_state_dict(best_state)
    with torch.no_grad():
        env.rec("restored", (F.cross_entropy(model(xv), yv), model[1].weight))
    env.rec("groups", [len(g["params"]) for g in optimizer.param_groups])
    env.rec("momentum", [optimizer.state[p]["momentum_buffer"] for p in head.parameters()])


def accumulate_schedules(torch, env):
    nn, optim = torch.nn, torch.optim
    accum, epochs, iters = 3, 2, 6

    model = env.init(nn.Sequential(nn.Linear(5, 24), nn.GELU(), nn.Linear(24, 1)))
    optimizer = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    onecycle = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05,
                                             steps_per_epoch=iters // accum, epochs=epochs,
                                             pct_start=0.3, anneal_strategy="cos")
    criterion = nn.MSELoss()
    xs, ys = env.randn(iters, 4, 5), env.randn(iters, 4, 1)

    def micro_step(x, y):
        loss = criterion(model(x), y) / accum
        loss.backward()
        return loss.detach()

    def optimizer_step():
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        optimizer.step()
        optimizer.zero_grad()
        return norm

    micro_step, optimizer_step = env.step(micro_step), env.step(optimizer_step)
    for epoch in range(epochs):
        for i in range(iters):
            loss = micro_step(xs[i], ys[i])
            if (i + 1) % accum == 0:
                norm = optimizer_step()
                onecycle.step()
                env.rec(f"e{epoch} i{i}", (loss, norm, onecycle.get_last_lr()))
    env.rec("weights", list(model.parameters()))

    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    warm = optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=2, T_mult=2,
                                                          eta_min=1e-4)

    def sgd_step(x, y):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    sgd_step = env.step(sgd_step)
    lrs = []
    for epoch in range(3):
        for i in range(iters):
            sgd_step(xs[i], ys[i])
            warm.step(epoch + i / iters)
            lrs.append(optimizer.param_groups[0]["lr"])
    env.rec("warm restarts", (lrs, warm.T_cur, warm.T_i))
    env.rec("final", list(model.parameters()))


def eval_modes(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 12)
            self.bn = nn.BatchNorm1d(12, momentum=None)
            self.bn2 = nn.BatchNorm1d(12, affine=False, track_running_stats=False)
            self.drop = nn.Dropout(0.3)
            self.fc2 = nn.Linear(12, 2)

        def forward(self, x):
            h = self.bn2(F.relu(self.bn(self.fc1(x))))
            return self.fc2(self.drop(h))

    model = env.init(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = env.randn(10, 6), env.randint(0, 2, (10,))

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    def evaluate(x, y):
        model.eval()
        with torch.no_grad():
            out = model(x)
        return F.cross_entropy(out, y), (out.argmax(1) == y).float().mean(), out

    train_step, evaluate = env.step(train_step), env.step(evaluate)
    for i in range(3):
        env.rec(f"train {i}", train_step(x, y), cross=False)
        env.rec(f"eval {i}", evaluate(x, y), cross=False)
    env.rec("modes", (model.training, [m.training for m in model.modules()]))
    env.rec("bn", (model.bn.running_mean, model.bn.running_var, model.bn.num_batches_tracked,
                   model.bn2.running_mean is None), cross=False)
    # (torch's own numbers: eval mode draws nothing)
    model.load_state_dict({k: v for k, v in model.state_dict().items()})
    with torch.inference_mode():
        out = model(x)
        env.rec("inference_mode", (out.requires_grad, out.is_inference()), cross=True)
    with torch.set_grad_enabled(False):
        env.rec("set_grad_enabled", (model(x).requires_grad, torch.is_grad_enabled()))
    env.rec("grad enabled after", torch.is_grad_enabled())
    model.train()
    bn = nn.BatchNorm1d(3, momentum=None)
    for k in range(3):
        bn(env.randn(4, 3) * (k + 1))
    env.rec("cumulative bn", (bn.running_mean, bn.running_var, bn.num_batches_tracked))
    bn.eval()
    env.rec("bn eval", bn(env.randn(4, 3)))
    d = nn.Dropout(0.5)
    d.eval()
    z = env.randn(3, 4)
    env.rec("dropout eval is identity", torch.equal(d(z), z))


def entity_embeddings(torch, env):
    nn, optim = torch.nn, torch.optim
    n, cards = 48, [4, 6]

    cat = torch.stack([env.randint(0, c, (n,)) for c in cards], dim=1)
    cont = env.randn(n, 3) * torch.tensor([1.0, 10.0, 100.0]) + torch.tensor([0.0, 5.0, -50])
    price = torch.exp(cont[:, 0] * 0.3 + cat[:, 0].float() * 0.2 + 3.0)
    train_idx, val_idx = torch.arange(0, 36), torch.arange(36, n)
    mean = cont[train_idx].mean(dim=0, keepdim=True)        # StandardScaler-like
    std = cont[train_idx].std(dim=0, unbiased=False, keepdim=True)
    cont_n = (cont - mean) / std
    target = torch.log1p(price)

    class TabularDataset(torch.utils.data.Dataset):
        def __init__(self, idx):
            self.idx = idx

        def __len__(self):
            return len(self.idx)

        def __getitem__(self, i):
            j = self.idx[i]
            return cat[j], cont_n[j], target[j]

    class TabularModel(nn.Module):
        def __init__(self, emb_szs, n_cont, out_sz, layers):
            super().__init__()
            self.embeds = nn.ModuleList([nn.Embedding(ni, nf) for ni, nf in emb_szs])
            self.emb_drop = nn.Dropout(0.0)
            self.bn_cont = nn.BatchNorm1d(n_cont)
            n_emb = sum(nf for _, nf in emb_szs)
            layerlist, n_in = [], n_emb + n_cont
            for i in layers:
                layerlist += [nn.Linear(n_in, i), nn.ReLU(inplace=True), nn.BatchNorm1d(i)]
                n_in = i
            layerlist.append(nn.Linear(layers[-1], out_sz))
            self.layers = nn.Sequential(*layerlist)

        def forward(self, x_cat, x_cont):
            embeddings = [e(x_cat[:, i]) for i, e in enumerate(self.embeds)]
            x = self.emb_drop(torch.cat(embeddings, 1))
            x = torch.cat([x, self.bn_cont(x_cont)], 1)
            return self.layers(x).squeeze(-1)

    emb_szs = [(c, min(50, (c + 1) // 2)) for c in cards]
    model = env.init(TabularModel(emb_szs, 3, 1, [16, 8]))
    criterion = nn.HuberLoss(delta=5.0)
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(TabularDataset(train_idx), batch_size=12,
                                         shuffle=False, drop_last=True)

    def train_step(xc, xn, yb):
        optimizer.zero_grad()
        loss = criterion(model(xc, xn), yb)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(3):
        model.train()
        env.rec(f"epoch {epoch}", [train_step(*batch) for batch in loader])
        model.eval()
        with torch.no_grad():
            pred = model(cat[val_idx], cont_n[val_idx])
            yv = target[val_idx]
            rmse = torch.sqrt(torch.mean((pred - yv) ** 2))
            r2 = 1 - ((yv - pred) ** 2).sum() / ((yv - yv.mean()) ** 2).sum()
            mae = torch.mean(torch.abs(torch.expm1(pred) - torch.expm1(yv)))
        env.rec(f"val {epoch}", (rmse.item(), r2.item(), mae.item()))
    env.rec("scaler", (mean, std))


def cutmix_soft_targets(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_cls = 4

    model = env.init(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                   nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                                   nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, n_cls)))
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    ce_soft = nn.CrossEntropyLoss(label_smoothing=0.05)

    def rand_bbox(size, lam):
        W, H = size[2], size[3]
        cut_rat = math.sqrt(1.0 - lam)
        cut_w, cut_h = int(W * cut_rat), int(H * cut_rat)
        cx, cy = env.choice(W), env.choice(H)
        bbx1, bby1 = min(max(cx - cut_w // 2, 0), W), min(max(cy - cut_h // 2, 0), H)
        bbx2, bby2 = min(max(cx + cut_w // 2, 0), W), min(max(cy + cut_h // 2, 0), H)
        return bbx1, bby1, bbx2, bby2

    def train_step(x, y, perm, lam, box):
        bbx1, bby1, bbx2, bby2 = box
        x = x.clone()
        x[:, :, bbx1:bbx2, bby1:bby2] = x[perm, :, bbx1:bbx2, bby1:bby2]
        lam = 1 - ((bbx2 - bbx1) * (bby2 - bby1) / (x.size()[-1] * x.size()[-2]))
        targets = lam * F.one_hot(y, n_cls).float() + (1 - lam) * F.one_hot(y[perm], n_cls).float()
        optimizer.zero_grad()
        out = model(x)
        loss = ce_soft(out, targets)                 # probabilities as targets
        manual = torch.sum(-targets * F.log_softmax(out, dim=-1), dim=-1).mean()
        loss.backward()
        optimizer.step()
        return loss.item(), manual.item(), lam

    train_step = env.step(train_step)
    x, y = env.randn(6, 3, 8, 8), env.randint(0, n_cls, (6,))
    for it in range(4):
        lam = float(env.np.beta(1.0, 1.0))
        perm = torch.tensor(env.np.permutation(6))
        box = rand_bbox(x.size(), lam)
        env.rec(f"it {it}", (box, train_step(x, y, perm, lam, box)))
    env.rec("weights", model[-1].weight)
