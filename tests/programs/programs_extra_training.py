"""Training-recipe programs of common kinds: a multi-task model (ModuleDict heads,
ParameterDict uncertainty weights, per-group learning rates, a frozen head); a custom
Dataset with random_split, a padding collate_fn, Subset and ConcatDataset; EMA and SWA
weight averaging (swa_utils.AveragedModel, SWALR, update_bn); an imbalanced classifier with
class weights, a focal loss, mixup with soft targets and a confusion matrix. Programs
`f(torch, env)`, see tutorial_harness.py."""
import copy


def multitask_moduledict(torch, env):
    nn, optim = torch.nn, torch.optim

    class MultiTaskNet(nn.Module):
        def __init__(self, tasks):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(10, 24), nn.LayerNorm(24), nn.ReLU(),
                                       nn.Linear(24, 16), nn.ReLU())
            self.heads = nn.ModuleDict({name: nn.Linear(16, n_out)
                                        for name, n_out in tasks.items()})
            # learned task weights (Kendall et al.): log sigma^2 per task
            self.log_vars = nn.ParameterDict({name: nn.Parameter(torch.zeros(()))
                                              for name in tasks})

        def forward(self, x):
            h = self.trunk(x)
            return {name: head(h) for name, head in self.heads.items()}

    tasks = {"cls": 4, "reg": 2, "attr": 3}
    model = env.init(MultiTaskNet(tasks))
    env.rec("structure", (list(model.heads.keys()), "reg" in model.heads, len(model.log_vars),
                          [n for n, _ in model.named_parameters()]))
    criteria = {"cls": nn.CrossEntropyLoss(), "reg": nn.SmoothL1Loss(beta=0.5),
                "attr": nn.BCEWithLogitsLoss()}
    weights = {"cls": 1.0, "reg": 0.5, "attr": 2.0}
    optimizer = optim.Adam([
        {"params": model.trunk.parameters(), "lr": 1e-2},
        {"params": model.heads.parameters()},
        {"params": model.log_vars.parameters(), "lr": 5e-2, "weight_decay": 0.0},
    ], lr=5e-3, weight_decay=1e-4)

    x = env.randn(8, 10)
    targets = {"cls": env.randint(0, 4, (8,)), "reg": env.randn(8, 2),
               "attr": (env.rand(8, 3) > 0.5).float()}

    def train_step(x, targets, learned_weights):
        model.train()
        optimizer.zero_grad()
        outputs = model(x)
        losses = {name: criteria[name](outputs[name], targets[name]) for name in outputs}
        if learned_weights:
            total = sum(torch.exp(-model.log_vars[k]) * v + model.log_vars[k]
                        for k, v in losses.items())
        else:
            # the auxiliary tasks count less while the main task's loss is still high
            aux_scale = 0.5 if losses["cls"] > 1.2 else 1.0
            total = sum(weights[k] * v * (1.0 if k == "cls" else aux_scale)
                        for k, v in losses.items())
        total.backward()
        optimizer.step()
        return total.item(), {k: v.item() for k, v in losses.items()}

    train_step = env.step(train_step)
    for i in range(3):
        env.rec(f"fixed {i}", train_step(x, targets, False))
    for i in range(2):
        env.rec(f"learned {i}", train_step(x, targets, True))
    env.rec("log_vars", dict(model.log_vars.items()))

    # freeze one task's head: it keeps its weights, the others train on
    for p in model.heads["attr"].parameters():
        p.requires_grad_(False)
    frozen = {k: v.clone() for k, v in model.heads["attr"].state_dict().items()}
    for i in range(2):
        env.rec(f"frozen {i}", train_step(x, targets, False))
    for k, v in model.heads["attr"].state_dict().items():
        assert torch.equal(v, frozen[k])
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        out = model(x)
        env.rec("eval", (out["cls"].argmax(1), out["reg"], torch.sigmoid(out["attr"]) > 0.5))


