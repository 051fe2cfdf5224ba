"""Sweep 17b (H), part 7: one compiled training step (micro-batch loop, label smoothing,
clip_grad_norm_, AdamW on tied weights, an EMA copy by _foreach_lerp_) called while the
program freezes and unfreezes a layer, sets dropout's p and switches to eval() between calls.
Run with PyTorch, with llgrad eagerly and
compiled (tutorial_harness.py)."""
import math  # noqa: F401

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def guards(torch, env):
    nn = torch.nn
    F = nn.functional
    V, D = 11, 8

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.l1 = nn.Linear(D, D)
            self.drop = nn.Dropout(0.2)
            self.ln = nn.LayerNorm(D)
            self.out = nn.Linear(D, V)
            self.out.weight = self.emb.weight

        def forward(self, x):
            return self.out(self.ln(self.drop(F.gelu(self.l1(self.emb(x))))))

    model = env.init(M())
    ema = env.init(M())
    ema.load_state_dict(model.state_dict())
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 3) * 0.5 ** (s // 4))
    data = env.randint(0, V, (4, 2, 3, 6))

    def train_step(x, accum):
        opt.zero_grad(set_to_none=True)
        tot = 0.0
        for m in range(accum):
            xb = x[m]
            logits = model(xb[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, V), xb[:, 1:].reshape(-1),
                                   label_smoothing=0.05) / accum
            loss.backward()
            tot = tot + loss.detach()
        gn = nn.utils.clip_grad_norm_(model.parameters(), 0.3)
        opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.2)
        return tot, gn
    step = env.step(train_step)
    torch.manual_seed(3)
    for it in range(8):
        if it == 3:
            model.l1.requires_grad_(False)   # freeze a layer mid-training
        if it == 5:
            model.l1.requires_grad_(True)
            model.drop.p = 0.0
        if it == 6:
            model.eval()
        tot, gn = step(data[it % 4], 2 if it < 4 else 1)
        sched.step()
        env.rec(f"loss{it}", tot)
        env.rec(f"gn{it}", gn)
        env.rec(f"lr{it}", opt.param_groups[0]["lr"])
        env.rec(f"l1{it}", model.l1.weight)
        env.rec(f"l1grad{it}", model.l1.weight.grad)
        env.rec(f"ema{it}", ema.l1.bias)
        model.train()
    env.rec("state", opt.state_dict()["state"][2]["exp_avg_sq"])
    env.rec("steps", [s["step"] for s in opt.state_dict()["state"].values()])


def test_freeze_unfreeze_eval_mid_training():
    run_tutorial(guards)
