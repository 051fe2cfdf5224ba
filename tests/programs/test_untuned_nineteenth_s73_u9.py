"""Batch 19 (s73, u9): six tutorial programs with PyTorch, llgrad eagerly and llgrad compiling
the step (tutorial_harness.py): a Fourier neural operator (rfft2, cfloat weights, a ragged
last batch, state through BytesIO, ihfft2), an RNN-transducer's lattice loss, a neural point
process (trapezoid, Ogata thinning), partial-convolution inpainting, an edge-conditioned MPNN
with Set2Set (index_add_, scatter_reduce amax) and a Nystromformer (iterative pinv)."""
import io

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def fourier_neural_operator(torch, env):
    nn, F = torch.nn, torch.nn.functional
    W, M = 8, 3      # (width, kept modes per axis)

    class FNO(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = nn.Linear(3, W)
            self.skip = nn.ModuleList([nn.Conv2d(W, W, 1) for _ in range(2)])
            self.w = nn.ParameterList([nn.Parameter(torch.complex(  # (layer, low/high rows)
                env.rand(W, W, M, M), env.rand(W, W, M, M)) / (W * W)) for _ in range(4)])
            self.proj = nn.Sequential(nn.Linear(W, 16), nn.GELU(), nn.Linear(16, 1))

        def spectral(self, x, w1, w2):
            xf, (b, _, h, w) = torch.fft.rfft2(x), x.shape
            out = torch.zeros(b, W, h, w // 2 + 1, dtype=torch.cfloat)
            out[:, :, :M, :M] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :M, :M], w1)
            out[:, :, -M:, :M] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -M:, :M], w2)
            return torch.fft.irfft2(out, s=(h, w))

        def forward(self, a):
            b, h, w = a.shape
            grid = torch.stack(torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w),
                                              indexing="ij"), -1).expand(b, h, w, 2)
            x = self.lift(torch.cat([a.unsqueeze(-1), grid], -1)).permute(0, 3, 1, 2)
            x = F.gelu(self.spectral(x, self.w[0], self.w[1]) + self.skip[0](x))
            x = self.spectral(x, self.w[2], self.w[3]) + self.skip[1](x)
            return self.proj(x.permute(0, 2, 3, 1)).squeeze(-1)

    model = env.init(FNO())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def rel_l2(pred, y):
        return (torch.linalg.vector_norm(pred - y, dim=(1, 2)) /
                torch.linalg.vector_norm(y, dim=(1, 2))).mean()

    def train_step(a, u):
        loss = rel_l2(model(a), u)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()

    def data(n):
        a = env.randn(n, 10, 12)
        return a, torch.roll(a, 1, dims=2) * 0.5 + a.cumsum(1) / 10
    step = env.step(train_step)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*data(7)), batch_size=3)
    for epoch in range(2):
        for i, (a, u) in enumerate(loader):         # (batches of 3, 3 and a ragged 1)
            env.rec(f"loss {epoch}.{i}", step(a, u))
        if epoch == 0:     # (a checkpoint through BytesIO: complex weights and Adam moments)
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
            for p in model.parameters():
                p.detach().zero_()
            ckpt = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
            model.load_state_dict(ckpt["model"]), opt.load_state_dict(ckpt["opt"])
    with torch.no_grad():
        a, u = data(2)
        pred = model(a)
        power = torch.fft.ihfft2(pred, norm="ortho").abs().pow(2).sum((0, 1))   # (one-sided)
        env.rec("test", [f"{rel_l2(pred, u).item():.5f}", power])
    env.rec("params", dict(model.state_dict()))
    env.rec("adam", [v for st in opt.state.values() for _, v in sorted(st.items())])


