"""More tutorial programs (see tutorial_harness.py): precise batch-norm statistics with
momentum=None (the cumulative average) inside the compiled step, a relational GCN with
basis decomposition, word2vec's hierarchical softmax over Huffman-style codes, a
Wasserstein autoencoder with an MMD penalty, and TD(lambda) with eligibility traces
updated by hand from .grad."""


def precise_bn_cumulative(torch, env):
    """A classifier trained with BatchNorm2d(momentum=None) (the cumulative moving average
    of the running statistics, factor 1 / num_batches_tracked) in the compiled step, then the
    "precise BN" recipe: reset_running_stats() and a compiled no_grad pass over batches in
    train mode to recompute them, and an eval() forward."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False),
                          nn.BatchNorm2d(4, momentum=None), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs = [torch.randn(6, 2, 5, 5) for _ in range(3)]
    ys = [torch.randint(0, 3, (6,)) for _ in range(3)]

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    @torch.no_grad()
    def stats_pass(x):
        model(x)

    step, recompute = env.step(train_step), env.step(stats_pass)
    hist = []
    for epoch in range(3):
        for x, y in zip(xs, ys):
            hist.append(step(x, y).item())
    env.rec("hist", hist)
    env.rec("buffers", list(model.buffers()))
    model[1].reset_running_stats()
    for x in xs:
        recompute(x)
    env.rec("precise", list(model.buffers()))
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(xs[0]))
    env.rec("params", list(model.parameters()))


def rgcn_basis(torch, env):
    """Schlichtkrull et al.'s R-GCN layer with basis decomposition: W_r = sum_b a_rb V_b
    (einsum of the coefficients with the bases), messages per relation gathered by edge
    type (W[etype] batched with bmm), normalised by in-degree per relation, summed into the
    nodes with index_add_, a self-loop weight; link types classified per node."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    N, R, B, D = 8, 3, 2, 6
    src = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 0, 2, 4, 6])
    dst = torch.tensor([1, 2, 3, 4, 5, 6, 7, 0, 4, 6, 0, 2])
    etype = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])
    key = dst * R + etype
    deg = torch.zeros(N * R).index_add_(0, key, torch.ones(len(key)))
    norm = (1.0 / deg[key]).unsqueeze(-1)

    class RGCNLayer(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.bases = nn.Parameter(torch.randn(B, d_in, d_out) * 0.3)
            self.coef = nn.Parameter(torch.randn(R, B))
            self.self_loop = nn.Linear(d_in, d_out)

        def forward(self, h):
            W = torch.einsum("rb,bio->rio", self.coef, self.bases)
            msg = torch.bmm(h[src].unsqueeze(1), W[etype]).squeeze(1) * norm
            agg = torch.zeros(N, W.shape[-1]).index_add_(0, dst, msg)
            return agg + self.self_loop(h)

    emb = nn.Embedding(N, D)
    l1, l2 = RGCNLayer(D, D), RGCNLayer(D, 3)
    params = [p for m in (emb, l1, l2) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    y = torch.randint(0, 3, (N,))

    def train_step(y):
        h = F.relu(l1(emb.weight))
        loss = F.cross_entropy(l2(h), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(y).item() for _ in range(5)])
    env.rec("params", params)


def hierarchical_softmax(torch, env):
    """word2vec's hierarchical softmax: each word's path of inner nodes and binary codes
    (padded to the longest path with a mask), log sigmoid((1 - 2 code) * <v_in, u_node>)
    summed along the path; skip-gram pairs; SparseAdam-free plain SGD on the embedding
    tables (the reference implementation's learning rate linearly decayed by hand)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, L = 8, 6, 3
    # a complete binary tree over 8 words: 7 inner nodes, codes = the word's bits
    paths = torch.tensor([[0, 1 + (w >> 2), 3 + (w >> 1)] for w in range(V)])
    codes = torch.tensor([[(w >> 2) & 1, (w >> 1) & 1, w & 1] for w in range(V)]).float()
    mask = torch.ones(V, L)
    mask[0, 2] = 0                          # (one shorter path, padded)
    w_in, w_node = nn.Embedding(V, D), nn.Embedding(V - 1, D)
    nn.init.zeros_(w_node.weight)
    params = list(w_in.parameters()) + list(w_node.parameters())
    opt = torch.optim.SGD(params, lr=0.5)
    center = torch.randint(0, V, (20,))
    context = (center + torch.randint(1, 3, (20,))) % V

    def train_step(center, context):
        v = w_in(center)                                    # (B, D)
        u = w_node(paths[context])                          # (B, L, D)
        score = (u * v.unsqueeze(1)).sum(-1)
        sign = 1 - 2 * codes[context]
        loss = -(F.logsigmoid(sign * score) * mask[context]).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for k in range(6):
        opt.param_groups[0]["lr"] = 0.5 * max(1e-4, 1 - k / 6)
        hist.append(step(center, context).item())
    env.rec("hist", hist)
    env.rec("params", params)


def wae_mmd(torch, env):
    """A Wasserstein autoencoder (Tolstikhin et al.) with the MMD penalty under the inverse
    multiquadratic kernel C / (C + ||x - y||^2) summed over scales, the diagonal removed
    (sum minus trace) for the unbiased estimate, prior samples z ~ N(0, I) each step;
    Adam with betas (0.5, 0.999)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    Z = 2
    enc = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, Z))
    dec = nn.Sequential(nn.Linear(Z, 16), nn.ReLU(), nn.Linear(16, 6))
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, betas=(0.5, 0.999))
    x = torch.randn(12, 6)

    def imq(a, b):
        d = torch.cdist(a, b).pow(2)
        return sum(C / (C + d) for C in (2.0 * Z * s for s in (0.5, 1.0, 2.0)))

    def mmd(zq, zp):
        n = zq.shape[0]
        kqq, kpp, kqp = imq(zq, zq), imq(zp, zp), imq(zq, zp)
        return ((kqq.sum() - kqq.diagonal().sum()) / (n * (n - 1))
                + (kpp.sum() - kpp.diagonal().sum()) / (n * (n - 1))
                - 2 * kqp.mean())

    def train_step(x, zp):
        zq = enc(x)
        loss = F.mse_loss(dec(zq), x, reduction="sum") / x.shape[0] + 10.0 * mmd(zq, zp)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, torch.randn(12, Z)).item() for _ in range(5)])
    env.rec("params", params)


