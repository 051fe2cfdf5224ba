"""Programs differentiating through gradients or reshaping training: a physics-informed net
(autograd.grad with create_graph=True for d2u/dx2 inside the loss), MAML (an inner-loop
gradient with create_graph=True, functional parameters through torch.func.functional_call),
a SimCLR-style contrastive loss (F.normalize, cosine-similarity matrix, temperature,
cross-entropy over masked logits), gradient clipping by value and by norm, and
weight_norm / spectral_norm parametrizations in training. Programs `f(torch, env)`, see
tutorial_harness.py."""
import math


def pinn(torch, env):
    nn, optim = torch.nn, torch.optim
    model = env.init(nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                                   nn.Linear(16, 1)))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, xb, ub):
        optimizer.zero_grad()
        x = x.requires_grad_(True)
        u = model(x)
        du = torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u), create_graph=True)[0]
        d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
        f = -d2u - math.pi ** 2 * torch.sin(math.pi * x)        # -u'' = pi^2 sin(pi x)
        loss_pde = (f ** 2).mean()
        loss_bc = ((model(xb) - ub) ** 2).mean()
        loss = loss_pde + 10 * loss_bc
        loss.backward()
        optimizer.step()
        return loss_pde.detach(), loss_bc.detach()

    train_step = env.step(train_step)
    xb, ub = torch.tensor([[0.0], [1.0]]), torch.zeros(2, 1)
    for i in range(4):
        x = env.rand(16, 1)
        env.rec(f"loss {i}", train_step(x, xb, ub))
    env.rec("state", model.state_dict())
    xt = torch.linspace(0, 1, 5).view(-1, 1)
    with torch.no_grad():
        env.rec("u", model(xt))
    # gradients of the residual's input derivative, eagerly, third order
    xt.requires_grad_(True)
    u = model(xt)
    g1, = torch.autograd.grad(u.sum(), xt, create_graph=True)
    g2, = torch.autograd.grad(g1.sum(), xt, create_graph=True)
    g3, = torch.autograd.grad(g2.sum(), xt)
    env.rec("derivatives", (g1, g2, g3))


def maml(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    functional_call = torch.func.functional_call
    model = env.init(nn.Sequential(nn.Linear(1, 20), nn.ReLU(), nn.Linear(20, 1)))
    meta_opt = optim.Adam(model.parameters(), lr=1e-3)
    inner_lr, n_tasks = 0.05, 3

    def meta_step(xs, ys, xq, yq):
        meta_opt.zero_grad()
        params = dict(model.named_parameters())
        total = 0.0
        for t in range(n_tasks):
            fast = params
            for _ in range(2):
                loss = F.mse_loss(functional_call(model, fast, (xs[t],)), ys[t])
                grads = torch.autograd.grad(loss, list(fast.values()), create_graph=True)
                fast = {name: p - inner_lr * g
                        for (name, p), g in zip(fast.items(), grads)}
            q_loss = F.mse_loss(functional_call(model, fast, (xq[t],)), yq[t])
            total = total + q_loss
        total = total / n_tasks
        total.backward()
        meta_opt.step()
        return total.detach()

    meta_step = env.step(meta_step)

    def tasks():
        amp = env.rand(n_tasks, 1, 1) * 4 + 0.1
        phase = env.rand(n_tasks, 1, 1) * math.pi
        xs = env.rand(n_tasks, 5, 1) * 10 - 5
        xq = env.rand(n_tasks, 5, 1) * 10 - 5
        return xs, amp * torch.sin(xs + phase), xq, amp * torch.sin(xq + phase)

    for i in range(3):
        env.rec(f"meta loss {i}", meta_step(*tasks()))
    env.rec("state", model.state_dict())
    # adaptation at test time, eagerly
    xs, ys, xq, yq = tasks()
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    loss = F.mse_loss(functional_call(model, params, xs[0]), ys[0])
    grads = torch.autograd.grad(loss, params.values())
    adapted = {k: v - inner_lr * g for (k, v), g in zip(params.items(), grads)}
    env.rec("adapted", F.mse_loss(functional_call(model, adapted, (xq[0],)), yq[0]))


def simclr(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU())
            self.projector = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8))

        def forward(self, x):
            return self.projector(self.backbone(x))

    def nt_xent(z1, z2, temperature=0.5):
        n = z1.shape[0]
        z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
        sim = F.cosine_similarity(z.unsqueeze(1), z.unsqueeze(0), dim=2) / temperature
        mask = torch.eye(2 * n, dtype=torch.bool)
        sim = sim.masked_fill(mask, float("-inf"))
        targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
        return F.cross_entropy(sim, targets)

    def info_nce(z1, z2, temperature=0.2):
        z1, z2 = F.normalize(z1, dim=-1), F.normalize(z2, dim=-1)
        logits = z1 @ z2.T / temperature
        labels = torch.arange(z1.size(0))
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2

    model = env.init(Encoder())
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    def train_step(x, noise1, noise2):
        model.train()
        optimizer.zero_grad()
        z1, z2 = model(x + 0.1 * noise1), model(x * 0.9 + 0.1 * noise2)
        l1, l2 = nt_xent(z1, z2), info_nce(z1, z2)
        loss = l1 + l2
        loss.backward()
        optimizer.step()
        return l1.detach(), l2.detach()

    train_step = env.step(train_step)
    x = env.randn(6, 10)
    for i in range(3):
        env.rec(f"loss {i}", train_step(x, env.randn(6, 10), env.randn(6, 10)))
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        z = F.normalize(model(x), p=2, dim=1)
        sim = z @ z.t()
        env.rec("sim", (sim, sim.fill_diagonal_(-1).argmax(1)))


