"""Programs built on the options tutorials use rarely: nn.MultiheadAttention with kdim / vdim,
add_bias_kv, add_zero_attn, a key_padding_mask and need_weights=False (a cross-attention
pooler); a layer zoo (Bilinear, Unflatten, ChannelShuffle, PixelUnshuffle, LPPool2d,
AdaptiveMaxPool2d(return_indices=True), Upsample(bicubic), CircularPad2d, RMSNorm, GroupNorm,
Mish, Hardswish, Softmin, EmbeddingBag(max) and per-sample weights); a loss zoo
(CrossEntropyLoss with label_smoothing, weight and ignore_index over (N, C, T) logits,
probability targets, MultiLabelSoftMarginLoss, MultiMarginLoss(p=2, margin, weight),
CosineEmbeddingLoss, MarginRankingLoss, PoissonNLLLoss(log_input=False, full=True),
GaussianNLLLoss(full=True), HuberLoss, TripletMarginWithDistanceLoss); a liquid
time-constant cell unfolded by its semi-implicit solver, its parameters clamped in place
after each step.
Programs `f(torch, env)`, see tutorial_harness.py."""


def mha_rare_options(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d, kd, vd, heads = 8, 5, 6, 2

    class Pooler(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Parameter(torch.zeros(1, 2, d))
            self.attn = nn.MultiheadAttention(d, heads, kdim=kd, vdim=vd, add_bias_kv=True,
                                              add_zero_attn=True, batch_first=True)
            self.self_attn = nn.MultiheadAttention(d, heads, bias=False, batch_first=True)
            self.out = nn.Linear(2 * d, 3)

        def forward(self, keys, values, pad):
            q = self.query.expand(keys.size(0), -1, -1)
            q = q + self.self_attn(q, q, q, need_weights=False)[0]
            pooled, _ = self.attn(q, keys, values, key_padding_mask=pad, need_weights=False)
            return self.out(pooled.flatten(1))

    model = Pooler()
    with torch.no_grad():
        model.query.copy_(env.randn(1, 2, d))
    env.init(model)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.5, centered=True)

    def train_step(keys, values, pad, y):
        logits = model(keys, values, pad)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    keys, values = env.randn(4, 5, kd), env.randn(4, 5, vd)
    lengths = torch.tensor([5, 3, 1, 4])
    pad = torch.arange(5)[None, :] >= lengths[:, None]
    y = env.randint(0, 3, (4,))
    for it in range(4):
        env.rec(f"it{it}", step(keys, values, pad, y))
    model.eval()
    with torch.no_grad():
        out, w = model.attn(model.query.expand(4, -1, -1), keys, values, key_padding_mask=pad,
                            average_attn_weights=False)
        env.rec("weights", (out, w))
    env.rec("bias_k", (model.attn.bias_k, model.attn.bias_v))


def layer_zoo(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Zoo(nn.Module):
        def __init__(self):
            super().__init__()
            self.bilinear = nn.Bilinear(4, 3, 16)
            self.unflatten = nn.Unflatten(1, (4, 2, 2))
            self.pad = nn.CircularPad2d((1, 1, 0, 1))
            self.conv = nn.Conv2d(4, 8, 3, padding=1)
            self.gn = nn.GroupNorm(2, 8)
            self.shuffle = nn.ChannelShuffle(2)
            self.up = nn.Upsample(scale_factor=2, mode="bicubic", align_corners=False)
            self.unshuffle = nn.PixelUnshuffle(2)
            self.lp = nn.LPPool2d(2, 2)
            self.amax = nn.AdaptiveMaxPool2d((2, 2), return_indices=True)
            self.rms = nn.RMSNorm(32)
            self.bag = nn.EmbeddingBag(10, 32, mode="max")
            self.bag_sum = nn.EmbeddingBag(10, 32, mode="sum")
            self.head = nn.Sequential(nn.Mish(), nn.Linear(32, 8), nn.Hardswish(),
                                      nn.Linear(8, 3), nn.Softmin(dim=1))

        def forward(self, a, b, ids, offsets, weights):
            x = self.unflatten(self.bilinear(a, b))          # (N, 4, 2, 2)
            x = self.conv(self.pad(x))                        # (N, 8, 3, 2)
            x = self.shuffle(F.silu(self.gn(x)))
            x = self.unshuffle(self.up(x))                    # (N, 32, 3, 2)
            x = self.lp(F.pad(x, (0, 0, 0, 1)))               # (N, 32, 2, 1)
            pooled, idx = self.amax(x)
            self.last_indices = idx
            h = self.rms(pooled.mean((2, 3)))
            h = h + self.bag(ids, offsets) + self.bag_sum(ids, offsets, per_sample_weights=weights)
            return self.head(h)

    model = env.init(Zoo())
    opt = torch.optim.NAdam(model.parameters(), lr=1e-2, momentum_decay=4e-3)

    def train_step(a, b, ids, offsets, weights, y):
        p = model(a, b, ids, offsets, weights)
        loss = F.nll_loss(torch.log(p), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, model.last_indices

    step = env.step(train_step)
    a, b = env.randn(3, 4), env.randn(3, 3)
    ids, offsets = env.randint(0, 10, (7,)), torch.tensor([0, 2, 5])
    weights, y = env.rand(7), env.randint(0, 3, (3,))
    for it in range(4):
        env.rec(f"it{it}", step(a, b, ids, offsets, weights, y))
    env.rec("model", model.state_dict())


def loss_zoo(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C, T = 4, 3
    model = env.init(nn.Linear(6, C * T))
    opt = torch.optim.Adamax(model.parameters(), lr=1e-2)
    ce = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.5]), ignore_index=2,
                             label_smoothing=0.1)
    ce_prob = nn.CrossEntropyLoss(label_smoothing=0.2, reduction="sum")
    mlsm = nn.MultiLabelSoftMarginLoss(weight=torch.tensor([0.5, 1.0, 1.5, 2.0]))
    mm = nn.MultiMarginLoss(p=2, margin=0.7, weight=torch.tensor([1.0, 0.5, 2.0, 1.0]))
    cos = nn.CosineEmbeddingLoss(margin=0.2)
    rank = nn.MarginRankingLoss(margin=0.3)
    pois = nn.PoissonNLLLoss(log_input=False, full=True)
    gauss = nn.GaussianNLLLoss(full=True, eps=1e-4)
    huber = nn.HuberLoss(delta=0.5)
    trip = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda u, v: 1.0 - F.cosine_similarity(u, v), margin=0.4, swap=True)

    def train_step(x, seq_y, probs, multi, y, sign, counts):
        out = model(x)
        logits = out.view(-1, C, T)
        flat = out[:, :C]
        losses = {
            "ce": ce(logits, seq_y),
            "ce_prob": ce_prob(flat, probs),
            "mlsm": mlsm(flat, multi),
            "mm": mm(flat, y),
            "cos": cos(out[:, :6], out[:, 6:], sign),
            "rank": rank(flat[:, 0], flat[:, 1], sign),
            "pois": pois(F.softplus(flat), counts),
            "gauss": gauss(flat, counts, F.softplus(out[:, C:2 * C]) + 0.1),
            "huber": huber(flat, counts),
            "trip": trip(out[:2, :6], out[2:4, :6], out[4:6, :6]),
        }
        loss = sum(losses.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return {k: v.item() for k, v in losses.items()}

    step = env.step(train_step)
    x, seq_y = env.randn(6, 6), env.randint(0, C, (6, T))
    probs = F.softmax(env.randn(6, C), 1)
    multi = (env.rand(6, C) > 0.5).float()
    y = env.randint(0, C, (6,))
    sign = (env.rand(6) > 0.5).float() * 2 - 1
    counts = env.randint(0, 4, (6, C)).float()
    for it in range(4):
        env.rec(f"it{it}", step(x, seq_y, probs, multi, y, sign, counts))


def liquid_time_constant(torch, env):
    nn = torch.nn
    n_in, n_units, unfolds = 3, 6, 4

    class LTCCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.gleak = nn.Parameter(torch.full((n_units,), 1.0))
            self.vleak = nn.Parameter(torch.zeros(n_units))
            self.cm = nn.Parameter(torch.full((n_units,), 0.5))
            self.sigma = nn.Parameter(torch.full((n_units, n_units), 3.0))
            self.mu = nn.Parameter(torch.full((n_units, n_units), 0.3))
            self.w = nn.Parameter(torch.full((n_units, n_units), 0.5))
            self.erev = nn.Parameter(torch.ones(n_units, n_units))
            self.sensory_w = nn.Parameter(torch.full((n_in, n_units), 0.5))
            self.sensory_mu = nn.Parameter(torch.full((n_in, n_units), 0.3))
            self.sensory_sigma = nn.Parameter(torch.full((n_in, n_units), 3.0))
            self.sensory_erev = nn.Parameter(torch.ones(n_in, n_units))

        @staticmethod
        def _sigmoid(v, mu, sigma):
            return torch.sigmoid(sigma * (v.unsqueeze(-1) - mu))

        def forward(self, x, v_pre, elapsed=1.0):
            s_act = self.sensory_w * self._sigmoid(x, self.sensory_mu, self.sensory_sigma)
            w_num_s = (s_act * self.sensory_erev).sum(1)
            w_den_s = s_act.sum(1)
            cm_t = self.cm / (elapsed / unfolds)
            for _ in range(unfolds):
                w_act = self.w * self._sigmoid(v_pre, self.mu, self.sigma)
                w_num = (w_act * self.erev).sum(1) + w_num_s
                w_den = w_act.sum(1) + w_den_s
                numerator = cm_t * v_pre + self.gleak * self.vleak + w_num
                denominator = cm_t + self.gleak + w_den
                v_pre = numerator / (denominator + 1e-8)
            return v_pre

        @torch.no_grad()
        def apply_weight_constraints(self):
            self.w.data.clamp_(min=0)
            self.sensory_w.clamp_(min=0)
            self.cm.data.clamp_(0, 1000)
            self.gleak.data = torch.clamp(self.gleak.data, min=0)

    cell = LTCCell()
    with torch.no_grad():
        cell.erev.copy_(env.randn(n_units, n_units).sign())
        cell.w.copy_(env.rand(n_units, n_units))
    env.init(cell)
    readout = env.init(nn.Linear(n_units, 1))
    params = list(cell.parameters()) + list(readout.parameters())
    opt = torch.optim.Adam(params, lr=0.05)

    def train_step(xs, ys):
        h = torch.zeros(xs.size(1), n_units)
        preds = []
        for t in range(xs.size(0)):
            h = cell(xs[t], h)
            preds.append(readout(h))
        loss = torch.mean((torch.stack(preds) - ys) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        cell.apply_weight_constraints()
        return loss

    step = env.step(train_step)
    xs, ys = env.randn(5, 2, n_in), env.randn(5, 2, 1)
    for it in range(4):
        env.rec(f"it{it}", step(xs, ys))
    env.rec("cell", cell.state_dict())
