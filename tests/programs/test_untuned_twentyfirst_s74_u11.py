"""Batch 21 (s74, u11): six tutorial programs with PyTorch, llgrad eagerly and llgrad compiling
the step (tutorial_harness.py): Conv-TasNet-style separation (SI-SNR plus an STFT loss under
permutation-invariant training; torch.signal.windows.hann, which llgrad lacked), an S4D
state-space layer (complex Vandermonde kernel, FFT convolution), a ViT with ToMe token merging
(bipartite soft matching, scatter_reduce), deep knowledge tracing (one_hot interactions, a
masked next-skill BCE, a rank AUC), DoRA on an NF4-quantised frozen base (blockwise absmax,
codebook argmin) and PointNet++ set abstraction (farthest point sampling, ball query). The
ViT's MultiheadAttention has no in_proj bias: the key bias's gradient is zero up to rounding,
and Adam makes steps of lr out of rounding (torch's and llgrad's differ)."""
import itertools
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def pit_sisnr_separation(torch, env):
    nn, F = torch.nn, torch.nn.functional
    N, K, S, T = 8, 4, 2, 64        # (filters, kernel, sources, samples)

    class TasNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Conv1d(1, N, K, stride=K // 2, bias=False)
            self.sep = nn.Sequential(nn.Conv1d(N, 16, 3, padding=2, dilation=2), nn.PReLU(),
                                     nn.GroupNorm(1, 16), nn.Conv1d(16, S * N, 1))
            self.dec = nn.ConvTranspose1d(N, 1, K, stride=K // 2, bias=False)

        def forward(self, mix):              # (B, T) -> (B, S, T)
            w = F.relu(self.enc(mix.unsqueeze(1)))
            masks = torch.sigmoid(self.sep(w)).view(mix.shape[0], S, N, -1)
            est = self.dec((masks * w.unsqueeze(1)).flatten(0, 1))
            return est.view(mix.shape[0], S, -1)[..., :mix.shape[-1]]

    def si_snr(est, ref, eps=1e-8):
        est, ref = est - est.mean(-1, keepdim=True), ref - ref.mean(-1, keepdim=True)
        proj = (est * ref).sum(-1, keepdim=True) * ref / (ref.pow(2).sum(-1, keepdim=True) + eps)
        return 10 * torch.log10(proj.pow(2).sum(-1) / ((est - proj).pow(2).sum(-1) + eps) + eps)

    perms = list(itertools.permutations(range(S)))
    window = torch.signal.windows.hann(16, sym=False)      # (SciPy's periodic Hann)

    def stft_mag(x):
        spec = torch.stft(x.flatten(0, 1), 16, hop_length=4, window=window, return_complex=True)
        return spec.abs().view(*x.shape[:2], *spec.shape[1:])

    def pit_loss(est, ref):     # (-SI-SNR + a spectral L1 term, under the best permutation)
        mag_est, mag_ref = stft_mag(est), stft_mag(ref)
        per = torch.stack([-si_snr(est[:, list(p)], ref).mean(-1) + 0.1 * (
            mag_est[:, list(p)] - mag_ref).abs().mean((1, 2, 3)) for p in perms], 1)
        best, idx = per.min(1)
        return best.mean(), idx

    model = env.init(TasNet())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, amsgrad=True)

    def train_step(mix, ref):
        loss, idx = pit_loss(model(mix), ref)
        opt.zero_grad(); loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        return loss.detach(), idx

    def batch(b):
        f = env.rand(b, S, 1) * 0.4 + 0.05
        ref = torch.sin(2 * math.pi * f * torch.arange(T)) * (env.rand(b, S, 1) + 0.5)
        ref[:, 1] = torch.sign(ref[:, 1]) * 0.5          # (a square-ish second source)
        return ref.sum(1), ref
    step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", step(*batch(4)))
    with torch.no_grad():
        mix, ref = batch(3)
        loss, idx = pit_loss(model(mix), ref)
        env.rec("eval", f"loss {loss.item():.3f} perms {idx.tolist()}")
    env.rec("params", dict(model.state_dict()))


def s4d_sequence_model(torch, env):
    nn, F = torch.nn, torch.nn.functional
    H, NS, L = 6, 4, 32           # (channels, state size / 2, length)

    class S4D(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_dt = nn.Parameter(torch.linspace(math.log(1e-2), math.log(1e-1), H))
            self.log_a_real = nn.Parameter(torch.log(0.5 * torch.ones(H, NS)))
            self.a_imag = nn.Parameter(math.pi * torch.arange(NS).float().repeat(H, 1))
            self.c = nn.Parameter(torch.view_as_real(torch.complex(
                torch.linspace(-1, 1, H * NS).view(H, NS), torch.full((H, NS), 0.3))))
            self.d = nn.Parameter(torch.ones(H))
            self.out = nn.Conv1d(H, 2 * H, 1)

        def kernel(self, n):
            a = -torch.exp(self.log_a_real) + 1j * self.a_imag            # (H, N) cfloat
            dta = a * self.log_dt.exp().unsqueeze(-1)
            c = torch.view_as_complex(self.c) * (torch.exp(dta) - 1.0) / a
            vander = dta.unsqueeze(-1) * torch.arange(n, device=a.device)   # (H, N, L)
            return 2 * torch.einsum("hn,hnl->hl", c, torch.exp(vander)).real

        def forward(self, u):             # (B, H, L)
            n = u.shape[-1]
            k_f, u_f = torch.fft.rfft(self.kernel(n), n=2 * n), torch.fft.rfft(u, n=2 * n)
            y = torch.fft.irfft(u_f * k_f, n=2 * n)[..., :n] + u * self.d.unsqueeze(-1)
            return F.glu(self.out(F.gelu(y)), dim=1)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp, self.s4 = nn.Linear(1, H), S4D()
            self.norm, self.head = nn.LayerNorm(H), nn.Linear(H, 1)

        def forward(self, x):             # (B, L) -> (B, L)
            h = self.inp(x.unsqueeze(-1))
            h = h + self.s4(h.transpose(1, 2)).transpose(1, 2)
            return self.head(self.norm(h)).squeeze(-1)

    model = env.init(Model())
    opt = torch.optim.AdamW([{"params": [p for n, p in model.named_parameters() if "s4." in n
                                         and "out" not in n], "lr": 1e-3, "weight_decay": 0.0},
                             {"params": [p for n, p in model.named_parameters() if "s4." not in n
                                         or "out" in n]}], lr=5e-3, weight_decay=0.01)

    def train_step(x):              # (predict the running mean: a long-memory target)
        loss = F.mse_loss(model(x), x.cumsum(-1) / torch.arange(1, L + 1))
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(env.randn(4, L)))
    with torch.no_grad():
        env.rec("kernel", model.s4.kernel(8))
    env.rec("params", dict(model.state_dict()))


def tome_vit(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D, P, R = 16, 4, 3             # (width, patch, tokens merged per block)

    def bipartite_merge(x, size, r):       # (Bolya et al.): keep the cls token unmerged
        scores = F.normalize(x[:, ::2], dim=-1) @ F.normalize(x[:, 1::2], dim=-1).transpose(1, 2)
        scores[:, 0, :] = -math.inf
        node_max, node_idx = scores.max(-1)
        edge_idx = node_max.argsort(-1, descending=True)[..., None]
        unm_idx, src_idx = edge_idx[:, r:].sort(1).values, edge_idx[:, :r]   # (cls first)
        dst_idx = node_idx[..., None].gather(1, src_idx)

        def merge(t, mode):
            c = t.shape[-1]
            ta, tb = t[:, ::2], t[:, 1::2]
            unm = ta.gather(1, unm_idx.expand(-1, -1, c))
            src = ta.gather(1, src_idx.expand(-1, -1, c))
            tb = tb.scatter_reduce(1, dst_idx.expand(-1, -1, c), src, reduce=mode)
            return torch.cat([unm, tb], 1)
        x, size = merge(x * size, "sum"), merge(size, "sum")    # (size-weighted means)
        return x / size, size

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.attn = nn.MultiheadAttention(D, 2, batch_first=True, bias=False)
            self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

        def forward(self, x, size):
            h = self.n1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            x, size = bipartite_merge(x, size, R)
            return x + self.mlp(self.n2(x)), size

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(1, D, P, stride=P)
            self.cls = nn.Parameter(torch.zeros(1, 1, D))
            self.pos = nn.Parameter(torch.linspace(-0.1, 0.1, 17 * D).view(1, 17, D))
            self.blocks = nn.ModuleList([Block(), Block()])
            self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, 3)

        def forward(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
            size = torch.ones_like(x[..., :1])
            for blk in self.blocks:
                x, size = blk(x, size)
            return self.head(self.norm(x[:, 0])), x.shape[1]

    model = env.init(ViT())
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3, total_steps=6, pct_start=0.3)

    def train_step(img, y):
        logits, n_tokens = model(img)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        return loss.detach(), n_tokens
    step = env.step(train_step)
    for it in range(5):
        y = env.randint(0, 3, (4,))
        img = env.rand(4, 1, 16, 16) + y.view(-1, 1, 1, 1).float() * torch.linspace(0, 1, 16)
        env.rec(f"step {it}", step(img, y))
        env.rec(f"lr {it}", sched.get_last_lr())
    env.rec("params", dict(model.state_dict()))


def knowledge_tracing(torch, env):
    nn, F = torch.nn, torch.nn.functional
    Q, H, L = 5, 12, 7              # (skills, hidden, max length)

    class DKT(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(2 * Q, H, batch_first=True)
            self.drop, self.out = nn.Dropout(0.0), nn.Linear(H, Q)

        def forward(self, skill, correct):
            x = F.one_hot(skill + Q * correct, 2 * Q).float()
            h, _ = self.lstm(x)
            return self.out(self.drop(h))                 # (B, L, Q) logits per skill

    model = env.init(DKT())
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-3, alpha=0.9, centered=True)

    def masked_next_loss(logits, skill, correct, lengths):
        pred = logits[:, :-1].gather(-1, skill[:, 1:, None]).squeeze(-1)
        mask = torch.arange(L - 1)[None, :] < (lengths[:, None] - 1)
        loss = F.binary_cross_entropy_with_logits(pred, correct[:, 1:].float(), reduction="none")
        return (loss * mask).sum() / mask.sum(), pred[mask], correct[:, 1:][mask]

    def train_step(skill, correct, lengths):
        model.train()
        loss, _, _ = masked_next_loss(model(skill, correct), skill, correct, lengths)
        opt.zero_grad(); loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 1.0); opt.step()
        return loss.detach()

    ability = env.randn(40)

    def batch(i, b):
        skill = env.randint(0, Q, (b, L))
        p = torch.sigmoid(ability[i:i + b, None] - 0.3 * skill + 0.5)
        correct = (env.rand(b, L) < p).long()
        lengths = env.randint(3, L + 1, (b,))
        pad = torch.arange(L) >= lengths[:, None]
        return skill.masked_fill(pad, 0), correct.masked_fill(pad, 0), lengths
    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(*batch(it * 6, 6)))
    model.eval()
    with torch.no_grad():
        skill, correct, lengths = batch(30, 10)
        loss, pred, y = masked_next_loss(model(skill, correct), skill, correct, lengths)
        ranks = torch.empty_like(pred).scatter_(0, pred.argsort(), torch.arange(1., len(pred) + 1))
        n_pos = y.sum()     # (Mann-Whitney)
        auc = (ranks[y.bool()].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (len(y) - n_pos))
        env.rec("eval", f"loss={loss.item():.4f} auc={auc.item():.4f} n={len(y)}")
    env.rec("params", dict(model.state_dict()))


