"""Tutorial programs on graphs, semi-supervised learning and robust losses, written as blog
posts write them (seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): GraphSAGE with scatter_reduce aggregation, a Mean Teacher whose EMA
teacher is updated with lerp_ inside the step, an expRNN (matrix_exp of a skew-symmetric
matrix), a masked regression on targets with missing values (isnan, nan_to_num), a
trimmed (kthvalue) robust loss, attention-based multiple-instance learning over bags of
different sizes."""
import copy


def graphsage_scatter_reduce(torch, env):
    """GraphSAGE node classification on a random graph: neighbour features gathered with
    index_select and aggregated with scatter_reduce (mean and amax, include_self=False),
    degree from bincount, F.normalize of the embeddings, masked train/val nodes."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    n, d, c = 12, 5, 3
    x = torch.randn(n, d)
    src = torch.randint(0, n, (30,))
    dst = torch.randint(0, n, (30,))
    y = torch.randint(0, c, (n,))
    train_mask = torch.arange(n) % 3 != 0

    class SAGEConv(nn.Module):
        def __init__(self, d_in, d_out, aggr):
            super().__init__()
            self.aggr = aggr
            self.lin_self = nn.Linear(d_in, d_out)
            self.lin_neigh = nn.Linear(d_in, d_out, bias=False)

        def forward(self, h, src, dst):
            msg = h.index_select(0, src)
            index = dst.unsqueeze(1).expand(-1, h.shape[1])
            agg = torch.zeros(h.shape[0], h.shape[1], dtype=h.dtype)
            agg = agg.scatter_reduce(0, index, msg, reduce=self.aggr, include_self=False)
            return self.lin_self(h) + self.lin_neigh(agg)

    class SAGE(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = SAGEConv(d, 8, "mean")
            self.conv2 = SAGEConv(8, c, "amax")

        def forward(self, h, src, dst):
            h = F.relu(self.conv1(h, src, dst))
            h = F.normalize(h, p=2, dim=-1)
            return self.conv2(h, src, dst)

    model = SAGE()
    opt = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
    deg = torch.bincount(dst, minlength=n)
    env.rec("deg", deg)

    def train_step(x, src, dst):
        model.train()
        opt.zero_grad()
        out = model(x, src, dst)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("losses", [step(x, src, dst).item() for _ in range(6)])
    model.eval()
    with torch.no_grad():
        pred = model(x, src, dst).argmax(-1)
    env.rec("val acc", (pred[~train_mask] == y[~train_mask]).float().mean().item())
    env.rec("params", list(model.parameters()))
    env.rec("grads", [p.grad for p in model.parameters()])


def mean_teacher_lerp(torch, env):
    """Mean Teacher (Tarvainen & Valpola): the student trains on labelled cross entropy plus
    a consistency MSE to the EMA teacher's softmax on noisy unlabelled inputs; the teacher
    (a deepcopy with requires_grad_(False)) is updated in the step under no_grad with
    t.lerp_(s, 1 - alpha); dropout in both; eval() for evaluation between steps."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    student = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    teacher = copy.deepcopy(student)
    for p in teacher.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    xl, yl = torch.randn(8, 6), torch.randint(0, 3, (8,))
    xu = torch.randn(16, 6)
    alpha = 0.9

    def train_step(xl, yl, xu, w):
        student.train()
        teacher.train()
        opt.zero_grad()
        loss_sup = F.cross_entropy(student(xl), yl)
        noise = 0.1 * torch.randn_like(xu)
        with torch.no_grad():
            t_prob = F.softmax(teacher(xu + noise), dim=1)
        s_prob = F.softmax(student(xu), dim=1)
        loss_cons = F.mse_loss(s_prob, t_prob)
        loss = loss_sup + w * loss_cons
        loss.backward()
        opt.step()
        with torch.no_grad():
            for t_p, s_p in zip(teacher.parameters(), student.parameters()):
                t_p.lerp_(s_p, 1 - alpha)
        return loss_sup.item(), loss_cons.item()

    step = env.step(train_step)
    hist = []
    for i in range(6):
        hist.append(step(xl, yl, xu, min(1.0, 0.25 * (i + 1))))
        if i % 2 == 1:
            teacher.eval()
            with torch.no_grad():
                hist.append(teacher(xl).argmax(1).tolist())
    env.rec("hist", hist)
    env.rec("teacher", list(teacher.parameters()))
    env.rec("student", list(student.parameters()))


