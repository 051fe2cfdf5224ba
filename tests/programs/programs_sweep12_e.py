"""Tutorial graph and structured-output programs (see tutorial_harness.py): a graph
autoencoder for link prediction with negative edges, an E(n)-equivariant GNN, SchNet's
radial-basis continuous filters, APPNP propagation, a differentiable soft rank for a
Spearman loss, sparsemax as an autograd.Function, the proxy-anchor loss and the center
loss with its own optimiser."""


def gae_link_prediction(torch, env):
    """Kipf & Welling's graph autoencoder: a GCN encoder on the symmetrically normalised
    adjacency D^-1/2 (A + I) D^-1/2 built from an edge_index with index_put_, inner-product
    decoder on positive edges and negative edges sampled with torch.randint, BCE with
    logits; the AUC-like metric (pos > neg) fraction."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    N = 10
    src = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 2, 4])
    dst = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 5, 7, 9])
    A = torch.zeros(N, N)
    A.index_put_((src, dst), torch.ones(len(src)))
    A = A + A.t() + torch.eye(N)
    dinv = A.sum(1).pow(-0.5)
    A_hat = dinv[:, None] * A * dinv[None, :]
    X = torch.randn(N, 5)
    l1, l2 = nn.Linear(5, 16), nn.Linear(16, 8)
    params = list(l1.parameters()) + list(l2.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)

    def train_step(X, A_hat, src, dst, neg_src, neg_dst):
        z = A_hat @ l2(F.relu(A_hat @ l1(X)))
        pos = (z[src] * z[dst]).sum(-1)
        neg = (z[neg_src] * z[neg_dst]).sum(-1)
        loss = (F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos))
                + F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, (pos[:, None] > neg[None, :]).float().mean()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        ns, nd = torch.randint(0, N, (12,)), torch.randint(0, N, (12,))
        loss, auc = step(X, A_hat, src, dst, ns, nd)
        hist.append((loss.item(), auc.item()))
    env.rec("hist", hist)
    env.rec("params", params)


def egnn_equivariant(torch, env):
    """Satorras et al.'s E(n)-equivariant GNN layer on a fully connected graph: edge
    messages from (h_i, h_j, ||x_i - x_j||^2), coordinates updated by x_i + mean_j (x_i -
    x_j) phi_x(m_ij), node features by index_add_ of messages; the equivariance check under
    a rotation from torch.linalg.qr, trained to regress a rotation-invariant target."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    N, H = 6, 8
    rows, cols = torch.where(~torch.eye(N, dtype=torch.bool))

    class EGCL(nn.Module):
        def __init__(self):
            super().__init__()
            self.phi_e = nn.Sequential(nn.Linear(2 * H + 1, H), nn.SiLU(), nn.Linear(H, H),
                                       nn.SiLU())
            self.phi_x = nn.Sequential(nn.Linear(H, H), nn.SiLU(), nn.Linear(H, 1))
            self.phi_h = nn.Sequential(nn.Linear(2 * H, H), nn.SiLU(), nn.Linear(H, H))

        def forward(self, h, x):
            diff = x[rows] - x[cols]
            d2 = diff.pow(2).sum(-1, keepdim=True)
            m = self.phi_e(torch.cat([h[rows], h[cols], d2], -1))
            x = x + torch.zeros_like(x).index_add_(0, rows, diff * self.phi_x(m)) / (N - 1)
            agg = torch.zeros_like(h).index_add_(0, rows, m)
            return h + self.phi_h(torch.cat([h, agg], -1)), x

    emb, l1, l2, out = nn.Linear(3, H), EGCL(), EGCL(), nn.Linear(H, 1)
    params = [p for m in (emb, l1, l2, out) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=5e-3)
    feats, pos = torch.randn(N, 3), torch.randn(N, 3)
    target = torch.cdist(pos, pos).mean().view(1)
    Q, _ = torch.linalg.qr(torch.randn(3, 3))

    def forward(feats, pos):
        h, x = emb(feats), pos
        h, x = l1(h, x)
        h, x = l2(h, x)
        return out(h).mean(0), x

    def train_step(feats, pos, target):
        pred, _ = forward(feats, pos)
        loss = F.mse_loss(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(feats, pos, target).item() for _ in range(4)])
    with torch.no_grad():
        p1, x1 = forward(feats, pos)
        p2, x2 = forward(feats, pos @ Q.t())
    env.rec("equivariance", [(p1 - p2).abs().max().item() < 1e-4,
                             (x1 @ Q.t() - x2).abs().max().item() < 1e-4])
    env.rec("params", params)