def dataset_collate_split(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    data_utils = torch.utils.data
    Dataset, DataLoader = data_utils.Dataset, data_utils.DataLoader
    pad_sequence = nn.utils.rnn.pad_sequence
    VOCAB, PAD = 15, 0

    class ReviewDataset(Dataset):
        """Variable-length token sequences with a label, as dicts."""
        def __init__(self, n, seed_lengths):
            self.samples = []
            for i in range(n):
                length = 2 + seed_lengths[i]
                tokens = env.randint(1, VOCAB, (length,))
                label = int(tokens.float().mean().item() > VOCAB / 2)
                self.samples.append((tokens, label))

        def __len__(self):
            return len(self.samples)

        def __getitem__(self, idx):
            tokens, label = self.samples[idx]
            return {"tokens": tokens, "label": label}

    def collate_batch(batch):
        tokens = [item["tokens"] for item in batch]
        lengths = torch.tensor([len(t) for t in tokens])
        padded = pad_sequence(tokens, batch_first=True, padding_value=PAD)
        labels = torch.tensor([item["label"] for item in batch], dtype=torch.float32)
        return padded, lengths, labels

    class BagModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(VOCAB, 8, padding_idx=PAD)
            self.fc = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))

        def forward(self, padded, lengths):
            mask = torch.arange(padded.size(1)).unsqueeze(0) < lengths.unsqueeze(1)
            emb = self.embedding(padded) * mask.unsqueeze(-1)
            pooled = emb.sum(dim=1) / lengths.unsqueeze(1).float()
            return self.fc(pooled).squeeze(1)

    dataset = ReviewDataset(14, [env.choice(5) for _ in range(14)])
    extra = ReviewDataset(4, [env.choice(5) for _ in range(4)])
    criterion = nn.BCEWithLogitsLoss()

    def fit(model, loader, optimizer, epochs, cross):
        def train_step(padded, lengths, labels):
            optimizer.zero_grad()
            loss = criterion(model(padded, lengths), labels)
            loss.backward()
            optimizer.step()
            return loss

        train_step = env.step(train_step)
        for epoch in range(epochs):
            model.train()
            for i, (padded, lengths, labels) in enumerate(loader):
                env.rec(f"loss {cross} {epoch} {i}", train_step(padded, lengths, labels),
                        cross=cross)

    def evaluate(model, loader):
        model.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for padded, lengths, labels in loader:
                pred = (torch.sigmoid(model(padded, lengths)) > 0.5).float()
                correct += (pred == labels).sum().item()
                total += labels.numel()
        return correct / total

    # a seeded random split: each library's own permutation (compared eager vs compiled)
    generator = torch.Generator().manual_seed(42)
    train_set, val_set = data_utils.random_split(dataset, [0.75, 0.25], generator=generator)
    env.rec("split sizes", (len(train_set), len(val_set)))
    env.rec("split covers", sorted(train_set.indices + val_set.indices) == list(range(14)))
    env.rec("split", (train_set.indices, val_set.indices), cross=False)
    model = env.init(BagModel())
    optimizer = optim.Adagrad(model.parameters(), lr=0.1)
    train_loader = DataLoader(train_set, batch_size=4, shuffle=False, collate_fn=collate_batch)
    fit(model, train_loader, optimizer, 2, cross=False)
    val_loader = DataLoader(val_set, batch_size=4, collate_fn=collate_batch)
    env.rec("val acc", evaluate(model, val_loader), cross=False)

    # a fixed split (Subset) plus extra data (ConcatDataset), batches that drop the remainder
    model = env.init(BagModel())
    optimizer = optim.Adagrad(model.parameters(), lr=0.1, lr_decay=0.01)
    train_set = data_utils.ConcatDataset([data_utils.Subset(dataset, range(0, 10)), extra])
    env.rec("concat", (len(train_set), train_set.cumulative_sizes,
                       train_set[11]["tokens"], train_set[11]["label"]))
    loader = DataLoader(train_set, batch_size=5, shuffle=False, drop_last=True,
                        collate_fn=collate_batch)
    env.rec("batches", len(loader))
    padded, lengths, labels = next(iter(loader))
    env.rec("first batch", (padded, lengths, labels))
    fit(model, loader, optimizer, 2, cross=True)
    env.rec("state", model.state_dict())
    test_loader = DataLoader(data_utils.Subset(dataset, range(10, 14)), batch_size=2,
                             collate_fn=collate_batch)
    env.rec("test acc", evaluate(model, test_loader))


