"""Tutorial programs (seeded with torch.manual_seed, modules initialised by their own
constructors, data from torch's random functions; see test_basics_sweep7.py) on training
technique: transfer learning with frozen layers and parameter groups, OneCycleLR and
ReduceLROnPlateau, gradient clipping, Dropout and BatchNorm in train and eval, AdamW's
weight decay with no-decay groups, early stopping, gradient accumulation, k-fold cross
validation."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _data(torch, n=32, d=10, classes=3):
    return torch.randn(n, d), torch.randint(0, classes, (n,))


def transfer_freeze_groups(torch, env):
    """A 'pretrained' backbone frozen with requires_grad_(False), a new head trained with
    its own learning rate, then the last backbone layer unfrozen into a second group."""
    nn = torch.nn
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
    pre_opt = torch.optim.SGD(backbone.parameters(), lr=0.1)
    X, y = _data(torch)
    for _ in range(3):          # ("pretraining" on a reconstruction target)
        pre_opt.zero_grad()
        backbone(X).pow(2).mean().backward()
        pre_opt.step()
    model = nn.Sequential(backbone, nn.Linear(16, 3))
    for p in model[0].parameters():
        p.requires_grad_(False)
    env.rec("trainable", sum(p.numel() for p in model.parameters() if p.requires_grad))
    env.rec("frozen", [n for n, p in model.named_parameters() if not p.requires_grad])
    opt = torch.optim.SGD([{"params": model[1].parameters(), "lr": 0.05}], momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step(X, y):
        opt.zero_grad()
        loss = loss_fn(model(X), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("head only", [step(X, y) for _ in range(5)])
    env.rec("backbone grad", [p.grad is None for p in backbone.parameters()])
    for p in backbone[2].parameters():
        p.requires_grad_(True)
    opt.add_param_group({"params": backbone[2].parameters(), "lr": 0.005})
    env.rec("unfrozen", [step(X, y) for _ in range(5)])
    env.rec("groups", [(g["lr"], g["momentum"], len(g["params"])) for g in opt.param_groups])
    env.rec("weights", model.state_dict())


def one_cycle(torch, env):
    """OneCycleLR stepped per batch over epochs of a shuffled DataLoader; the lr and
    momentum it sets, and the losses."""
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(0)
    X, y = _data(torch, n=40)
    loader = data.DataLoader(data.TensorDataset(X, y), batch_size=10, shuffle=True)
    model = nn.Sequential(nn.Linear(10, 20), nn.Tanh(), nn.Linear(20, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, epochs=3,
                                                steps_per_epoch=len(loader))

    def step(xb, yb):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    hist = []
    for epoch in range(3):
        for xb, yb in loader:
            hist.append((step(xb, yb), opt.param_groups[0]["lr"],
                         opt.param_groups[0]["momentum"]))
            sched.step()
    env.rec("hist", hist)
    env.rec("last_lr", sched.get_last_lr())
    env.rec("weights", list(model.parameters()))


def reduce_on_plateau(torch, env):
    """ReduceLROnPlateau on a validation loss, with Adam; the lr drops it makes."""
    nn = torch.nn
    torch.manual_seed(0)
    X, y = torch.randn(32, 4), torch.randn(32, 1)
    Xv, yv = torch.randn(16, 4), torch.randn(16, 1)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5,
                                                       patience=1)

    def step(X, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(X), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    hist = []
    for epoch in range(12):
        loss = step(X, y)
        with torch.no_grad():
            val = nn.functional.mse_loss(model(Xv), yv).item()
        sched.step(val)
        hist.append((loss.item(), val, opt.param_groups[0]["lr"]))
    env.rec("hist", hist)
    env.rec("weights", list(model.parameters()))


def gradient_clipping(torch, env):
    """clip_grad_norm_ (returning the total norm) and clip_grad_value_ in an RNN step."""
    nn = torch.nn
    torch.manual_seed(0)
    rnn = nn.RNN(5, 12, batch_first=True)
    head = nn.Linear(12, 1)
    params = list(rnn.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.5)
    X, y = torch.randn(6, 7, 5) * 3, torch.randn(6, 1) * 10

    def step(X, y, by_value):
        opt.zero_grad()
        out, h = rnn(X)
        loss = nn.functional.mse_loss(head(out[:, -1]), y)
        loss.backward()
        if by_value:
            nn.utils.clip_grad_value_(params, clip_value=0.1)
            norm = torch.stack([p.grad.norm() for p in params]).norm()
        else:
            norm = nn.utils.clip_grad_norm_(params, max_norm=1.0)
        opt.step()
        return loss.item(), norm

    step = env.step(step)
    env.rec("norm", [step(X, y, False) for _ in range(5)])
    env.rec("value", [step(X, y, True) for _ in range(5)])
    env.rec("weights", params)


def dropout_batchnorm_modes(torch, env):
    """A net with Dropout and BatchNorm1d: train steps (dropout masks from the seeded
    stream), eval outputs (running statistics), the running stats and num_batches_tracked."""
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    X, y = torch.randn(20, 8), torch.randint(0, 2, (20,))

    def step(X, y):
        opt.zero_grad()
        out = model(X)
        loss = nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss.item(), out

    step = env.step(step)
    hist = []
    for epoch in range(4):
        model.train()
        hist.append([step(X[i:i + 5], y[i:i + 5]) for i in range(0, 20, 5)])
        model.eval()
        with torch.no_grad():
            hist.append(model(X))
    env.rec("hist", hist)
    bn = model[1]
    env.rec("bn", (bn.running_mean, bn.running_var, bn.num_batches_tracked, bn.training))
    env.rec("weights", list(model.parameters()))


def adamw_no_decay(torch, env):
    """AdamW with weight decay on weights and none on biases and norms (the usual
    named_parameters filter), amsgrad in the second run."""
    nn = torch.nn
    torch.manual_seed(0)
    for amsgrad in (False, True):
        model = nn.Sequential(nn.Linear(6, 12), nn.LayerNorm(12), nn.GELU(), nn.Linear(12, 1))
        decay, no_decay = [], []
        for name, p in model.named_parameters():
            (no_decay if name.endswith("bias") or "1." in name else decay).append(p)
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=0.01, amsgrad=amsgrad)
        X, y = torch.randn(24, 6), torch.randn(24, 1)

        def step(X, y):
            opt.zero_grad()
            loss = nn.functional.smooth_l1_loss(model(X), y)
            loss.backward()
            opt.step()
            return loss

        step = env.step(step)
        env.rec(f"losses {amsgrad}", [step(X, y) for _ in range(15)])
        env.rec(f"sizes {amsgrad}", (len(decay), len(no_decay)))
        env.rec(f"weights {amsgrad}", list(model.parameters()))


def early_stopping(torch, env):
    """Early stopping on a validation loss with patience, keeping the best state with
    copy.deepcopy(model.state_dict()) and restoring it."""
    nn = torch.nn
    torch.manual_seed(0)
    X, y = torch.randn(30, 5), torch.randn(30, 1)
    Xv, yv = torch.randn(10, 5), torch.randn(10, 1)
    model = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.03)

    def step(X, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(X), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    best, best_state, patience, bad, stopped = float("inf"), None, 3, 0, None
    hist = []
    for epoch in range(40):
        train = step(X, y)
        model.eval()
        with torch.no_grad():
            val = nn.functional.mse_loss(model(Xv), yv).item()
        model.train()
        hist.append((train, val))
        if val < best - 1e-4:
            best, bad = val, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
            if bad >= patience:
                stopped = epoch
                break
    env.rec("hist", hist)
    env.rec("stopped", stopped)
    model.load_state_dict(best_state)
    with torch.no_grad():
        env.rec("restored", (nn.functional.mse_loss(model(Xv), yv).item(), best))


def gradient_accumulation(torch, env):
    """Accumulating gradients over 4 micro-batches of a shuffled DataLoader (loss / steps),
    stepping the optimizer and a StepLR every 4th batch."""
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(0)
    ds = data.TensorDataset(torch.randn(64, 12), torch.randint(0, 5, (64,)))
    loader = data.DataLoader(ds, batch_size=4, shuffle=True)
    model = nn.Sequential(nn.Linear(12, 24), nn.SiLU(), nn.Linear(24, 5))
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    accum = 4

    def micro(xb, yb):
        loss = nn.functional.cross_entropy(model(xb), yb) / accum
        loss.backward()
        return loss.detach()

    def update():
        opt.step()
        opt.zero_grad(set_to_none=True)

    micro, update = env.step(micro), env.step(update)
    hist = []
    for epoch in range(2):
        for i, (xb, yb) in enumerate(loader):
            hist.append(micro(xb, yb))
            if (i + 1) % accum == 0:
                update()
                sched.step()
    env.rec("hist", hist)
    env.rec("lr", opt.param_groups[0]["lr"])
    env.rec("weights", list(model.parameters()))


def kfold_cross_validation(torch, env):
    """k-fold cross validation with Subset and SubsetRandomSampler, a fresh model per fold
    (reset_parameters), accuracy per fold."""
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(0)
    X = torch.randn(40, 6)
    y = (X[:, 0] + X[:, 1] > 0).long()
    ds = data.TensorDataset(X, y)
    k = 4
    idx = torch.randperm(len(ds)).tolist()
    folds = [idx[i::k] for i in range(k)]
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
    results = []
    for fold in range(k):
        for layer in model.children():
            if hasattr(layer, "reset_parameters"):
                layer.reset_parameters()
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
        train_idx = [i for f in range(k) if f != fold for i in folds[f]]
        train_loader = data.DataLoader(ds, batch_size=10,
                                       sampler=data.SubsetRandomSampler(train_idx))
        test_loader = data.DataLoader(data.Subset(ds, folds[fold]), batch_size=5)

        def step(xb, yb):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            return loss.item()

        step = env.step(step)
        losses = [step(xb, yb) for _ in range(3) for xb, yb in train_loader]
        correct = 0
        with torch.no_grad():
            for xb, yb in test_loader:
                correct += (model(xb).argmax(1) == yb).sum().item()
        results.append((losses, correct / len(folds[fold])))
    env.rec("results", results)


PROGRAMS = {f.__name__: f for f in [
    transfer_freeze_groups, one_cycle, reduce_on_plateau, gradient_clipping,
    dropout_batchnorm_modes, adamw_no_decay, early_stopping, gradient_accumulation,
    kfold_cross_validation]}


# (over ~1.5 s each with their builds, on a machine the suite shares: in the slow run)
SLOW = {"adamw_no_decay", "dropout_batchnorm_modes", "gradient_accumulation",
        "gradient_clipping", "transfer_freeze_groups"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-6)
