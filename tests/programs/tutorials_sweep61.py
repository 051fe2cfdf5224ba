"""Sweep 61 (H1): tutorial programs of kinds the earlier sweeps had not written: the
neural-operator tutorial's FNO-1d (complex Fourier weights: compiled code has no complex
values, a strict xfail of the compiled run), a minimal Mamba language model (a selective
scan written as a Python loop over time), DiffPool on batched dense graphs, and learned
ISTA (unrolled soft thresholding). Synthetic data; in-step randomness from the library's
own seeded generator (llgrad's streams are torch's). Programs `f(torch, env)`, see
tutorial_harness.py."""
import math

def fno_1d(torch, env):
    """The neural operator tutorial's FNO-1d (Li et al.'s fourier_1d.py): a learned
    complex multiplier on the lowest Fourier modes (rfft, einsum on cfloat weights,
    out_ft[:, :, :modes] = ..., irfft) beside a 1x1 Conv1d, GELU; Adam on complex params,
    a relative L2 loss, StepLR."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(30)
    n, s, modes, width = 12, 32, 5, 8

    class SpectralConv1d(nn.Module):
        def __init__(self, in_channels, out_channels, modes1):
            super().__init__()
            self.in_channels, self.out_channels, self.modes1 = in_channels, out_channels, modes1
            self.scale = 1 / (in_channels * out_channels)
            self.weights1 = nn.Parameter(
                self.scale * torch.rand(in_channels, out_channels, self.modes1, dtype=torch.cfloat))

        def compl_mul1d(self, input, weights):
            return torch.einsum("bix,iox->box", input, weights)

        def forward(self, x):
            batchsize = x.shape[0]
            x_ft = torch.fft.rfft(x)
            out_ft = torch.zeros(batchsize, self.out_channels, x.size(-1) // 2 + 1,
                                 dtype=torch.cfloat)
            out_ft[:, :, :self.modes1] = self.compl_mul1d(x_ft[:, :, :self.modes1], self.weights1)
            return torch.fft.irfft(out_ft, n=x.size(-1))

    class FNO1d(nn.Module):
        def __init__(self, modes, width):
            super().__init__()
            self.fc0 = nn.Linear(2, width)
            self.conv0 = SpectralConv1d(width, width, modes)
            self.conv1 = SpectralConv1d(width, width, modes)
            self.w0 = nn.Conv1d(width, width, 1)
            self.w1 = nn.Conv1d(width, width, 1)
            self.fc1 = nn.Linear(width, 16)
            self.fc2 = nn.Linear(16, 1)

        def get_grid(self, shape):
            batchsize, size_x = shape[0], shape[1]
            gridx = torch.linspace(0, 1, size_x, dtype=torch.float)
            return gridx.reshape(1, size_x, 1).repeat([batchsize, 1, 1])

        def forward(self, x):
            grid = self.get_grid(x.shape)
            x = torch.cat((x, grid), dim=-1)
            x = self.fc0(x).permute(0, 2, 1)
            x = F.gelu(self.conv0(x) + self.w0(x))
            x = self.conv1(x) + self.w1(x)
            x = x.permute(0, 2, 1)
            return self.fc2(F.gelu(self.fc1(x)))

    def rel_l2(pred, y):
        diff = torch.norm(pred.reshape(pred.size(0), -1) - y.reshape(y.size(0), -1), 2, 1)
        return (diff / torch.norm(y.reshape(y.size(0), -1), 2, 1)).sum()

    # data: u0 = random low-frequency signal; target: its antiderivative-like smoothing
    xs = torch.linspace(0, 1, s)
    coef = env.randn(n, 5)
    k = torch.arange(1, 6).float()
    a = (coef[:, :, None] * torch.sin(2 * math.pi * k[None, :, None] * xs)).sum(1)
    u = (coef[:, :, None] * torch.cos(2 * math.pi * k[None, :, None] * xs)
         / k[None, :, None]).sum(1)
    a, u = a.unsqueeze(-1), u.unsqueeze(-1)

    model = env.init(FNO1d(modes, width))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    def train_step(x, y):
        optimizer.zero_grad()
        out = model(x)
        loss = rel_l2(out.view(x.size(0), -1), y.view(x.size(0), -1))
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(train_step)
    for ep in range(4):
        for b in range(0, 8, 4):
            env.rec(f"ep{ep} b{b}", step(a[b:b + 4], u[b:b + 4]))
        scheduler.step()
    with torch.no_grad():
        env.rec("test", rel_l2(model(a[8:]).view(4, -1), u[8:].view(4, -1)))
    env.rec("params", dict(model.state_dict()))


def mamba_selective_scan(torch, env):
    """A minimal Mamba LM (johnma2006/mamba-minimal, "Mamba: the easy way"): RMSNorm
    residual blocks; in_proj split into x and the gate z; a depthwise causal Conv1d
    (padding d_conv - 1, trimmed to the sequence); the input-dependent dt, B, C from
    x_proj; softplus(dt_proj); A = -exp(A_log); a sequential selective scan over time
    (deltaA = exp(einsum), h = deltaA * h + deltaB_u); y * silu(z); AdamW, clip_grad_norm_,
    next-token cross entropy on a repeating token stream; greedy generation under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(31)
    vocab, d_model, d_state, d_conv, expand, n_layer = 11, 16, 4, 3, 2, 2
    d_inner = expand * d_model
    dt_rank = math.ceil(d_model / 16)

    class RMSNorm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class MambaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(d_model, d_inner * 2, bias=False)
            self.conv1d = nn.Conv1d(d_inner, d_inner, kernel_size=d_conv, groups=d_inner,
                                    padding=d_conv - 1)
            self.x_proj = nn.Linear(d_inner, dt_rank + d_state * 2, bias=False)
            self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
            A = torch.arange(1, d_state + 1).float().repeat(d_inner, 1)
            self.A_log = nn.Parameter(torch.log(A))
            self.D = nn.Parameter(torch.ones(d_inner))
            self.out_proj = nn.Linear(d_inner, d_model, bias=False)

        def forward(self, x):
            b, l, d = x.shape
            x_and_res = self.in_proj(x)
            x, res = x_and_res.split(split_size=[d_inner, d_inner], dim=-1)
            x = x.transpose(1, 2)                       # b d_in l
            x = self.conv1d(x)[:, :, :l]
            x = F.silu(x.transpose(1, 2))
            y = self.ssm(x)
            y = y * F.silu(res)
            return self.out_proj(y)

        def ssm(self, x):
            d_in, n = self.A_log.shape
            A = -torch.exp(self.A_log.float())
            D = self.D.float()
            x_dbl = self.x_proj(x)
            delta, B, C = x_dbl.split(split_size=[dt_rank, n, n], dim=-1)
            delta = F.softplus(self.dt_proj(delta))
            return self.selective_scan(x, delta, A, B, C, D)

        def selective_scan(self, u, delta, A, B, C, D):
            b, l, d_in = u.shape
            deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
            deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
            x = torch.zeros((b, d_in, A.shape[1]))
            ys = []
            for i in range(l):
                x = deltaA[:, i] * x + deltaB_u[:, i]
                y = torch.einsum("bdn,bn->bd", x, C[:, i, :])
                ys.append(y)
            y = torch.stack(ys, dim=1)
            return y + u * D

    class ResidualBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.mixer = MambaBlock()
            self.norm = RMSNorm(d_model)

        def forward(self, x):
            return self.mixer(self.norm(x)) + x

    class Mamba(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, d_model)
            self.layers = nn.ModuleList([ResidualBlock() for _ in range(n_layer)])
            self.norm_f = RMSNorm(d_model)
            self.lm_head = nn.Linear(d_model, vocab, bias=False)
            self.lm_head.weight = self.embedding.weight     # tied

        def forward(self, input_ids):
            x = self.embedding(input_ids)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm_f(x))

    model = env.init(Mamba())
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1)
    pattern = torch.tensor([1, 2, 3, 5, 8, 2, 3, 5, 8, 10])
    starts = env.randint(0, 10, (4, 6))

    def train_step(idx):
        model.train()
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), idx[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item(), norm

    step = env.step(train_step)
    for it in range(4):
        pos = (starts[it][:, None] + torch.arange(9)) % 10
        env.rec(f"step {it}", step(pattern[pos]))

    model.eval()
    with torch.no_grad():
        ids = pattern[:3].unsqueeze(0)
        for _ in range(4):
            next_id = model(ids)[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, next_id], dim=1)
    env.rec("generated", ids)
    env.rec("params", dict(model.state_dict()))


