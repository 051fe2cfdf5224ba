"""Batch 23 (s74, u13), part 2: a U-Net (ConvTranspose2d with output_padding, skips cropped by
a negative F.pad, Dice + BCE with pos_weight), a word-level LSTM language model (tied
encoder/decoder weights, dropout between layers, truncated BPTT with repackaged hidden
state, a hand-written SGD update), a dense GAT (LeakyReLU scores, a -inf mask, dropout on
the attention, masked node loss), a DDPM step (sinusoidal time embedding, schedules indexed
by t, an EMA copy) and a CLIP-style step (logit_scale clamped through .data)."""
import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-4 s a program: the slow set)


def unet_dice(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(2, o),
                             nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2 = block(1, 4), block(4, 8)
            self.pool = nn.MaxPool2d(2)
            self.mid = block(8, 8)
            self.up2 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)
            self.u2 = block(16, 8)
            self.up1 = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.u1 = block(8, 4)
            self.out = nn.Conv2d(4, 1, 1)

        def forward(self, x):
            s1 = self.d1(x)
            s2 = self.d2(self.pool(s1))
            m = self.mid(self.pool(s2))
            u = self.up2(m)
            dh, dw = u.shape[2] - s2.shape[2], u.shape[3] - s2.shape[3]
            s2c = F.pad(s2, [dw // 2, dw - dw // 2, dh // 2, dh - dh // 2])
            u = self.u2(torch.cat([s2c, u], dim=1))
            u = self.up1(u)
            u = u[:, :, :s1.shape[2], :s1.shape[3]]
            u = self.u1(torch.cat([s1, u], dim=1))
            return self.out(u)

    def dice_loss(logits, target, smooth=1.0):
        p = torch.sigmoid(logits).flatten(1)
        t = target.flatten(1)
        inter = (p * t).sum(1)
        return 1 - ((2 * inter + smooth) / (p.sum(1) + t.sum(1) + smooth)).mean()

    model = env.init(UNet())
    bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0]))
    # (eps: a dead ReLU channel leaves some taps of up2 a gradient of rounding (1e-10), which
    # Adam's default eps would turn into steps of lr, the libraries' rounding apart)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2, eps=1e-4)
    x = env.rand(2, 1, 12, 12)
    y = (x > 0.6).float()
    # (negative padding crops: the 12x12 skip fits a 10x10 map)
    env.rec("crop", F.pad(x, [-1, -1, -1, -1]).shape)

    def train_step(x, y):
        logits = model(x)
        loss = bce(logits, y) + dice_loss(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        iou = ((logits > 0) & (y > 0)).sum() / ((logits > 0) | (y > 0)).sum().clamp(min=1)
        return loss.detach(), iou
    step = env.step(train_step)
    for t in range(4):
        loss, iou = step(x, y)
        env.rec(f"loss {t}", loss)
        env.rec(f"iou {t}", iou)
    env.rec("params", dict(model.named_parameters()))


def word_lm_tbptt(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, E, L, bptt = 20, 12, 2, 5

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.2)
            self.encoder = nn.Embedding(V, E)
            self.rnn = nn.LSTM(E, E, L, dropout=0.3)
            self.decoder = nn.Linear(E, V)
            self.decoder.weight = self.encoder.weight

        def forward(self, inp, hidden):
            emb = self.drop(self.encoder(inp))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, V)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (weight.new_zeros(L, bsz, E), weight.new_zeros(L, bsz, E))

    def repackage_hidden(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    model = env.init(RNNModel())
    env.rec("tied", (model.decoder.weight is model.encoder.weight,
                     len(list(model.parameters())), len(model.state_dict())))
    criterion = nn.NLLLoss()
    data = env.randint(0, V, (46,))
    bsz = 3
    nbatch = data.size(0) // bsz
    source = data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()
    lr, clip = 2.0, 0.25

    def get_batch(i):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)

    def train_step(data, targets, hidden, train):
        model.train(train)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        if train:
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
        return loss.detach(), hidden
    step = env.step(train_step)
    for epoch in range(2):
        for train in (False, True):
            hidden = model.init_hidden(bsz)
            total = 0.0
            for i in range(0, source.size(0) - 1, bptt):
                data, targets = get_batch(i)
                loss, hidden = step(data, targets, hidden, train)
                total += len(data) * loss.item()
            avg = total / (len(source) - 1)
            env.rec(f"{epoch} {train}", f"loss {avg:5.2f} | ppl {math.exp(avg):8.2f}",
                    cross=not train)
    env.rec("params", dict(model.named_parameters()), cross=False)


