"""Sweep 59 (H1): first-month PyTorch programs as blog posts and course notebooks write
them: a TensorDataset under a shuffled DataLoader with a ragged last batch, model.train()
/ model.eval() switches, validation under no_grad, accuracy from argmax, early stopping
that deep-copies the best state_dict and restores it, StepLR and ReduceLROnPlateau,
kaiming / xavier init through apply(), MSE + L1 regression, multi-label BCE with
pos_weight, class-weighted CrossEntropy with ignore_index, two branches concatenated,
clip_grad_norm_ logged by a print inside the step. Synthetic data; the library's own
seeded RNG (llgrad's streams are torch's). Programs `f(torch, env)`, see
tutorial_harness.py."""
import contextlib
import copy
import io


def _blobs(env, n, d, k, spread=1.5):
    """n points of k Gaussian blobs in d dims, and their labels"""
    y = env.randint(0, k, (n,))
    centres = env.randn(k, d, scale=spread)
    return centres[y] + env.randn(n, d), y


def mlp_early_stopping(torch, env):
    nn = torch.nn
    from_data = torch.utils.data
    torch.manual_seed(0)
    X, y = _blobs(env, 70, 6, 3)
    train_ds = from_data.TensorDataset(X[:50], y[:50])
    val_ds = from_data.TensorDataset(X[50:], y[50:])
    train_loader = from_data.DataLoader(train_ds, batch_size=16, shuffle=True, drop_last=False)
    val_loader = from_data.DataLoader(val_ds, batch_size=8)    # (8, 8, 4)

    sizes = [6, 32, 16]
    layers = [nn.Sequential(nn.Linear(a, b), nn.ReLU()) for a, b in zip(sizes, sizes[1:])]
    model = nn.Sequential(*layers, nn.Linear(sizes[-1], 3))

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)

    model.apply(init_weights)
    env.rec("init", dict(model.state_dict()))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    def train_batch(xb, yb):
        model.train()
        optimizer.zero_grad()
        out = model(xb)
        loss = loss_fn(out, yb)
        loss.backward()
        optimizer.step()
        acc = (out.argmax(dim=1) == yb).float().mean().item()
        return loss.item(), acc

    def eval_batch(xb, yb):
        model.eval()
        with torch.no_grad():
            out = model(xb)
            return loss_fn(out, yb).item() * len(yb), (out.argmax(1) == yb).sum().item()

    train_batch, eval_batch = env.step(train_batch), env.step(eval_batch)
    best_loss, best_state, patience, bad = float("inf"), None, 2, 0
    for epoch in range(8):
        losses, accs = [], []
        for xb, yb in train_loader:
            loss, acc = train_batch(xb, yb)
            losses.append(loss)
            accs.append(acc)
        scheduler.step()
        total, correct = 0.0, 0
        for xb, yb in val_loader:
            l, c = eval_batch(xb, yb)
            total += l
            correct += c
        val_loss = total / len(val_ds)
        env.rec(f"epoch {epoch}", (losses, accs, val_loss, correct, scheduler.get_last_lr()))
        if val_loss < best_loss:
            best_loss, bad = val_loss, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
            if bad >= patience:
                env.rec("stopped at", epoch)
                break
    model.load_state_dict(best_state)
    env.rec("restored", [eval_batch(xb, yb) for xb, yb in val_loader])
    with torch.no_grad():
        preds = model(X[50:]).argmax(dim=1)
    env.rec("best", (best_loss, preds.tolist(), dict(model.state_dict())))


def regression_mse_l1_plateau(torch, env):
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(1)
    X = env.randn(46, 4)
    true_w = torch.tensor([[1.5], [-2.0], [0.5], [0.0]])
    Y = X @ true_w + 0.3 * torch.sin(3 * X[:, :1]) + 0.05 * env.randn(46, 1)
    loader = data.DataLoader(data.TensorDataset(X[:36], Y[:36]), batch_size=10, shuffle=True)

    model = nn.Sequential(nn.Linear(4, 24, bias=False), nn.BatchNorm1d(24), nn.Tanh(),
                          nn.Dropout(p=0.1), nn.Linear(24, 1))

    def init_fn(m):
        if type(m) == nn.Linear:
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                m.bias.data.fill_(0.01)

    model.apply(init_fn)
    mse, l1 = nn.MSELoss(), nn.L1Loss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5,
                                                           patience=1)

    def train_step(xb, yb):
        pred = model(xb)
        loss = mse(pred, yb) + 0.5 * l1(pred, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_step)
    for epoch in range(6):
        model.train()
        running = 0.0
        for xb, yb in loader:                       # (10, 10, 10, 6)
            running += step(xb, yb).item() * xb.size(0)
        model.eval()
        with torch.no_grad():
            pred = model(X[36:])
            val = mse(pred, Y[36:]).item()
            err = (pred - Y[36:]).abs()
            close = torch.where(err < 0.25, 1.0, 0.0).mean().item()
        scheduler.step(val)
        env.rec(f"epoch {epoch}", (running / 36, val, close,
                                   optimizer.param_groups[0]["lr"]), cross=False)
        env.rec(f"epoch {epoch} torch", (running / 36, val, close))
    env.rec("pred", pred.squeeze(1).numpy())
    env.rec("state", dict(model.state_dict()))


