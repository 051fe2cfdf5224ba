"""Tutorial time-series and training-loop programs (see tutorial_harness.py): N-BEATS
basis blocks, a linear recurrent unit, RWKV's time mixing, seq2seq forecasting with a
random teacher-forcing ratio, knowledge distillation with a temperature, a factorisation
machine, multi-sample dropout drawn from a torch.Generator and progressive unfreezing by
requires_grad_ between steps."""


def nbeats_basis(torch, env):
    """N-BEATS (interpretable): a trend block with a polynomial basis (t^p as a buffer) and
    a seasonality block with a Fourier basis (cos / sin of 2 pi k t), each emitting
    backcast and forecast thetas; doubly residual stacking (x = x - backcast, forecast +=
    block forecast); sliding windows cut from one series with Tensor.unfold; sMAPE loss."""
    nn, F = torch.nn, torch.nn.functional
    import math
    torch.manual_seed(0)
    L, Hz = 12, 4
    series = torch.sin(torch.arange(80.0) * 0.4) + 0.02 * torch.arange(80.0) + 2
    windows = series.unfold(0, L + Hz, 3)
    x, y = windows[:, :L], windows[:, L:]

    class Block(nn.Module):
        def __init__(self, basis_b, basis_f):
            super().__init__()
            self.fc = nn.Sequential(nn.Linear(L, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
            self.theta = nn.Linear(32, basis_b.shape[0], bias=False)
            self.register_buffer("bb", basis_b)
            self.register_buffer("bf", basis_f)

        def forward(self, x):
            th = self.theta(self.fc(x))
            return th @ self.bb, th @ self.bf

    tb, tf = torch.arange(L) / (L + Hz), torch.arange(L, L + Hz) / (L + Hz)
    trend = Block(torch.stack([tb ** p for p in range(3)]), torch.stack([tf ** p for p in range(3)]))
    k = torch.arange(1, 3).float()[:, None]
    season = Block(torch.cat([torch.cos(2 * math.pi * k * tb), torch.sin(2 * math.pi * k * tb)]),
                   torch.cat([torch.cos(2 * math.pi * k * tf), torch.sin(2 * math.pi * k * tf)]))
    blocks = nn.ModuleList([trend, season])
    opt = torch.optim.Adam(blocks.parameters(), lr=1e-3)

    def train_step(x, y):
        forecast = torch.zeros_like(y)
        for b in blocks:
            back, fore = b(x)
            x = x - back
            forecast = forecast + fore
        loss = 200 * ((forecast - y).abs() / (forecast.abs() + y.abs())).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("windows", windows.shape[0])
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", list(blocks.parameters()))


def lru_recurrence(torch, env):
    """Orvieto et al.'s linear recurrent unit, real diagonal variant: lambda =
    exp(-exp(nu_log)) from a ring initialisation, gamma = sqrt(1 - lambda^2) normalisation,
    h_t = lambda * h_{t-1} + gamma * (B u_t) in a Python loop over time, y = Re-free C h + D
    u; torch.stack of the states, GELU and a skip; sequence classification."""
    nn, F = torch.nn, torch.nn.functional
    import math
    torch.manual_seed(0)
    N, Hd, T = 8, 4, 10

    class LRU(nn.Module):
        def __init__(self, r_min=0.4, r_max=0.9):
            super().__init__()
            u = torch.rand(N)
            self.nu_log = nn.Parameter(torch.log(-0.5 * torch.log(
                u * (r_max ** 2 - r_min ** 2) + r_min ** 2)))
            self.B = nn.Parameter(torch.randn(N, Hd) / math.sqrt(2 * Hd))
            self.C = nn.Parameter(torch.randn(Hd, N) / math.sqrt(N))
            self.D = nn.Parameter(torch.randn(Hd))

        def forward(self, u):
            lam = torch.exp(-torch.exp(self.nu_log))
            gamma = torch.sqrt(1 - lam ** 2)
            Bu = (u @ self.B.t()) * gamma
            h = torch.zeros(u.shape[0], N)
            hs = []
            for t in range(u.shape[1]):
                h = lam * h + Bu[:, t]
                hs.append(h)
            return torch.stack(hs, 1) @ self.C.t() + self.D * u

    enc, lru, head = nn.Linear(3, Hd), LRU(), nn.Linear(Hd, 2)
    params = [p for m in (enc, lru, head) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=4e-3)
    x = torch.randn(6, T, 3)
    y = (x[:, :3, 0].sum(1) > 0).long()

    def train_step(x, y):
        h = enc(x)
        h = h + F.gelu(lru(h))
        loss = F.cross_entropy(head(h.mean(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", params)


def rwkv_time_mixing(torch, env):
    """RWKV-4's time mixing in its numerically stable recurrent form: token shift by
    nn.ZeroPad2d((0, 0, 1, -1)), r / k / v from lerps with learned mix vectors, the WKV
    recurrence with running (aa, bb, pp) and the max trick (ww = u + k_t, p = max(pp, ww),
    e1 = exp(pp - p), e2 = exp(ww - p)), decay w = -exp(time_decay), sigmoid(r) gating."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C, T = 6, 7

    class TimeMix(nn.Module):
        def __init__(self):
            super().__init__()
            self.time_decay = nn.Parameter(torch.linspace(-1, 1, C))
            self.time_first = nn.Parameter(torch.full((C,), 0.3))
            self.mix_k = nn.Parameter(torch.rand(1, 1, C))
            self.mix_v = nn.Parameter(torch.rand(1, 1, C))
            self.mix_r = nn.Parameter(torch.rand(1, 1, C))
            self.shift = nn.ZeroPad2d((0, 0, 1, -1))
            self.key, self.value, self.recept = (nn.Linear(C, C, bias=False) for _ in range(3))
            self.out = nn.Linear(C, C, bias=False)

        def forward(self, x):
            xx = self.shift(x)
            k = self.key(x * self.mix_k + xx * (1 - self.mix_k))
            v = self.value(x * self.mix_v + xx * (1 - self.mix_v))
            r = torch.sigmoid(self.recept(x * self.mix_r + xx * (1 - self.mix_r)))
            w, u = -torch.exp(self.time_decay), self.time_first
            aa = torch.zeros(x.shape[0], C)
            bb = torch.zeros(x.shape[0], C)
            pp = torch.full((x.shape[0], C), -1e38)
            outs = []
            for t in range(x.shape[1]):
                kt, vt = k[:, t], v[:, t]
                ww = u + kt
                p = torch.maximum(pp, ww)
                e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
                outs.append((e1 * aa + e2 * vt) / (e1 * bb + e2))
                ww = pp + w
                p = torch.maximum(ww, kt)
                e1, e2 = torch.exp(ww - p), torch.exp(kt - p)
                aa, bb, pp = e1 * aa + e2 * vt, e1 * bb + e2, p
            return self.out(r * torch.stack(outs, 1))

    emb, ln, mix, head = nn.Embedding(9, C), nn.LayerNorm(C), TimeMix(), nn.Linear(C, 9)
    params = [p for m in (emb, ln, mix, head) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=5e-3)
    ids = torch.randint(0, 9, (3, T + 1))

    def train_step(ids):
        x = emb(ids[:, :-1])
        x = x + mix(ln(x))
        loss = F.cross_entropy(head(x).transpose(1, 2), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(ids).item() for _ in range(5)])
    env.rec("params", params)


def seq2seq_teacher_forcing_ratio(torch, env):
    """Seq2seq forecasting as the tutorials write the decoder loop: an LSTM encoder, an
    LSTMCell decoder fed either the ground truth or its own detached prediction, chosen per
    step by `random.random() < teacher_forcing_ratio` (Python's random, seeded; the choice
    a Python bool argument of the step), the ratio decayed each epoch."""
    nn, F = torch.nn, torch.nn.functional
    import random
    torch.manual_seed(0)
    rng = random.Random(0)
    H, T_in, T_out = 12, 8, 4
    enc, cell, proj = nn.LSTM(1, H, batch_first=True), nn.LSTMCell(1, H), nn.Linear(H, 1)
    params = [p for m in (enc, cell, proj) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    t = torch.arange(T_in + T_out).float()
    phase = torch.rand(8, 1) * 6
    seqs = torch.sin(0.5 * t + phase).unsqueeze(-1)
    src, tgt = seqs[:, :T_in], seqs[:, T_in:]

    def train_step(src, tgt, force):
        _, (h, c) = enc(src)
        h, c = h[0], c[0]
        inp, preds = src[:, -1], []
        for k in range(T_out):
            h, c = cell(inp, (h, c))
            pred = proj(h)
            preds.append(pred)
            inp = tgt[:, k] if force[k] else pred.detach()
        loss = F.mse_loss(torch.stack(preds, 1), tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist, ratio = [], 0.9
    for epoch in range(5):
        force = tuple(rng.random() < ratio for _ in range(T_out))
        hist.append(step(src, tgt, force).item())
        ratio *= 0.7
    env.rec("hist", hist)
    env.rec("params", params)


def distillation_temperature(torch, env):
    """Hinton's knowledge distillation as the PyTorch tutorial writes it: a teacher in
    eval() under no_grad, soft targets softmax(teacher / T), the student's log_softmax(/T),
    nn.KLDivLoss(reduction="batchmean") * T^2 mixed with hard-label cross-entropy; and the
    tutorial's cosine-loss variant on hidden features (nn.CosineEmbeddingLoss with a
    target of ones)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, w), nn.ReLU(), nn.Linear(w, 16))
            self.head = nn.Linear(16, 4)

        def forward(self, x):
            h = self.body(x)
            return self.head(F.relu(h)), h

    teacher, student = Net(64), Net(8)
    teacher.eval()
    opt = torch.optim.Adam(student.parameters(), lr=1e-3)
    kl, cos = nn.KLDivLoss(reduction="batchmean"), nn.CosineEmbeddingLoss()
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))

    def train_step(x, y, T, w_soft):
        with torch.no_grad():
            t_logits, t_h = teacher(x)
        s_logits, s_h = student(x)
        soft = kl(F.log_softmax(s_logits / T, -1), F.softmax(t_logits / T, -1)) * T ** 2
        hid = cos(s_h, t_h, torch.ones(x.shape[0]))
        loss = w_soft * soft + (1 - w_soft) * F.cross_entropy(s_logits, y) + 0.5 * hid
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y, 2.0, 0.25).item() for _ in range(5)])
    env.rec("params", list(student.parameters()))


