"""Sweep 19 (C), part 11: classification losses from papers' reference code: R-Drop (the
batch run twice through dropout, cross-entropy on both plus the symmetric KL of the two
log-softmaxes with F.kl_div(reduction="none") and pad-masking by masked_fill_), the
class-balanced focal loss (the effective number of samples (1 - beta^n) / (1 - beta) per
class from a NumPy count, one-hot labels, the focal modulator written with exp and log1p)
and PolyLoss (cross-entropy plus epsilon * (1 - pt) with label smoothing). Run with PyTorch,
with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def r_drop(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, PAD = 12, 0

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 8, padding_idx=PAD)
            self.drop = nn.Dropout(0.3)
            self.fc = nn.Linear(8, 4)

        def forward(self, ids):
            mask = (ids != PAD).float().unsqueeze(-1)
            h = (self.emb(ids) * mask).sum(1) / mask.sum(1).clamp(min=1)
            return self.fc(self.drop(torch.tanh(h)))

    def compute_kl_loss(p, q, pad_mask=None):
        p_loss = F.kl_div(F.log_softmax(p, dim=-1), F.softmax(q, dim=-1), reduction="none")
        q_loss = F.kl_div(F.log_softmax(q, dim=-1), F.softmax(p, dim=-1), reduction="none")
        if pad_mask is not None:
            p_loss.masked_fill_(pad_mask, 0.)
            q_loss.masked_fill_(pad_mask, 0.)
        p_loss = p_loss.sum()
        q_loss = q_loss.sum()
        return (p_loss + q_loss) / 2

    model = env.init(Classifier())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids, label = env.randint(0, V, (6, 5)), env.randint(0, 4, (6,))
    ignore = (label == 3).unsqueeze(-1)          # (a class left out of the consistency term)

    def train_step(ids, label, alpha):
        logits = model(ids)
        logits2 = model(ids)
        ce_loss = 0.5 * (F.cross_entropy(logits, label) + F.cross_entropy(logits2, label))
        kl_loss = compute_kl_loss(logits, logits2, ignore)
        loss = ce_loss + alpha * kl_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, kl_loss
    train_step = env.step(train_step)
    model.eval()        # (no dropout: the consistency term is 0, and torch's numbers hold)
    for i in range(3):
        env.rec(f"eval step{i}", train_step(ids, label, 4.0))
    model.train()
    torch.manual_seed(5)
    for i in range(3):
        env.rec(f"train step{i}", train_step(ids, label, 4.0), cross=False)
    env.rec("params", list(model.parameters()), cross=False)


def class_balanced_focal(torch, env):
    nn, F = torch.nn, torch.nn.functional
    no_of_classes = 4
    samples_per_cls = [40, 12, 5, 2]

    def focal_loss(labels, logits, alpha, gamma):
        BCLoss = F.binary_cross_entropy_with_logits(input=logits, target=labels, reduction="none")
        if gamma == 0.0:
            modulator = 1.0
        else:
            modulator = torch.exp(-gamma * labels * logits - gamma * torch.log(1 + torch.exp(-1.0 * logits)))
        loss = modulator * BCLoss
        weighted_loss = alpha * loss
        focal_loss = torch.sum(weighted_loss)
        focal_loss /= torch.sum(labels)
        return focal_loss

    def CB_loss(labels, logits, samples_per_cls, no_of_classes, loss_type, beta, gamma):
        effective_num = 1.0 - np.power(beta, samples_per_cls)
        weights = (1.0 - beta) / np.array(effective_num)
        weights = weights / np.sum(weights) * no_of_classes
        labels_one_hot = F.one_hot(labels, no_of_classes).float()
        weights = torch.tensor(weights).float()
        weights = weights.unsqueeze(0)
        weights = weights.repeat(labels_one_hot.shape[0], 1) * labels_one_hot
        weights = weights.sum(1)
        weights = weights.unsqueeze(1)
        weights = weights.repeat(1, no_of_classes)
        if loss_type == "focal":
            return focal_loss(labels_one_hot, logits, weights, gamma)
        elif loss_type == "sigmoid":
            return F.binary_cross_entropy_with_logits(input=logits, target=labels_one_hot, weight=weights)
        pred = logits.softmax(dim=1)
        return F.binary_cross_entropy(input=pred, target=labels_one_hot, weight=weights)

    def poly1_cross_entropy(logits, labels, epsilon=1.0, label_smoothing=0.1):
        labels_onehot = F.one_hot(labels, num_classes=logits.size(-1)).to(device=logits.device,
                                                                            dtype=logits.dtype)
        pt = torch.sum(labels_onehot * F.softmax(logits, dim=-1), dim=-1)
        CE = F.cross_entropy(input=logits, target=labels, reduction="none",
                             label_smoothing=label_smoothing)
        return (CE + epsilon * (1 - pt)).mean()

    model = env.init(nn.Sequential(nn.Linear(6, 16), nn.SiLU(), nn.Linear(16, no_of_classes)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    X = env.randn(20, 6)
    y = torch.tensor(np.repeat(np.arange(4), [10, 5, 3, 2]))

    def train_step(X, y, loss_type):
        logits = model(X)
        if loss_type == "poly":
            loss = poly1_cross_entropy(logits, y)
        else:
            loss = CB_loss(y, logits, samples_per_cls, no_of_classes, loss_type, 0.9999, 2.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i, kind in enumerate(["focal", "focal", "sigmoid", "softmax", "poly", "focal", "poly"]):
        env.rec(f"{kind}{i}", train_step(X, y, kind))
    env.rec("params", list(model.parameters()))
    env.rec("gamma 0", CB_loss(y, model(X), samples_per_cls, no_of_classes, "focal", 0.99, 0.0))


@pytest.mark.parametrize("program", [r_drop, class_balanced_focal])
def test_classification_losses(program):
    run_tutorial(program)
