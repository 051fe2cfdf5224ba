"""Tutorial programs on second-order methods and self-supervised objectives, written as
blog posts write them (seeded with torch.manual_seed, modules built by their
constructors; see tutorial_harness.py): a TRPO policy update (Fisher-vector products by
double backward, conjugate gradient, a backtracking line search over
vector_to_parameters), VICReg (variance / invariance / covariance with the strided
off_diagonal trick), rotation prediction with torch.rot90, DINO (teacher centring buffer,
temperature sharpening, EMA teacher), DARTS mixed operations (architecture weights with
their own optimiser), Newton's method for logistic regression with
torch.autograd.functional.hessian."""
import copy
import math


def trpo_conjugate_gradient(torch, env):
    """A TRPO step on a fixed batch: the surrogate advantage ratio, the mean KL to the old
    policy (a detached copy of the logits), Fisher-vector products by autograd.grad of
    (grad_kl . v) with create_graph, ten conjugate-gradient iterations in Python, the
    step scaled to the trust region, a backtracking line search that writes candidate
    parameters with nn.utils.vector_to_parameters."""
    nn, F = torch.nn, torch.nn.functional
    utils = nn.utils
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    states = torch.randn(16, 3)
    actions = torch.randint(0, 2, (16,))
    adv = torch.randn(16)
    max_kl = 0.01

    def surrogate(old_logp):
        logp = F.log_softmax(policy(states), -1).gather(1, actions[:, None]).squeeze(1)
        return (torch.exp(logp - old_logp) * adv).mean()

    def mean_kl(old_logits):
        p_old = F.softmax(old_logits, -1)
        return (p_old * (F.log_softmax(old_logits, -1)
                         - F.log_softmax(policy(states), -1))).sum(-1).mean()

    def fvp(v, old_logits, damping=0.1):
        kl = mean_kl(old_logits)
        grads = torch.autograd.grad(kl, policy.parameters(), create_graph=True)
        flat = torch.cat([g.reshape(-1) for g in grads])
        hv = torch.autograd.grad((flat * v).sum(), policy.parameters())
        return torch.cat([h.reshape(-1) for h in hv]) + damping * v

    def trpo_step(states):
        with torch.no_grad():
            old_logits = policy(states)
            old_logp = F.log_softmax(old_logits, -1).gather(1, actions[:, None]).squeeze(1)
        loss = surrogate(old_logp)
        g = torch.cat([x.reshape(-1) for x in torch.autograd.grad(loss, policy.parameters())])
        x = torch.zeros_like(g)
        r, p = g.clone(), g.clone()
        rr = r.dot(r)
        for _ in range(10):
            Ap = fvp(p, old_logits)
            alpha = rr / p.dot(Ap)
            x = x + alpha * p
            r = r - alpha * Ap
            rr_new = r.dot(r)
            p = r + rr_new / rr * p
            rr = rr_new
        shs = 0.5 * x.dot(fvp(x, old_logits))
        full_step = x * torch.sqrt(2 * max_kl / shs)
        return loss.detach(), full_step.detach(), old_logits, old_logp

    step = env.step(trpo_step)
    hist = []
    for _ in range(2):
        loss, full_step, old_logits, old_logp = step(states)
        old_params = utils.parameters_to_vector(policy.parameters()).detach()
        accepted = None
        for k in range(5):
            frac = 0.5 ** k
            utils.vector_to_parameters(old_params + frac * full_step, policy.parameters())
            with torch.no_grad():
                improve = surrogate(old_logp) - loss
                kl = mean_kl(old_logits)
            if kl.item() <= max_kl and improve.item() > 0:
                accepted = k
                break
        else:
            utils.vector_to_parameters(old_params, policy.parameters())
        hist.append((loss.item(), accepted, kl.item(), improve.item()))
    env.rec("hist", hist)
    env.rec("params", list(policy.parameters()))