def grad_clipping(torch, env):
    nn, optim = torch.nn, torch.optim
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)))
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.MSELoss()

    def train_step(x, y, mode):
        optimizer.zero_grad()
        loss = criterion(model(x), y) * 50
        loss.backward()
        if mode == "value":
            nn.utils.clip_grad_value_(model.parameters(), clip_value=0.05)
            norm = None
        elif mode == "norm":
            norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        elif mode == "inf":
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.1, norm_type=float("inf"))
        else:
            norm = nn.utils.clip_grad_norm_(model.parameters(), 2.0, norm_type=1.0,
                                            error_if_nonfinite=True)
        optimizer.step()
        return loss.detach(), norm

    train_step = env.step(train_step)
    x, y = env.randn(8, 4), env.randn(8, 3)
    for mode in ("value", "norm", "inf", "l1", "norm"):
        env.rec(f"{mode}", train_step(x, y, mode))
        env.rec(f"{mode} grads", [p.grad for p in model.parameters()])
    # the per-parameter hook form
    for p in model.parameters():
        p.register_hook(lambda grad: torch.clamp(grad, -0.01, 0.01))
    optimizer.zero_grad()
    (criterion(model(x), y) * 50).backward()
    env.rec("hook grads", [p.grad for p in model.parameters()])
    grads = [p.grad for p in model.parameters()]
    env.rec("total norm", nn.utils.get_total_norm(grads, norm_type=2.0))


def weight_and_spectral_norm(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    P = nn.utils.parametrizations

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = P.weight_norm(nn.Conv2d(1, 3, 3))
            self.fc1 = P.spectral_norm(nn.Linear(3 * 4 * 4, 8))
            self.fc2 = P.weight_norm(nn.Linear(8, 2), dim=None)

        def forward(self, x):
            h = F.relu(self.conv(x)).flatten(1)
            return self.fc2(F.relu(self.fc1(h)))

    model = env.init(Net())
    env.rec("keys", sorted(model.state_dict().keys()))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    x, y = env.randn(4, 1, 6, 6), env.randint(0, 2, (4,))
    for i in range(3):
        env.rec(f"loss {i}", train_step(x, y))
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x))
        env.rec("sigma", torch.linalg.matrix_norm(model.fc1.weight, ord=2))
        env.rec("wn weight", model.conv.weight)