def rnn_transducer(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, BLANK, D, H = 6, 0, 5, 10

    class Transducer(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.emb = nn.LSTM(D, H, batch_first=True), nn.Embedding(V, H)
            self.pred = nn.LSTM(H, H, batch_first=True)
            self.j_enc, self.j_pred = nn.Linear(H, H), nn.Linear(H, H, bias=False)
            self.out = nn.Linear(H, V)

        def predictor(self, ys):    # (ys: (B, U); a blank-as-start token is prepended)
            return self.pred(self.emb(F.pad(ys, (1, 0), value=BLANK)))[0]

        def joint(self, f, g):       # f (B, T, H), g (B, U+1, H) -> (B, T, U+1, V)
            return self.out(torch.tanh(self.j_enc(f).unsqueeze(2) + self.j_pred(g).unsqueeze(1)))

    def rnnt_loss(logits, ys):
        lp = F.log_softmax(logits, -1)
        B, T, U1, _ = lp.shape
        blank = lp[..., BLANK]
        emit = lp[:, :, :-1, :].gather(3, ys[:, None, :, None].expand(B, T, U1 - 1, 1))[..., 0]
        alpha = {(0, 0): torch.zeros(B)}
        for t, u in [(t, u) for t in range(T) for u in range(U1)][1:]:
            terms = ([alpha[t - 1, u] + blank[:, t - 1, u]] if t else []) + \
                ([alpha[t, u - 1] + emit[:, t, u - 1]] if u else [])
            alpha[t, u] = torch.logsumexp(torch.stack(terms), 0)
        return -(alpha[T - 1, U1 - 1] + blank[:, T - 1, U1 - 1]).mean()

    model = env.init(Transducer())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9)

    def train_step(x, ys):
        f, _ = model.enc(x)
        loss = rnnt_loss(model.joint(f, model.predictor(ys)), ys)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(4):
        ys = env.randint(1, V, (3, 3))
        x = env.randn(3, 5, D) + F.one_hot(ys, V).float().repeat_interleave(2, 1)[:, :5, :D]
        env.rec(f"loss {it}", step(x, ys))
    with torch.no_grad():            # greedy decoding: at most 2 symbols per frame
        f, hyp = model.enc(env.randn(1, 5, D))[0], []
        g, state = model.pred(model.emb(torch.tensor([[BLANK]])))
        for t in range(f.shape[1]):
            for _ in range(2):
                k = int(model.joint(f[:, t:t + 1], g).argmax())
                if k == BLANK:
                    break
                hyp.append(k)
                g, state = model.pred(model.emb(torch.tensor([[k]])), state)
        env.rec("greedy", hyp)
    env.rec("params", dict(model.state_dict()))


def neural_point_process(torch, env):
    nn, F = torch.nn, torch.nn.functional
    K, H, PADM = 3, 8, -100

    class RMTPP(nn.Module):
        def __init__(self):
            super().__init__()
            self.mark_emb, self.rnn = nn.Embedding(K, 4), nn.GRU(5, H, batch_first=True)
            self.v, self.w = nn.Linear(H, 1), nn.Parameter(torch.tensor(0.1))
            self.mark_head = nn.Linear(H, K)

        def forward(self, dts, marks):
            return self.rnn(torch.cat([self.mark_emb(marks.clamp(min=0)), dts[..., None]], -1))[0]

        def intensity(self, h, tau):     # h (B, L, H), tau (..., B, L) -> lambda(tau)
            return torch.exp(self.v(h).squeeze(-1) + self.w * tau)

    model = env.init(RMTPP())
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05, lr_decay=1e-3,
                              initial_accumulator_value=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    grid = torch.linspace(0, 1, 9)

    def nll(dts, marks, mask):
        h = model(dts[:, :-1], marks[:, :-1])            # history up to event i predicts i+1
        nxt_dt, nxt_mark, m = dts[:, 1:], marks[:, 1:], mask[:, 1:]
        log_lam = torch.log(model.intensity(h, nxt_dt))
        taus = grid[:, None, None] * nxt_dt               # (G, B, L): trapezoid nodes
        comp = torch.trapezoid(model.intensity(h, taus), taus, dim=0)
        time_ll = ((log_lam - comp) * m).sum() / m.sum()
        mark_ll = -F.cross_entropy(model.mark_head(h).transpose(1, 2), nxt_mark,
                                   ignore_index=PADM)
        return -(time_ll + mark_ll), comp

    def train_step(dts, marks, mask):
        loss, _ = nll(dts, marks, mask)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()

    def batch(lens):
        dts = nn.utils.rnn.pad_sequence([env.rand(n) * 2 + 0.05 for n in lens], batch_first=True)
        marks = nn.utils.rnn.pad_sequence([env.randint(0, K, (n,)) for n in lens],
                                          batch_first=True, padding_value=PADM)
        return dts, marks, (marks != PADM).float()
    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(*batch([6, 4, 5])))
        sched.step()
        env.rec(f"lr {it}", sched.get_last_lr())
    with torch.no_grad():
        dts, marks, mask = batch([5, 3])
        loss, comp = nll(dts, marks, mask)
        lam = model.intensity(model(dts[:, :-1], marks[:, :-1]), grid[:, None, None] * 2.0)
        env.rec("eval", [loss, comp, torch.cumulative_trapezoid(lam, dx=0.25, dim=0)[-1]])
        h_last, t, ok = model(dts, marks)[:, -1:], torch.zeros(2, 1), torch.zeros(2, 1) > 0
        bound = model.intensity(h_last, torch.full((2, 1), 3.0)) + model.intensity(h_last, t)
        for _ in range(20):        # (Ogata thinning of the next event time)
            t = torch.where(ok, t, t + torch.distributions.Exponential(bound).sample())
            ok = ok | (torch.rand(2, 1) * bound <= model.intensity(h_last, t))
        env.rec("thinning", [t, ok], cross=False)
    env.rec("params", dict(model.state_dict()))


