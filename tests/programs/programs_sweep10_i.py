"""Tutorial programs on less common layers and schedules, written as blog posts write them
(seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): a stacked bidirectional LSTM with proj_size over packed sequences,
a 3-D CNN for short video clips, a float64 model under a warmup + cosine SequentialLR and a
CyclicLR, a kNN / prototype classifier voting with scatter_add_ (gradients clamped in
place), multi-head attention with a per-head 3-D float mask and per-head weights, an
Elman RNN with ReLU nonlinearity trained with gradient clipping by value."""


def lstm_proj_bidirectional(torch, env):
    """A sequence tagger: nn.LSTM(num_layers=2, bidirectional=True, proj_size=4,
    dropout=0.0) over pack_padded_sequence(enforce_sorted=False) of embedded sentences,
    pad_packed_sequence(total_length=...), a per-token linear layer and cross entropy with
    ignore_index=-100 on the padding; the final (h, c) shapes (h projected) are logged."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    rnn_utils = nn.utils.rnn
    V, E, H, P, K = 10, 5, 6, 4, 3
    lengths = torch.tensor([4, 6, 2, 5])
    tokens = torch.randint(1, V, (4, 6))
    tags = tokens % K
    pos = torch.arange(6)[None]
    tokens = tokens.masked_fill(pos >= lengths[:, None], 0)
    tags = tags.masked_fill(pos >= lengths[:, None], -100)

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=0)
            self.lstm = nn.LSTM(E, H, num_layers=2, bidirectional=True, proj_size=P,
                                batch_first=True)
            self.out = nn.Linear(2 * P, K)

        def forward(self, tokens, lengths):
            packed = rnn_utils.pack_padded_sequence(self.emb(tokens), lengths,
                                                    batch_first=True, enforce_sorted=False)
            out, (h, c) = self.lstm(packed)
            out, _ = rnn_utils.pad_packed_sequence(out, batch_first=True,
                                                   total_length=tokens.shape[1])
            return self.out(out), h, c

    model = Tagger()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(tokens, lengths, tags):
        opt.zero_grad()
        logits, h, c = model(tokens, lengths)
        loss = F.cross_entropy(logits.reshape(-1, K), tags.reshape(-1))
        loss.backward()
        opt.step()
        return loss.item(), h.detach(), c.detach()

    step = env.step(train_step)
    hist = [step(tokens, lengths, tags) for _ in range(5)]
    env.rec("losses", [h[0] for h in hist])
    env.rec("h, c", hist[-1][1:])
    env.rec("param shapes", [tuple(p.shape) for p in model.lstm.parameters()])
    env.rec("params", list(model.parameters()))


def video_conv3d(torch, env):
    """Action recognition on tiny clips (B, C, T, H, W): Conv3d with (3, 3, 3) kernels,
    BatchNorm3d, MaxPool3d((1, 2, 2)), a (2+1)-D factorised block (a (1, 3, 3) spatial
    conv then a (3, 1, 1) temporal conv), AdaptiveAvgPool3d(1); temporal upsampling of a
    feature map with F.interpolate(mode="trilinear"); label smoothing cross entropy."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class R2Plus1D(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            self.spatial = nn.Conv3d(c_in, c_out, (1, 3, 3), padding=(0, 1, 1), bias=False)
            self.bn = nn.BatchNorm3d(c_out)
            self.temporal = nn.Conv3d(c_out, c_out, (3, 1, 1), padding=(1, 0, 0))

        def forward(self, x):
            return self.temporal(F.relu(self.bn(self.spatial(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(2, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm3d(4)
            self.pool = nn.MaxPool3d((1, 2, 2))
            self.block = R2Plus1D(4, 6)
            self.head = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(6, 3))

        def forward(self, x):
            h = self.pool(F.relu(self.bn(self.conv(x))))
            h = self.block(h)
            return self.head(h), h

    model = Net()
    clips = torch.randn(4, 2, 4, 6, 6)
    labels = torch.tensor([0, 1, 2, 1])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        logits, _ = model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(clips, labels) for _ in range(4)])
    model.eval()
    with torch.no_grad():
        logits, feat = model(clips)
        up = F.interpolate(feat, size=(8, 3, 3), mode="trilinear", align_corners=False)
    env.rec("eval", [logits, up])
    env.rec("buffers", list(model.buffers()))
    env.rec("params", list(model.parameters()))


def float64_schedules(torch, env):
    """A float64 regression (model.double(), torch.set_default_dtype untouched, data made
    float64 with .double()) under SequentialLR(LinearLR warmup, CosineAnnealingLR), then a
    second phase under CyclicLR(mode="triangular2", cycle_momentum=True) with SGD
    momentum; lr and momentum per step are logged; dtypes of params, grads and loss."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Softplus(), nn.Linear(8, 1)).double()
    x = torch.randn(20, 3).double()
    y = (x ** 2).sum(1, keepdim=True) - 1
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=1e-3)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[3])

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for _ in range(8):
        loss = step(x, y)
        sched.step()
        hist.append((loss.item(), opt.param_groups[0]["lr"]))
    env.rec("phase 1", hist)
    env.rec("dtypes", [loss.dtype, model[0].weight.dtype, model[0].weight.grad.dtype])
    cyc = torch.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.05, step_size_up=2,
                                            mode="triangular2", cycle_momentum=True,
                                            base_momentum=0.8, max_momentum=0.9)
    hist = []
    for _ in range(6):
        loss = step(x, y)
        cyc.step()
        g = opt.param_groups[0]
        hist.append((loss.item(), g["lr"], g["momentum"]))
    env.rec("phase 2", hist)
    env.rec("params", list(model.parameters()))


def knn_prototype_vote(torch, env):
    """An embedding net trained with a prototype loss (negative squared distances from
    torch.cdist to class means as logits), its gradients clamped in place (p.grad.clamp_)
    before the step; then k-nearest-neighbour
    classification: cdist to the support set, topk(largest=False), votes counted with
    scatter_add_ into a (Q, classes) tensor, ties broken by argmax."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    n_cls = 3
    centres = torch.randn(n_cls, 4) * 2
    ys = torch.arange(n_cls).repeat_interleave(6)
    xs = centres[ys] + torch.randn(18, 4)
    yq = torch.arange(n_cls).repeat(3)
    xq = centres[yq] + torch.randn(9, 4)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
    # (SGD, not Adam: distances ignore a shift of every embedding, so the output bias (and
    # a hidden unit active on every input) gets a zero gradient up to rounding, which
    # Adam would turn into full steps)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    def train_step(xs, ys):
        opt.zero_grad()
        emb = net(xs)
        protos = torch.stack([emb[ys == c].mean(0) for c in range(n_cls)])
        logits = -torch.cdist(emb, protos) ** 2
        loss = F.cross_entropy(logits, ys)
        loss.backward()
        for p in net.parameters():
            p.grad.clamp_(-0.05, 0.05)
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(xs, ys) for _ in range(6)])
    with torch.no_grad():
        es, eq = net(xs), net(xq)
        d = torch.cdist(eq, es)
        _, idx = d.topk(5, dim=1, largest=False)
        votes = torch.zeros(xq.shape[0], n_cls)
        votes.scatter_add_(1, ys[idx], torch.ones_like(idx, dtype=torch.float))
        pred = votes.argmax(1)
    env.rec("votes", votes)
    env.rec("acc", (pred == yq).float().mean().item())
    env.rec("params", list(net.parameters()))