def dora_nf4_finetune(torch, env):
    nn, F = torch.nn, torch.nn.functional
    NF4 = torch.tensor([-1.0, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0,
                        0.0796, 0.1609, 0.2461, 0.3379, 0.4407, 0.5626, 0.7230, 1.0])
    BLOCK = 16

    def quantize(w):                  # blockwise absmax, nearest NF4 code -> (uint8, scales)
        blocks = w.reshape(-1, BLOCK)
        absmax = blocks.abs().amax(-1, keepdim=True)
        codes = ((blocks / absmax).unsqueeze(-1) - NF4).abs().argmin(-1).to(torch.uint8)
        return codes, absmax

    class DoRALinear(nn.Module):
        def __init__(self, base, r=2, alpha=4):
            super().__init__()
            for name, buf in zip(("codes", "absmax"), quantize(base.weight.detach())):
                self.register_buffer(name, buf)
            self.shape = base.weight.shape
            self.bias = nn.Parameter(base.bias.detach().clone(), requires_grad=False)
            self.lora_a = nn.Parameter(torch.linspace(-0.3, 0.3, r * self.shape[1]).view(r, -1))
            self.lora_b = nn.Parameter(torch.zeros(self.shape[0], r))
            self.scale = alpha / r
            self.m = nn.Parameter(self.base_weight().norm(p=2, dim=1, keepdim=True))

        def base_weight(self):
            return (NF4[self.codes.long()] * self.absmax).reshape(self.shape)

        def forward(self, x):
            w = self.base_weight() + self.scale * self.lora_b @ self.lora_a
            norm = torch.linalg.vector_norm(w, dim=1, keepdim=True).detach()
            return F.linear(x, self.m * w / norm, self.bias)

    base = env.init(nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 4)))
    base.requires_grad_(False)
    model = nn.Sequential(DoRALinear(base[0]), nn.SiLU(), DoRALinear(base[2]))
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(trainable, lr=1e-2)
    env.rec("trainable", sum(p.numel() for p in trainable))
    env.rec("quant error", (model[0].base_weight() - base[0].weight).abs().max())

    def train_step(x, y):
        loss = F.smooth_l1_loss(model(x), y, beta=0.5)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        return loss.detach()
    w_true = env.randn(8, 4)
    step = env.step(train_step)
    for it in range(5):
        x = env.randn(6, 8)
        env.rec(f"loss {it}", step(x, x @ w_true))
    with torch.no_grad():   # (merge for deployment: one dense weight per layer)
        layer = model[0]
        w = layer.base_weight() + layer.scale * layer.lora_b @ layer.lora_a
        merged = layer.m * w / w.norm(dim=1, keepdim=True)
        env.rec("merged", [F.linear(x := env.randn(3, 8), merged, layer.bias), layer(x)])
    env.rec("params", {k: v for k, v in model.state_dict().items() if "codes" not in k})
    env.rec("codes", model[0].codes)


