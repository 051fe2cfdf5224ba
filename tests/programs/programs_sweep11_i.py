"""Tutorial programs on less common tensor operations in training steps (see
tutorial_harness.py): overlapping-patch inpainting with nn.Unfold / nn.Fold, embedding
alignment with an SVD Procrustes step, a determinantal point process likelihood with
slogdet, a forecaster over Tensor.unfold sliding windows, graph pooling with scatter_reduce
and index_reduce_, and the get_total_norm / clip_grads_with_norm_ pair with CyclicLR and
PolynomialLR."""


def unfold_fold_inpainting(torch, env):
    """Patch-based inpainting: nn.Unfold(kernel 4, stride 2) turns masked images into
    overlapping patches, an MLP predicts each patch, nn.Fold sums them back and the overlap
    count (Fold of Unfold of ones) divides; the loss only on the masked pixels."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    unfold, fold = nn.Unfold(4, stride=2), nn.Fold((10, 10), 4, stride=2)
    net = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 16))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    img = torch.rand(3, 1, 10, 10)
    mask = torch.ones(1, 1, 10, 10)
    mask[..., 3:7, 3:7] = 0
    counts = fold(unfold(torch.ones(1, 1, 10, 10)))

    def train_step(img, mask):
        opt.zero_grad()
        patches = unfold(img * mask).transpose(1, 2)            # [B, L, 16]
        mpatch = unfold(mask.expand_as(img)).transpose(1, 2)
        pred = net(torch.cat([patches, mpatch], -1)).transpose(1, 2)
        out = fold(pred) / counts
        loss = F.mse_loss(out * (1 - mask), img * (1 - mask), reduction="sum") / (1 - mask).sum()
        loss.backward()
        opt.step()
        return loss, out.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, out = step(img, mask)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("out", out)
    env.rec("params", list(net.parameters()))


def procrustes_alignment(torch, env):
    """MUSE-style embedding alignment: a linear map W trained by SGD on a dictionary's
    pairs, then orthogonalised each step (W <- (1 + b) W - b W W^T W) and, at the end,
    replaced by the Procrustes solution U V^T from torch.linalg.svd(Y^T X); cosine
    similarities via F.normalize and the nearest neighbours by topk."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    D = 5
    src = torch.randn(20, D)
    q, _ = torch.linalg.qr(torch.randn(D, D))
    tgt = src @ q.T + 0.01 * torch.randn(20, D)
    mapping = nn.Linear(D, D, bias=False)
    nn.init.eye_(mapping.weight)
    opt = torch.optim.SGD(mapping.parameters(), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(mapping(x), y)
        loss.backward()
        opt.step()
        with torch.no_grad():
            w = mapping.weight
            w.copy_((1 + 0.01) * w - 0.01 * w @ w.T @ w)
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(src, tgt).item() for _ in range(6)])
    u, s, vh = torch.linalg.svd(tgt.T @ src)
    w = u @ vh
    sims = F.normalize(src @ w.T, dim=1) @ F.normalize(tgt, dim=1).T
    env.rec("procrustes", w @ w.T)
    env.rec("nn", sims.topk(2, dim=1).indices)
    env.rec("singular values", s)
    env.rec("params", list(mapping.parameters()))


def dpp_slogdet(torch, env):
    """A determinantal point process with a learned low-rank kernel L = B B^T + eps I: the
    log-likelihood of observed subsets log det(L_Y) - log det(L + I) with
    torch.linalg.slogdet (and torch.logdet for the normaliser), the subsets selected by
    index tensors L[idx][:, idx]; Adam on B."""
    nn = torch.nn
    torch.manual_seed(0)
    N, R = 6, 3
    B = nn.Parameter(torch.randn(N, R) * 0.5)
    opt = torch.optim.Adam([B], lr=0.05)
    subsets = [torch.tensor([0, 2]), torch.tensor([1, 3, 5]), torch.tensor([0, 4])]

    def train_step(s0, s1, s2):
        opt.zero_grad()
        L = B @ B.T + 1e-3 * torch.eye(N)
        norm = torch.logdet(L + torch.eye(N))
        ll = 0
        for idx in (s0, s1, s2):
            sign, logabs = torch.linalg.slogdet(L[idx][:, idx])
            ll = ll + logabs - norm
        loss = -ll / 3
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(*subsets).item() for _ in range(6)])
    env.rec("kernel", B @ B.T)