def ema_swa(torch, env):
    nn, optim = torch.nn, torch.optim
    swa_utils = optim.swa_utils

    model = env.init(nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                   nn.Linear(16, 3)))
    ema_model = copy.deepcopy(model)
    for p in ema_model.parameters():
        p.requires_grad_(False)
    swa_model = swa_utils.AveragedModel(model)
    ema_avg = swa_utils.AveragedModel(model,
                                      multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=6)
    swa_start = 3
    swa_scheduler = swa_utils.SWALR(optimizer, swa_lr=0.05, anneal_epochs=2,
                                    anneal_strategy="cos")
    criterion = nn.CrossEntropyLoss()
    x, y = env.randn(16, 6), env.randint(0, 3, (16,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)

    @torch.no_grad()
    def update_ema(decay=0.8):
        for ema_p, p in zip(ema_model.parameters(), model.parameters()):
            ema_p.mul_(decay).add_(p.detach(), alpha=1 - decay)
        for ema_b, b in zip(ema_model.buffers(), model.buffers()):
            ema_b.copy_(b)

    def train_step(xb, yb):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss is {loss.item()}")
        loss.backward()
        optimizer.step()
        update_ema()
        return loss

    train_step = env.step(train_step)
    for epoch in range(6):
        for i, (xb, yb) in enumerate(loader):
            env.rec(f"loss {epoch} {i}", train_step(xb, yb))
            ema_avg.update_parameters(model)
        if epoch >= swa_start:
            swa_model.update_parameters(model)
            swa_scheduler.step()
        else:
            scheduler.step()
        env.rec(f"lr {epoch}", optimizer.param_groups[0]["lr"])
    env.rec("n_averaged", (swa_model.n_averaged, ema_avg.n_averaged))
    swa_utils.update_bn(loader, swa_model)
    env.rec("swa bn", (swa_model.module[1].running_mean, swa_model.module[1].running_var))
    env.rec("ema", ema_model.state_dict())
    env.rec("ema avg", ema_avg.module.state_dict())
    env.rec("state", model.state_dict())
    for m in (model, ema_model, swa_model, ema_avg):
        m.eval()
    with torch.no_grad():
        env.rec("eval", [m(x) for m in (model, ema_model, swa_model, ema_avg)])


def imbalanced_mixup(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    C = 3

    class FocalLoss(nn.Module):
        def __init__(self, alpha=None, gamma=2.0, reduction="mean"):
            super().__init__()
            self.register_buffer("alpha", alpha)
            self.gamma, self.reduction = gamma, reduction

        def forward(self, logits, target):
            log_probs = F.log_softmax(logits, dim=-1)
            log_pt = log_probs.gather(1, target.unsqueeze(1)).squeeze(1)
            pt = log_pt.exp()
            loss = -((1 - pt) ** self.gamma) * log_pt
            if self.alpha is not None:
                loss = self.alpha[target] * loss
            return loss.mean() if self.reduction == "mean" else loss.sum()

    counts = [12, 3, 1]
    y = torch.cat([torch.full((n,), c, dtype=torch.long) for c, n in enumerate(counts)])
    x = env.randn(len(y), 5) + F.one_hot(y, 5).float() * 2.0
    class_counts = torch.bincount(y, minlength=C).float()
    class_weights = class_counts.sum() / (C * class_counts)
    env.rec("class weights", class_weights)

    model = env.init(nn.Sequential(nn.Linear(5, 16), nn.GELU(), nn.Dropout(0.0),
                                   nn.Linear(16, C)))
    optimizer = optim.RAdam(model.parameters(), lr=1e-2)
    weighted_ce = nn.CrossEntropyLoss(weight=class_weights)
    focal = FocalLoss(alpha=class_weights / class_weights.sum())

    def mixup_data(x, y, lam, index):
        mixed_x = lam * x + (1 - lam) * x[index, :]
        return mixed_x, y, y[index]

    def train_step(x, y, lam, index):
        model.train()
        optimizer.zero_grad()
        mixed_x, y_a, y_b = mixup_data(x, y, lam, index)
        pred = model(mixed_x)
        loss = lam * weighted_ce(pred, y_a) + (1 - lam) * weighted_ce(pred, y_b)
        # the same mixup as soft targets (cross_entropy with class probabilities)
        soft = lam * F.one_hot(y_a, C).float() + (1 - lam) * F.one_hot(y_b, C).float()
        loss = loss + 0.5 * F.cross_entropy(pred, soft, label_smoothing=0.05)
        loss = loss + focal(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for i in range(4):
        lam = env.rand(1)[0]                     # a Beta draw's stand-in, as a tensor
        index = torch.argsort(env.rand(len(y)))  # a permutation of the batch
        env.rec(f"loss {i}", train_step(x, y, lam, index))
    env.rec("state", model.state_dict())

    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
    confusion = torch.bincount(y * C + pred, minlength=C * C).view(C, C)
    recall = confusion.diag().float() / confusion.sum(1).clamp(min=1).float()
    precision = confusion.diag().float() / confusion.sum(0).clamp(min=1).float()
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-8)
    env.rec("metrics", (confusion, recall, f1, recall.mean().item()))

    # oversampling the rare classes: each library's own draws (eager vs compiled)
    sample_weights = class_weights[y]
    sampler = torch.utils.data.WeightedRandomSampler(sample_weights, num_samples=len(y),
                                                     replacement=True)
    drawn = torch.tensor(list(sampler))
    env.rec("sampled", torch.bincount(y[drawn], minlength=C), cross=False)