def multilabel_pos_weight(torch, env):
    nn = torch.nn
    torch.manual_seed(2)
    n, d, k = 30, 8, 4
    X = env.randn(n, d)
    W = env.randn(d, k)
    Y = ((X @ W) > 1.2).float()                     # (rare positives)
    pos = Y.sum(0)
    pos_weight = (n - pos) / pos.clamp(min=1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(d, 20)
            self.fc2 = nn.Linear(20, k)
            nn.init.xavier_uniform_(self.fc1.weight)
            nn.init.xavier_uniform_(self.fc2.weight)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    model = Net()
    criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    def train_step(xb, yb):
        optimizer.zero_grad()
        logits = model(xb)
        loss = criterion(logits, yb)
        loss.backward()
        optimizer.step()
        preds = (torch.sigmoid(logits) > 0.5).float()
        exact = (preds == yb).all(dim=1).float().mean()
        return loss.item(), exact.item()

    step = env.step(train_step)
    batches = [(0, 12), (12, 24), (24, 30)]         # (12, 12, 6)
    for epoch in range(4):
        for a, b in batches:
            env.rec(f"e{epoch} {a}", step(X[a:b], Y[a:b]))
    model.eval()
    with torch.no_grad():
        probs = torch.sigmoid(model(X))
    preds = probs > 0.5
    tp = (preds & (Y == 1)).sum(0).float()
    fp = (preds & (Y == 0)).sum(0).float()
    fn = (~preds & (Y == 1)).sum(0).float()
    f1 = 2 * tp / (2 * tp + fp + fn).clamp(min=1)
    env.rec("f1", f1.tolist())
    env.rec("positive probs", torch.masked_select(probs, Y.bool()))
    env.rec("params", [p.detach() for p in model.parameters()])


def tagger_class_weights(torch, env):
    nn = torch.nn
    torch.manual_seed(3)
    V, T, C = 25, 7, 4
    lengths = [7, 5, 3, 6, 2, 7, 4, 5, 6, 3]
    tokens = env.randint(1, V, (len(lengths), T))
    tags = tokens % C
    for i, n in enumerate(lengths):
        tokens[i, n:] = 0
        tags[i, n:] = -100
    counts = torch.bincount(tags[tags != -100], minlength=C).float()
    weights = counts.sum() / (C * counts)

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 12, padding_idx=0)
            self.proj = nn.Linear(12, 16)
            self.out = nn.Linear(16, C)

        def forward(self, x):
            return self.out(torch.relu(self.proj(self.emb(x))))

    model = Tagger()
    criterion = nn.CrossEntropyLoss(weight=weights, ignore_index=-100)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def train_step(x, t):
        model.train()
        logits = model(x)
        loss = criterion(logits.view(-1, C), t.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mask = t != -100
        pred = logits.argmax(-1)
        correct = (pred[mask] == t[mask]).sum().item()
        return loss.item(), correct, mask.sum().item()

    step = env.step(train_step)
    for epoch in range(3):
        for s in range(0, len(lengths), 4):             # (4, 4, 2)
            env.rec(f"e{epoch} b{s}", step(tokens[s:s + 4], tags[s:s + 4]))
    env.rec("weights", weights)
    env.rec("params", dict(model.state_dict()))


def two_branch_clip_print(torch, env):
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(4)
    n = 27
    num = env.randn(n, 5)
    cat = env.randint(0, 6, (n,))
    y = (num[:, 0] + (cat % 2).float() > 0.3).long()

    class TwoBranch(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_branch = nn.Sequential(nn.Linear(5, 8), nn.ReLU())
            self.cat_branch = nn.Sequential(nn.Embedding(6, 4), nn.Linear(4, 8), nn.ReLU())
            self.head = nn.Linear(16, 2)

        def forward(self, x_num, x_cat):
            feats = torch.cat([self.num_branch(x_num), self.cat_branch(x_cat)], dim=1)
            return self.head(feats)

    model = TwoBranch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.03)
    criterion = nn.CrossEntropyLoss()
    loader = data.DataLoader(data.TensorDataset(num, cat, y), batch_size=8, shuffle=True)
    out = io.StringIO()

    def train_step(step_i, x_num, x_cat, yb):
        optimizer.zero_grad()
        loss = criterion(model(x_num, x_cat), yb)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        print(f"step {step_i}: loss {loss:.4f} grad norm {norm:.3f}")
        return loss.detach(), norm

    step = env.step(train_step)
    i = 0
    with contextlib.redirect_stdout(out):
        for epoch in range(3):
            for x_num, x_cat, yb in loader:             # (8, 8, 8, 3)
                env.rec(f"step {i}", step(i, x_num, x_cat, yb))
                i += 1
    env.rec("log", out.getvalue().splitlines())
    env.rec("params", dict(model.state_dict()))