def schnet_rbf_filter(torch, env):
    """SchNet's continuous-filter convolution: interatomic distances expanded in Gaussian
    radial basis functions exp(-gamma (d - mu_k)^2), a cosine cutoff 0.5 (cos(pi d / rc) +
    1) * (d < rc), filters W(d) by an MLP with shifted softplus (softplus(x) - log 2), the
    interaction sum over neighbours; energies summed per molecule with index_add and forces
    as -dE/dpos by autograd.grad(create_graph=True) in the loss."""
    nn, F = torch.nn, torch.nn.functional
    import math
    torch.manual_seed(0)
    H, K, rc = 8, 10, 3.0
    mus = torch.linspace(0, rc, K)

    def ssp(x):
        return F.softplus(x) - math.log(2.0)

    emb = nn.Embedding(4, H)
    filt = nn.Sequential(nn.Linear(K, H), nn.Softplus(), nn.Linear(H, H))
    lin_in, lin_out = nn.Linear(H, H, bias=False), nn.Linear(H, H)
    readout = nn.Sequential(nn.Linear(H, 4), nn.Softplus(), nn.Linear(4, 1))
    params = [p for m in (emb, filt, lin_in, lin_out, readout) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=2e-3)
    Z = torch.randint(0, 4, (7,))
    pos = torch.randn(7, 3)
    mol = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    same = (mol[:, None] == mol[None, :]) & ~torch.eye(7, dtype=torch.bool)
    i, j = torch.where(same)
    E_ref, F_ref = torch.tensor([-1.0, 0.5]), torch.randn(7, 3) * 0.1

    def train_step(Z, pos, E_ref, F_ref):
        pos = pos.clone().requires_grad_(True)
        d = (pos[i] - pos[j]).norm(dim=-1)
        rbf = torch.exp(-10.0 * (d[:, None] - mus) ** 2)
        cut = 0.5 * (torch.cos(d * math.pi / rc) + 1) * (d < rc).float()
        W = filt(rbf) * cut[:, None]
        h = emb(Z)
        msg = lin_in(h)[j] * W
        h = h + lin_out(ssp(torch.zeros_like(h).index_add(0, i, msg)))
        E = torch.zeros(2).index_add(0, mol, readout(h).squeeze(-1))
        (dE,) = torch.autograd.grad(E.sum(), pos, create_graph=True)
        loss = F.mse_loss(E, E_ref) + 10 * F.mse_loss(-dE, F_ref)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(Z, pos, E_ref, F_ref).item() for _ in range(4)])
    env.rec("params", params)


def appnp_propagation(torch, env):
    """APPNP (predict then propagate): an MLP's predictions H, then K power-iteration
    steps Z = (1 - alpha) A_hat Z + alpha H with dropout on the adjacency-free features,
    cross-entropy on a train mask given as a bool tensor (logits[mask]), eval accuracy on
    the others."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    N = 12
    A = (torch.rand(N, N) < 0.3).float()
    A = ((A + A.t()) > 0).float().fill_diagonal_(1.0)
    deg = A.sum(1)
    A_hat = A / deg.sqrt()[:, None] / deg.sqrt()[None, :]
    X, y = torch.randn(N, 6), torch.randint(0, 3, (N,))
    train_mask = torch.zeros(N, dtype=torch.bool)
    train_mask[:7] = True
    mlp = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-2, weight_decay=5e-4)

    def propagate(H, alpha=0.1, K=5):
        Z = H
        for _ in range(K):
            Z = (1 - alpha) * (A_hat @ Z) + alpha * H
        return Z

    def train_step(X, y, train_mask):
        logits = propagate(mlp(X))
        loss = F.cross_entropy(logits[train_mask], y[train_mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (logits.argmax(1)[~train_mask] == y[~train_mask]).float().mean()
        return loss, acc

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, acc = step(X, y, train_mask)
        hist.append((loss.item(), acc.item()))
    env.rec("hist", hist)
    env.rec("params", list(mlp.parameters()))


def soft_rank_spearman(torch, env):
    """A differentiable Spearman loss: soft ranks as 1 + sum_j sigmoid((s_i - s_j) / tau)
    - 0.5 over pairwise differences (broadcasting), centred and normalised ranks, the
    correlation with the true ranks from argsort().argsort(); a scorer trained to maximise
    it, with Adam and clip_grad_value_."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    scorer = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1, bias=False))  # (ranks: shift-free)
    opt = torch.optim.Adam(scorer.parameters(), lr=1e-2)
    x = torch.randn(3, 10, 4)
    target = (x[..., 0] - x[..., 1] ** 2)
    true_rank = target.argsort(-1).argsort(-1).float() + 1

    def soft_rank(s, tau):
        return 0.5 + torch.sigmoid((s.unsqueeze(-1) - s.unsqueeze(-2)) / tau).sum(-1)

    def corr(a, b):
        a, b = a - a.mean(-1, keepdim=True), b - b.mean(-1, keepdim=True)
        return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))

    def train_step(x, true_rank, tau):
        s = scorer(x).squeeze(-1)
        loss = 1 - corr(soft_rank(s, tau), true_rank).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(scorer.parameters(), 0.1)
        opt.step()
        hard = corr(s.argsort(-1).argsort(-1).float(), true_rank).mean()
        return loss, hard

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, hard = step(x, true_rank, 0.5)
        hist.append((loss.item(), hard.item()))
    env.rec("hist", hist)
    env.rec("params", list(scorer.parameters()))


