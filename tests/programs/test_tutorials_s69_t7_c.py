"""Sweep 69 (t7), file c: pytorch.org recipes and nanoGPT-style training loops, run with
PyTorch, with llgrad eagerly and with llgrad compiling the step through tutorial_harness.py.

- the "Compiled optimizer" / "LR scheduler with compiled optimizer" recipes: the optimizer's
  step and the scheduler's step together in the compiled function (`def fn(): opt.step();
  sched.step()`), Adam with a tensor lr stepped by LinearLR, the backward left eager;
- nanoGPT's loop at toy size: the token embedding tied to the output layer
  (`self.wte.weight = self.lm_head.weight`), configure_optimizers' decay / no-decay groups by
  `p.dim() >= 2`, get_lr's warmup-then-cosine written into each param_group, gradient
  accumulation over micro-steps (`loss / gradient_accumulation_steps` in a compiled
  micro-step), clip_grad_norm_ and zero_grad(set_to_none=True);
- transfer learning: a frozen backbone (requires_grad = False, the optimizer given
  `filter(lambda p: p.requires_grad, ...)`), unfrozen mid-training with
  optimizer.add_param_group at a lower lr, the step compiled throughout;
- a padded tagger: CrossEntropyLoss with both ignore_index and label_smoothing, heads in an
  nn.ModuleDict chosen by a Python key, a ParameterList of per-task scales, early stopping
  keeping `copy.deepcopy(model.state_dict())` and ReduceLROnPlateau on the validation loss;
- reproducibility: `torch.manual_seed(s)` then a dropout model trained twice from the same
  state gives the same losses (the compiled run too), and eval under no_grad with accuracy by
  argmax / eq / sum().item()."""
import copy
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def compiled_optimizer_recipe(torch, env):
    nn = torch.nn
    model = env.init(nn.Sequential(*[nn.Linear(16, 16) for _ in range(3)]))
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    sched = torch.optim.lr_scheduler.LinearLR(opt, total_iters=5)

    def fn():
        opt.step()
        sched.step()

    fn = env.step(fn)
    x = env.randn(8, 16)
    for i in range(7):
        output = model(x).sum()
        output.backward()
        fn()
        opt.zero_grad()
        env.rec(f"lr {i}", (opt.param_groups[0]["lr"], sched.get_last_lr()[0]))
        env.rec(f"out {i}", output)
    env.rec("params", dict(model.state_dict()))
    env.rec("step", [opt.state[p]["step"] for p in model.parameters()])
    if env.compiled:
        assert fn.n_traces <= 2, fn.n_traces


def nanogpt_loop(torch, env):
    nn, F = torch.nn, torch.nn.functional
    vocab, block, n_embd = 11, 6, 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            # (bias=False, nanoGPT's config.bias: a key bias gets only rounding noise as its
            # gradient, which AdamW would turn into full-size steps of no meaning)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                     nn.Linear(4 * n_embd, n_embd))
            self.register_buffer("bias", torch.tril(torch.ones(block, block))
                                 .view(1, 1, block, block))

        def attn(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            q = q.view(B, T, 2, C // 2).transpose(1, 2)
            k = k.view(B, T, 2, C // 2).transpose(1, 2)
            v = v.view(B, T, 2, C // 2).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(2)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [{'params': decay_params, 'weight_decay': weight_decay},
                            {'params': nodecay_params, 'weight_decay': 0.0}]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    model = env.init(GPT())
    env.rec("tied", model.wte.weight is model.lm_head.weight)
    env.rec("n params", sum(p.numel() for p in model.parameters()))
    learning_rate, min_lr, warmup_iters, lr_decay_iters = 6e-3, 6e-4, 2, 8
    optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.95))
    grad_accum, grad_clip = 2, 1.0

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    def micro_step(X, Y):
        logits, loss = model(X, Y)
        loss = loss / grad_accum
        loss.backward()
        return loss

    micro_step = env.step(micro_step)
    data = env.randint(0, vocab, (200,))

    def get_batch(i):
        ix = [(7 * i + 13 * j) % (200 - block - 1) for j in range(4)]
        x = torch.stack([data[k:k + block] for k in ix])
        y = torch.stack([data[k + 1:k + 1 + block] for k in ix])
        y[:, 0] = -1 if i % 3 == 0 else y[:, 0]        # (an ignored position now and then)
        return x, y

    for it in range(10):
        lr = get_lr(it)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        total = 0.0
        for m in range(grad_accum):
            X, Y = get_batch(it * grad_accum + m)
            total += micro_step(X, Y).item()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        env.rec(f"iter {it}", f"loss {total:.5f} norm {norm.item():.5f} lr {lr:.6f}")
    env.rec("params", dict(model.state_dict()))
    env.rec("still tied", model.wte.weight is model.lm_head.weight)
    if env.compiled:        # (.grad None at each first micro-step, then accumulating)
        assert micro_step.n_traces <= 2, micro_step.n_traces


def freeze_unfreeze(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                          nn.Linear(32, 16), nn.ReLU())
            self.head = nn.Linear(16, 3)

        def forward(self, x):
            return self.head(self.backbone(x))

    model = env.init(Classifier())
    for param in model.backbone.parameters():
        param.requires_grad = False
    optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()),
                                lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_step)
    X, Y = env.randn(40, 10), env.randint(0, 3, (40,))
    for epoch in range(4):
        if epoch == 2:
            for param in model.backbone.parameters():
                param.requires_grad = True
            optimizer.add_param_group({"params": model.backbone.parameters(), "lr": 0.01})
        for i in range(0, 40, 20):
            env.rec(f"epoch {epoch} loss {i}", step(X[i:i + 20], Y[i:i + 20]))
        model.eval()
        with torch.no_grad():
            correct = (model(X).argmax(1) == Y).sum().item()
        env.rec(f"epoch {epoch} acc", correct / len(Y))
        env.rec(f"epoch {epoch} trainable",
                sum(p.numel() for p in model.parameters() if p.requires_grad))
    env.rec("params", dict(model.state_dict()))
    env.rec("momentum", [optimizer.state[p]["momentum_buffer"]
                         for g in optimizer.param_groups for p in g["params"]])
    if env.compiled:
        assert step.n_traces <= 4, step.n_traces