def partial_conv_inpainting(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class PartialConv2d(nn.Conv2d):
        def forward(self, x, mask):
            with torch.no_grad():
                ones = torch.ones(self.out_channels, self.in_channels, *self.kernel_size)
                covered = F.conv2d(mask, ones, stride=self.stride, padding=self.padding)
                new_mask = (covered > 0).float()
                ratio = ones[0].numel() / covered.clamp(min=1e-8) * new_mask
            raw = F.conv2d(x * mask, self.weight, None, self.stride, self.padding)
            return (raw * ratio + self.bias.view(1, -1, 1, 1)) * new_mask, new_mask

    class PConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2 = (PartialConv2d(i, o, 3, stride=2, padding=1) for i, o in
                                ((3, 6), (6, 8)))
            self.d1, self.d2 = PartialConv2d(14, 6, 3, padding=1), PartialConv2d(9, 3, 3, padding=1)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")

        def forward(self, img, mask):
            m0 = mask.expand(-1, 3, -1, -1).contiguous()
            h1, m1 = self.e1(img, m0)
            h2, m2 = self.e2(F.relu(h1), m1)
            d, dm = self.d1(torch.cat([self.up(F.leaky_relu(h2, 0.2)), F.relu(h1)], 1),
                            torch.cat([self.up(m2), m1], 1))
            return self.d2(torch.cat([self.up(F.leaky_relu(d, 0.2)), img], 1),
                           torch.cat([self.up(dm), m0], 1))[0]

    model = env.init(PConvNet())
    opt = torch.optim.RMSprop(model.parameters(), lr=2e-3, alpha=0.9, momentum=0.5, centered=True)

    def losses(img, mask):
        out = model(img, mask)
        comp = mask * img + (1 - mask) * out
        l1 = F.l1_loss(mask * out, mask * img) + 6 * F.l1_loss((1 - mask) * out, (1 - mask) * img)
        tv = comp.diff(dim=-2).abs().mean() + comp.diff(dim=-1).abs().mean()
        return l1 + 0.1 * tv, comp

    def train_step(img, mask):
        loss, _ = losses(img, mask)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()

    def batch(n):
        img = torch.sigmoid(env.randn(n, 3, 12, 12)).cumsum(-1) / 12
        mask = torch.ones(n, 1, 12, 12)
        for i in range(n):
            r, c = env.choice(6), env.choice(6)
            mask[i, :, r:r + 5, c:c + 4] = 0
        return img, mask
    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(*batch(2)))
    with torch.no_grad():
        img, mask = batch(2)
        mse = F.mse_loss(losses(img, mask)[1], img)
        env.rec("psnr", f"psnr={(10 * torch.log10(1 / mse)).item():.3f}")
    env.rec("params", dict(model.state_dict()))


