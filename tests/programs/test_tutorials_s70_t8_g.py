"""Stop 70 (t8), file g: whole Kaggle-style pipelines that use many pieces at once, run with
PyTorch, with llgrad eagerly and with llgrad compiling the model or the step through
tutorial_harness.py.

- an image-classification notebook: a custom Dataset whose __getitem__ flips at random
  (torch.rand) and normalises, a DataLoader with shuffle, drop_last and a collate_fn, the
  model compiled (`model = torch.compile(model)`), OneCycleLR stepped per batch, gradient
  clipping, an EMA of the weights by AveragedModel(multi_avg_fn=get_ema_multi_avg_fn),
  evaluation of the EMA model with test-time augmentation (the flip averaged);
- a multi-task model with learned uncertainty weights (Kendall et al.'s
  `exp(-log_var) * loss + log_var` over a dict of task losses), a shared trunk with two
  heads, the step returning a dict of losses, the log-variances in their own param group
  without weight decay;
- train and evaluate functions both compiled, the evaluation under the
  `@torch.inference_mode()` decorator calling model.eval() itself (the "PyTorch 2 best
  practices" posts), the train step calling model.train(), alternating every epoch."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def kaggle_image_pipeline(torch, env):
    nn, F = torch.nn, torch.nn.functional
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    swa_utils = torch.optim.swa_utils

    class ImageDataset(Dataset):
        def __init__(self, images, labels, train=True):
            self.images, self.labels, self.train = images, labels, train
            self.mean, self.std = images.mean(), images.std()

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, idx):
            img = self.images[idx]
            if self.train and torch.rand(1).item() < 0.5:
                img = torch.flip(img, dims=[-1])
            return (img - self.mean) / self.std, self.labels[idx]

    def collate(batch):
        imgs, labels = zip(*batch)
        return torch.stack(imgs), torch.stack(labels)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                nn.MaxPool2d(2), nn.Conv2d(8, 12, 3, padding=1, bias=False),
                nn.BatchNorm2d(12), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
            self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(12, 4))

        def forward(self, x):
            return self.classifier(self.features(x))

    images, labels = env.rand(40, 1, 8, 8), env.randint(0, 4, (40,))
    train_ds = ImageDataset(images[:32], labels[:32])
    valid_ds = ImageDataset(images[32:], labels[32:], train=False)
    train_dl = DataLoader(train_ds, batch_size=8, shuffle=True, drop_last=True,
                          collate_fn=collate)
    model = env.init(Net())
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    epochs = 3
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, epochs=epochs,
                                                steps_per_epoch=len(train_dl))
    model = env.step(model)                         # model = torch.compile(model)
    losses, lrs = [], []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_dl:
            loss = F.cross_entropy(model(xb), yb, label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            ema.update_parameters(model)
            losses.append(loss.item())
            lrs.append(sched.get_last_lr()[0])
    ema.eval()
    with torch.no_grad():
        xv = torch.stack([valid_ds[i][0] for i in range(len(valid_ds))])
        probs = (F.softmax(ema(xv), 1) + F.softmax(ema(torch.flip(xv, dims=[-1])), 1)) / 2
    env.rec("losses", losses)
    env.rec("lrs", lrs)
    env.rec("tta probs", probs)
    env.rec("ema", dict(ema.state_dict()))
    env.rec("accuracy", (probs.argmax(1) == valid_ds.labels).float().mean().item())


def multitask_uncertainty(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class MultiTask(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(6, 24), nn.SiLU(), nn.LayerNorm(24))
            self.cls_head = nn.Linear(24, 3)
            self.reg_head = nn.Linear(24, 2)
            self.log_vars = nn.Parameter(torch.zeros(2))

        def forward(self, x):
            h = self.trunk(x)
            return {"cls": self.cls_head(h), "reg": self.reg_head(h)}

    model = env.init(MultiTask())
    decay = [p for n, p in model.named_parameters() if n != "log_vars" and p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if n != "log_vars" and p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0},
                             {"params": [model.log_vars], "weight_decay": 0.0, "lr": 5e-2}],
                            lr=1e-2)
    X, yc, yr = env.randn(36, 6), env.randint(0, 3, (36,)), env.randn(36, 2) * 3

    def train_step(x, t_cls, t_reg):
        out = model(x)
        task_losses = {"cls": F.cross_entropy(out["cls"], t_cls),
                       "reg": F.mse_loss(out["reg"], t_reg)}
        total = 0
        for i, (name, loss) in enumerate(task_losses.items()):
            total = total + torch.exp(-model.log_vars[i]) * loss + model.log_vars[i]
        opt.zero_grad()
        total.backward()
        opt.step()
        return {"total": total.detach(), **{k: v.detach() for k, v in task_losses.items()}}

    step = env.step(train_step)
    history = {"total": [], "cls": [], "reg": []}
    for epoch in range(4):
        for i in range(0, 36, 12):
            out = step(X[i:i + 12], yc[i:i + 12], yr[i:i + 12])
            for k, v in out.items():
                history[k].append(v.item())
    env.rec("history", history)
    env.rec("log_vars", model.log_vars)
    env.rec("params", dict(model.state_dict()))
    env.rec("opt state", [s["exp_avg_sq"] for s in opt.state.values()])


def inference_mode_evaluation(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(3, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(),
                                   nn.Dropout(0.3), nn.Linear(8, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    @torch.inference_mode()
    def evaluate(x, y):
        model.eval()
        out = model(x)
        return F.cross_entropy(out, y), (out.argmax(1) == y).float().mean()

    train_step, evaluate = env.step(train_step), env.step(evaluate)
    X, y = env.randn(16, 3), env.randint(0, 2, (16,))
    Xv, yv = env.randn(10, 3), env.randint(0, 2, (10,))
    for epoch in range(3):
        for i in range(0, 16, 8):
            env.rec(f"train {epoch} {i}", train_step(X[i:i + 8], y[i:i + 8]))
        loss, acc = evaluate(Xv, yv)
        env.rec(f"eval {epoch}", (loss, acc))
        env.rec(f"inference {epoch}", (loss.is_inference(), loss.requires_grad))
    env.rec("params", dict(model.state_dict()))
    if env.compiled:
        assert evaluate.n_traces == 1, evaluate.n_traces


PROGRAMS = {"kaggle_image_pipeline": kaggle_image_pipeline,
            "multitask_uncertainty": multitask_uncertainty,
            "inference_mode_evaluation": inference_mode_evaluation}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
