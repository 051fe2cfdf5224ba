"""More programs from the books and notebooks: a PINN for the 1-D heat equation (u_t and u_xx
by autograd.grad with create_graph over a 2-D input, Adam then an LBFGS closure with a strong
Wolfe line search); an exponential moving average of the weights written by hand (no_grad,
mul_ / add_ over parameters and buffers of a deep-copied shadow, a decay warm-up);
d2l's weight decay chapter (polynomial features scaled by math.gamma, an L2 penalty by hand
and per-parameter-group weight_decay); d2l's k-fold cross-validation on house prices (the
folds cut with torch.cat, log-RMSE over clamped predictions); a custom length-bucketing
Sampler given as batch_sampler; a highway network; dict samples through DataLoader's
default collate (nested dicts, tuples, NumPy arrays and Python numbers) for a two-headed
model with weighted losses. Programs `f(torch, env)`, see tutorial_harness.py."""
import copy
import math

import numpy as np


def pinn_heat_lbfgs(torch, env):
    nn, optim = torch.nn, torch.optim
    alpha = 0.1

    model = env.init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                                   nn.Linear(16, 1)))

    def residual(xt):
        xt = xt.clone().requires_grad_(True)
        u = model(xt)
        grads = torch.autograd.grad(u, xt, torch.ones_like(u), create_graph=True)[0]
        u_x, u_t = grads[:, 0:1], grads[:, 1:2]
        u_xx = torch.autograd.grad(u_x, xt, torch.ones_like(u_x), create_graph=True)[0][:, 0:1]
        return u_t - alpha * u_xx

    def total_loss(xt, x0, u0, xb):
        loss_pde = residual(xt).pow(2).mean()
        loss_ic = (model(x0) - u0).pow(2).mean()
        loss_bc = model(xb).pow(2).mean()
        return loss_pde + loss_ic + loss_bc

    xt = torch.cat([env.rand(20, 1), env.rand(20, 1)], dim=1)
    xs = torch.linspace(0, 1, 8).view(-1, 1)
    x0 = torch.cat([xs, torch.zeros_like(xs)], dim=1)
    u0 = torch.sin(math.pi * xs)
    tb = torch.linspace(0, 1, 4).view(-1, 1)
    xb = torch.cat([torch.cat([torch.zeros_like(tb), tb], 1),
                    torch.cat([torch.ones_like(tb), tb], 1)], 0)

    adam = optim.Adam(model.parameters(), lr=1e-2)

    def adam_step(xt, x0, u0, xb):
        adam.zero_grad()
        loss = total_loss(xt, x0, u0, xb)
        loss.backward()
        adam.step()
        return loss.item()

    adam_step = env.step(adam_step)
    env.rec("adam", [adam_step(xt, x0, u0, xb) for _ in range(3)])
    lbfgs = optim.LBFGS(model.parameters(), lr=1.0, max_iter=5, history_size=5,
                        line_search_fn="strong_wolfe")

    def closure():
        lbfgs.zero_grad()
        loss = total_loss(xt, x0, u0, xb)
        loss.backward()
        return loss

    closure = env.step(closure)
    env.rec("lbfgs", [lbfgs.step(closure).item() for _ in range(2)], cross=True)
    env.rec("weights", list(model.parameters()))
    env.rec("lbfgs state", (lbfgs.state[lbfgs._params[0]]["n_iter"],
                            lbfgs.state[lbfgs._params[0]]["func_evals"]))