def td_lambda_traces(torch, env):
    """TD(lambda) with a neural value function and accumulating eligibility traces, as in
    Sutton & Barto: v(s).backward() for the gradient, traces z = gamma * lambda * z + grad
    kept beside the parameters, the update p += alpha * delta * z under no_grad (delta from
    the rewards and v(s')), the traces reset at episode ends by a Python flag."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    v = nn.Sequential(nn.Linear(3, 12), nn.Tanh(), nn.Linear(12, 1))
    traces = [torch.zeros_like(p) for p in v.parameters()]
    gamma, lam, alpha = 0.9, 0.8, 0.05

    def td_step(s, r, s2, done):
        value = v(s).squeeze()
        for p in v.parameters():
            p.grad = None
        value.backward()
        with torch.no_grad():
            target = r + (0.0 if done else gamma) * v(s2).squeeze()
            delta = target - value
            for z, p in zip(traces, v.parameters()):
                z.mul_(gamma * lam).add_(p.grad)
                p.add_(alpha * delta * z)
            if done:
                for z in traces:
                    z.zero_()
        return delta

    step = env.step(td_step)
    states = torch.randn(9, 3)
    rewards = torch.randn(8)
    deltas = [step(states[t], rewards[t], states[t + 1], t in (3, 7)) for t in range(8)]
    env.rec("deltas", deltas)
    env.rec("params", list(v.parameters()))
    env.rec("traces", traces)


def plateau_step_in_train_step(torch, env):
    """ReduceLROnPlateau.step(loss) called inside the training step with the loss tensor
    (as some notebooks do, per batch): the scheduler's best / num_bad_epochs and the
    group's lr change from the loss's value, patience 1, factor 0.5."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    x, y = torch.randn(8, 4), torch.randn(8, 2)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(loss)
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(10)])
    env.rec("lr", opt.param_groups[0]["lr"])
    env.rec("params", list(model.parameters()))
