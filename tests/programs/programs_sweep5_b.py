"""Programs of common kinds: a face-recognition-style ArcFace head (normalised weights, an
additive angular margin through acos/cos, one_hot via scatter_) with a center loss; PointNet
(a T-Net predicting a 3x3 transform applied by bmm, shared Conv1d(k=1) layers, max over
points, an orthogonality regulariser); a SIREN / Fourier-feature implicit image fit (sine
activations with their own uniform init under no_grad, a meshgrid of coordinates); an
end-to-end memory network (story embeddings, attention hops over the memory, a temporal
encoding). Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def arcface(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_cls, emb_dim, s, m = 5, 8, 16.0, 0.3

    class ArcMarginProduct(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(out_features, in_features))
            nn.init.xavier_uniform_(self.weight)
            self.cos_m, self.sin_m = math.cos(m), math.sin(m)
            self.th, self.mm = math.cos(math.pi - m), math.sin(math.pi - m) * m

        def forward(self, x, label):
            cosine = F.linear(F.normalize(x), F.normalize(self.weight))
            sine = torch.sqrt((1.0 - cosine.pow(2)).clamp(0, 1))
            phi = cosine * self.cos_m - sine * self.sin_m
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
            one_hot = torch.zeros(cosine.size())
            one_hot.scatter_(1, label.view(-1, 1).long(), 1)
            return s * ((one_hot * phi) + ((1.0 - one_hot) * cosine))

    class CenterLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.centers = nn.Parameter(torch.randn(n_cls, emb_dim))

        def forward(self, x, labels):
            return (x - self.centers[labels]).pow(2).sum(1).clamp(1e-12, 1e12).mean() / 2

    backbone = env.init(nn.Sequential(nn.Linear(6, 32), nn.BatchNorm1d(32), nn.PReLU(),
                                      nn.Linear(32, emb_dim)))
    head, center = env.init(ArcMarginProduct(emb_dim, n_cls)), env.init(CenterLoss())
    optimizer = optim.SGD([{"params": backbone.parameters()}, {"params": head.parameters()}],
                          lr=0.05, momentum=0.9, weight_decay=5e-4)
    center_opt = optim.SGD(center.parameters(), lr=0.5)
    x, y = env.randn(20, 6), env.randint(0, n_cls, (20,))

    def train_step(x, y):
        backbone.train()
        emb = backbone(x)
        logits = head(emb, y)
        loss = F.cross_entropy(logits, y) + 0.01 * center(emb, y)
        optimizer.zero_grad()
        center_opt.zero_grad()
        loss.backward()
        optimizer.step()
        for p in center.parameters():       # (the center loss' weight undone for its lr)
            p.grad.data *= 1.0 / 0.01
        center_opt.step()
        return loss.item(), logits.detach()

    train_step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", train_step(x, y))
    backbone.eval()
    with torch.no_grad():
        emb = F.normalize(backbone(x))
        sim = emb @ emb.t()
        env.rec("eval", (sim, backbone[1].running_mean, backbone[2].weight))


def pointnet(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class TNet(nn.Module):
        def __init__(self, k=3):
            super().__init__()
            self.k = k
            # (no biases before BatchNorm: their gradients are rounding noise, which Adam
            # scales up to full steps)
            self.conv1 = nn.Conv1d(k, 16, 1, bias=False)
            self.conv2 = nn.Conv1d(16, 32, 1)
            self.fc = nn.Linear(32, k * k)
            self.bn1 = nn.BatchNorm1d(16)

        def forward(self, x):
            b = x.size(0)
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.conv2(x))
            x = torch.max(x, 2, keepdim=True)[0].view(-1, 32)
            iden = torch.eye(self.k).flatten().view(1, self.k * self.k).repeat(b, 1)
            return (self.fc(x) + iden).view(-1, self.k, self.k)

    class PointNetCls(nn.Module):
        def __init__(self, n_cls=3):
            super().__init__()
            self.stn = TNet()
            self.conv1 = nn.Conv1d(3, 16, 1, bias=False)
            self.conv2 = nn.Conv1d(16, 32, 1, bias=False)
            self.bn1, self.bn2 = nn.BatchNorm1d(16), nn.BatchNorm1d(32)
            self.fc = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, n_cls))

        def forward(self, x):
            trans = self.stn(x)
            x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
            x = F.relu(self.bn1(self.conv1(x)))
            x = self.bn2(self.conv2(x))
            x, idx = torch.max(x, 2)
            return F.log_softmax(self.fc(x), dim=1), trans, idx

    def feature_transform_regularizer(trans):
        d = trans.size(1)
        I = torch.eye(d)[None, :, :]
        return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - I,
                                     dim=(1, 2)))

    model = env.init(PointNetCls())
    optimizer = optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999))
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    points, labels = env.randn(6, 3, 12), env.randint(0, 3, (6,))

    def train_step(points, target):
        optimizer.zero_grad()
        model.train()
        pred, trans, _ = model(points)
        loss = F.nll_loss(pred, target) + 0.001 * feature_transform_regularizer(trans)
        loss.backward()
        optimizer.step()
        correct = pred.data.max(1)[1].eq(target.data).cpu().sum()
        return loss.item(), correct.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"epoch {epoch}", train_step(points, labels))
        scheduler.step()
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        pred, trans, idx = model(points)
        env.rec("eval", (pred, trans, idx, scheduler.get_last_lr()))


def siren_fourier(torch, env):
    nn, optim = torch.nn, torch.optim
    H = W = 8

    class SineLayer(nn.Module):
        def __init__(self, in_f, out_f, is_first=False, omega_0=30.0):
            super().__init__()
            self.omega_0, self.in_f = omega_0, in_f
            self.linear = nn.Linear(in_f, out_f)
            with torch.no_grad():
                bound = 1 / in_f if is_first else math.sqrt(6 / in_f) / omega_0
                self.linear.weight.uniform_(-bound, bound)

        def forward(self, x):
            return torch.sin(self.omega_0 * self.linear(x))

    class FourierFeatures(nn.Module):
        def __init__(self, B):
            super().__init__()
            self.register_buffer("B", B)

        def forward(self, x):
            proj = 2 * math.pi * x @ self.B
            return torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1)

    siren = env.init(nn.Sequential(SineLayer(2, 24, is_first=True), SineLayer(24, 24),
                                   nn.Linear(24, 1)))
    ff = env.init(nn.Sequential(FourierFeatures(env.randn(2, 8, scale=3.0)),
                                nn.Linear(16, 24), nn.ReLU(), nn.Linear(24, 1)))
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, H), torch.linspace(-1, 1, W), indexing="ij")
    coords = torch.stack([xs, ys], dim=-1).reshape(-1, 2)
    image = (torch.sin(3 * xs) * torch.cos(2 * ys) + 0.1 * env.randn(H, W)).reshape(-1, 1)

    for name, model in [("siren", siren), ("fourier", ff)]:
        optimizer = optim.Adam(model.parameters(), lr=1e-3)

        def fit_step(coords, target):
            optimizer.zero_grad()
            out = model(coords)
            loss = ((out - target) ** 2).mean()
            loss.backward()
            optimizer.step()
            psnr = 10 * torch.log10(1.0 / loss.detach())
            return loss.item(), psnr

        fit_step = env.step(fit_step)
        for it in range(5):
            env.rec(f"{name} {it}", fit_step(coords, image))
        # the image's gradient at each pixel, from the fitted network (autograd.grad)
        c = coords.clone().requires_grad_(True)
        out = model(c)
        grad = torch.autograd.grad(out, c, torch.ones_like(out), create_graph=True)[0]
        env.rec(f"{name} grad", (grad.norm(dim=-1).reshape(H, W), grad.requires_grad))


def memory_network(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    V, D, n_mem, sent_len, hops = 12, 10, 5, 4, 3

    class MemN2N(nn.Module):
        def __init__(self):
            super().__init__()
            # adjacent weight tying: C of hop k is A of hop k + 1
            self.C = nn.ModuleList([nn.Embedding(V, D, padding_idx=0) for _ in range(hops + 1)])
            self.TA = nn.Parameter(torch.zeros(n_mem, D))
            self.TC = nn.Parameter(torch.zeros(n_mem, D))
            pos = torch.tensor([[(1 - j / sent_len) - (k / D) * (1 - 2 * j / sent_len)
                                 for k in range(1, D + 1)] for j in range(1, sent_len + 1)])
            self.register_buffer("encoding", pos)

        def forward(self, story, query):
            u = (self.C[0](query) * self.encoding).sum(1)
            attn = []
            for hop in range(hops):
                m = (self.C[hop](story) * self.encoding).sum(2) + self.TA
                c = (self.C[hop + 1](story) * self.encoding).sum(2) + self.TC
                p = F.softmax(torch.einsum("bmd,bd->bm", m, u), dim=1)
                o = torch.bmm(p.unsqueeze(1), c).squeeze(1)
                u = u + o
                attn.append(p)
            return u @ self.C[hops].weight.t(), torch.stack(attn, 1)

    model = env.init(MemN2N())
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    story = env.randint(0, V, (8, n_mem, sent_len))
    query = env.randint(1, V, (8, sent_len))
    answer = story[torch.arange(8), 2, 1]

    def train_step(story, query, answer):
        optimizer.zero_grad()
        logits, attn = model(story, query)
        loss = F.cross_entropy(logits, answer, reduction="sum")
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 40.0)
        optimizer.step()
        with torch.no_grad():
            for emb in model.C:
                emb.weight[0].zero_()
        return loss.item(), attn.detach()

    train_step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", train_step(story, query, answer))
    with torch.no_grad():
        logits, attn = model(story, query)
        env.rec("accuracy", (logits.argmax(1) == answer).float().mean())
        env.rec("C0", model.C[0].weight)
