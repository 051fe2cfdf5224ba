"""Sweep 20 (C), part 9: a padded-text classifier and a training-loop toolkit. The classifier:
nn.MultiheadAttention(batch_first=True) with key_padding_mask = (tokens == PAD), the
averaged attention weights returned (need_weights=True) and checked to be zero on padding,
masked mean pooling with the mask's sum clamped, and model.train()/eval() switches around
an accuracy loop. The toolkit: a TensorDataset read by a DataLoader without drop_last (a
ragged last batch), mixup with a lambda from a Beta draw given by the program and a
permutation from the program's stream, gradient accumulation (loss / accum, the step every
accum batches and at the epoch's end), OneCycleLR stepped after each optimizer step, an EMA
copy of the model updated with `ema_p.lerp_(p, 1 - decay)` under no_grad and its buffers
copied, and the EMA model evaluated. Run with PyTorch, with llgrad eagerly and with
llgrad.compile (tutorial_harness.py)."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def padded_mha(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, PAD = 20, 16, 0

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=PAD)
            self.attn = nn.MultiheadAttention(D, 4, batch_first=True)
            self.norm = nn.LayerNorm(D)
            self.fc = nn.Linear(D, 3)

        def forward(self, tokens):
            mask = tokens == PAD
            x = self.emb(tokens)
            h, w = self.attn(x, x, x, key_padding_mask=mask, need_weights=True)
            h = self.norm(x + h)
            keep = (~mask).unsqueeze(-1).float()
            pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)
            return self.fc(pooled), w

    model = env.init(Classifier())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    tokens = env.randint(1, V, (6, 7))
    lengths = [7, 4, 2, 6, 5, 3]
    for i, n in enumerate(lengths):
        tokens[i, n:] = PAD
    labels = env.randint(0, 3, (6,))

    def train_step(tokens, labels):
        model.train()
        logits, w = model(tokens)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, w
    train_step = env.step(train_step)
    for i in range(4):
        loss, w = train_step(tokens, labels)
        env.rec(f"loss{i}", loss)
    env.rec("weights", w)
    env.rec("pad weight", float(w.masked_select((tokens == PAD).unsqueeze(1).expand_as(w)).abs().max()))

    @torch.no_grad()
    def evaluate(tokens, labels):
        model.eval()
        logits, _ = model(tokens)
        correct = (logits.argmax(1) == labels).sum().item()
        return correct / labels.numel(), logits
    env.rec("eval", env.step(evaluate)(tokens, labels))
    # (the key bias's gradient is rounding noise, softmax being shift-invariant, which Adam
    # scales to lr-sized steps: only its query and value parts are compared)
    state = model.state_dict()
    b = state.pop("attn.in_proj_bias")
    env.rec("state", state)
    env.rec("qv bias", torch.cat([b[:D], b[2 * D:]]))


def training_toolkit(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from importlib import import_module
    data = import_module(torch.__name__ + ".utils.data")
    X, y = env.randn(22, 8), env.randint(0, 3, (22,))
    loader = data.DataLoader(data.TensorDataset(X, y), batch_size=5, shuffle=False)
    env.rec("batches", len(loader))
    model = env.init(nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3)))
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    accum, epochs, decay = 2, 2, 0.9
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    steps_per_epoch = (len(loader) + accum - 1) // accum
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, epochs=epochs,
                                                steps_per_epoch=steps_per_epoch)

    def forward_backward(xb, yb, perm, lam):
        mixed = lam * xb + (1 - lam) * xb[perm]
        out = model(mixed)
        loss = lam * F.cross_entropy(out, yb) + (1 - lam) * F.cross_entropy(out, yb[perm])
        (loss / accum).backward()
        return loss.detach()

    def optimizer_step():
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        with torch.no_grad():
            for ema_p, p in zip(ema.parameters(), model.parameters()):
                ema_p.lerp_(p, 1 - decay)
            for ema_b, b in zip(ema.buffers(), model.buffers()):
                ema_b.copy_(b)
    forward_backward, optimizer_step = env.step(forward_backward), env.step(optimizer_step)
    history = []
    for epoch in range(epochs):
        model.train()
        running = 0.0
        for i, (xb, yb) in enumerate(loader):
            perm = torch.tensor(env.np.permutation(xb.size(0)))
            lam = float(env.np.beta(0.4, 0.4))
            running += forward_backward(xb, yb, perm, lam).item() * xb.size(0)
            if (i + 1) % accum == 0 or i + 1 == len(loader):
                optimizer_step()
        history.append((running / len(loader.dataset), sched.get_last_lr()[0]))
    env.rec("history", history)
    ema.eval()
    with torch.no_grad():
        env.rec("ema logits", env.step(ema)(X))
    env.rec("model", model.state_dict())
    env.rec("ema", ema.state_dict())


@pytest.mark.parametrize("program", [padded_mha, training_toolkit])
def test_mha_toolkit(program):
    run_tutorial(program)