def ema_manual(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class EMA:
        def __init__(self, model, decay=0.99):
            self.shadow = copy.deepcopy(model).eval()
            for p in self.shadow.parameters():
                p.requires_grad_(False)
            self.decay, self.updates = decay, 0

        def update(self, model):
            self.updates += 1
            d = min(self.decay, (1 + self.updates) / (10 + self.updates))   # warm-up
            self.apply(model, d)
            return d

        @torch.no_grad()
        def apply(self, model, d):
            msd = model.state_dict()
            for k, v in self.shadow.state_dict().items():
                if v.dtype.is_floating_point:
                    v.mul_(d).add_(msd[k].detach(), alpha=1 - d)
                else:
                    v.copy_(msd[k])

    model = env.init(nn.Sequential(nn.Linear(4, 12), nn.BatchNorm1d(12), nn.ReLU(),
                                   nn.Linear(12, 2)))
    ema = EMA(model)
    optimizer = optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    x, y = env.randn(10, 4), env.randint(0, 2, (10,))

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    # (the counter stays outside the compiled calls: a compiled call replays tensor
    # effects, not `self.updates += 1`, so a step holding it traces at every call)
    train_step, ema.apply = env.step(train_step), env.step(ema.apply)
    for i in range(4):
        env.rec(f"step {i}", (train_step(x, y), ema.update(model)))
    with torch.no_grad():
        model.eval()
        env.rec("outputs", (model(x), ema.shadow(x)))
    env.rec("shadow", (ema.shadow.state_dict(), ema.updates,
                       [p.requires_grad for p in ema.shadow.parameters()]))


def weight_decay_d2l(torch, env):
    nn = torch.nn
    max_degree, n_train = 8, 20
    features = env.np.normal(size=(2 * n_train, 1))
    env.np.shuffle(features)
    poly_features = np.power(features, np.arange(max_degree).reshape(1, -1))
    for i in range(max_degree):
        poly_features[:, i] /= math.gamma(i + 1)
    true_w = np.zeros(max_degree)
    true_w[0:4] = np.array([5, 1.2, -3.4, 5.6])
    labels = np.dot(poly_features, true_w)
    labels += env.np.normal(scale=0.1, size=labels.shape)
    poly_features, labels = [torch.tensor(x, dtype=torch.float32) for x in
                             [poly_features, labels]]
    train_x, train_y = poly_features[:n_train], labels[:n_train].reshape(-1, 1)
    test_x, test_y = poly_features[n_train:], labels[n_train:].reshape(-1, 1)

    def l2_penalty(w):
        return torch.sum(w.pow(2)) / 2

    # from scratch: the penalty in the loss
    w = torch.zeros(max_degree, 1).requires_grad_(True)
    b = torch.zeros(1, requires_grad=True)
    lambd, lr = 3.0, 0.01

    def scratch_step(X, y):
        l = ((X @ w + b - y) ** 2 / 2) + lambd * l2_penalty(w)
        l.sum().backward()
        with torch.no_grad():
            for param in (w, b):
                param -= lr * param.grad / X.shape[0]
                param.grad.zero_()
        return l.mean().item()

    scratch_step = env.step(scratch_step)
    env.rec("scratch", [scratch_step(train_x[i:i + 5], train_y[i:i + 5])
                        for _ in range(2) for i in range(0, n_train, 5)])
    env.rec("L2 norm of w", torch.norm(w).item())

    # concise: weight decay on the weight's parameter group only
    net = nn.Sequential(nn.Linear(max_degree, 1, bias=True))
    for param in net.parameters():
        param.data.normal_()
    env.init(net)
    loss = nn.MSELoss(reduction="none")
    trainer = torch.optim.SGD([{"params": net[0].weight, "weight_decay": 3.0},
                               {"params": net[0].bias}], lr=lr)

    def concise_step(X, y):
        trainer.zero_grad()
        l = loss(net(X), y)
        l.mean().backward()
        trainer.step()
        return l.mean().item()

    concise_step = env.step(concise_step)
    env.rec("concise", [concise_step(train_x[i:i + 5], train_y[i:i + 5])
                        for _ in range(2) for i in range(0, n_train, 5)])
    with torch.no_grad():
        env.rec("test loss", loss(net(test_x), test_y).mean())
    env.rec("L2 norm", net[0].weight.norm().item())


def kfold_house_prices(torch, env):
    nn = torch.nn
    n, d, k = 30, 5, 3
    features = env.randn(n, d)
    labels = torch.exp(features[:, :1] * 0.3 + 5.0) + env.rand(n, 1)
    loss = nn.MSELoss()

    def log_rmse(net, features, labels):
        clipped_preds = torch.clamp(net(features), 1, float("inf"))
        rmse = torch.sqrt(loss(torch.log(clipped_preds), torch.log(labels)))
        return rmse.item()

    def get_k_fold_data(k, i, X, y):
        assert k > 1
        fold_size = X.shape[0] // k
        X_train, y_train = None, None
        for j in range(k):
            idx = slice(j * fold_size, (j + 1) * fold_size)
            X_part, y_part = X[idx, :], y[idx]
            if j == i:
                X_valid, y_valid = X_part, y_part
            elif X_train is None:
                X_train, y_train = X_part, y_part
            else:
                X_train = torch.cat([X_train, X_part], 0)
                y_train = torch.cat([y_train, y_part], 0)
        return X_train, y_train, X_valid, y_valid

    def train(net, train_features, train_labels, test_features, test_labels, num_epochs,
              learning_rate, weight_decay, batch_size):
        train_ls, test_ls = [], []
        dataset = torch.utils.data.TensorDataset(train_features, train_labels)
        train_iter = torch.utils.data.DataLoader(dataset, batch_size, shuffle=False)
        optimizer = torch.optim.Adam(net.parameters(), lr=learning_rate,
                                     weight_decay=weight_decay)

        def step(X, y):
            optimizer.zero_grad()
            l = loss(net(X), y)
            l.backward()
            optimizer.step()

        step = env.step(step)
        for epoch in range(num_epochs):
            for X, y in train_iter:
                step(X, y)
            train_ls.append(log_rmse(net, train_features, train_labels))
            if test_labels is not None:
                test_ls.append(log_rmse(net, test_features, test_labels))
        return train_ls, test_ls

    train_l_sum, valid_l_sum = 0, 0
    for i in range(k):
        data = get_k_fold_data(k, i, features, labels)
        net = env.init(nn.Sequential(nn.Linear(d, 1)))
        with torch.no_grad():
            net[0].bias.fill_(100.0)
        train_ls, valid_ls = train(net, *data, num_epochs=3, learning_rate=5.0,
                                   weight_decay=0.01, batch_size=8)
        train_l_sum += train_ls[-1]
        valid_l_sum += valid_ls[-1]
        env.rec(f"fold {i}", (train_ls, valid_ls))
    env.rec("mean", (train_l_sum / k, valid_l_sum / k))


def bucket_sampler(torch, env):
    nn, F = torch.nn, torch.nn.functional
    data_utils = torch.utils.data

    lengths = [2 + env.choice(7) for _ in range(14)]
    seqs = [env.randn(L, 3) for L in lengths]
    ys = [float(s.sum() > 0) for s in seqs]

    class SeqDataset(data_utils.Dataset):
        def __len__(self):
            return len(seqs)

        def __getitem__(self, i):
            return seqs[i], ys[i]

    class BucketBatchSampler(data_utils.Sampler):
        """Batches of similar lengths (sorted within chunks), in a fixed order."""

        def __init__(self, lengths, batch_size):
            self.lengths, self.batch_size = lengths, batch_size

        def __iter__(self):
            order = sorted(range(len(self.lengths)), key=lambda i: self.lengths[i])
            batches = [order[i:i + self.batch_size]
                       for i in range(0, len(order), self.batch_size)]
            return iter(batches[::-1])

        def __len__(self):
            return math.ceil(len(self.lengths) / self.batch_size)

    def collate(batch):
        xs, y = zip(*batch)
        lens = torch.tensor([len(x) for x in xs])
        return nn.utils.rnn.pad_sequence(xs, batch_first=True), lens, torch.tensor(y)

    loader = data_utils.DataLoader(SeqDataset(), batch_sampler=BucketBatchSampler(lengths, 4),
                                   collate_fn=collate)
    gru = env.init(nn.GRU(3, 8, batch_first=True))
    head = env.init(nn.Linear(8, 1))
    optimizer = torch.optim.Adam(list(gru.parameters()) + list(head.parameters()), lr=0.01)

    def step(x, lens, y):
        optimizer.zero_grad()
        out, _ = gru(x)
        last = out[torch.arange(x.size(0)), lens - 1]        # the last valid step
        loss = F.binary_cross_entropy_with_logits(head(last).squeeze(1), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    env.rec("len", len(loader))
    for epoch in range(2):
        env.rec(f"epoch {epoch}", [(tuple(x.shape), step(x, lens, y))
                                   for x, lens, y in loader])
    sampler = data_utils.BatchSampler(data_utils.SequentialSampler(range(7)), 3, drop_last=False)
    env.rec("batch sampler", (list(sampler), len(sampler)))


def highway_network(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Highway(nn.Module):
        def __init__(self, size, num_layers, f=F.relu):
            super().__init__()
            self.num_layers = num_layers
            self.nonlinear = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
            self.linear = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
            self.gate = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
            self.f = f
            for g in self.gate:
                nn.init.constant_(g.bias, -1.0)         # carry by default

        def forward(self, x):
            for layer in range(self.num_layers):
                gate = torch.sigmoid(self.gate[layer](x))
                nonlinear = self.f(self.nonlinear[layer](x))
                linear = self.linear[layer](x)
                x = gate * nonlinear + (1 - gate) * linear
            return x

    model = env.init(nn.Sequential(nn.Linear(6, 10), Highway(10, 3), nn.Linear(10, 3)))
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=0.01)
    x, y = env.randn(12, 6), env.randint(0, 3, (12,))

    def step(x, y):
        optimizer.zero_grad()
        loss = F.nll_loss(F.log_softmax(model(x), dim=1), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(x, y) for _ in range(4)])
    env.rec("gate bias", model[1].gate[0].bias)
    env.rec("adagrad sum", optimizer.state[model[1].gate[0].bias]["sum"])


def dict_batches(torch, env):
    nn, F = torch.nn, torch.nn.functional
    data_utils = torch.utils.data
    n = 10
    images = env.np.standard_normal((n, 2, 4, 4)).astype(np.float32)
    meta = env.np.standard_normal((n, 3)).astype(np.float32)
    cls = [int(v) for v in env.np.integers(0, 3, n)]
    reg = [float(v) for v in env.np.standard_normal(n)]

    class MultiDataset(data_utils.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return {"image": images[i], "meta": torch.from_numpy(meta[i]),
                    "target": {"cls": cls[i], "reg": reg[i]}, "id": (i, f"s{i}")}

    loader = data_utils.DataLoader(MultiDataset(), batch_size=4, shuffle=False)

    class TwoHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveMaxPool2d(1), nn.Flatten())
            self.meta = nn.Linear(3, 4)
            self.cls_head = nn.Linear(8, 3)
            self.reg_head = nn.Linear(8, 1)

        def forward(self, batch):
            h = torch.cat([self.conv(batch["image"]), F.silu(self.meta(batch["meta"]))], 1)
            return {"cls": self.cls_head(h), "reg": self.reg_head(h).squeeze(-1)}

    model = env.init(TwoHead())
    optimizer = torch.optim.NAdam(model.parameters(), lr=1e-2)
    weights = {"cls": 1.0, "reg": 0.5}

    def step(batch):
        optimizer.zero_grad()
        out = model(batch)
        losses = {"cls": F.cross_entropy(out["cls"], batch["target"]["cls"]),
                  "reg": F.mse_loss(out["reg"], batch["target"]["reg"].float())}
        total = sum(weights[k] * v for k, v in losses.items())
        total.backward()
        optimizer.step()
        return {k: v.item() for k, v in losses.items()}

    step = env.step(step)
    first = next(iter(loader))
    env.rec("collated", (sorted(first), first["image"].dtype, first["target"]["cls"].dtype,
                         first["target"]["reg"].dtype, first["id"][0], list(first["id"][1])))
    for epoch in range(2):
        env.rec(f"epoch {epoch}", [step(batch) for batch in loader])