def vicreg_off_diagonal(torch, env):
    """VICReg on two noisy views: the invariance term (mse), the variance term (relu(1 -
    sqrt(var + eps)) over the batch), the covariance term with the reference code's
    off_diagonal: x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten(); an expander MLP with
    BatchNorm1d; LARS-free SGD; a linear probe trained afterwards on frozen features."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    backbone = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8))
    expander = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 16))
    params = list(backbone.parameters()) + list(expander.parameters())
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    base = torch.randn(32, 6)
    labels = (base[:, 0] > 0).long()

    def train_step(x):
        backbone.train()
        expander.train()
        x1 = x + 0.1 * torch.randn_like(x)
        x2 = x * (1 + 0.1 * torch.randn_like(x))
        z1, z2 = expander(backbone(x1)), expander(backbone(x2))
        repr_loss = F.mse_loss(z1, z2)
        z1, z2 = z1 - z1.mean(0), z2 - z2.mean(0)
        std1, std2 = torch.sqrt(z1.var(0) + 1e-4), torch.sqrt(z2.var(0) + 1e-4)
        std_loss = F.relu(1 - std1).mean() / 2 + F.relu(1 - std2).mean() / 2
        n, d = z1.shape
        cov1, cov2 = (z1.T @ z1) / (n - 1), (z2.T @ z2) / (n - 1)
        cov_loss = off_diagonal(cov1).pow(2).sum() / d + off_diagonal(cov2).pow(2).sum() / d
        loss = 25 * repr_loss + 25 * std_loss + cov_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), repr_loss.item(), std_loss.item(), cov_loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(base) for _ in range(4)])
    env.rec("off diag", off_diagonal(torch.arange(16.0).view(4, 4)))
    backbone.eval()
    with torch.no_grad():
        feats = backbone(base)
    probe = nn.Linear(8, 2)
    popt = torch.optim.Adam(probe.parameters(), lr=0.05)
    for _ in range(5):
        popt.zero_grad()
        F.cross_entropy(probe(feats), labels).backward()
        popt.step()
    env.rec("probe acc", (probe(feats).argmax(1) == labels).float().mean().item())
    env.rec("params", params)


def rotation_pretext_rot90(torch, env):
    """Self-supervised rotation prediction (Gidaris et al.): every image rotated by 0, 90,
    180, 270 degrees with torch.rot90(x, k, dims=(2, 3)), the four copies concatenated with
    labels from torch.arange(4).repeat_interleave(B); a small CNN predicts k; a
    StepLR; the features are then reused by a fresh head (requires_grad_(False) on the
    trunk)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                          nn.Flatten())
    rot_head = nn.Linear(32, 4)
    imgs = torch.zeros(4, 1, 6, 6)
    imgs[:, :, :3, :2] = 1.0
    imgs = imgs + 0.1 * torch.randn_like(imgs)
    opt = torch.optim.SGD(list(trunk.parameters()) + list(rot_head.parameters()), lr=0.1,
                          momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.2)

    def train_step(x):
        rotated = torch.cat([torch.rot90(x, k, dims=(2, 3)) for k in range(4)])
        labels = torch.arange(4).repeat_interleave(x.shape[0])
        logits = rot_head(trunk(rotated))
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), (logits.argmax(1) == labels).float().mean().item()

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        hist.append(step(imgs))
        sched.step()
    env.rec("hist", hist)
    env.rec("rot90", torch.rot90(torch.arange(6.0).view(1, 1, 2, 3), -1, dims=(2, 3)))
    trunk.requires_grad_(False)
    head = nn.Linear(32, 2)
    hopt = torch.optim.Adam(head.parameters(), lr=0.05)
    y = torch.tensor([0, 1, 0, 1])
    for _ in range(3):
        hopt.zero_grad()
        F.cross_entropy(head(trunk(imgs)), y).backward()
        hopt.step()
    env.rec("trunk grads", [p.grad for p in trunk.parameters()])
    env.rec("params", list(trunk.parameters()) + list(head.parameters()))


