"""Sweep 17b (H), part 10: activation checkpointing of transformer blocks
(torch.utils.checkpoint, use_reentrant=False) with dropout inside, in a compiled training
step; the recomputation replays the forward's dropout masks, so the gradients equal an
unchecked model's from the same seed. Run with PyTorch, with llgrad eagerly and compiled
(tutorial_harness.py)."""
import importlib

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def ckpt(torch, env):
    nn = torch.nn
    F = nn.functional
    cp = importlib.import_module(torch.__name__ + ".utils.checkpoint")
    D = 8

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(D)
            self.fc = nn.Linear(D, 2 * D)
            self.drop = nn.Dropout(0.25)
            self.out = nn.Linear(2 * D, D)

        def forward(self, x):
            return x + self.out(self.drop(F.gelu(self.fc(self.ln(x)))))

    class Net(nn.Module):
        def __init__(self, use_ckpt):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(2)])
            self.head = nn.Linear(D, 3)
            self.use_ckpt = use_ckpt

        def forward(self, x):
            for b in self.blocks:
                x = cp.checkpoint(b, x, use_reentrant=False) if self.use_ckpt else b(x)
            return self.head(x.mean(1))

    model = env.init(Net(True))
    ref = env.init(Net(False))
    ref.load_state_dict(model.state_dict())
    x = env.randn(4, 5, D)
    y = env.randint(0, 3, (4,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    step = env.step(step)
    torch.manual_seed(2)
    for i in range(3):
        env.rec(f"loss{i}", step(x, y))
        env.rec(f"g{i}", model.blocks[0].fc.weight.grad)
    # the same draws without checkpointing give the same gradients (the recomputation
    # replays the forward's dropout masks)
    opt.zero_grad()
    torch.manual_seed(9)
    a = F.cross_entropy(model(x), y)
    a.backward()
    torch.manual_seed(9)
    ref.load_state_dict(model.state_dict())
    b = F.cross_entropy(ref(x), y)
    b.backward()
    env.rec("same loss", a)
    env.rec("ckpt grad", model.blocks[1].fc.weight.grad)
    env.rec("plain grad", ref.blocks[1].fc.weight.grad)
    env.rec("same grad", torch.allclose(model.blocks[1].fc.weight.grad,
                                        ref.blocks[1].fc.weight.grad, atol=1e-6))


def test_checkpointed_blocks_with_dropout():
    run_tutorial(ckpt)
