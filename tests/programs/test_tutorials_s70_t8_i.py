"""Stop 70 (t8), file i: losses for imbalance, curricula and mixing as their papers'
reference code writes them, run with PyTorch, with llgrad eagerly and with llgrad compiling
the step through tutorial_harness.py.

- LDAM-DRW (Cao et al., kaidic/LDAM-DRW): per-class margins `1 / n_j ** 0.25` scaled to a
  max margin, subtracted from the true class's logit through `index.scatter_(1, ...)` and
  `torch.where`, the loss scaled by s; the deferred re-weighting switched on at an epoch
  (class weights from the effective number of samples, (1 - beta) / (1 - beta ** n)),
  passed to the compiled step as a tensor that is None before;
- Manifold Mixup (Verma et al.): the mixing layer and lambda drawn outside the step
  (np.random.beta from a seeded generator, as the repository's mixup_data), the hidden
  states mixed at that layer with a permutation, the mixed cross-entropy;
- self-paced learning (Kumar et al. blog re-implementations): per-sample losses with
  reduction='none', samples whose loss is under a threshold kept by a 0/1 mask inside the
  step, the threshold grown by a factor each epoch outside it;
- a focal Tversky loss for segmentation (Abraham & Khan): a small encoder-decoder with a
  skip concatenation, sigmoid probabilities, true positives / false negatives / false
  positives summed per image, `(1 - tversky) ** gamma` averaged."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def ldam_drw(torch, env):
    nn, F = torch.nn, torch.nn.functional
    cls_num_list = [30, 12, 6]

    class LDAMLoss(nn.Module):
        def __init__(self, cls_num_list, max_m=0.5, weight=None, s=30):
            super().__init__()
            m_list = 1.0 / np.sqrt(np.sqrt(cls_num_list))
            m_list = m_list * (max_m / np.max(m_list))
            self.m_list = torch.tensor(m_list, dtype=torch.float32)
            self.s, self.weight = s, weight

        def forward(self, x, target):
            index = torch.zeros_like(x, dtype=torch.uint8)
            index.scatter_(1, target.data.view(-1, 1), 1)
            index_float = index.type(torch.float32)
            batch_m = torch.matmul(self.m_list[None, :], index_float.transpose(0, 1))
            batch_m = batch_m.view((-1, 1))
            x_m = x - batch_m
            output = torch.where(index.bool(), x_m, x)
            return F.cross_entropy(self.s * output, target, weight=self.weight)

    labels = torch.cat([torch.full((n,), c, dtype=torch.long)
                        for c, n in enumerate(cls_num_list)])
    X = env.randn(len(labels), 5) + labels.unsqueeze(1).float()
    perm = torch.tensor([(11 * i) % len(labels) for i in range(len(labels))])
    X, labels = X[perm], labels[perm]
    model = env.init(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=2e-4)

    def train_step(x, y, per_cls_weights):
        criterion = LDAMLoss(cls_num_list, max_m=0.5, s=30, weight=per_cls_weights)
        loss = criterion(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    losses = []
    for epoch in range(4):
        if epoch < 2:
            per_cls_weights = None
        else:
            beta = 0.99
            effective_num = 1.0 - np.power(beta, cls_num_list)
            w = (1.0 - beta) / np.array(effective_num)
            w = w / np.sum(w) * len(cls_num_list)
            per_cls_weights = torch.tensor(w, dtype=torch.float32)
        for i in range(0, len(labels), 16):
            losses.append(step(X[i:i + 16], labels[i:i + 16], per_cls_weights).item())
    env.rec("losses", losses)
    env.rec("params", dict(model.state_dict()))
    if env.compiled:
        assert step.n_traces <= 3, step.n_traces


def manifold_mixup(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.RandomState(5)

    class MixupNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Sequential(nn.Linear(6, 16), nn.ReLU()),
                                         nn.Sequential(nn.Linear(16, 16), nn.ReLU()),
                                         nn.Linear(16, 3)])

        def forward(self, x, target=None, mixup_layer=-1, lam=1.0, index=None):
            y_a = y_b = target
            if mixup_layer == 0:
                x = lam * x + (1 - lam) * x[index]
                y_a, y_b = target, target[index]
            for k, layer in enumerate(self.layers):
                x = layer(x)
                if k + 1 == mixup_layer:
                    x = lam * x + (1 - lam) * x[index]
                    y_a, y_b = target, target[index]
            return x, y_a, y_b

    model = env.init(MixupNet())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    X, y = env.randn(32, 6), env.randint(0, 3, (32,))

    def train_step(x, t, layer, lam, index):
        out, y_a, y_b = model(x, t, mixup_layer=layer, lam=lam, index=index)
        loss = lam * F.cross_entropy(out, y_a) + (1 - lam) * F.cross_entropy(out, y_b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    losses = []
    for epoch in range(3):
        for i in range(0, 32, 8):
            lam = float(rng.beta(2.0, 2.0))
            layer = int(rng.randint(0, 3))
            index = torch.tensor(rng.permutation(8))
            losses.append(step(X[i:i + 8], y[i:i + 8], layer, lam, index).item())
    env.rec("losses", losses)
    env.rec("params", dict(model.state_dict()))
    if env.compiled:
        assert step.n_traces <= 6, step.n_traces


def self_paced(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    X = env.randn(40, 4)
    y = X.sum(1, keepdim=True) + env.randn(40, 1) * torch.linspace(0.1, 3.0, 40).unsqueeze(1)

    def train_step(x, t, threshold):
        losses = F.mse_loss(model(x), t, reduction="none").squeeze(1)
        v = (losses < threshold).float()
        loss = (v * losses).sum() / v.sum().clamp_min(1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, v.sum()

    step = env.step(train_step)
    threshold, history = 1.0, []
    for epoch in range(5):
        for i in range(0, 40, 10):
            loss, n_kept = step(X[i:i + 10], y[i:i + 10], threshold)
            history.append((loss.item(), int(n_kept.item())))
        threshold *= 1.5
    env.rec("history", history)
    env.rec("params", dict(model.state_dict()))
    if env.compiled:
        assert step.n_traces <= 2, step.n_traces


def focal_tversky_segmentation(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class TinyUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU())
            self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose2d(8, 6, 2, stride=2)
            self.dec = nn.Sequential(nn.Conv2d(12, 6, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(6, 1, 1))

        def forward(self, x):
            e = self.enc(x)
            d = self.up(self.down(e))
            return self.dec(torch.cat([d, e], dim=1))

    def focal_tversky(logits, target, alpha=0.7, beta=0.3, gamma=0.75, smooth=1.0):
        p = torch.sigmoid(logits).flatten(1)
        t = target.flatten(1)
        tp = (p * t).sum(1)
        fn = ((1 - p) * t).sum(1)
        fp = (p * (1 - t)).sum(1)
        tversky = (tp + smooth) / (tp + alpha * fn + beta * fp + smooth)
        return ((1 - tversky) ** gamma).mean()

    model = env.init(TinyUNet())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    images = env.randn(8, 1, 8, 8)
    masks = (F.avg_pool2d(images, 3, stride=1, padding=1) > 0.3).float()

    def train_step(x, m):
        logits = model(x)
        loss = focal_tversky(logits, m) + 0.5 * F.binary_cross_entropy_with_logits(logits, m)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            pred = (logits > 0).float()
            dice = (2 * (pred * m).sum() + 1) / (pred.sum() + m.sum() + 1)
        return loss, dice

    step = env.step(train_step)
    history = []
    for epoch in range(3):
        for i in range(0, 8, 4):
            loss, dice = step(images[i:i + 4], masks[i:i + 4])
            history.append((loss.item(), dice.item()))
    env.rec("history", history)
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"ldam_drw": ldam_drw, "manifold_mixup": manifold_mixup, "self_paced": self_paced,
            "focal_tversky_segmentation": focal_tversky_segmentation}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