def padded_tagger_early_stop(torch, env):
    nn = torch.nn
    PAD = 0

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 8, padding_idx=PAD)
            self.rnn = nn.GRU(8, 12, batch_first=True)
            self.heads = nn.ModuleDict({"pos": nn.Linear(12, 5), "ner": nn.Linear(12, 4)})
            self.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in range(2)])

        def forward(self, tokens, task):
            h, _ = self.rnn(self.emb(tokens))
            k = 0 if task == "pos" else 1
            return self.heads[task](h) * self.scales[k]

    model = env.init(Tagger())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5,
                                                       patience=0)
    losses = {"pos": nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1),
              "ner": nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.2)}

    def train_step(tokens, tags, task):
        logits = model(tokens, task)
        loss = losses[task](logits.reshape(-1, logits.size(-1)), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    tokens = env.randint(1, 12, (24, 7))
    lengths = [7 - (i % 4) for i in range(24)]
    for i, n in enumerate(lengths):
        tokens[i, n:] = PAD
    tags = {"pos": env.randint(0, 5, (24, 7)), "ner": env.randint(0, 4, (24, 7))}
    for t in tags.values():
        t[tokens == PAD] = -100
    best, best_state, bad, patience = float("inf"), None, 0, 2
    for epoch in range(6):
        model.train()
        for task in ("pos", "ner"):
            env.rec(f"epoch {epoch} {task}", step(tokens[:16], tags[task][:16], task))
        model.eval()
        with torch.no_grad():
            val = sum(losses[t](model(tokens[16:], t).reshape(-1, 5 if t == "pos" else 4),
                                tags[t][16:].reshape(-1)).item() for t in ("pos", "ner"))
        sched.step(val)
        env.rec(f"epoch {epoch} val", (val, opt.param_groups[0]["lr"]))
        if val < best:
            best, best_state, bad = val, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= patience:
                env.rec("stopped at", epoch)
                break
    model.load_state_dict(best_state)
    env.rec("best", best)
    env.rec("restored", dict(model.state_dict()))
    with torch.no_grad():
        pred = model(tokens, "pos").argmax(-1)
        mask = tags["pos"] != -100
        env.rec("acc", (pred[mask] == tags["pos"][mask]).float().mean().item())
    if env.compiled:
        assert step.n_traces <= 4, step.n_traces


def seed_reproducibility(torch, env):
    nn, F = torch.nn, torch.nn.functional
    start = env.init(nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.3),
                                   nn.Linear(32, 2))).state_dict()
    start = copy.deepcopy(start)
    X, Y = env.randn(24, 6), env.randint(0, 2, (24,))

    def run(seed):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 2))
        model.load_state_dict(start)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        step = env.step(step)
        losses = [step(X[i:i + 8], Y[i:i + 8]) for _ in range(2) for i in range(0, 24, 8)]
        model.eval()
        with torch.no_grad():
            acc = (model(X).argmax(dim=1) == Y).sum().item() / len(Y)
        return losses, acc, model

    a, acc_a, model_a = run(7)
    b, acc_b, model_b = run(7)
    c, _, _ = run(8)
    env.rec("same seed same losses", a == b)
    env.rec("other seed other losses", a != c)
    env.rec("acc equal", acc_a == acc_b)
    env.rec("losses", a, cross=False)
    env.rec("params", dict(model_a.state_dict()), cross=False)


PROGRAMS = {"compiled_optimizer_recipe": compiled_optimizer_recipe,
            "nanogpt_loop": nanogpt_loop,
            "freeze_unfreeze": freeze_unfreeze,
            "padded_tagger_early_stop": padded_tagger_early_stop,
            "seed_reproducibility": seed_reproducibility}


# (2-6 s each, cold)
@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=("nanogpt_loop", "freeze_unfreeze", "padded_tagger_early_stop")))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