def factorization_machine(torch, env):
    """Rendle's factorisation machine for CTR on categorical fields: field offsets added to
    the raw indices (a buffer from np.cumsum-like torch.cumsum), a linear term from an
    Embedding(.., 1), the pairwise term 0.5 * ((sum v)^2 - sum v^2).sum(1), BCE with logits;
    SparseAdam-free: Adam on the embeddings with weight decay on the factors only."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    field_dims = [4, 7, 3, 5]
    offsets = torch.cat([torch.zeros(1, dtype=torch.long),
                         torch.cumsum(torch.tensor(field_dims), 0)[:-1]])
    n, k = sum(field_dims), 6
    lin, fac = nn.Embedding(n, 1), nn.Embedding(n, k)
    bias = nn.Parameter(torch.zeros(1))
    nn.init.xavier_uniform_(fac.weight)
    opt = torch.optim.Adam([{"params": [bias, lin.weight]},
                            {"params": fac.parameters(), "weight_decay": 1e-3}], lr=1e-2)
    x = torch.stack([torch.randint(0, d, (32,)) for d in field_dims], 1)
    y = ((x[:, 0] + x[:, 2]) % 2).float()

    def train_step(x, y):
        idx = x + offsets
        v = fac(idx)
        pair = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1)
        logit = bias + lin(idx).sum((1, 2)) + pair
        loss = F.binary_cross_entropy_with_logits(logit, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", [bias, lin.weight, fac.weight])


def multisample_dropout_generator(torch, env):
    """Multi-sample dropout (Inoue 2019) with its masks drawn from a dedicated
    torch.Generator (bernoulli_(p, generator=g) on a new tensor, the Kaggle-kernel way of
    reproducible masks): 4 dropout samples through a shared head, their losses averaged;
    the generator's state advanced by the compiled step exactly as eagerly (cross=False:
    compared between llgrad's runs)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(10, 24), nn.ReLU())
    head = nn.Linear(24, 3)
    params = list(body.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    g = torch.Generator().manual_seed(123)

    def train_step(x, y):
        h = body(x)
        loss = 0.0
        for _ in range(4):
            keep = torch.empty_like(h).bernoulli_(0.7, generator=g)
            loss = loss + F.cross_entropy(head(h * keep / 0.7), y)
        loss = loss / 4
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(4)], cross=False)
    env.rec("next draw", torch.rand(3, generator=g), cross=False)
    env.rec("params", params, cross=False)


