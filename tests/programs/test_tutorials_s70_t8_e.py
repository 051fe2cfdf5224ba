"""Stop 70 (t8), file e: Kaggle-notebook training loops, run with PyTorch, with llgrad eagerly
and with llgrad compiling the step (or the model, as `model = torch.compile(model)`)
through tutorial_harness.py.

- an EarlyStopping class (the "pytorchtools" one Kaggle notebooks copy): validation loss
  with patience and delta, the best checkpoint (model and optimizer state_dicts) written by
  torch.save to an io.BytesIO, MultiplicativeLR, and at the stop the checkpoint loaded back
  with torch.load and training resumed from it (the optimizer's state tensors replaced);
- K-fold cross-validation with out-of-fold predictions: a fresh model per fold, the model
  compiled (`model = torch.compile(model)`) and the loss and backward outside it, the
  fold's validation predictions written into an `oof` tensor by index, the test
  predictions averaged over folds;
- GloVe from a co-occurrence matrix (the "GloVe in PyTorch" blog posts): two embedding
  tables and two bias tables, the weighting f(X) = min(1, (X/x_max)**alpha), a weighted
  least-squares loss over the nonzero pairs, Adagrad as the paper trains it;
- temperature scaling (Guo et al., the gpleiss notebook): a trained classifier's
  validation logits, one temperature Parameter fitted by LBFGS with a closure (the closure
  compiled), the expected calibration error computed with bucketize before and after."""