def pointnet2_set_abstraction(torch, env):
    nn, F = torch.nn, torch.nn.functional
    NPTS, M, NS, RAD = 24, 6, 4, 0.8

    def farthest_point_sample(xyz, m):        # (B, N, 3) -> (B, m) indices, start at point 0
        b, n, _ = xyz.shape
        idx = torch.zeros(b, m, dtype=torch.long)
        dist = torch.full((b, n), 1e10)
        far = torch.zeros(b, dtype=torch.long)
        for i in range(m):
            idx[:, i] = far
            c = xyz[torch.arange(b), far].unsqueeze(1)
            dist = torch.minimum(dist, ((xyz - c) ** 2).sum(-1))
            far = dist.argmax(-1)
        return idx

    def ball_query(xyz, centers, radius, k):  # the first k points within radius, by index
        b, n, _ = xyz.shape
        d2 = torch.cdist(centers, xyz) ** 2
        idx = torch.arange(n).view(1, 1, n).repeat(b, centers.shape[1], 1)
        idx[d2 > radius ** 2] = n
        idx = idx.sort(-1).values[..., :k]
        return torch.where(idx == n, idx[..., :1].expand(-1, -1, k), idx)   # (pad: the first)

    def group(t, idx):                        # (B, N, C), (B, M, K) -> (B, M, K, C)
        return t[torch.arange(t.shape[0]).view(-1, 1, 1), idx]

    class Net(nn.Module):       # (one set-abstraction level, then a global max and a head)
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Conv2d(3, 16, 1), nn.BatchNorm2d(16), nn.ReLU(),
                                     nn.Conv2d(16, 32, 1), nn.BatchNorm2d(32), nn.ReLU())
            self.head = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 2))

        def forward(self, xyz):
            cidx = farthest_point_sample(xyz, M)
            centers = group(xyz, cidx.unsqueeze(-1)).squeeze(2)
            nbr = group(xyz, ball_query(xyz, centers, RAD, NS)) - centers.unsqueeze(2)
            feat = self.mlp(nbr.permute(0, 3, 1, 2)).max(-1)[0]      # (B, C, M)
            return self.head(feat.max(-1)[0]), cidx

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

    def train_step(xyz, y):
        model.train()
        logits, cidx = model(xyz)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach(), cidx

    def clouds(b):       # (class 0: a sphere shell; class 1: a flat disc)
        y, p = env.randint(0, 2, (b,)), F.normalize(env.randn(b, NPTS, 3), dim=-1)
        flat = torch.tensor([1.0, 1.0, 0.1]) * env.rand(b, NPTS, 1).sqrt()
        p = torch.where(y.view(b, 1, 1).bool(), p * flat, p)
        return p + 0.02 * env.randn(b, NPTS, 3), y
    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(*clouds(4)))
        sched.step()
    model.eval()
    with torch.no_grad():
        xyz, y = clouds(6)
        logits, _ = model(xyz)
        env.rec("acc", (logits.argmax(1) == y).float().mean().item())
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {f.__name__: f for f in (pit_sisnr_separation, s4d_sequence_model, tome_vit,
                                     knowledge_tracing, dora_nf4_finetune,
                                     pointnet2_set_abstraction)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
