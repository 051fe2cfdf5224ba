"""Batch 18 (s72, u8): six tutorial programs run with PyTorch, with llgrad eagerly and with
llgrad compiling the training step (tutorial_harness.py): tabular regression with entity
embeddings (padding_idx), a weighted EmbeddingBag, BatchNorm1d(momentum=None), AdamW with a
no-decay group, HuberLoss, PolynomialLR, an R^2 eval under no_grad; a seq2seq GRU (a
bidirectional 2-layer encoder, a GRUCell decoder with masked Luong attention, drawn teacher
forcing, label smoothing with ignore_index, clip_grad_norm_'s norm, NAdam, greedy decoding);
a siamese Conv1d/InstanceNorm1d encoder (margin contrastive loss on pairwise_distance,
TripletMarginWithDistanceLoss by cosine distance with swap, NT-Xent; Nesterov SGD under
CyclicLR triangular2); a small U-Net (reflect padding, GroupNorm, ceil_mode pooling of odd
sizes, ConvTranspose2d, F.pad to the skip, BCEWithLogits(pos_weight) + soft Dice, amsgrad
under CosineAnnealingWarmRestarts by fractional epochs, IoU); a mixture density network
(logsumexp of Normal log-probs against MixtureSameFamily, gaussian_nll_loss(full=True),
Adamax under ReduceLROnPlateau); a multi-task net with Kendall's uncertainty weights, two
micro-batches accumulated in the step, clip_grad_value_, RAdam(decoupled_weight_decay),
LambdaLR warm-up and printed top-1/top-2 accuracy."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def tabular_entity_embeddings(torch, env):
    nn, F = torch.nn, torch.nn.functional
    cards, n_num, n_tags = [5, 7, 3], 4, 6

    class TabNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embs = nn.ModuleList([nn.Embedding(c + 1, min(4, (c + 1) // 2), padding_idx=0)
                                       for c in cards])
            self.tags = nn.EmbeddingBag(n_tags, 3, mode="sum")
            d = sum(e.embedding_dim for e in self.embs) + 3 + n_num
            self.bn_num = nn.BatchNorm1d(n_num, momentum=None)
            self.mlp = nn.Sequential(nn.Linear(d, 16), nn.ReLU(),
                                     nn.Dropout(0.2), nn.Linear(16, 1))

        def forward(self, cat, num, tag_idx, tag_off, tag_w):
            e = [emb(cat[:, i]) for i, emb in enumerate(self.embs)]
            t = self.tags(tag_idx, tag_off, per_sample_weights=tag_w)
            return self.mlp(torch.cat(e + [t, self.bn_num(num)], dim=1)).squeeze(1)

    model = env.init(TabNet())
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "bn" in name or "embs" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 1e-2},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-2)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=2.0)
    crit = nn.HuberLoss(delta=0.5)

    def train_step(cat, num, tag_idx, tag_off, tag_w, y):
        loss = crit(model(cat, num, tag_idx, tag_off, tag_w), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()

    def batch(n):
        cat = torch.stack([env.randint(0, c + 1, (n,)) for c in cards], dim=1)
        num = env.randn(n, n_num) * 3 + 1
        counts = env.randint(1, 4, (n,))
        off = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)[:-1]])
        idx = env.randint(0, n_tags, (int(counts.sum()),))
        w = env.rand(idx.shape[0])
        y = num[:, 0] * 0.5 - (cat[:, 1] == 3).float() + w.sum() / n
        return cat, num, idx, off, w, y

    model.train()
    for m in model.modules():      # (dropout off for a deterministic fit, as RLHF code does)
        if isinstance(m, nn.Dropout):
            m.eval()
    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(*batch(12)))
        sched.step()
        env.rec(f"lr {it}", [g["lr"] for g in opt.param_groups])
    model.eval()
    with torch.no_grad():
        cat, num, idx, off, w, y = batch(10)
        pred = model(cat, num, idx, off, w)
        rmse = torch.sqrt(F.mse_loss(pred, y))
        r2 = 1 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    env.rec("eval", f"rmse={rmse.item():.4f} r2={r2.item():.4f}")
    env.rec("bn", [model.bn_num.running_mean, model.bn_num.running_var,
                   model.bn_num.num_batches_tracked])
    env.rec("params", dict(model.state_dict()))


def seq2seq_gru_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, E, H, PAD, BOS, EOS = 11, 8, 12, 0, 1, 2

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb = nn.Embedding(V, E, padding_idx=PAD)
            self.tgt_emb = nn.Embedding(V, E, padding_idx=PAD)
            self.enc = nn.GRU(E, H, num_layers=2, bidirectional=True, batch_first=True)
            self.bridge = nn.Linear(2 * H, H)
            self.cell = nn.GRUCell(E + H, H)
            self.attn = nn.Linear(H, 2 * H, bias=False)
            self.combine = nn.Linear(3 * H, H)
            self.out = nn.Linear(H, V)

        def encode(self, src):
            mem, h = self.enc(self.src_emb(src))
            h0 = torch.tanh(self.bridge(torch.cat([h[-2], h[-1]], dim=-1)))
            return mem, h0, src.ne(PAD)

        def decode_step(self, tok, h, ctx_prev, mem, mask):
            h = self.cell(torch.cat([self.tgt_emb(tok), ctx_prev], dim=-1), h)
            score = torch.bmm(mem, self.attn(h).unsqueeze(2)).squeeze(2)
            a = F.softmax(score.masked_fill(~mask, float("-inf")), dim=-1)
            ctx = torch.bmm(a.unsqueeze(1), mem).squeeze(1)
            att_h = torch.tanh(self.combine(torch.cat([h, ctx], dim=-1)))
            return self.out(att_h), h, att_h

    model = env.init(Seq2Seq())
    opt = torch.optim.NAdam(model.parameters(), lr=5e-3)
    crit = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1, reduction="sum")

    def train_step(src, tgt, coins):
        mem, h, mask = model.encode(src)
        ctx = torch.zeros(src.shape[0], H)
        tok = torch.full((src.shape[0],), BOS, dtype=torch.long)
        loss = 0.0
        for t in range(tgt.shape[1]):
            logits, h, ctx = model.decode_step(tok, h, ctx, mem, mask)
            loss = loss + crit(logits, tgt[:, t])
            tok = tgt[:, t] if coins[t] else logits.argmax(-1)
        loss = loss / tgt.ne(PAD).sum()
        opt.zero_grad(); loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        return loss.detach(), norm

    def batch(n, s, t):
        src = env.randint(3, V, (n, s))
        lens = env.randint(2, s + 1, (n,))
        src = src.masked_fill(torch.arange(s)[None, :] >= lens[:, None], PAD)
        tgt = torch.cat([src.flip(1)[:, :t - 1].clamp(min=0), torch.full((n, 1), EOS)], 1)
        return src, tgt

    step = env.step(train_step)
    for it in range(4):
        src, tgt = batch(5, 6, 5)
        coins = [env.choice(2) == 1 for _ in range(tgt.shape[1])]
        env.rec(f"step {it}", step(src, tgt, coins))
    model.eval()
    with torch.no_grad():
        src, _ = batch(3, 6, 5)
        mem, h, mask = model.encode(src)
        ctx, tok, outs = torch.zeros(3, H), torch.full((3,), BOS, dtype=torch.long), []
        for _ in range(5):
            logits, h, ctx = model.decode_step(tok, h, ctx, mem, mask)
            outs.append(tok := logits.argmax(-1))
        env.rec("greedy", torch.stack(outs, 1))
    env.rec("params", dict(model.state_dict()))


def siamese_signals(torch, env):
    nn, F = torch.nn, torch.nn.functional

    enc = env.init(nn.Sequential(
        nn.Conv1d(2, 8, 5, padding=2), nn.InstanceNorm1d(8, affine=True), nn.GELU(),
        nn.AvgPool1d(2), nn.Conv1d(8, 8, 3, padding=1, dilation=1), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(8, 6)))
    opt = torch.optim.SGD(enc.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                              mode="triangular2")
    triplet = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b), margin=0.3, swap=True)

    def train_step(a, p, n, same):
        za, zp, zn = enc(a), enc(p), enc(n)
        d = F.pairwise_distance(za, zn)
        contrastive = (same * d.pow(2) + (1 - same) * F.relu(1.0 - d).pow(2)).mean() / 2
        z = F.normalize(torch.cat([za, zp]), dim=1)
        sim = z @ z.t() / 0.5
        sim = sim.masked_fill(torch.eye(z.shape[0], dtype=torch.bool), -1e9)
        b = za.shape[0]
        target = torch.cat([torch.arange(b, 2 * b), torch.arange(0, b)])
        ntxent = F.cross_entropy(sim, target)
        loss = contrastive + triplet(za, zp, zn) + 0.5 * ntxent
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach(), F.cosine_similarity(za, zp).mean().detach()

    step = env.step(train_step)
    base = env.randn(6, 2, 16)
    for it in range(5):
        a = base + 0.1 * env.randn(6, 2, 16)
        p = base + 0.1 * env.randn(6, 2, 16)
        n = base.roll(1, 0) + 0.1 * env.randn(6, 2, 16)
        same = (env.rand(6) > 0.5).float()
        env.rec(f"step {it}", step(a, p, n, same))
        sched.step()
        env.rec(f"lr {it}", [sched.get_last_lr()[0], opt.param_groups[0]["momentum"]])
    env.rec("params", dict(enc.state_dict()))


def unet_small(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, padding_mode="reflect"),
                             nn.GroupNorm(2, cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2 = block(1, 4), block(4, 8)
            self.pool = nn.MaxPool2d(2, ceil_mode=True)
            self.mid = block(8, 8)
            self.up2 = nn.ConvTranspose2d(8, 8, 2, stride=2)
            self.u2 = block(16, 8)
            self.up1 = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.u1 = block(8, 4)
            self.head = nn.Conv2d(4, 1, 1)

        @staticmethod
        def match(x, skip):
            dh, dw = skip.shape[-2] - x.shape[-2], skip.shape[-1] - x.shape[-1]
            return F.pad(x, [dw // 2, dw - dw // 2, dh // 2, dh - dh // 2])  # (< 0: crops)

        def forward(self, x):
            s1 = self.d1(x)
            s2 = self.d2(self.pool(s1))
            m = self.mid(self.pool(s2))
            u = self.u2(torch.cat([self.match(self.up2(m), s2), s2], dim=1))
            u = self.u1(torch.cat([self.match(self.up1(u), s1), s1], dim=1))
            return self.head(u)

    model = env.init(UNet())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, amsgrad=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=1, T_mult=2,
                                                                 eta_min=1e-4)
    bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))

    def train_step(x, m):
        logits = model(x)
        prob = torch.sigmoid(logits)
        inter = (prob * m).sum(dim=(1, 2, 3))
        dice = 1 - (2 * inter + 1) / (prob.sum(dim=(1, 2, 3)) + m.sum(dim=(1, 2, 3)) + 1)
        loss = bce(logits, m) + dice.mean()
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()

    step = env.step(train_step)
    iters = 2
    for epoch in range(2):
        for i in range(iters):
            x = env.randn(2, 1, 11, 13)
            m = (x > 0.8).float()
            env.rec(f"loss {epoch}.{i}", step(x, m))
            sched.step(epoch + (i + 1) / iters)
            env.rec(f"lr {epoch}.{i}", opt.param_groups[0]["lr"])
    with torch.no_grad():
        x = env.randn(2, 1, 11, 13)
        m = (x > 0.8)
        pred = torch.sigmoid(model(x)) > 0.5
        iou = ((pred & m).sum().float() + 1e-6) / ((pred | m).sum().float() + 1e-6)
    env.rec("iou", iou)
    env.rec("params", dict(model.state_dict()))


def mixture_density(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    K = 3

    class MDN(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(1, 20), nn.Tanh())
            self.pi, self.mu, self.log_sigma = nn.Linear(20, K), nn.Linear(20, K), nn.Linear(20, K)
            self.base = nn.Linear(20, 2)

        def forward(self, x):
            h = self.body(x)
            return self.pi(h), self.mu(h), self.log_sigma(h).clamp(-5, 3), self.base(h)

    model = env.init(MDN())
    opt = torch.optim.Adamax(model.parameters(), lr=2e-2)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0)

    def mdn_nll(pi, mu, log_sigma, y):
        comp = D.Normal(mu, log_sigma.exp()).log_prob(y.unsqueeze(-1))
        return -torch.logsumexp(F.log_softmax(pi, dim=-1) + comp, dim=-1).mean()

    def train_step(x, y):
        pi, mu, log_sigma, base = model(x)
        nll = mdn_nll(pi, mu, log_sigma, y)
        base_nll = F.gaussian_nll_loss(base[:, 0], y, F.softplus(base[:, 1]), full=True,
                                       eps=1e-4)
        loss = nll + 0.5 * base_nll
        opt.zero_grad(); loss.backward(); opt.step()
        return nll.detach(), base_nll.detach()

    def data(n):
        x = env.rand(n, 1) * 2 - 1
        y = torch.sin(3 * x[:, 0]) + 0.3 * torch.sign(x[:, 0]) * env.randn(n) ** 2
        return x, y

    step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"train {epoch}", step(*data(32)))
        with torch.no_grad():
            x, y = data(16)
            pi, mu, log_sigma, _ = model(x)
            mix = D.MixtureSameFamily(D.Categorical(logits=pi), D.Normal(mu, log_sigma.exp()))
            val = -mix.log_prob(y).mean()
            env.rec(f"val {epoch}", [val, mdn_nll(pi, mu, log_sigma, y), mix.mean, mix.variance])
            env.rec(f"sample {epoch}", mix.sample(), cross=False)
        sched.step(val.item())
        env.rec(f"lr {epoch}", opt.param_groups[0]["lr"])
    env.rec("params", dict(model.state_dict()))


def multitask_uncertainty(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C, L = 4, 3

    class MultiTask(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(6, 24), nn.LayerNorm(24), nn.Mish(),
                                       nn.Linear(24, 24), nn.Mish())
            self.cls = nn.Linear(24, C)
            self.reg = nn.Linear(24, 1)
            self.tags = nn.Linear(24, L)
            self.log_vars = nn.Parameter(torch.zeros(3))

        def forward(self, x):
            h = self.trunk(x)
            return F.log_softmax(self.cls(h), dim=-1), self.reg(h).squeeze(-1), self.tags(h)

    model = env.init(MultiTask())
    opt = torch.optim.RAdam(model.parameters(), lr=1e-2, weight_decay=1e-2,
                            decoupled_weight_decay=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    nll = nn.NLLLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.0]))
    smooth = nn.SmoothL1Loss(beta=0.5)
    multi = nn.MultiLabelSoftMarginLoss()

    def losses(x, yc, yr, yt):
        logp, r, t = model(x)
        parts = torch.stack([nll(logp, yc), smooth(r, yr), multi(t, yt)])
        w = torch.exp(-model.log_vars)
        return (w * parts + model.log_vars).sum(), parts

    def train_step(xs, ycs, yrs, yts):
        opt.zero_grad()
        total = 0.0
        for x, yc, yr, yt in zip(xs, ycs, yrs, yts):
            loss, parts = losses(x, yc, yr, yt)
            (loss / len(xs)).backward()
            total = total + loss.detach() / len(xs)
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        return total, parts.detach()

    def data(n):
        x = env.randn(n, 6)
        yc = (x[:, 0] > 0).long() * 2 + (x[:, 1] > 0).long()
        yr = x[:, 2] - 0.5 * x[:, 3]
        yt = (x[:, 3:] > 0).float()
        return x, yc, yr, yt

    step = env.step(train_step)
    for it in range(4):
        a, b = data(8), data(8)
        env.rec(f"step {it}", step(*[list(z) for z in zip(a, b)]))
        sched.step()
    model.eval()
    with torch.no_grad():
        x, yc, yr, yt = data(20)
        logp, r, t = model(x)
        top1 = (logp.argmax(1) == yc).float().mean()
        top2 = (logp.topk(2, dim=1).indices == yc[:, None]).any(1).float().mean()
        env.rec("metrics", f"top1={top1.item():.3f} top2={top2.item():.3f} "
                           f"mae={(r - yr).abs().mean().item():.4f}")
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"tabular_entity_embeddings": tabular_entity_embeddings,
            "seq2seq_gru_attention": seq2seq_gru_attention,
            "siamese_signals": siamese_signals, "unet_small": unet_small,
            "mixture_density": mixture_density, "multitask_uncertainty": multitask_uncertainty}


# (float32: the seq2seq's NAdam steps part the last bits of a few GRUCell weights by 4e-4 of
# their scale within four steps; run in float64 the program agrees with torch to 1e-10)
RTOL = {"seq2seq_gru_attention": 1e-3}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=RTOL.get(name, 1e-4), atol=1e-5)
