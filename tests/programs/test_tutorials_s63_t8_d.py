"""Sweep 63 (t8), file d: steps that write buffers by index under no_grad and toggle modes
and random state inside the step, run with PyTorch, with llgrad eagerly and with llgrad
compiling the whole step through tutorial_harness.py.

- instance discrimination with a memory bank (Wu et al. 2018, NPID): a (N, d) bank buffer
  read by `self.memory[idx]`, momentum-updated and written back by `self.memory[idx] =
  F.normalize(pos)` under no_grad, a register_buffer step counter, dropout after a
  torch.manual_seed per step, .item() logging; with the manual_seed inside the step the
  compiled call runs eagerly with its warning (asserted);
- FixMatch-style pseudo-labelling: model.eval() and no_grad for the pseudo-labels, then
  model.train() inside the same step, a confidence mask from .ge(threshold).float(),
  torch.where with Python scalars, a cosine learning rate set by hand on
  optimizer.param_groups[0]['lr'] each step, nn.ModuleDict heads, an nn.ParameterList of
  per-class temperatures and clip_grad_value_."""
import copy
import math

import pytest

import llgrad

torch = pytest.importorskip("torch")

import tutorial_harness  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def npid_memory_bank(torch, env, dropout=0.2, seed_inside=False):
    nn, F = torch.nn, torch.nn.functional
    n_data, d, temperature, momentum = 24, 8, 0.1, 0.5

    class MemoryBank(nn.Module):
        def __init__(self, init):
            super().__init__()
            self.register_buffer("memory", F.normalize(init, dim=1))
            self.register_buffer("updates", torch.zeros((), dtype=torch.long))

        def forward(self, features):
            return features @ self.memory.t() / temperature

        @torch.no_grad()
        def update(self, features, idx):
            pos = self.memory[idx]
            pos.mul_(momentum).add_(features.detach() * (1 - momentum))
            self.memory[idx] = F.normalize(pos, dim=1)
            self.updates += 1

    model = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(dropout),
                                   nn.Linear(16, d)))
    bank = MemoryBank(env.randn(n_data, d))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    log = []

    def train_step(x, idx, seed):
        if seed_inside:
            torch.manual_seed(seed)
        features = F.normalize(model(x), dim=1)
        logits = bank(features)
        loss = F.cross_entropy(logits, idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        bank.update(features, idx)
        log.append(f"step {int(bank.updates)} loss {loss.item():.4f}")
        return loss.detach()

    step = env.step(train_step)
    data = env.randn(n_data, 6)
    # (dropout masks come from the library's stream: compared between llgrad runs only)
    cross = dropout == 0
    for it in range(4):
        idx = env.randint(0, n_data, (8,))
        if not seed_inside:
            torch.manual_seed(100 + it)
        env.rec(f"step {it}", step(data[idx], idx, 100 + it), cross=cross)
    env.rec("log", log, cross=cross)
    env.rec("bank", dict(bank.state_dict()), cross=cross)
    env.rec("params", dict(model.state_dict()), cross=cross)


def fixmatch_pseudo_label(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_classes, threshold, total_steps, base_lr = 3, 0.6, 6, 0.05

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(5, 16), nn.BatchNorm1d(16), nn.ReLU())
            self.heads = nn.ModuleDict({"cls": nn.Linear(16, n_classes),
                                        "aux": nn.Linear(16, 1)})
            self.temps = nn.ParameterList([nn.Parameter(torch.ones(1))
                                           for _ in range(n_classes)])

        def forward(self, x):
            h = self.body(x)
            logits = self.heads["cls"](h) / torch.cat(list(self.temps))
            return logits, self.heads["aux"](h).squeeze(-1)

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9, nesterov=True)
    state = {"step": 0}

    def train_step(x_l, y_l, x_weak, x_strong):
        lr = base_lr * math.cos(7 * math.pi * state["step"] / (16 * total_steps))
        opt.param_groups[0]["lr"] = lr
        model.eval()
        with torch.no_grad():
            probs = torch.softmax(model(x_weak)[0], dim=-1)
            max_probs, targets_u = torch.max(probs, dim=-1)
            mask = max_probs.ge(threshold).float()
        model.train()
        logits_l, aux_l = model(x_l)
        logits_s, _ = model(x_strong)
        loss_x = F.cross_entropy(logits_l, y_l)
        loss_u = (F.cross_entropy(logits_s, targets_u, reduction="none") * mask).mean()
        aux_target = torch.where(y_l == 0, 1.0, -1.0)
        loss = loss_x + loss_u + 0.1 * F.mse_loss(aux_l, aux_target)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        state["step"] += 1
        return loss.detach(), mask.sum(), targets_u, model.training

    step = env.step(train_step)
    w = env.randn(5, n_classes)
    for it in range(total_steps):
        x_l, x_u = env.randn(8, 5), env.randn(16, 5)
        env.rec(f"step {it}", step(x_l, (x_l @ w).argmax(1), x_u,
                                   x_u + env.randn(16, 5, scale=0.3)))
        env.rec(f"lr {it}", opt.param_groups[0]["lr"])
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


@pytest.mark.parametrize("program", [npid_memory_bank, fixmatch_pseudo_label],
                         ids=lambda p: p.__name__)
def test_program(program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)


def test_npid_without_dropout_gives_torchs_numbers():
    run_tutorial(lambda torch, env: npid_memory_bank(torch, env, dropout=0.0),
                 rtol=1e-4, atol=1e-5)


def test_npid_manual_seed_inside_the_step_runs_eagerly_with_the_warning():
    # (manual_seed inside a compiled function is a documented fallback: the step runs
    # eagerly, warned, and its dropout masks are eager's)
    program = lambda torch, env: npid_memory_bank(torch, env, seed_inside=True)  # noqa: E731
    states = []
    tenv = tutorial_harness.Env(torch, "torch", states)
    torch.manual_seed(0)
    program(torch, tenv)
    eager = tutorial_harness._run_llgrad(program, "eager", copy.deepcopy(states), 0)
    compiled = tutorial_harness.Env(llgrad, "compiled", copy.deepcopy(states))
    llgrad.manual_seed(0)
    with pytest.warns(Warning, match=r"manual_seed\(\)"):
        program(llgrad, compiled)
    tutorial_harness.compare(eager.records, compiled.records, "compiled vs eager", False,
                             0.0, 0.0)
