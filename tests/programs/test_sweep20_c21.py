"""Sweep 20 (C), part 21: fine-tuning and domain adaptation. Progressive unfreezing: a
pretrained backbone frozen with requires_grad_(False), the head trained alone, then the last
backbone block unfrozen mid-run and given to the optimizer with add_param_group at a lower
lr (discriminative learning rates), the frozen BatchNorm kept in eval() while the rest
trains. Then DANN: a gradient reversal layer as an autograd.Function whose backward returns
grad_output.neg() * ctx.alpha (alpha from the schedule 2 / (1 + exp(-10 p)) - 1 passed in
each step), a domain classifier on reversed features and a label classifier, and an
nn.Embedding(max_norm=1.0) (rows renormalised in place at lookup) with an optimizer of its
own beside Adam for the rest (llgrad has no sparse gradients: Embedding(sparse=True) and
SparseAdam raise NotImplementedError). Run with PyTorch, with llgrad eagerly and with
llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def progressive_unfreezing(torch, env):
    nn, F = torch.nn, torch.nn.functional
    backbone = nn.Sequential(
        nn.Sequential(nn.Linear(6, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU()),
        nn.Sequential(nn.Linear(16, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU()))
    head = nn.Linear(16, 3)
    env.init(backbone)
    env.init(head)
    backbone.requires_grad_(False)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-2)
    X, y = env.randn(24, 6), env.randint(0, 3, (24,))

    def set_modes():
        backbone.eval()
        for block in backbone:
            if any(p.requires_grad for p in block.parameters()):
                block.train()
        head.train()

    def train_step(x, y):
        set_modes()
        loss = F.cross_entropy(head(backbone(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for epoch in range(4):
        if epoch == 2:
            backbone[1].requires_grad_(True)
            opt.add_param_group({"params": backbone[1].parameters(), "lr": 1e-3})
        for b in range(2):
            env.rec(f"e{epoch}b{b}", train_step(X[b * 12:(b + 1) * 12], y[b * 12:(b + 1) * 12]))
    env.rec("backbone", backbone.state_dict())
    env.rec("head", head.state_dict())
    env.rec("frozen grads", [p.grad is None for p in backbone[0].parameters()])
    env.rec("groups", [len(g["params"]) for g in opt.param_groups])


def dann_sparse(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class GradReverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output.neg() * ctx.alpha, None

    class DANN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8, max_norm=1.0)
            self.features = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
            self.label_clf = nn.Linear(16, 3)
            self.domain_clf = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, ids, alpha):
            f = self.features(self.emb(ids).mean(1))
            return self.label_clf(f), self.domain_clf(GradReverse.apply(f, alpha)).squeeze(1)

    model = env.init(DANN())
    # (llgrad has no sparse gradients: Embedding(sparse=True) and SparseAdam raise)
    sparse_opt = torch.optim.SGD(list(model.emb.parameters()), lr=0.1, momentum=0.9)
    dense = [p for n, p in model.named_parameters() if not n.startswith("emb.")]
    dense_opt = torch.optim.Adam(dense, lr=1e-2)
    src, tgt = env.randint(0, 20, (6, 4)), env.randint(0, 20, (6, 4))
    y_src = env.randint(0, 3, (6,))

    def train_step(src, tgt, y_src, alpha):
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        ls, ds = model(src, alpha)
        _, dt = model(tgt, alpha)
        loss = F.cross_entropy(ls, y_src) + F.binary_cross_entropy_with_logits(
            torch.cat([ds, dt]), torch.cat([torch.zeros(6), torch.ones(6)]))
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        return loss
    train_step = env.step(train_step)
    n = 5
    for i in range(n):
        p = i / n
        alpha = 2.0 / (1.0 + math.exp(-10 * p)) - 1
        env.rec(f"step{i}", train_step(src, tgt, y_src, alpha))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [progressive_unfreezing, dann_sparse])
def test_finetune(program):
    run_tutorial(program)