import io

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def early_stopping_resume(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class EarlyStopping:
        def __init__(self, patience=2, delta=0.0):
            self.patience, self.delta = patience, delta
            self.counter, self.best_score, self.early_stop = 0, None, False
            self.val_loss_min = float("inf")
            self.buffer = None

        def __call__(self, val_loss, model, optimizer):
            score = -val_loss
            if self.best_score is None or score > self.best_score + self.delta:
                self.best_score = score
                self.save_checkpoint(val_loss, model, optimizer)
                self.counter = 0
            else:
                self.counter += 1
                if self.counter >= self.patience:
                    self.early_stop = True

        def save_checkpoint(self, val_loss, model, optimizer):
            self.buffer = io.BytesIO()
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "val_loss": val_loss}, self.buffer)
            self.val_loss_min = val_loss

    model = env.init(nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Dropout(0.0),
                                   nn.Linear(32, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.MultiplicativeLR(opt, lr_lambda=lambda epoch: 0.9)
    X, y = env.randn(32, 4), env.randn(32, 1)
    Xv, yv = env.randn(16, 4), env.randn(16, 1)

    def train_step(x, t):
        model.train()
        opt.zero_grad()
        loss = F.mse_loss(model(x), t)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    stopper = EarlyStopping(patience=2)
    train_hist, val_hist, stops = [], [], []
    for epoch in range(12):
        for i in range(0, 32, 8):
            train_hist.append(step(X[i:i + 8], y[i:i + 8]))
        sched.step()
        model.eval()
        with torch.no_grad():
            val = F.mse_loss(model(Xv), yv).item()
        val_hist.append(val)
        stopper(val, model, opt)
        if stopper.early_stop:
            stops.append(epoch)
            stopper.buffer.seek(0)
            ckpt = torch.load(stopper.buffer)
            model.load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["optimizer"])
            stopper.counter, stopper.early_stop = 0, False
    env.rec("train", train_hist)
    env.rec("val", val_hist)
    env.rec("stops", stops)
    env.rec("lr", opt.param_groups[0]["lr"])
    env.rec("params", dict(model.state_dict()))
    env.rec("exp_avg", [s["exp_avg"] for s in opt.state_dict()["state"].values()])


def kfold_oof(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n, k = 30, 3
    X, y = env.randn(n, 5), env.randint(0, 2, (n,)).float()
    X_test = env.randn(8, 5)
    perm = torch.tensor([(7 * i) % n for i in range(n)])
    folds = [perm[f::k] for f in range(k)]
    oof = torch.zeros(n)
    test_pred = torch.zeros(8)
    fold_scores = []
    for f in range(k):
        val_idx = folds[f]
        train_idx = torch.cat([folds[g] for g in range(k) if g != f])
        model = env.init(nn.Sequential(nn.Linear(5, 16), nn.GELU(), nn.Linear(16, 1)))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
        model = env.step(model)                      # model = torch.compile(model)
        for epoch in range(5):
            model.train()
            for i in range(0, len(train_idx), 10):
                idx = train_idx[i:i + 10]
                logits = model(X[idx]).squeeze(1)
                loss = F.binary_cross_entropy_with_logits(logits, y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            oof[val_idx] = torch.sigmoid(model(X[val_idx]).squeeze(1))
            test_pred += torch.sigmoid(model(X_test).squeeze(1)) / k
        acc = ((oof[val_idx] > 0.5).float() == y[val_idx]).float().mean().item()
        fold_scores.append(acc)
    env.rec("oof", oof)
    env.rec("test", test_pred)
    env.rec("fold scores", fold_scores)
    env.rec("cv", sum(fold_scores) / k)


def glove(torch, env):
    nn = torch.nn
    vocab, dim, x_max, alpha = 10, 6, 8.0, 0.75
    counts = (env.rand(vocab, vocab) * 12).floor()
    counts = counts * (env.rand(vocab, vocab) > 0.4).float()
    ii, jj = torch.nonzero(counts, as_tuple=True)
    xij = counts[ii, jj]

    class GloVe(nn.Module):
        def __init__(self):
            super().__init__()
            self.wi = nn.Embedding(vocab, dim)
            self.wj = nn.Embedding(vocab, dim)
            self.bi = nn.Embedding(vocab, 1)
            self.bj = nn.Embedding(vocab, 1)
            for e in (self.wi, self.wj):
                nn.init.uniform_(e.weight, -0.5 / dim, 0.5 / dim)
            for e in (self.bi, self.bj):
                nn.init.zeros_(e.weight)

        def forward(self, i, j):
            return ((self.wi(i) * self.wj(j)).sum(1) + self.bi(i).squeeze(1)
                    + self.bj(j).squeeze(1))

    model = env.init(GloVe())
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)

    def weight_fn(x):
        return torch.where(x < x_max, (x / x_max) ** alpha, torch.ones_like(x))

    def train_step(i, j, x):
        opt.zero_grad()
        pred = model(i, j)
        loss = (weight_fn(x) * (pred - torch.log(x)) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    losses = []
    n_pairs = len(xij)
    for epoch in range(4):
        for s in range(0, n_pairs, 16):
            losses.append(step(ii[s:s + 16], jj[s:s + 16], xij[s:s + 16]).item())
    env.rec("pairs", n_pairs)
    env.rec("losses", losses)
    env.rec("vectors", model.wi.weight + model.wj.weight)
    env.rec("state", [v for s in opt.state_dict()["state"].values() for v in s.values()])


def temperature_scaling(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 4)))
    X, y = env.randn(40, 6), env.randint(0, 4, (40,))
    Xv, yv = env.randn(30, 6), env.randint(0, 4, (30,))
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    for it in range(30):    # (overfit on purpose: an over-confident model)
        opt.zero_grad()
        F.cross_entropy(model(X), y).backward()
        opt.step()

    def ece(logits, labels, n_bins=5):
        probs = F.softmax(logits, dim=1)
        conf, pred = probs.max(1)
        acc = pred.eq(labels).float()
        bins = torch.bucketize(conf, torch.linspace(0, 1, n_bins + 1)[1:-1])
        total = torch.zeros(())
        for b in range(n_bins):
            in_bin = bins == b
            if in_bin.any():
                total = total + in_bin.float().mean() * (conf[in_bin].mean()
                                                         - acc[in_bin].mean()).abs()
        return total

    with torch.no_grad():
        logits = model(Xv)
    temperature = nn.Parameter(torch.ones(1) * 1.5)
    lbfgs = torch.optim.LBFGS([temperature], lr=0.01, max_iter=20)

    def closure():
        lbfgs.zero_grad()
        loss = F.cross_entropy(logits / temperature, yv)
        loss.backward()
        return loss

    step = env.step(closure)
    before = (F.cross_entropy(logits, yv).item(), ece(logits, yv).item())
    lbfgs.step(step)
    with torch.no_grad():
        after = (F.cross_entropy(logits / temperature, yv).item(),
                 ece(logits / temperature, yv).item())
    env.rec("before", before)
    env.rec("temperature", temperature)
    env.rec("after", after)
    env.rec("grad", temperature.grad)
    env.rec("func evals", lbfgs.state[temperature]["func_evals"])


PROGRAMS = {"early_stopping_resume": early_stopping_resume, "kfold_oof": kfold_oof,
            "glove": glove, "temperature_scaling": temperature_scaling}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