def mha_per_head_mask(torch, env):
    """nn.MultiheadAttention (batch_first) with a 3-D float attn_mask of shape
    (B * num_heads, L, S): a different ALiBi-like distance penalty per head plus a causal
    -inf part, average_attn_weights=False to get per-head weights (B, H, L, S); a
    residual block with LayerNorm; a copy task."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    B, L, D, Hh = 3, 5, 8, 2
    slopes = torch.tensor([0.5, 0.125])
    dist = (torch.arange(L)[:, None] - torch.arange(L)[None]).float()
    causal = torch.triu(torch.full((L, L), float("-inf")), 1)
    mask = (-slopes[:, None, None] * dist.abs() + causal).repeat(B, 1, 1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, D)
            self.attn = nn.MultiheadAttention(D, Hh, batch_first=True)
            self.ln = nn.LayerNorm(D)
            self.out = nn.Linear(D, 6)

        def forward(self, tok, mask):
            h = self.emb(tok)
            a, w = self.attn(h, h, h, attn_mask=mask, average_attn_weights=False)
            return self.out(self.ln(h + a)), w

    model = Block()
    tok = torch.randint(0, 6, (B, L))
    target = torch.roll(tok, 1, dims=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(tok, target, mask):
        opt.zero_grad()
        logits, w = model(tok, mask)
        loss = F.cross_entropy(logits[:, 1:].reshape(-1, 6), target[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss.item(), w.detach()

    step = env.step(train_step)
    hist = [step(tok, target, mask) for _ in range(5)]
    env.rec("losses", [h[0] for h in hist])
    env.rec("weights", hist[-1][1])
    params = []
    for n, p in model.named_parameters():
        if n.endswith("in_proj_bias"):      # (the key bias gets no gradient: left out)
            p = torch.cat([p[:D], p[2 * D:]])
        params.append(p)
    env.rec("params", params)


def elman_relu_clip_value(torch, env):
    """An Elman network nn.RNN(nonlinearity="relu", num_layers=2) with identity-initialised
    recurrent weights (IRNN, nn.init.eye_ on weight_hh_l*), gradients clipped by value
    with clip_grad_value_, adding-problem data (a value channel and a marker channel);
    Adamax."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    T = 8
    values = torch.rand(6, T)
    markers = torch.zeros(6, T)
    first = torch.randint(0, T // 2, (6,))
    second = torch.randint(T // 2, T, (6,))
    markers[torch.arange(6), first] = 1
    markers[torch.arange(6), second] = 1
    x = torch.stack([values, markers], -1)
    y = (values * markers).sum(1, keepdim=True)

    class IRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.RNN(2, 12, num_layers=2, nonlinearity="relu", batch_first=True)
            for name, p in self.rnn.named_parameters():
                if name.startswith("weight_hh"):
                    nn.init.eye_(p)
                elif name.startswith("bias"):
                    nn.init.zeros_(p)
            self.out = nn.Linear(12, 1)

        def forward(self, x):
            out, h = self.rnn(x)
            return self.out(out[:, -1]), h

    model = IRNN()
    opt = torch.optim.Adamax(model.parameters(), lr=2e-3)

    def train_step(x, y):
        opt.zero_grad()
        pred, h = model(x)
        loss = F.mse_loss(pred, y)
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(6)])
    env.rec("params", list(model.parameters()))
