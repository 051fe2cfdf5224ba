"""Sweep 63 (t1), file a: tutorial programs of kinds the earlier sweeps had not written, run
with PyTorch, with llgrad eagerly and with llgrad compiling each whole training step
(forward, loss, backward, optimizer step) through tutorial_harness.py: the same per-step
losses, parameters and gradients, no warning from llgrad (so no eager fallback) and
compiled code for every step.

- gMLP (Liu et al., "Pay Attention to MLPs") text classifier: the spatial gating unit's
  chunk, LayerNorm and a token-mixing Linear over the sequence axis initialised near the
  identity (weight ~ 0, bias 1), AdamW with OneCycleLR;
- a maxout MLP (Goodfellow et al.): Linear to k pieces, view and max over the pieces,
  SGD with momentum and the paper's max-norm constraint by torch.renorm under no_grad
  after every step;
- a relation network (Santoro et al.) on Sort-of-CLEVR-like scenes: CNN feature-map cells
  with their coordinates as objects, every ordered pair by unsqueeze/expand/cat with the
  question, g_theta summed over pairs, f_phi on the sum."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def gmlp_text_classifier(torch, env):
    nn, F = torch.nn, torch.nn.functional
    vocab, seq_len, d_model, d_ffn, n_classes, batch = 30, 12, 16, 32, 3, 8

    class SpatialGatingUnit(nn.Module):
        def __init__(self, d_ffn, seq_len):
            super().__init__()
            self.norm = nn.LayerNorm(d_ffn // 2)
            self.spatial_proj = nn.Conv1d(seq_len, seq_len, kernel_size=1)
            nn.init.constant_(self.spatial_proj.bias, 1.0)

        def forward(self, x):
            u, v = x.chunk(2, dim=-1)
            v = self.norm(v)
            v = self.spatial_proj(v)        # (mixes tokens: channels are the positions)
            return u * v

    class gMLPBlock(nn.Module):
        def __init__(self, d_model, d_ffn, seq_len):
            super().__init__()
            self.norm = nn.LayerNorm(d_model)
            self.channel_proj1 = nn.Linear(d_model, d_ffn)
            self.channel_proj2 = nn.Linear(d_ffn // 2, d_model)
            self.sgu = SpatialGatingUnit(d_ffn, seq_len)

        def forward(self, x):
            residual = x
            x = self.norm(x)
            x = F.gelu(self.channel_proj1(x))
            x = self.sgu(x)
            x = self.channel_proj2(x)
            return x + residual

    class gMLPClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.blocks = nn.Sequential(*[gMLPBlock(d_model, d_ffn, seq_len) for _ in range(2)])
            self.head = nn.Linear(d_model, n_classes)

        def forward(self, tokens):
            x = self.blocks(self.embed(tokens))
            return self.head(x.mean(dim=1))

    model = gMLPClassifier()
    for block in model.blocks:     # (the paper: spatial weights near zero, so f(x) ~ x at init)
        nn.init.uniform_(block.sgu.spatial_proj.weight, -1e-3, 1e-3)
    model = env.init(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=6)
    criterion = nn.CrossEntropyLoss()

    def train_step(tokens, labels):
        model.train()
        optimizer.zero_grad()
        logits = model(tokens)
        loss = criterion(logits, labels)
        loss.backward()
        optimizer.step()
        return loss.detach(), (logits.argmax(-1) == labels).float().mean()

    step = env.step(train_step)
    for it in range(6):
        tokens = env.randint(0, vocab, (batch, seq_len))
        labels = tokens[:, 0] % n_classes          # (learnable: the first token's class)
        env.rec(f"step {it}", step(tokens, labels))
        scheduler.step()
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def maxout_max_norm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_in, n_hidden, pieces, n_classes, batch = 10, 12, 3, 4, 16

    class Maxout(nn.Module):
        def __init__(self, d_in, d_out, pool_size):
            super().__init__()
            self.d_out, self.pool_size = d_out, pool_size
            self.lin = nn.Linear(d_in, d_out * pool_size)

        def forward(self, x):
            shape = list(x.size())
            shape[-1] = self.d_out
            shape.append(self.pool_size)
            m, _ = self.lin(x).view(*shape).max(-1)
            return m

    model = env.init(nn.Sequential(Maxout(n_in, n_hidden, pieces),
                                   Maxout(n_hidden, n_hidden, pieces),
                                   nn.Linear(n_hidden, n_classes)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    max_norm = 0.9

    def train_step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        with torch.no_grad():       # (each unit's incoming weight vector: a row of W)
            for m in model.modules():
                if isinstance(m, nn.Linear):
                    m.weight.copy_(torch.renorm(m.weight, p=2, dim=0, maxnorm=max_norm))
        return loss.detach()

    w_true = env.randn(n_in, n_classes)
    step = env.step(train_step)
    for it in range(6):
        x = env.randn(batch, n_in)
        env.rec(f"step {it}", step(x, (x @ w_true).argmax(-1)))
    env.rec("grads", _grads(model))
    env.rec("row norms", [m.weight.norm(dim=1) for m in model.modules()
                          if isinstance(m, nn.Linear)])
    env.rec("params", dict(model.state_dict()))


def relation_network(torch, env):
    nn, F = torch.nn, torch.nn.functional
    batch, img, q_dim, n_answers, ch = 6, 12, 5, 4, 8

    class ConvInputModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, ch, 3, stride=2, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(ch)
            self.conv2 = nn.Conv2d(ch, ch, 3, stride=2, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(ch)

        def forward(self, img):
            # (no conv bias before BatchNorm: its gradient is zero up to rounding, which
            # Adam would scale up to lr-sized steps of noise)
            x = F.relu(self.bn1(self.conv1(img)))
            return F.relu(self.bn2(self.conv2(x)))

    class RN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = ConvInputModel()
            obj = ch + 2
            self.g_fc1 = nn.Linear(2 * obj + q_dim, 32)
            self.g_fc2 = nn.Linear(32, 32)
            self.f_fc1 = nn.Linear(32, 32)
            self.fc_out = nn.Linear(32, n_answers)

        def forward(self, img, qst):
            x = self.conv(img)                              # (B, C, d, d)
            mb, n_channels, d, _ = x.size()
            x_flat = x.view(mb, n_channels, d * d).permute(0, 2, 1)
            idx = torch.arange(d * d, dtype=torch.float32)
            coords = torch.stack([(idx // d) / (d - 1) * 2 - 1, (idx % d) / (d - 1) * 2 - 1], 1)
            x_flat = torch.cat([x_flat, coords.unsqueeze(0).expand(mb, -1, -1)], 2)
            n = d * d
            qst = qst.unsqueeze(1).unsqueeze(2).expand(-1, n, n, -1)
            x_i = x_flat.unsqueeze(1).expand(-1, n, -1, -1)     # (B, n, n, obj): object j
            x_j = x_flat.unsqueeze(2).expand(-1, -1, n, -1)     # (B, n, n, obj): object i
            x_full = torch.cat([x_i, x_j, qst], 3).view(mb * n * n, -1)
            x_ = F.relu(self.g_fc1(x_full))
            x_ = F.relu(self.g_fc2(x_))
            x_g = x_.view(mb, n * n, 32).sum(1)
            x_f = F.relu(self.f_fc1(x_g))
            return F.log_softmax(self.fc_out(x_f), dim=1)

    model = env.init(RN())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(images, questions, answers):
        model.train()
        optimizer.zero_grad()
        output = model(images, questions)
        loss = F.nll_loss(output, answers)
        loss.backward()
        optimizer.step()
        correct = output.argmax(1).eq(answers).sum()
        return loss.detach(), correct

    step = env.step(train_step)
    for it in range(4):
        images = env.rand(batch, 3, img, img)
        questions = env.randint(0, 2, (batch, q_dim)).float()
        answers = env.randint(0, n_answers, (batch,))
        env.rec(f"step {it}", step(images, questions, answers))
    env.rec("grads", _grads(model))
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(env.rand(2, 3, img, img), env.randint(0, 2, (2, q_dim)).float()))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {
    "gmlp_text_classifier": gmlp_text_classifier,
    "maxout_max_norm": maxout_max_norm,
    "relation_network": relation_network,
}


# (over ~1 s each on an idle machine, most of it cold compile)
SLOW = {'gmlp_text_classifier'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    _, _, compiled = run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces == 1, (cf.fn.__name__, cf.n_traces)