def sparsemax_function(torch, env):
    """Sparsemax (Martins & Astudillo) as a torch.autograd.Function: forward by sorting
    descending, cumsum, the support size k(z) = max{k : 1 + k z_(k) > sum_{j<=k} z_(j)}
    via a comparison with arange and sum, tau, clamp(min=0); backward on the support
    (grad - mean over the support) * mask; used as the attention normaliser."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Sparsemax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            zs, _ = torch.sort(z, dim=-1, descending=True)
            ks = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
            cs = zs.cumsum(-1)
            support = (1 + ks * zs) > cs
            k = support.sum(-1, keepdim=True)
            tau = (cs.gather(-1, k - 1) - 1) / k.to(z.dtype)
            out = (z - tau).clamp(min=0)
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            (out,) = ctx.saved_tensors
            mask = (out > 0).to(g.dtype)
            v = (g * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True)
            return mask * (g - v)

    q, kv = nn.Linear(5, 8), nn.Linear(5, 16)
    clf = nn.Linear(8, 2)
    params = [p for m in (q, kv, clf) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.3)
    x, y = torch.randn(6, 7, 5), torch.randint(0, 2, (6,))

    def train_step(x, y):
        k, v = kv(x).chunk(2, -1)
        scores = q(x.mean(1, keepdim=True)) @ k.transpose(1, 2) / 8 ** 0.5
        a = Sparsemax.apply(scores * 3)
        loss = F.cross_entropy(clf((a @ v).squeeze(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, (a > 0).sum(-1)

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, support = step(x, y)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("support", support)
    env.rec("params", params)


def proxy_anchor_loss(torch, env):
    """Kim et al.'s proxy-anchor loss: learnable class proxies (nn.Parameter, kaiming
    init by hand), cosine similarities F.normalize(x) @ F.normalize(P).T, positive and
    negative terms with log(1 + sum exp(...)) per proxy (softplus of logsumexp), only
    proxies with positives averaged (nonzero count), the proxies on a 100x learning rate
    in their own param group."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C, D = 4, 8
    emb = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, D))
    proxies = nn.Parameter(torch.randn(C, D) * (2 / D) ** 0.5)
    opt = torch.optim.AdamW([{"params": emb.parameters()},
                             {"params": [proxies], "lr": 1e-1}], lr=1e-3)
    x, y = torch.randn(12, 6), torch.randint(0, 3, (12,))
    alpha, delta = 32.0, 0.1

    def train_step(x, y):
        cos = F.normalize(emb(x)) @ F.normalize(proxies).t()
        P_one_hot = F.one_hot(y, C).float()
        N_one_hot = 1 - P_one_hot
        pos_exp = torch.exp(-alpha * (cos - delta))
        neg_exp = torch.exp(alpha * (cos + delta))
        with_pos = torch.nonzero(P_one_hot.sum(0) != 0).squeeze(1)
        P_sim = torch.where(P_one_hot == 1, pos_exp, torch.zeros_like(pos_exp)).sum(0)
        N_sim = torch.where(N_one_hot == 1, neg_exp, torch.zeros_like(neg_exp)).sum(0)
        loss = (torch.log(1 + P_sim).sum() / len(with_pos)
                + torch.log(1 + N_sim).sum() / C)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", list(emb.parameters()) + [proxies])


def center_loss_two_optimizers(torch, env):
    """Wen et al.'s center loss as the popular repo writes it: centers an nn.Parameter in
    a CenterLoss module, distances ||x||^2 + ||c||^2 - 2 x c^T by addmm_(x, c.t(), beta=1,
    alpha=-2) on an expanded sum, masked by labels, clamped; two optimisers, and the centers'
    gradients rescaled by 1 / weight before their SGD step (for p in
    center_loss.parameters(): p.grad.data *= 1 / weight)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C, D = 3, 2

    class CenterLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.centers = nn.Parameter(torch.randn(C, D))

        def forward(self, x, labels):
            B = x.shape[0]
            distmat = (x.pow(2).sum(1, keepdim=True).expand(B, C)
                       + self.centers.pow(2).sum(1, keepdim=True).expand(C, B).t())
            distmat.addmm_(x, self.centers.t(), beta=1, alpha=-2)
            classes = torch.arange(C).long()
            mask = labels.unsqueeze(1).expand(B, C).eq(classes.expand(B, C))
            dist = distmat * mask.float()
            return dist.clamp(min=1e-12, max=1e12).sum() / B

    feat = nn.Sequential(nn.Linear(5, 16), nn.PReLU(), nn.Linear(16, D))
    clf = nn.Linear(D, C)
    closs = CenterLoss()
    opt = torch.optim.SGD(list(feat.parameters()) + list(clf.parameters()), lr=0.05,
                          momentum=0.9)
    opt_c = torch.optim.SGD(closs.parameters(), lr=0.5)
    x, y = torch.randn(15, 5), torch.randint(0, C, (15,))
    weight = 0.1

    def train_step(x, y):
        f = feat(x)
        loss = F.cross_entropy(clf(f), y) + weight * closs(f, y)
        opt.zero_grad()
        opt_c.zero_grad()
        loss.backward()
        opt.step()
        for p in closs.parameters():
            p.grad.data *= 1.0 / weight
        opt_c.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", list(feat.parameters()) + list(clf.parameters()) + [closs.centers])