def unfold_window_forecaster(torch, env):
    """A time-series forecaster over sliding windows made by series.unfold(0, W + 1, 1)
    (inputs and next-value targets split from each window), a 1-D conv then a GRU over the
    window, Huber loss, ReduceLROnPlateau on the training loss; a multi-step rollout at the
    end feeding predictions back with torch.cat."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    W = 8
    t = torch.arange(60, dtype=torch.float32)
    series = torch.sin(t / 4) + 0.1 * torch.cos(t)
    windows = series.unfold(0, W + 1, 1)        # [52, W + 1]
    x, y = windows[:, :W].unsqueeze(1), windows[:, W:]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(1, 4, 3, padding=1)
            self.gru = nn.GRU(4, 8, batch_first=True)
            self.out = nn.Linear(8, 1)

        def forward(self, x):
            h, _ = self.gru(F.relu(self.conv(x)).transpose(1, 2))
            return self.out(h[:, -1])

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.huber_loss(model(x), y, delta=0.5)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        loss = step(x, y)
        sched.step(loss.item())
        hist.append((loss.item(), opt.param_groups[0]["lr"]))
    env.rec("hist", hist)
    with torch.no_grad():
        ctx = series[-W:].clone()
        for _ in range(4):
            nxt = model(ctx[-W:].view(1, 1, W)).view(1)
            ctx = torch.cat([ctx, nxt])
    env.rec("rollout", ctx[-4:])


def scatter_reduce_graph_pool(torch, env):
    """Graph classification with hand-written pooling: messages summed to nodes by
    index_add, node features max-pooled per graph by scatter_reduce(reduce="amax",
    include_self=False) and mean-pooled by index_reduce_(reduce="mean",
    include_self=False) into zeros; the two pools concatenated for the classifier."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    n_nodes, G = 10, 3
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    src = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 4])
    dst = torch.tensor([1, 2, 0, 4, 5, 6, 3, 8, 9, 7, 0, 6])
    feats = torch.randn(n_nodes, 4)
    labels = torch.tensor([0, 1, 0])
    lin1, lin2, cls = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(16, 2)
    params = [p for m in (lin1, lin2, cls) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)

    def train_step(feats, src, dst, batch, labels):
        opt.zero_grad()
        h = F.relu(lin1(feats))
        msg = torch.zeros_like(h).index_add(0, dst, h[src])
        h = F.relu(lin2(h + msg))
        idx = batch.unsqueeze(1).expand(-1, h.shape[1])
        hmax = torch.zeros(G, h.shape[1]).scatter_reduce(0, idx, h, reduce="amax",
                                                         include_self=False)
        hmean = torch.zeros(G, h.shape[1]).index_reduce_(0, batch, h, "mean",
                                                         include_self=False)
        loss = F.cross_entropy(cls(torch.cat([hmax, hmean], 1)), labels)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(feats, src, dst, batch, labels).item() for _ in range(6)])
    env.rec("params", params)


def total_norm_cyclic_poly(torch, env):
    """PyTorch 2.6's split clipping: norms = [p.grad for p], total =
    torch.nn.utils.get_total_norm(grads, norm_type=2.0), clip_grads_with_norm_(params, 1.0,
    total) (logging the norm in between); a CyclicLR(mode="exp_range", cycle_momentum=True)
    on SGD and a PolynomialLR(power=2) on Adam for a second head."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    body, head = nn.Linear(5, 10), nn.Linear(10, 3)
    opt_a = torch.optim.SGD(body.parameters(), lr=0.01, momentum=0.9)
    opt_b = torch.optim.Adam(head.parameters(), lr=1e-2)
    s_a = torch.optim.lr_scheduler.CyclicLR(opt_a, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                            mode="exp_range", gamma=0.9)
    s_b = torch.optim.lr_scheduler.PolynomialLR(opt_b, total_iters=5, power=2.0)
    params = list(body.parameters()) + list(head.parameters())
    x, y = torch.randn(16, 5) * 4, torch.randint(0, 3, (16,))

    def train_step(x, y):
        opt_a.zero_grad()
        opt_b.zero_grad()
        loss = F.cross_entropy(head(torch.relu(body(x))), y)
        loss.backward()
        total = torch.nn.utils.get_total_norm([p.grad for p in params], norm_type=2.0)
        torch.nn.utils.clip_grads_with_norm_(params, 1.0, total)
        opt_a.step()
        opt_b.step()
        return loss, total

    step = env.step(train_step)
    hist = []
    for _ in range(7):
        loss, total = step(x, y)
        s_a.step()
        s_b.step()
        hist.append((loss.item(), total.item(), s_a.get_last_lr()[0],
                     opt_a.param_groups[0]["momentum"], s_b.get_last_lr()[0]))
    env.rec("hist", hist)
    env.rec("params", params)
