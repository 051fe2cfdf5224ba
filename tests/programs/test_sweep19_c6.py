"""Sweep 19 (C), part 6: contrastive and retrieval losses of recent papers: SigLIP's pairwise
sigmoid loss (labels 2*eye-1, a learnable log temperature and bias, logsigmoid summed over
the batch), a two-tower recommender trained with in-batch negatives and the logQ correction
(item frequencies subtracted from the logits, the accidental positives masked with
masked_fill), and Matryoshka representation learning (one head per nested prefix of the
embedding, losses weighted and summed). Run with PyTorch, with llgrad eagerly and with
llgrad.compile (tutorial_harness.py)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def siglip(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Towers(nn.Module):
        def __init__(self):
            super().__init__()
            self.img = nn.Sequential(nn.Linear(10, 16), nn.GELU(approximate="tanh"), nn.Linear(16, 8))
            self.txt = nn.Sequential(nn.Embedding(20, 8), nn.Flatten(), nn.Linear(24, 8))
            self.t_prime = nn.Parameter(torch.tensor(math.log(10.0)))
            self.b = nn.Parameter(torch.tensor(-10.0))

        def forward(self, img, txt):
            zimg = F.normalize(self.img(img), dim=-1)
            ztxt = F.normalize(self.txt(txt), dim=-1)
            logits = zimg @ ztxt.t() * self.t_prime.exp() + self.b
            return logits

    model = env.init(Towers())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)

    def sigmoid_loss(logits):
        n = logits.size(0)
        labels = 2 * torch.eye(n) - torch.ones(n, n)
        return -torch.sum(F.logsigmoid(labels * logits)) / n

    def train_step(img, txt):
        logits = model(img, txt)
        loss = sigmoid_loss(logits)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, logits.detach()
    train_step = env.step(train_step)
    for i in range(5):
        img, txt = env.randn(8, 10), env.randint(0, 20, (8, 3))
        loss, logits = train_step(img, txt)
        env.rec(f"loss{i}", loss)
        env.rec(f"acc{i}", (logits.argmax(1) == torch.arange(8)).float().mean())
    env.rec("t, b", (model.t_prime, model.b))
    env.rec("params", list(model.parameters()))


def two_tower_logq(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_users, n_items, D = 15, 25, 8
    counts = np.bincount(np.random.default_rng(1).zipf(1.6, 400) % n_items, minlength=n_items) + 1
    item_prob = torch.tensor(counts / counts.sum(), dtype=torch.float32)

    class Tower(nn.Module):
        def __init__(self, n, n_feat):
            super().__init__()
            self.id_emb = nn.Embedding(n, D)
            self.feat = nn.Linear(n_feat, D)
            self.mlp = nn.Sequential(nn.ReLU(), nn.Linear(D, D))

        def forward(self, ids, feats):
            return F.normalize(self.mlp(self.id_emb(ids) + self.feat(feats)), p=2, dim=1)

    user_tower, item_tower = env.init(Tower(n_users, 4)), env.init(Tower(n_items, 3))
    params = list(user_tower.parameters()) + list(item_tower.parameters())
    opt = torch.optim.Adagrad(params, lr=0.1)
    temperature = 0.05

    def train_step(u, uf, it, itf):
        q = user_tower(u, uf)
        c = item_tower(it, itf)
        logits = q @ c.T / temperature
        logits = logits - torch.log(item_prob[it]).unsqueeze(0)
        # the same item twice in a batch: the other copy is not a negative
        dup = (it.unsqueeze(0) == it.unsqueeze(1)) & ~torch.eye(len(it), dtype=torch.bool)
        logits = logits.masked_fill(dup, float("-inf"))
        loss = F.cross_entropy(logits, torch.arange(len(u)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(5):
        u, it = env.randint(0, n_users, (12,)), env.randint(0, n_items, (12,))
        env.rec(f"loss{i}", train_step(u, env.randn(12, 4), it, env.randn(12, 3)))
    env.rec("params", params)
    with torch.no_grad():
        all_items = item_tower(torch.arange(n_items), torch.zeros(n_items, 3))
        scores = user_tower(torch.arange(3), torch.zeros(3, 4)) @ all_items.T
        env.rec("top5", scores.topk(5, dim=1).indices)


def matryoshka(torch, env):
    nn, F = torch.nn, torch.nn.functional
    nesting = [2, 4, 8, 16]

    class MRL_Linear_Layer(nn.Module):
        def __init__(self, nesting_list, num_classes=5):
            super().__init__()
            self.nesting_list = nesting_list
            for i, num_feat in enumerate(self.nesting_list):
                setattr(self, f"nesting_classifier_{i}", nn.Linear(num_feat, num_classes))

        def forward(self, x):
            nesting_logits = ()
            for i, num_feat in enumerate(self.nesting_list):
                nesting_logits += (getattr(self, f"nesting_classifier_{i}")(x[:, :num_feat]),)
            return nesting_logits

    class Matryoshka_CE_Loss(nn.Module):
        def __init__(self, relative_importance=None, **kwargs):
            super().__init__()
            self.criterion = nn.CrossEntropyLoss(**kwargs)
            self.relative_importance = relative_importance

        def forward(self, output, target):
            losses = torch.stack([self.criterion(o, target) for o in output])
            rel = torch.ones_like(losses) if self.relative_importance is None \
                else torch.tensor(self.relative_importance)
            return (rel * losses).sum()

    backbone = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(2), nn.Flatten())
    model = env.init(nn.Sequential(backbone, MRL_Linear_Layer(nesting)))
    criterion = Matryoshka_CE_Loss(relative_importance=[1.0, 1.0, 0.5, 0.5], label_smoothing=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    def train_step(x, y):
        model.train()
        out = model(x)
        loss = criterion(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, [o.argmax(1) for o in out]
    train_step = env.step(train_step)
    x, y = env.randn(10, 1, 6, 6), env.randint(0, 5, (10,))
    for i in range(5):
        env.rec(f"step{i}", train_step(x, y))
    model.eval()
    with torch.no_grad():
        env.rec("eval", [F.softmax(o, -1) for o in model(x)])
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [siglip, two_tower_logq, matryoshka])
def test_contrastive_retrieval(program):
    run_tutorial(program)