def progressive_unfreezing(torch, env):
    """ULMFiT-style gradual unfreezing: all layers frozen with requires_grad_(False)
    except the head, one more layer group unfrozen each epoch (between compiled calls),
    discriminative learning rates (lr / 2.6^depth) in param groups, the optimiser created
    once over everything (frozen parameters have grad None and are skipped)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    groups = nn.ModuleList([nn.Sequential(nn.Linear(6, 12), nn.Tanh()),
                            nn.Sequential(nn.Linear(12, 12), nn.Tanh()),
                            nn.Linear(12, 3)])
    opt = torch.optim.Adam([{"params": g.parameters(), "lr": 1e-2 / 2.6 ** (2 - i)}
                            for i, g in enumerate(groups)])
    for g in groups[:2]:
        g.requires_grad_(False)
    x, y = torch.randn(20, 6), torch.randint(0, 3, (20,))

    def train_step(x, y):
        h = x
        for g in groups:
            h = g(h)
        loss = F.cross_entropy(h, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for epoch in range(4):
        if 1 <= epoch <= 2:
            groups[2 - epoch].requires_grad_(True)
        hist.append(step(x, y).item())
        hist.append(step(x, y).item())
    env.rec("hist", hist)
    env.rec("params", list(groups.parameters()))
    env.rec("grads none", [p.grad is None for p in groups.parameters()])
