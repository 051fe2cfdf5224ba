"""Sweep 65 (p2), sequence-model programs, run with PyTorch, with llgrad eagerly and with
llgrad compiling the training step (tutorial_harness.py):

- a causal Transformer decoder generating greedily under no_grad, the compiled generate
  step called with a sequence one token longer each time;
- skip-gram with negative sampling (two Embeddings, bmm, logsigmoid) and GloVe's weighted
  least squares (f(X) = min(1, (X / x_max) ** 0.75)) trained by Adagrad;
- a temporal convolutional network: dilated causal Conv1d with left F.pad, weight_norm,
  residual 1x1 convs;
- WaveNet's gated activation (tanh * sigmoid of a split conv), skip connections summed,
  a softmax over mu-law quantised targets;
- a seq2seq with Luong attention and teacher forcing chosen per step by a Python coin
  (the same in every run), so the compiled step meets both branches;
- sentence similarity by F.cosine_similarity broadcast (x[:, None], y[None], dim=-1)
  against a CosineEmbeddingLoss and a MarginRankingLoss."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def greedy_generate(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, L = 10, 16, 8

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.pos = nn.Embedding(L, D)
            layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True,
                                               norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(D, V)

        def forward(self, idx):
            T = idx.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(T)
            h = self.tok(idx) + self.pos(torch.arange(T))
            return self.head(self.blocks(h, mask=mask, is_causal=True))

    model = env.init(TinyGPT())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def train_step(seq):
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), seq[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(3):
        env.rec(f"loss {it}", step(env.randint(0, V, (4, L))))

    @torch.no_grad()
    def next_token(idx):
        return model(idx)[:, -1].argmax(-1, keepdim=True)

    model.eval()
    nxt = env.step(next_token)
    idx = env.randint(0, V, (2, 2))
    for _ in range(L - 2):
        idx = torch.cat([idx, nxt(idx)], dim=1)
    env.rec("generated", idx)


def skipgram_glove(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D = 12, 6
    center = env.init(nn.Embedding(V, D))
    context = env.init(nn.Embedding(V, D))
    sg_opt = torch.optim.Adam(list(center.parameters()) + list(context.parameters()), lr=1e-2)

    def sg_step(c, pos, neg):
        v = center(c).unsqueeze(2)                          # (B, D, 1)
        pos_score = torch.bmm(context(pos).unsqueeze(1), v).squeeze()
        neg_score = torch.bmm(context(neg), v).squeeze(2)   # (B, K)
        loss = -(F.logsigmoid(pos_score) + F.logsigmoid(-neg_score).sum(1)).mean()
        sg_opt.zero_grad()
        loss.backward()
        sg_opt.step()
        return loss.detach()

    W = env.init(nn.Embedding(V, D))
    Wc = env.init(nn.Embedding(V, D))
    b, bc = nn.Parameter(torch.zeros(V)), nn.Parameter(torch.zeros(V))
    glove_opt = torch.optim.Adagrad(list(W.parameters()) + list(Wc.parameters()) + [b, bc],
                                    lr=0.05)

    def glove_step(i, j, x):
        weight = torch.clamp((x / 10.0) ** 0.75, max=1.0)
        pred = (W(i) * Wc(j)).sum(1) + b[i] + bc[j]
        loss = (weight * (pred - torch.log(x)) ** 2).sum()
        glove_opt.zero_grad()
        loss.backward()
        glove_opt.step()
        return loss.detach()

    sg, gl = env.step(sg_step), env.step(glove_step)
    for it in range(3):
        env.rec(f"sg {it}", sg(env.randint(0, V, (8,)), env.randint(0, V, (8,)),
                               env.randint(0, V, (8, 3))))
        env.rec(f"glove {it}", gl(env.randint(0, V, (10,)), env.randint(0, V, (10,)),
                                  env.rand(10) * 20 + 1))
    env.rec("emb", (center.weight, W.weight, b))


def tcn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    wn = nn.utils.parametrizations.weight_norm

    class TemporalBlock(nn.Module):
        def __init__(self, i, o, dilation):
            super().__init__()
            self.pad = 2 * dilation
            self.conv1 = wn(nn.Conv1d(i, o, 3, dilation=dilation))
            self.conv2 = wn(nn.Conv1d(o, o, 3, dilation=dilation))
            self.down = nn.Conv1d(i, o, 1) if i != o else None

        def forward(self, x):
            h = F.relu(self.conv1(F.pad(x, (self.pad, 0))))
            h = F.relu(self.conv2(F.pad(h, (self.pad, 0))))
            return F.relu(h + (x if self.down is None else self.down(x)))

    model = env.init(nn.Sequential(TemporalBlock(1, 6, 1), TemporalBlock(6, 6, 2),
                                   TemporalBlock(6, 6, 4)))
    head = env.init(nn.Linear(6, 1))
    opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=2e-3)

    def train_step(x, y):
        h = model(x)[:, :, -1]
        loss = F.mse_loss(head(h).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(3):
        x = env.randn(4, 1, 20)
        env.rec(f"loss {it}", step(x, x[:, 0, -5:].sum(1)))
    env.rec("params", dict(model.state_dict()))


def wavenet_gated(torch, env):
    nn, F = torch.nn, torch.nn.functional
    Q, R = 8, 6

    class Layer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.d = d
            self.conv = nn.Conv1d(R, 2 * R, 2, dilation=d)
            self.res = nn.Conv1d(R, R, 1)
            self.skip = nn.Conv1d(R, R, 1)

        def forward(self, x):
            a, b = self.conv(F.pad(x, (self.d, 0))).chunk(2, dim=1)
            z = torch.tanh(a) * torch.sigmoid(b)
            return x + self.res(z), self.skip(z)

    embed = env.init(nn.Conv1d(Q, R, 1))
    layers = env.init(nn.ModuleList([Layer(d) for d in (1, 2, 4)]))
    out = env.init(nn.Sequential(nn.ReLU(), nn.Conv1d(R, R, 1), nn.ReLU(), nn.Conv1d(R, Q, 1)))
    params = [*embed.parameters(), *layers.parameters(), *out.parameters()]
    opt = torch.optim.Adam(params, lr=3e-3)

    def mu_law(x):
        y = torch.sign(x) * torch.log1p((Q - 1) * x.abs()) / torch.log1p(torch.tensor(Q - 1.0))
        return ((y + 1) / 2 * (Q - 1) + 0.5).long().clamp(0, Q - 1)

    def train_step(wave):
        q = mu_law(wave)
        x = embed(F.one_hot(q[:, :-1], Q).permute(0, 2, 1).float())
        skips = 0
        for layer in layers:
            x, s = layer(x)
            skips = skips + s
        loss = F.cross_entropy(out(skips), q[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    t = torch.arange(24.0)
    for it in range(3):
        env.rec(f"loss {it}", step(torch.sin(t * (0.3 + 0.1 * it))[None].repeat(2, 1) * 0.9
                                   + env.randn(2, 24, scale=0.05)))
    env.rec("out", dict(out.state_dict()))


def seq2seq_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, H = 8, 12
    emb = env.init(nn.Embedding(V, H))
    enc = env.init(nn.GRU(H, H, batch_first=True))
    cell = env.init(nn.GRUCell(2 * H, H))
    attn = env.init(nn.Linear(H, H, bias=False))
    out = env.init(nn.Linear(2 * H, V))
    params = [p for m in (emb, enc, cell, attn, out) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)

    def train_step(src, tgt, teacher):
        e, h = enc(emb(src))
        h = h[0]
        ctx = torch.zeros_like(h)
        prev = torch.zeros(src.shape[0], dtype=torch.long)
        loss = 0
        for t in range(tgt.shape[1]):
            h = cell(torch.cat([emb(prev), ctx], 1), h)
            scores = torch.bmm(e, attn(h).unsqueeze(2)).squeeze(2)
            ctx = (F.softmax(scores, 1).unsqueeze(2) * e).sum(1)
            logits = out(torch.cat([h, ctx], 1))
            loss = loss + F.cross_entropy(logits, tgt[:, t])
            prev = tgt[:, t] if teacher else logits.argmax(1)
        loss = loss / tgt.shape[1]
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        src = env.randint(1, V, (4, 5))
        env.rec(f"loss {it}", step(src, src[:, :4].flip(1), env.choice(2) == 1))


def cosine_similarity_losses(torch, env):
    nn, F = torch.nn, torch.nn.functional
    enc = env.init(nn.Sequential(nn.Linear(5, 10), nn.ReLU(), nn.Linear(10, 4)))
    opt = torch.optim.SGD(enc.parameters(), lr=0.1)
    cel = nn.CosineEmbeddingLoss(margin=0.2)
    mrl = nn.MarginRankingLoss(margin=0.1)

    def train_step(a, b, target):
        za, zb = enc(a), enc(b)
        sim = F.cosine_similarity(za[:, None], zb[None], dim=-1)      # (B, B)
        pos, neg = sim.diagonal(), sim.roll(1, dims=1).diagonal()
        loss = cel(za, zb, target) + mrl(pos, neg, torch.ones_like(pos))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), sim.detach()

    step = env.step(train_step)
    target = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0])
    for it in range(3):
        env.rec(f"step {it}", step(env.randn(5, 5), env.randn(5, 5), target))


PROGRAMS = {"greedy_generate": greedy_generate, "skipgram_glove": skipgram_glove, "tcn": tcn,
            "wavenet_gated": wavenet_gated, "seq2seq_attention": seq2seq_attention,
            "cosine_similarity_losses": cosine_similarity_losses}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("cosine_similarity_losses",)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
