"""Batch 20 (s73, u10): six tutorial programs with PyTorch, llgrad eagerly and llgrad compiling
the step (tutorial_harness.py): a rational-quadratic neural spline flow (searchsorted, gather),
a sparse variational GP classifier (cholesky, solve_triangular, Gauss-Hermite quadrature, a
calibration histogram in the step), DeepHit survival (a discrete-time pmf, censoring, a
pairwise ranking loss), Reformer LSH attention (argsort buckets, chunked attention, the sort
undone, bucket runs by unique_consecutive in the step), ComplEx knowledge-graph embeddings
(1-N scoring, N3 regulariser, Adagrad) and a jigsaw-puzzle pretext task (tiles from
Tensor.unfold, a permutation set, a shared tile encoder). The histogram and unique_consecutive
in the compiled steps ran those steps eagerly, with a warning, before they were traced."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def neural_spline_flow(torch, env):
    nn, F = torch.nn, torch.nn.functional
    K, B, D = 5, 3.0, 4        # (bins, tail bound, data dim)

    def rq_spline(x, w, h, d):     # Durkan et al.: monotone rational-quadratic, identity tails
        inside = (x > -B) & (x < B)
        w = F.softmax(w, -1) * (2 * B - 1e-3 * K) + 1e-3
        h = F.softmax(h, -1) * (2 * B - 1e-3 * K) + 1e-3
        d = F.pad(F.softplus(d) + 1e-3, (1, 1), value=1.0)
        cw = F.pad(torch.cumsum(w, -1), (1, 0)) - B
        ch = F.pad(torch.cumsum(h, -1), (1, 0)) - B
        cw[..., -1], ch[..., -1] = B, B
        xc = x.clamp(-B + 1e-4, B - 1e-4)
        idx = (torch.searchsorted(cw[..., 1:-1].contiguous(), xc[..., None])).clamp(0, K - 1)
        g = lambda t: t.gather(-1, idx)[..., 0]          # noqa: E731
        x0, wk, y0, hk, d0, d1 = g(cw), g(w), g(ch), g(h), g(d), g(d[..., 1:])
        s, th = hk / wk, (xc - x0) / wk
        den = s + (d1 + d0 - 2 * s) * th * (1 - th)
        y = y0 + hk * (s * th ** 2 + d0 * th * (1 - th)) / den
        dy = s ** 2 * (d1 * th ** 2 + 2 * s * th * (1 - th) + d0 * (1 - th) ** 2)
        logdet = torch.log(dy) - 2 * torch.log(den)
        return torch.where(inside, y, x), torch.where(inside, logdet, torch.zeros_like(x))

    class Coupling(nn.Module):
        def __init__(self, flip):
            super().__init__()
            self.flip = flip
            self.net = nn.Sequential(nn.Linear(D // 2, 16), nn.ReLU(),
                                     nn.Linear(16, (D // 2) * (3 * K - 1)))

        def forward(self, x):
            a, b = x.chunk(2, -1)
            if self.flip:
                a, b = b, a
            p = self.net(a).view(*a.shape, 3 * K - 1)
            b, ld = rq_spline(b, p[..., :K], p[..., K:2 * K], p[..., 2 * K:])
            out = torch.cat([b, a], -1) if self.flip else torch.cat([a, b], -1)
            return out, ld.sum(-1)

    flows = env.init(nn.ModuleList([Coupling(False), Coupling(True)]))
    base = torch.distributions.Normal(torch.zeros(D), torch.ones(D))
    opt = torch.optim.Adam(flows.parameters(), lr=5e-3)

    def log_prob(x):
        total = torch.zeros(x.shape[0])
        for f in flows:
            x, ld = f(x)
            total = total + ld
        return base.log_prob(x).sum(-1) + total

    def train_step(x):
        loss = -log_prob(x).mean()
        opt.zero_grad(); loss.backward()
        gn = nn.utils.clip_grad_norm_(flows.parameters(), 5.0)
        opt.step()
        return loss.detach(), gn

    def data(n):        # (a banana: x1 = z1, x2 = z2 + z1^2/2, and two noisy copies)
        z = env.randn(n, 2)
        xy = torch.stack([z[:, 0], z[:, 1] * 0.5 + z[:, 0] ** 2 / 2 - 1], 1)
        return torch.cat([xy, xy.flip(1) + 0.1 * env.randn(n, 2)], 1)
    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(data(16)))
    with torch.no_grad():
        env.rec("test nll", -log_prob(data(32)).mean())
        env.rec("tails", log_prob(torch.tensor([[4.0, -5.0, 0.5, 3.5], [0.0, 0.0, 0.0, 0.0]])))
    env.rec("params", dict(flows.state_dict()))


def svgp_classifier(torch, env):
    nn = torch.nn
    M, NQ = 6, 10
    gh_x, gh_w = (torch.tensor(a, dtype=torch.float32) for a in np.polynomial.hermite.hermgauss(NQ))

    class SVGP(nn.Module):
        def __init__(self):
            super().__init__()
            self.z = nn.Parameter(torch.linspace(-2, 2, M)[:, None].repeat(1, 2))
            self.m = nn.Parameter(torch.zeros(M))
            self.l_raw = nn.Parameter(torch.eye(M) * -1.0)     # (whitened q(u) = N(m, L L^T))
            self.log_ls, self.log_var = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.tensor(0.))

        def kern(self, a, b):
            d = (a[:, None, :] - b[None, :, :]) / self.log_ls.exp()
            return self.log_var.exp() * torch.exp(-0.5 * d.pow(2).sum(-1))

        def scale_tril(self):
            return torch.tril(self.l_raw, -1) + torch.diag_embed(F_softplus(self.l_raw.diagonal()))

        def forward(self, x):
            kzz = self.kern(self.z, self.z) + 1e-4 * torch.eye(M)
            lz = torch.linalg.cholesky(kzz)
            a = torch.linalg.solve_triangular(lz, self.kern(self.z, x), upper=False)   # (M, N)
            s = self.scale_tril()
            mean = a.T @ self.m
            var = self.log_var.exp() - a.pow(2).sum(0) + (s.T @ a).pow(2).sum(0)
            return mean, var.clamp(min=1e-6)

        def kl(self):
            q = torch.distributions.MultivariateNormal(self.m, scale_tril=self.scale_tril())
            p = torch.distributions.MultivariateNormal(torch.zeros(M), scale_tril=torch.eye(M))
            return torch.distributions.kl_divergence(q, p)

    F_softplus = torch.nn.functional.softplus
    model = env.init(SVGP())
    opt = torch.optim.Adam(model.parameters(), lr=0.03)

    def expected_ll(mean, var, y):      # E_q(f)[log sigmoid(y f)], y in {-1, +1}
        f = mean[:, None] + math.sqrt(2.0) * var.sqrt()[:, None] * gh_x
        return (torch.nn.functional.logsigmoid(y[:, None] * f) * gh_w).sum(1) / math.sqrt(math.pi)

    def train_step(x, y, n_total):
        mean, var = model(x)
        elbo = n_total / x.shape[0] * expected_ll(mean, var, y).sum() - model.kl()
        loss = -elbo / n_total
        opt.zero_grad(); loss.backward(); opt.step()
        p = torch.sigmoid(mean / torch.sqrt(1 + math.pi * var / 8)).detach()   # (calibration)
        return loss.detach(), torch.histogram(p, bins=4, range=(0.0, 1.0)).hist

    x_all = env.randn(24, 2)
    y_all = torch.where(x_all[:, 0] * x_all[:, 1] > 0, 1.0, -1.0)
    step = env.step(train_step)
    for it in range(5):
        sl = slice((it % 3) * 8, (it % 3) * 8 + 8)
        env.rec(f"loss {it}", step(x_all[sl], y_all[sl], 24))
    with torch.no_grad():
        mean, var = model(env.randn(5, 2))
        env.rec("predictive", [torch.sigmoid(mean / torch.sqrt(1 + math.pi * var / 8)), var])
        env.rec("kl", model.kl())
    env.rec("params", dict(model.state_dict()))


def deephit_survival(torch, env):
    nn, F = torch.nn, torch.nn.functional
    T, ALPHA, SIGMA = 6, 0.5, 0.1

    model = env.init(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.BatchNorm1d(16),
                                   nn.Dropout(0.0), nn.Linear(16, T + 1)))
    opt = torch.optim.NAdam(model.parameters(), lr=1e-2, weight_decay=1e-4)

    def deephit_loss(logits, t, event):
        pmf = F.softmax(logits, -1)[:, :T]     # (the last bin: survival past the horizon)
        cif = pmf.cumsum(-1)
        p_t = pmf.gather(1, t[:, None])[:, 0]
        surv_t = 1 - cif.gather(1, t[:, None])[:, 0] + p_t      # (S(t-1))
        ll = torch.where(event, torch.log(p_t + 1e-7), torch.log(surv_t.clamp(min=1e-7)))
        f_at = cif[:, t]                                      # f_at[i, j] = F_i(t_j)
        diag = f_at.diagonal()
        acceptable = event[:, None] & (t[:, None] < t[None, :])
        rank = (torch.exp(-(diag[:, None] - f_at.T) / SIGMA) * acceptable).sum() / \
            acceptable.sum().clamp(min=1)
        return -ll.mean() * ALPHA + (1 - ALPHA) * rank

    def train_step(x, t, event):
        model.train()
        loss = deephit_loss(model(x), t, event)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()

    def batch(n):
        x = env.randn(n, 5)
        risk = x[:, 0] - 0.5 * x[:, 1]
        t = (3 - risk + env.randn(n) * 0.5).round().clamp(0, T - 1).long()
        return x, t, env.rand(n) < 0.7
    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(*batch(10)))
    model.eval()
    with torch.no_grad():
        x, t, event = batch(12)
        cif = F.softmax(model(x), -1)[:, :T].cumsum(-1)
        risk_at = cif[torch.arange(12), t]
        comparable = event[:, None] & (t[:, None] < t[None, :])
        concordant = (risk_at[:, None] > cif[:, t].diagonal()[None, :]) & comparable
        env.rec("c-index", f"{concordant.sum().item()}/{comparable.sum().item()}")
        env.rec("survival", 1 - cif[:3])
    env.rec("params", dict(model.state_dict()))


def reformer_lsh_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, L, NB, CH = 12, 8, 16, 4, 4          # (vocab, width, length, buckets, chunk)
    rotations = env.randn(D, NB // 2)

    class LSHAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qk, self.v, self.out = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)

        def forward(self, x):
            b, n, _ = x.shape
            qk, v = self.qk(x), self.v(x)
            rot = F.normalize(qk, dim=-1) @ rotations
            buckets = torch.cat([rot, -rot], -1).argmax(-1)              # (b, n)
            keys = buckets * n + torch.arange(n)                          # (stable sort by key)
            order = keys.argsort(-1)
            undo = order.argsort(-1)
            take = lambda t: t.gather(1, order[..., None].expand(-1, -1, t.shape[-1]))  # noqa
            sqk, sv, spos = take(qk), take(v), order
            cq = sqk.view(b, n // CH, CH, D)
            ck = F.normalize(cq, dim=-1)
            cv = sv.view(b, n // CH, CH, D)
            look = lambda t: torch.cat([t, t.roll(1, dims=1)], 2)        # noqa: E731
            kk, vv = look(ck), look(cv)
            pq, pk = spos.view(b, n // CH, CH), look(spos.view(b, n // CH, CH))
            dots = torch.einsum("bcid,bcjd->bcij", cq, kk) / D ** 0.5
            dots = dots.masked_fill(pq[..., None] == pk[..., None, :], -1e5)   # (not self)
            o = torch.einsum("bcij,bcjd->bcid", dots.softmax(-1), vv).reshape(b, n, D)
            return self.out(o.gather(1, undo[..., None].expand(-1, -1, D))), buckets

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.attn = nn.Embedding(V, D), LSHAttention()
            self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, V)

        def forward(self, tok):
            h = self.emb(tok)
            a, buckets = self.attn(self.norm(h))
            return self.head(h + a), buckets

    model = env.init(Model())
    opt = torch.optim.Adamax(model.parameters(), lr=2e-2)

    def train_step(tok):        # (predict each token's duplicate: the sequence is x, x)
        logits, buckets = model(tok)
        loss = F.cross_entropy(logits[:, L // 2:].reshape(-1, V), tok[:, :L // 2].reshape(-1))
        opt.zero_grad(); loss.backward(); opt.step()
        runs = torch.unique_consecutive(buckets[0].sort().values, return_counts=True)  # sizes
        return loss.detach(), torch.bincount(buckets.flatten(), minlength=NB), runs
    step = env.step(train_step)
    for it in range(4):
        half = env.randint(0, V, (3, L // 2))
        env.rec(f"step {it}", step(torch.cat([half, half], 1)))
    with torch.no_grad():
        half = env.randint(0, V, (2, L // 2))
        logits, _ = model(torch.cat([half, half], 1))
        env.rec("copy acc", (logits[:, L // 2:].argmax(-1) == half).float().mean())
    env.rec("params", dict(model.state_dict()))


def complex_kge(torch, env):
    nn, F = torch.nn, torch.nn.functional
    NE, NR, R = 10, 3, 4

    class ComplEx(nn.Module):
        def __init__(self):
            super().__init__()
            self.ent, self.rel = nn.Embedding(NE, 2 * R), nn.Embedding(NR, 2 * R)
            for e in (self.ent, self.rel):
                nn.init.normal_(e.weight, std=1e-1)

        def forward(self, h, r):           # scores of (h, r, every tail)
            eh = torch.view_as_complex(self.ent(h).view(-1, R, 2))
            er = torch.view_as_complex(self.rel(r).view(-1, R, 2))
            et = torch.view_as_complex(self.ent.weight.view(NE, R, 2))
            scores = ((eh * er) @ et.conj().T).real
            return scores, (eh.abs(), er.abs(), et.abs())

    model = env.init(ComplEx())
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)

    def train_step(h, r, t):
        scores, factors = model(h, r)
        n3 = sum(f.pow(3).sum() for f in factors[:2]) / h.shape[0]
        loss = F.cross_entropy(scores, t, label_smoothing=0.1) + 1e-3 * n3
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()

    heads = env.randint(0, NE, (30,))
    rels = env.randint(0, NR, (30,))
    tails = (heads * (rels + 1) + rels) % NE          # (a deterministic relation table)
    step = env.step(train_step)
    for epoch in range(2):
        for i in range(3):
            sl = slice(i * 10, i * 10 + 10)
            env.rec(f"loss {epoch}.{i}", step(heads[sl], rels[sl], tails[sl]))
    with torch.no_grad():
        scores, _ = model(heads[:8], rels[:8])
        true = scores.gather(1, tails[:8, None])
        ranks = (scores > true).sum(1) + 1
        env.rec("mrr", f"mrr={(1.0 / ranks.float()).mean().item():.4f} hits@3="
                       f"{(ranks <= 3).float().mean().item():.3f}")
    env.rec("params", dict(model.state_dict()))


def jigsaw_pretext(torch, env):
    nn, F = torch.nn, torch.nn.functional
    PERMS = [(0, 1, 2, 3), (3, 2, 1, 0), (1, 0, 3, 2), (2, 3, 0, 1), (0, 2, 1, 3), (3, 1, 2, 0)]

    class JigsawNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.tile = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.GroupNorm(2, 4),
                                      nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())
            self.fc = nn.Sequential(nn.Linear(4 * 16, 24), nn.ReLU(), nn.Linear(24, len(PERMS)))

        def forward(self, tiles):          # tiles (B, 4, 1, h, w): one shared encoder
            b = tiles.shape[0]
            feats = self.tile(tiles.flatten(0, 1)).view(b, -1)
            return self.fc(feats)

    perms = torch.tensor(PERMS)
    model = env.init(JigsawNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, dampening=0.1,
                          weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)

    def make_tiles(img, labels):          # img (B, 1, 8, 8) -> 4 tiles of 4x4, shuffled
        t = img.unfold(2, 4, 4).unfold(3, 4, 4)                  # (B, 1, 2, 2, 4, 4)
        t = t.reshape(img.shape[0], 1, 4, 4, 4).transpose(1, 2)  # (B, 4, 1, 4, 4)
        idx = perms[labels]                                       # (B, 4)
        return t[torch.arange(img.shape[0])[:, None], idx]

    def train_step(img, labels):
        tiles = make_tiles(img, labels)
        tiles = tiles - tiles.mean(dim=(2, 3, 4), keepdim=True)   # (per-tile normalisation)
        logits = model(tiles)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach(), (logits.argmax(1) == labels).sum()
    step = env.step(train_step)
    for it in range(5):
        img = env.rand(6, 1, 8, 8).cumsum(-1).cumsum(-2) / 16
        env.rec(f"step {it}", step(img, env.randint(0, len(PERMS), (6,))))
        sched.step()
        env.rec(f"lr {it}", sched.get_last_lr())
    env.rec("params", dict(model.state_dict()))
    env.rec("momentum", [opt.state[p]["momentum_buffer"] for p in model.parameters()])


PROGRAMS = {f.__name__: f for f in (neural_spline_flow, svgp_classifier, deephit_survival,
                                     reformer_lsh_attention, complex_kge, jigsaw_pretext)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
