"""Sweep 19 (C), part 16: a masked diffusion language model (MDLM: a time t per sequence
from NumPy, tokens replaced by [MASK] where rand < 1 - alpha(t) with the log-linear
schedule, the loss on masked tokens weighted by alpha'(t) / (1 - alpha(t)), the [MASK]
logit set to -inf, ancestral sampling outside the step) and the FT-Transformer for tabular
data (a numerical feature tokenizer x_j * W_j + b_j by broadcasting, categorical
embeddings with per-column offsets, a prepended [CLS] token, pre-norm blocks with ReGLU,
AdamW with no decay on tokenizer and norm parameters). Run with PyTorch, with llgrad
eagerly and with llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def mdlm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, T, D = 9, 8, 16
    MASK = V            # (one more token: [MASK])
    eps = 1e-3

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V + 1, D)
            self.pos = nn.Parameter(torch.zeros(1, T, D))
            self.time = nn.Sequential(nn.Linear(1, D), nn.SiLU(), nn.Linear(D, D))
            self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0,
                                                                        batch_first=True, norm_first=True), 1)
            self.out = nn.Linear(D, V + 1)

        def forward(self, x, t):
            h = self.tok(x) + self.pos + self.time(t[:, None])[:, None, :]
            logits = self.out(self.enc(h))
            logits[:, :, MASK] = -float("inf")
            return logits

    def alpha(t):
        return 1 - (1 - eps) * t

    model = env.init(Denoiser())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x0 = env.randint(0, V, (6, T))

    def train_step(x0, t, u):
        move = u < (1 - alpha(t))[:, None]
        xt = torch.where(move, torch.full_like(x0, MASK), x0)
        logits = model(xt, t)
        log_p = logits.log_softmax(-1)
        log_p_x0 = torch.gather(log_p, -1, x0[..., None]).squeeze(-1)
        weight = (1 - eps) / (1 - alpha(t))           # -alpha'(t) / (1 - alpha(t))
        loss = -(log_p_x0 * move * weight[:, None]).sum() / move.numel()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, move.sum()
    train_step = env.step(train_step)
    for i in range(5):
        t = env.rand(6) * (1 - 1e-2) + 1e-2
        env.rec(f"step{i}", train_step(x0, t, env.rand(6, T)))
    env.rec("params", _without_key_bias(model, D))
    model.eval()
    with torch.no_grad():
        x = torch.full((2, T), MASK)
        steps = 4
        for s in range(steps, 0, -1):
            t, s_ = torch.full((2,), s / steps), torch.full((2,), (s - 1) / steps)
            probs = model(x, t).softmax(-1)
            p_unmask = ((alpha(s_) - alpha(t)) / (1 - alpha(t)))[:, None, None]
            q = probs * p_unmask
            q[:, :, MASK] = 1 - p_unmask[:, :, 0]
            draw = (env.rand(2, T, 1) < q.cumsum(-1)).int().argmax(-1)
            x = torch.where(x == MASK, draw, x)
        env.rec("samples", x)


def ft_transformer(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_num, cards, D = 3, [4, 3], 8

    class FeatureTokenizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(n_num + 1, D))    # (+1: [CLS])
            self.bias = nn.Parameter(torch.empty(n_num, D))
            nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
            nn.init.kaiming_uniform_(self.bias, a=math.sqrt(5))
            self.register_buffer("category_offsets", torch.tensor([0] + cards[:-1]).cumsum(0))
            self.category_embeddings = nn.Embedding(sum(cards), D)
            self.category_bias = nn.Parameter(torch.zeros(len(cards), D))

        def forward(self, x_num, x_cat):
            x_num = torch.cat([torch.ones(len(x_num), 1), x_num], dim=1)
            x = self.weight[None] * x_num[:, :, None]
            x = torch.cat([x, self.category_embeddings(x_cat + self.category_offsets[None])], dim=1)
            bias = torch.cat([torch.zeros(1, D), self.bias, self.category_bias])
            return x + bias[None]

    class ReGLU(nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=-1)
            return a * F.relu(b)

    class Block(nn.Module):
        def __init__(self, first):
            super().__init__()
            self.norm0 = nn.Identity() if first else nn.LayerNorm(D)
            self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
            self.norm1 = nn.LayerNorm(D)
            self.ffn = nn.Sequential(nn.Linear(D, 2 * 12), ReGLU(), nn.Dropout(0.0), nn.Linear(12, D))

        def forward(self, x, last):
            h = self.norm0(x)
            q = h[:, :1] if last else h           # (the last block: the [CLS] query only)
            x = (x[:, :1] if last else x) + self.attn(q, h, h, need_weights=False)[0]
            return x + self.ffn(self.norm1(x))

    class FTTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = FeatureTokenizer()
            self.blocks = nn.ModuleList([Block(True), Block(False)])
            self.head = nn.Sequential(nn.LayerNorm(D), nn.ReLU(), nn.Linear(D, 1))

        def forward(self, x_num, x_cat):
            x = self.tokenizer(x_num, x_cat)
            for i, b in enumerate(self.blocks):
                x = b(x, i == len(self.blocks) - 1)
            return self.head(x[:, 0]).squeeze(-1)

    model = env.init(FTTransformer())
    no_wd = [p for n, p in model.named_parameters() if "tokenizer" in n or "norm" in n or n.endswith(".bias")]
    wd = [p for n, p in model.named_parameters() if not any(p is q for q in no_wd)]
    opt = torch.optim.AdamW([{"params": wd}, {"params": no_wd, "weight_decay": 0.0}],
                            lr=1e-3, weight_decay=1e-5)
    x_num = env.randn(16, n_num)
    x_cat = torch.stack([env.randint(0, c, (16,)) for c in cards], dim=1)
    y = x_num[:, 0] * 2 - x_cat[:, 1].float() + 0.1 * env.randn(16)

    def train_step(x_num, x_cat, y):
        model.train()
        loss = F.mse_loss(model(x_num, x_cat), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(6):
        env.rec(f"loss{i}", train_step(x_num, x_cat, y))
    env.rec("params", _without_key_bias(model, D))


def _without_key_bias(model, D):
    """The parameters, the attention's key bias left out: its gradient is zero up to rounding
    (softmax does not see a constant per query), which Adam turns into lr-sized steps of
    either sign."""
    return {n: (p if not n.endswith("in_proj_bias") else p[list(range(D)) + list(range(2 * D, 3 * D))])
            for n, p in model.named_parameters()}


def test_mdlm():
    # (a weight whose first gradient is -4.6e-8, rounding of a 4e-3 row, takes a full
    # Adam step: torch and llgrad agree on it to ~1e-4 of the weights' scale)
    run_tutorial(mdlm, rtol=1e-4)


def test_ft_transformer():
    run_tutorial(ft_transformer)