def dense_gat(torch, env):
    nn, F = torch.nn, torch.nn.functional
    N, Fin, Hd, heads, C = 10, 6, 4, 2, 3

    class GATLayer(nn.Module):
        def __init__(self, fin, fout, heads, concat, dropout=0.3):
            super().__init__()
            self.heads, self.fout, self.concat, self.dropout = heads, fout, concat, dropout
            self.W = nn.Linear(fin, heads * fout, bias=False)
            self.a_src = nn.Parameter(torch.empty(1, heads, fout))
            self.a_dst = nn.Parameter(torch.empty(1, heads, fout))
            nn.init.xavier_uniform_(self.a_src, gain=1.414)
            nn.init.xavier_uniform_(self.a_dst, gain=1.414)
            self.leakyrelu = nn.LeakyReLU(0.2)

        def forward(self, h, adj):
            Wh = self.W(h).view(-1, self.heads, self.fout)                 # N, H, F
            e_src = (Wh * self.a_src).sum(-1)                              # N, H
            e_dst = (Wh * self.a_dst).sum(-1)
            e = self.leakyrelu(e_src.unsqueeze(1) + e_dst.unsqueeze(0))    # N, N, H
            e = e.masked_fill(adj.unsqueeze(-1) == 0, float("-inf"))
            attention = F.softmax(e, dim=1)
            attention = F.dropout(attention, self.dropout, training=self.training)
            out = torch.einsum("ijh,jhf->ihf", attention, Wh)
            return out.reshape(-1, self.heads * self.fout) if self.concat else out.mean(1)

    class GAT(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = GATLayer(Fin, Hd, heads, True)
            self.l2 = GATLayer(Hd * heads, C, 1, False)

        def forward(self, x, adj):
            x = F.dropout(x, 0.3, training=self.training)
            x = F.elu(self.l1(x, adj))
            return F.log_softmax(self.l2(x, adj), dim=1)

    model = env.init(GAT())
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    x = env.randn(N, Fin)
    adj = (env.rand(N, N) > 0.6).float()
    adj = ((adj + adj.t() + torch.eye(N)) > 0).long()
    y = env.randint(0, C, (N,))
    train_mask = torch.zeros(N, dtype=torch.bool)
    train_mask[:6] = True

    def train_step(train):
        model.train(train)
        out = model(x, adj)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        if train:
            opt.zero_grad()
            loss.backward()
            opt.step()
        acc = (out.argmax(1)[~train_mask] == y[~train_mask]).float().mean()
        return loss.detach(), acc
    step = env.step(train_step)
    env.rec("eval 0", step(False))
    for t in range(4):
        env.rec(f"train {t}", step(True), cross=False)
    env.rec("eval", step(False), cross=False)
    env.rec("params", dict(model.named_parameters()), cross=False)


def ddpm_step(torch, env):
    nn, F = torch.nn, torch.nn.functional
    T = 50
    betas = torch.linspace(1e-4, 0.02, T)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    sqrt_ac, sqrt_1mac = alphas_cumprod.sqrt(), (1.0 - alphas_cumprod).sqrt()

    def extract(a, t, shape):
        out = a.gather(-1, t)
        return out.reshape(t.shape[0], *((1,) * (len(shape) - 1)))

    class SinusoidalPosEmb(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def forward(self, t):
            half = self.dim // 2
            emb = math.log(10000) / (half - 1)
            emb = torch.exp(torch.arange(half, device=t.device) * -emb)
            emb = t[:, None].float() * emb[None, :]
            return torch.cat((emb.sin(), emb.cos()), dim=-1)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.time_mlp = nn.Sequential(SinusoidalPosEmb(8), nn.Linear(8, 16), nn.GELU(),
                                          nn.Linear(16, 8))
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
            self.norm = nn.GroupNorm(4, 8)
            self.conv2 = nn.Conv2d(8, 1, 3, padding=1)

        def forward(self, x, t):
            h = self.conv1(x) + self.time_mlp(t)[:, :, None, None]
            return self.conv2(F.silu(self.norm(h)))

    model = env.init(Denoiser())
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    def train_step(x0, t, noise):
        x_t = extract(sqrt_ac, t, x0.shape) * x0 + extract(sqrt_1mac, t, x0.shape) * noise
        loss = F.mse_loss(model(x_t, t), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), model.parameters()):
                pe.mul_(0.9).add_(p, alpha=0.1)
        return loss.detach()
    step = env.step(train_step)
    x0 = env.rand(4, 1, 6, 6) * 2 - 1
    for it in range(4):
        env.rec(f"loss {it}", step(x0, env.randint(0, T, (4,)), env.randn(4, 1, 6, 6)))

    @torch.no_grad()
    def p_sample(x, i):
        t = torch.full((x.shape[0],), i, dtype=torch.long)
        eps = ema(x, t)
        mean = (x - betas[i] / sqrt_1mac[i] * eps) / alphas[i].sqrt()
        return mean
    x = env.randn(2, 1, 6, 6)
    for i in reversed(range(T - 3, T)):
        x = p_sample(x, i)
    env.rec("sample", x)
    env.rec("ema", dict(ema.named_parameters()))


def clip_contrastive(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class CLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ReLU(), nn.Flatten(),
                                        nn.Linear(4 * 3 * 3, 8))
            self.token_embedding = nn.Embedding(15, 8)
            self.ln_final = nn.LayerNorm(8)
            self.text_projection = nn.Parameter(torch.empty(8, 8))
            nn.init.normal_(self.text_projection, std=8 ** -0.5)
            self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

        def encode_text(self, text):
            x = self.ln_final(self.token_embedding(text))
            x = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
            return x @ self.text_projection

        def forward(self, image, text):
            image_features = F.normalize(self.visual(image), dim=-1)
            text_features = F.normalize(self.encode_text(text), dim=-1)
            logit_scale = self.logit_scale.exp()
            logits_per_image = logit_scale * image_features @ text_features.t()
            return logits_per_image, logits_per_image.t()

    model = env.init(CLIP())
    opt = torch.optim.Adam(model.parameters(), lr=0.05, betas=(0.9, 0.98), eps=1e-6)

    def train_step(images, texts):
        logits_per_image, logits_per_text = model(images, texts)
        ground_truth = torch.arange(len(images), dtype=torch.long)
        loss = (F.cross_entropy(logits_per_image, ground_truth)
                + F.cross_entropy(logits_per_text, ground_truth)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.logit_scale.data.clamp_(0, 2.7)
        acc = (logits_per_image.argmax(-1) == ground_truth).float().mean()
        return loss.item(), acc
    step = env.step(train_step)
    # (a distinct end token per text, the largest id: two texts with one EOT would tie)
    images = env.rand(5, 3, 8, 8)
    texts = torch.cat([env.randint(0, 10, (5, 3)), torch.arange(10, 15).view(5, 1)], dim=1)
    for t in range(5):
        loss, acc = step(images, texts)
        env.rec(f"step {t}", f"loss {loss:.5f} acc {acc.item():.3f} scale "
                             f"{model.logit_scale.exp().item():.4f}")
    env.rec("params", dict(model.named_parameters()))


PROGRAMS = {f.__name__: f for f in (unet_dice, word_lm_tbptt, dense_gat, ddpm_step,
                                    clip_contrastive)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