def dino_centering(torch, env):
    """DINO self-distillation: student and EMA teacher (a deepcopy, requires_grad False)
    with a weight-normalised-free projection head; teacher outputs centred by a `center`
    buffer and sharpened (temperature 0.04), student temperature 0.1; the cross-view cross
    entropy -sum(t * log_softmax(s)); the center updated in the step with an EMA of the
    teacher batch mean under no_grad; the teacher momentum follows a cosine schedule."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class DINOHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 8))
            self.last = nn.Linear(8, 10, bias=False)

        def forward(self, x):
            return self.last(F.normalize(self.mlp(x), dim=-1))

    student = DINOHead()
    teacher = copy.deepcopy(student)
    teacher.requires_grad_(False)
    center = torch.zeros(1, 10)
    opt = torch.optim.AdamW(student.parameters(), lr=5e-3, weight_decay=0.04)
    base = torch.randn(12, 6)

    def train_step(x, momentum):
        v1 = x + 0.2 * torch.randn_like(x)
        v2 = x + 0.2 * torch.randn_like(x)
        s1, s2 = student(v1) / 0.1, student(v2) / 0.1
        with torch.no_grad():
            t_out = torch.cat([teacher(v1), teacher(v2)])
            t1, t2 = F.softmax((t_out - center) / 0.04, -1).chunk(2)
        loss = (-(t1 * F.log_softmax(s2, -1)).sum(-1).mean()
                - (t2 * F.log_softmax(s1, -1)).sum(-1).mean()) / 2
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(student.parameters(), 3.0)
        opt.step()
        with torch.no_grad():
            for ps, pt in zip(student.parameters(), teacher.parameters()):
                pt.mul_(momentum).add_((1 - momentum) * ps.detach())
            center.mul_(0.9).add_(t_out.mean(0, keepdim=True), alpha=0.1)
        return loss.item()

    step = env.step(train_step)
    hist = []
    for it in range(5):
        m = 1 - (1 - 0.99) * (math.cos(math.pi * it / 5) + 1) / 2
        hist.append(step(base, m))
    env.rec("hist", hist)
    env.rec("center", center)
    env.rec("teacher", list(teacher.parameters()))


def darts_mixed_ops(torch, env):
    """DARTS (first-order): each edge a MixedOp summing candidate operations (identity,
    3x3 conv, 5x5 conv, avg-pool, zero) weighted by softmax of architecture parameters
    alpha, kept out of model.parameters() in their own Adam; alternating steps (alpha on a
    validation batch, weights on a training batch with SGD); the derived architecture is
    the argmax per edge."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C = 4

    class Zero(nn.Module):
        def forward(self, x):
            return x.mul(0.0)

    class MixedOp(nn.Module):
        def __init__(self):
            super().__init__()
            self.ops = nn.ModuleList([nn.Identity(), nn.Conv2d(C, C, 3, padding=1, bias=False),
                                      nn.Conv2d(C, C, 5, padding=2, bias=False),
                                      nn.AvgPool2d(3, stride=1, padding=1,
                                                   count_include_pad=False), Zero()])

        def forward(self, x, w):
            return sum(wi * op(x) for wi, op in zip(w, self.ops))

    class Network(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(1, C, 3, padding=1)
            self.edges = nn.ModuleList([MixedOp() for _ in range(3)])
            self.head = nn.Linear(C, 2)
            self._alpha = [torch.zeros(3, 5, requires_grad=True)]

        def alphas(self):
            return self._alpha

        def forward(self, x):
            w = F.softmax(self._alpha[0], dim=-1)
            s0 = self.stem(x)
            s1 = self.edges[0](s0, w[0])
            s2 = self.edges[1](s0, w[1]) + self.edges[2](s1, w[2])
            return self.head(F.relu(s2).mean((2, 3)))

    model = Network()
    w_opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=3e-4)
    a_opt = torch.optim.Adam(model.alphas(), lr=3e-2, betas=(0.5, 0.999), weight_decay=1e-3)
    xt, yt = torch.randn(6, 1, 5, 5), torch.randint(0, 2, (6,))
    xv, yv = torch.randn(6, 1, 5, 5), torch.randint(0, 2, (6,))

    def search_step(xt, yt, xv, yv):
        a_opt.zero_grad()
        F.cross_entropy(model(xv), yv).backward()
        a_opt.step()
        w_opt.zero_grad()
        loss = F.cross_entropy(model(xt), yt)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        w_opt.step()
        return loss.item()

    step = env.step(search_step)
    env.rec("hist", [step(xt, yt, xv, yv) for _ in range(4)])
    env.rec("alpha", model.alphas()[0])
    env.rec("genotype", model.alphas()[0].argmax(-1))
    env.rec("params", list(model.parameters()))


def newton_logreg_hessian(torch, env):
    """Logistic regression by Newton's method: the loss as a function of the weight vector,
    its gradient by torch.autograd.functional.jacobian and its Hessian by
    torch.autograd.functional.hessian, the update w - solve(H + damping I, g) by
    torch.linalg.solve; compared with a plain autograd gradient; converges in a few
    steps."""
    F = torch.nn.functional
    torch.manual_seed(0)
    x = torch.cat([torch.randn(20, 2), torch.ones(20, 1)], 1)
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * torch.randn(20) > 0).float()

    def loss_fn(w):
        return F.binary_cross_entropy_with_logits(x @ w, y) + 0.01 * w.pow(2).sum()

    def newton_step(w):
        g = torch.autograd.functional.jacobian(loss_fn, w)
        H = torch.autograd.functional.hessian(loss_fn, w)
        w_new = w - torch.linalg.solve(H + 1e-4 * torch.eye(3), g)
        return w_new, loss_fn(w), g.norm()

    step = env.step(newton_step)
    w = torch.zeros(3)
    hist = []
    for _ in range(4):
        w, loss, gnorm = step(w)
        hist.append((loss.item(), gnorm.item()))
    env.rec("hist", hist)
    env.rec("w", w)
    w2 = w.clone().requires_grad_(True)
    loss_fn(w2).backward()
    env.rec("grad at optimum", w2.grad)
    env.rec("hessian", torch.autograd.functional.hessian(loss_fn, w))