def exprnn_matrix_exp(torch, env):
    """An orthogonal RNN (expRNN): the recurrent matrix is matrix_exp(A - A.T) of a free
    parameter A, trained on a copy-memory style task with gradient clipping; the
    recurrent matrix stays orthogonal (W @ W.T == I)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class ExpRNN(nn.Module):
        def __init__(self, d_in, hidden, d_out):
            super().__init__()
            self.A = nn.Parameter(torch.randn(hidden, hidden) * 0.1)
            self.inp = nn.Linear(d_in, hidden)
            self.out = nn.Linear(hidden, d_out)

        def recurrent(self):
            return torch.matrix_exp(self.A - self.A.t())

        def forward(self, x):
            W = self.recurrent()
            h = x.new_zeros(x.shape[0], W.shape[0])
            for t in range(x.shape[1]):
                h = torch.tanh(h @ W.t() + self.inp(x[:, t]))
            return self.out(h)

    model = ExpRNN(3, 6, 3)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01)
    x = torch.randn(4, 5, 3)
    target = x[:, 0].argmax(1)

    def train_step(x, target):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item(), norm

    step = env.step(train_step)
    env.rec("hist", [step(x, target) for _ in range(5)])
    with torch.no_grad():
        W = model.recurrent()
        env.rec("orthogonal", torch.allclose(W @ W.t(), torch.eye(6), atol=1e-5))
    env.rec("params", list(model.parameters()))


def masked_missing_targets(torch, env):
    """Multi-target regression on a table where some targets are missing (NaN), as Kaggle
    kernels write it: mask = ~torch.isnan(y), the loss over observed entries only with
    y.nan_to_num(); the inputs' missing values filled with the column means (nanmean)."""
    nn = torch.nn
    torch.manual_seed(0)
    X = torch.randn(20, 4)
    X[3, 1] = float("nan")
    X[7, 2] = float("nan")
    Y = torch.randn(20, 3)
    Y[torch.rand(20, 3) < 0.3] = float("nan")
    col_mean = torch.nanmean(X, dim=0)
    X = torch.where(torch.isnan(X), col_mean.expand_as(X), X)
    env.rec("col_mean", col_mean)
    model = nn.Sequential(nn.Linear(4, 12), nn.SiLU(), nn.Linear(12, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)

    def train_step(xb, yb):
        opt.zero_grad()
        pred = model(xb)
        mask = ~torch.isnan(yb)
        se = (pred - yb.nan_to_num()) ** 2 * mask
        loss = se.sum() / mask.sum().clamp(min=1)
        loss.backward()
        opt.step()
        return loss.detach(), mask.sum(0)

    step = env.step(train_step)
    hist = []
    for epoch in range(3):
        for i in range(0, 20, 8):       # the last batch holds 4 rows
            loss, counts = step(X[i:i + 8], Y[i:i + 8])
            hist.append((loss.item(), counts.tolist()))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def trimmed_loss_kthvalue(torch, env):
    """Robust regression with a trimmed loss: the per-sample losses above their k-th
    smallest value (kthvalue) are dropped; a median-absolute-deviation scale with
    median(); the residual quantiles reported by torch.quantile."""
    nn = torch.nn
    torch.manual_seed(0)
    X = torch.randn(32, 3)
    w_true = torch.tensor([[1.5], [-2.0], [0.5]])
    y = X @ w_true + 0.1 * torch.randn(32, 1)
    y[::7] += 8.0                        # outliers
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    k = 24

    def train_step(X, y):
        opt.zero_grad()
        per = (model(X) - y).squeeze(1).abs()
        thresh = per.kthvalue(k).values
        kept = per[per <= thresh]
        loss = kept.pow(2).mean()
        loss.backward()
        opt.step()
        med = per.detach().median()
        mad = (per.detach() - med).abs().median()
        return loss.item(), kept.numel(), mad

    step = env.step(train_step)
    env.rec("hist", [step(X, y) for _ in range(6)])
    with torch.no_grad():
        r = (model(X) - y).squeeze(1)
        env.rec("quantiles", torch.quantile(r, torch.tensor([0.1, 0.5, 0.9])))
    env.rec("params", list(model.parameters()))


def attention_mil_bags(torch, env):
    """Attention-based deep multiple-instance learning (Ilse et al.): each bag holds a
    different number of instances; gated attention (tanh * sigmoid) weights the instance
    embeddings; a bag label from BCEWithLogits; one bag per step, shapes changing."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class GatedAttentionMIL(nn.Module):
        def __init__(self, d_in=5, d=8, k=4):
            super().__init__()
            self.feat = nn.Sequential(nn.Linear(d_in, d), nn.ReLU())
            self.att_v = nn.Linear(d, k)
            self.att_u = nn.Linear(d, k)
            self.att_w = nn.Linear(k, 1)
            self.cls = nn.Linear(d, 1)

        def forward(self, bag):
            h = self.feat(bag)                                    # (n, d)
            a = self.att_w(torch.tanh(self.att_v(h)) * torch.sigmoid(self.att_u(h)))
            a = F.softmax(a.transpose(1, 0), dim=1)               # (1, n)
            z = a @ h                                             # (1, d)
            return self.cls(z).squeeze(), a

    model = GatedAttentionMIL()
    opt = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.9, 0.999),
                           weight_decay=1e-4)
    sizes = [5, 3, 7, 5, 3, 7]
    bags = [torch.randn(s, 5) for s in sizes]
    labels = [torch.tensor(float(i % 2)) for i in range(len(sizes))]

    def train_step(bag, label):
        opt.zero_grad()
        logit, att = model(bag)
        loss = F.binary_cross_entropy_with_logits(logit, label)
        loss.backward()
        opt.step()
        return loss.item(), att.detach()

    step = env.step(train_step)
    hist = []
    for epoch in range(2):
        for bag, label in zip(bags, labels):
            hist.append(step(bag, label))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))