def diffpool_dense(torch, env):
    """DiffPool (Ying et al.; PyG's dense_diff_pool written out): batched dense graphs with
    node masks; a dense GraphSAGE layer (adj @ x / degree, F.normalize); the assignment
    S = softmax(GNN_pool(x)); X' = S^T Z, A' = S^T A S; the link-prediction loss
    ||A - S S^T||_F / numel and the assignment entropy added to the cross entropy; a second
    dense layer on the coarsened graph, mean/max readout; Adam; accuracy under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(32)
    B, N, feat, hidden, clusters, classes = 8, 7, 5, 12, 3, 2

    # two graph families: dense vs sparse edges; the label is the family
    y = env.randint(0, 2, (B,))
    p_edge = 0.25 + 0.45 * y.float()
    upper = (env.rand(B, N, N) < p_edge[:, None, None]).float().triu(1)
    adj = upper + upper.transpose(1, 2)
    n_nodes = env.randint(5, N + 1, (B,))
    mask = torch.arange(N)[None, :] < n_nodes[:, None]
    adj = adj * mask[:, :, None] * mask[:, None, :]
    x = env.randn(B, N, feat) * mask.unsqueeze(-1)

    class DenseSAGEConv(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.lin_rel = nn.Linear(cin, cout, bias=False)
            self.lin_root = nn.Linear(cin, cout)

        def forward(self, x, adj, mask=None):
            out = torch.matmul(adj, x)
            out = out / adj.sum(dim=-1, keepdim=True).clamp(min=1)
            out = self.lin_rel(out) + self.lin_root(x)
            out = F.normalize(out, p=2, dim=-1)
            if mask is not None:
                out = out * mask.view(x.size(0), x.size(1), 1).to(x.dtype)
            return out

    def dense_diff_pool(x, adj, s, mask=None):
        batch_size, num_nodes, _ = x.size()
        s = torch.softmax(s, dim=-1)
        if mask is not None:
            mask = mask.view(batch_size, num_nodes, 1).to(x.dtype)
            x, s = x * mask, s * mask
        out = torch.matmul(s.transpose(1, 2), x)
        out_adj = torch.matmul(torch.matmul(s.transpose(1, 2), adj), s)
        link_loss = adj - torch.matmul(s, s.transpose(1, 2))
        link_loss = torch.norm(link_loss, p=2) / adj.numel()
        ent_loss = (-s * torch.log(s + 1e-15)).sum(dim=-1).mean()
        return out, out_adj, link_loss, ent_loss

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.gnn1_pool = DenseSAGEConv(feat, clusters)
            self.gnn1_embed = DenseSAGEConv(feat, hidden)
            self.gnn2_embed = DenseSAGEConv(hidden, hidden)
            self.lin1 = nn.Linear(2 * hidden, hidden)
            self.lin2 = nn.Linear(hidden, classes)

        def forward(self, x, adj, mask):
            s = self.gnn1_pool(x, adj, mask)
            z = F.relu(self.gnn1_embed(x, adj, mask))
            x, adj, l1, e1 = dense_diff_pool(z, adj, s, mask)
            x = F.relu(self.gnn2_embed(x, adj))
            x = torch.cat([x.mean(dim=1), x.max(dim=1).values], dim=-1)
            x = F.relu(self.lin1(x))
            return F.log_softmax(self.lin2(x), dim=-1), l1, e1

    model = env.init(Net())
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def train_step(x, adj, mask, y):
        model.train()
        optimizer.zero_grad()
        out, link_loss, ent_loss = model(x, adj, mask)
        loss = F.nll_loss(out, y) + link_loss + ent_loss
        loss.backward()
        optimizer.step()
        return loss.item(), link_loss.item(), ent_loss.item()

    def test(x, adj, mask, y):
        model.eval()
        with torch.no_grad():
            pred = model(x, adj, mask)[0].max(dim=1)[1]
        return int(pred.eq(y).sum().item())

    step, test = env.step(train_step), env.step(test)
    for epoch in range(4):
        env.rec(f"epoch {epoch}", step(x, adj, mask, y))
        env.rec(f"correct {epoch}", test(x, adj, mask, y))
    env.rec("params", dict(model.state_dict()))


def lista_sparse_coding(torch, env):
    """Learned ISTA (Gregor & LeCun; the "unrolled optimisation" blog posts): a dictionary
    with unit-norm atoms, sparse codes with random supports; classic ISTA under no_grad
    with the step 1/L from eigvalsh(D^T D); LISTA unrolls T iterations with learned W_e, S
    and a per-layer threshold (soft thresholding by sign * relu(|z| - theta), F.softshrink
    for the fixed-threshold baseline); MSE to the true codes, Adam, a MultiStepLR."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(34)
    m, n, k, T, N = 8, 12, 2, 4, 48

    D = env.randn(m, n)
    D = D / D.norm(dim=0, keepdim=True)
    support = env.rand(N, n).argsort(dim=1)[:, :k]
    Z = torch.zeros(N, n).scatter_(1, support, env.randn(N, k) + 2.0 * torch.sign(env.randn(N, k)))
    Y = Z @ D.t() + 0.01 * env.randn(N, m)

    L = torch.linalg.eigvalsh(D.t() @ D).max().item()
    alpha = 0.1

    def ista(y, n_iter):
        z = torch.zeros(y.size(0), n)
        for _ in range(n_iter):
            z = F.softshrink(z + (y - z @ D.t()) @ D / L, lambd=alpha / L)
        return z

    with torch.no_grad():
        env.rec("ista mse", [F.mse_loss(ista(Y, t), Z) for t in (1, T, 4 * T)])

    class LISTA(nn.Module):
        def __init__(self):
            super().__init__()
            self.We = nn.Linear(m, n, bias=False)
            self.S = nn.Linear(n, n, bias=False)
            self.theta = nn.Parameter(torch.full((T,), alpha / L))
            with torch.no_grad():
                self.We.weight.copy_(D.t() / L)
                self.S.weight.copy_(torch.eye(n) - D.t() @ D / L)

        @staticmethod
        def shrink(x, theta):
            return torch.sign(x) * F.relu(torch.abs(x) - theta)

        def forward(self, y):
            B = self.We(y)
            z = self.shrink(B, self.theta[0])
            for t in range(1, T):
                z = self.shrink(B + self.S(z), self.theta[t])
            return z

    model = env.init(LISTA())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[3, 5], gamma=0.3)

    def train_step(y, z):
        opt.zero_grad()
        z_hat = model(y)
        loss = F.mse_loss(z_hat, z, reduction="sum") / y.size(0)
        loss.backward()
        opt.step()
        sparsity = (z_hat.abs() > 1e-6).float().sum(1).mean()
        return loss.item(), sparsity

    step = env.step(train_step)
    for epoch in range(6):
        for b in range(0, 32, 16):
            env.rec(f"e{epoch} b{b}", step(Y[b:b + 16], Z[b:b + 16]))
        sched.step()
        env.rec(f"lr {epoch}", sched.get_last_lr())
    with torch.no_grad():
        env.rec("lista test mse", F.mse_loss(model(Y[32:]), Z[32:]))
    env.rec("params", dict(model.state_dict()))