def mpnn_edge_conditioned(torch, env):
    nn, F = torch.nn, torch.nn.functional
    DN, DE, H = 4, 3, 6

    class MPNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp, self.root, self.gru = nn.Linear(DN, H), nn.Linear(H, H), nn.GRUCell(H, H)
            self.edge_net = nn.Sequential(nn.Linear(DE, 16), nn.ReLU(), nn.Linear(16, H * H))
            self.lstm = nn.LSTMCell(2 * H, H)        # (Set2Set's)
            self.head = nn.Sequential(nn.Linear(2 * H, H), nn.ReLU(), nn.Linear(H, 1))

        def conv(self, x, src, dst, e):          # NNConv: a weight matrix for each edge
            msg = torch.bmm(x[src].unsqueeze(1), self.edge_net(e).view(-1, H, H)).squeeze(1)
            agg = torch.zeros(x.shape[0], H).index_add_(0, dst, msg)
            deg = torch.zeros(x.shape[0]).index_add_(0, dst, torch.ones(dst.shape[0]))
            return self.root(x) + agg / deg.clamp(min=1).unsqueeze(1)

        def forward(self, x, src, dst, e, batch, n_graphs):
            h = F.relu(self.inp(x))
            for _ in range(2):
                h = self.gru(F.relu(self.conv(h, src, dst, e)), h)
            q, c, q_star = torch.zeros(n_graphs, H), torch.zeros(n_graphs, H), torch.zeros(
                n_graphs, 2 * H)
            for _ in range(2):          # Set2Set: a softmax over each graph's nodes
                q, c = self.lstm(q_star, (q, c))
                s = (h * q[batch]).sum(-1)
                s_max = torch.full((n_graphs,), -1e9).scatter_reduce(0, batch, s, "amax")
                a = torch.exp(s - s_max[batch])
                a = a / torch.zeros(n_graphs).scatter_add(0, batch, a)[batch]
                r = torch.zeros(n_graphs, H).index_add(0, batch, a[:, None] * h)
                q_star = torch.cat([q, r], -1)
            return self.head(q_star).squeeze(-1)

    def graphs(sizes):
        pairs, off = [], 0
        for n in sizes:         # (a path through the nodes, then 70% of the other pairs)
            p = torch.combinations(torch.arange(n), r=2)
            keep = env.rand(p.shape[0]) < 0.7
            keep[: n - 1] = True
            pairs, off = pairs + [p[keep] + off], off + n
        p = torch.cat(pairs)
        src, dst = torch.cat([p[:, 0], p[:, 1]]), torch.cat([p[:, 1], p[:, 0]])
        x = env.randn(off, DN)
        batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
        e = torch.cat([(x[src] - x[dst]).norm(dim=1, keepdim=True), env.rand(len(src), DE - 1)], 1)
        y = torch.zeros(len(sizes)).index_add_(0, batch, x[:, 0]) / torch.tensor(sizes)
        return x, src, dst, e, batch, len(sizes), y

    model = env.init(MPNN())
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.05)

    def train_step(x, src, dst, e, batch, n_graphs, y):
        loss = F.mse_loss(model(x, src, dst, e, batch, n_graphs), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(*graphs([4, 5, 3])))
    with torch.no_grad():
        *inputs, y = graphs([5, 4, 6, 3])
        env.rec("eval", [pred := model(*inputs), torch.corrcoef(torch.stack([pred, y]))[0, 1]])
    env.rec("params", dict(model.state_dict()))


def nystromformer_classifier(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, NH, L, LM, C = 20, 8, 2, 12, 4, 3

    def iterative_pinv(k, iters=6):
        i = torch.eye(k.shape[-1])
        v = k.mT / (k.abs().sum(-1).amax(-1) * k.abs().sum(-2).amax(-1))[..., None, None]
        for _ in range(iters):
            kv = k @ v
            v = 0.25 * v @ (13 * i - kv @ (15 * i - kv @ (7 * i - kv)))
        return v

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(V, D), nn.Parameter(torch.zeros(1, L, D))
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.out = nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D)
            self.res_conv = nn.Conv2d(NH, NH, (5, 1), padding=(2, 0), groups=NH, bias=False)
            self.ff = nn.Sequential(nn.Linear(D, 16), nn.SiLU(), nn.Linear(16, D))
            self.pool, self.head = nn.Parameter(torch.ones(L) / L), nn.Linear(D, C)

        def attn(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, NH, D // NH).permute(2, 0, 3, 1, 4)
            q = q * (D // NH) ** -0.5
            ql, kl = (t.reshape(b, NH, LM, n // LM, -1).mean(-2) for t in (q, k))  # landmarks
            k1, k2, k3 = (F.softmax(a @ c.mT, -1) for a, c in ((q, kl), (ql, kl), (ql, k)))
            o = (k1 @ iterative_pinv(k2)) @ (k3 @ v) + self.res_conv(v)
            return self.out(o.transpose(1, 2).reshape(b, n, D))

        def forward(self, tok):
            x = self.emb(tok) + self.pos
            x = x + self.attn(self.norm1(x))
            x = x + self.ff(self.norm2(x))
            return self.head(torch.tensordot(x, F.softmax(self.pool, 0), dims=([1], [0])))

    model = env.init(Classifier())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=5,
                                                pct_start=0.4, anneal_strategy="linear")

    def train_step(tok, y):
        loss = F.cross_entropy(model(tok), y)
        opt.zero_grad(); loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), clip_value=0.25)
        opt.step()
        return loss.detach()

    def batch(n):
        tok = env.randint(0, V, (n, L))
        return tok, (tok < 7).sum(1) % C
    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(*batch(6)))
        sched.step()
        env.rec(f"lr {it}", [opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]])
    with torch.no_grad():
        tok, y = batch(8)
        env.rec("acc", f"acc={(model(tok).argmax(1) == y).float().mean().item():.3f}")
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {f.__name__: f for f in (fourier_neural_operator, rnn_transducer, neural_point_process,
                                     partial_conv_inpainting, mpnn_edge_conditioned,
                                     nystromformer_classifier)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
