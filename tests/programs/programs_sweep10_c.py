"""Tutorial programs on losses and training recipes, written as blog posts write them
(seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): multi-task learning with learned homoscedastic uncertainty weights,
non-crossing quantile regression with the pinball loss, LoRA fine-tuning of a frozen
model (merged afterwards), dynamic loss scaling by hand (skip the step on inf grads), a
Cox proportional-hazards model (argsort, logcumsumexp, concordance index), a Hamiltonian
neural network (autograd.grad with create_graph inside the loss)."""
import math


def uncertainty_weighting(torch, env):
    """Kendall et al. multi-task weighting: a shared trunk with a regression head and a
    classification head, learned log-variances s_i (an nn.Parameter of size 2) and the
    loss sum(exp(-s_i) L_i + s_i); the log-variances get their own param group (no
    weight decay); the task weights exp(-s) are logged."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class MultiTask(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(5, 16), nn.ReLU())
            self.reg = nn.Linear(16, 1)
            self.cls = nn.Linear(16, 3)
            self.log_vars = nn.Parameter(torch.zeros(2))

        def forward(self, x):
            h = self.trunk(x)
            return self.reg(h).squeeze(-1), self.cls(h)

    model = MultiTask()
    x = torch.randn(32, 5)
    y_reg = x[:, 0] * 3 + 0.5 * torch.randn(32)
    y_cls = (x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    ds = torch.utils.data.TensorDataset(x, y_reg, y_cls)
    loader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)
    opt = torch.optim.Adam([
        {"params": [p for n, p in model.named_parameters() if n != "log_vars"],
         "weight_decay": 1e-4},
        {"params": [model.log_vars], "lr": 0.05}], lr=0.01)

    def train_step(xb, yr, yc):
        model.train()
        pr, pc = model(xb)
        losses = torch.stack([F.mse_loss(pr, yr), F.cross_entropy(pc, yc)])
        loss = (torch.exp(-model.log_vars) * losses + model.log_vars).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), losses.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(3):
        for xb, yr, yc in loader:
            loss, parts = step(xb, yr, yc)
            hist.append((loss, parts.tolist()))
    env.rec("hist", hist)
    env.rec("task weights", torch.exp(-model.log_vars.detach()))
    env.rec("params", list(model.parameters()))


def quantile_regression(torch, env):
    """Quantile regression of heteroscedastic data: the network outputs a base quantile
    and positive increments (softplus, then cumsum) so the 0.1 / 0.5 / 0.9 quantiles never
    cross; the pinball loss max(q * e, (q - 1) * e) through torch.maximum with a
    broadcast quantile buffer; coverage of the 10-90 band measured at eval."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    qs = torch.tensor([0.1, 0.5, 0.9])

    class QuantileNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 3))
            self.register_buffer("qs", qs)

        def forward(self, x):
            out = self.body(x)
            base, inc = out[:, :1], F.softplus(out[:, 1:])
            return torch.cat([base, base + inc.cumsum(-1)], -1)

    def pinball(pred, y, q):
        e = y.unsqueeze(-1) - pred
        return torch.maximum(q * e, (q - 1) * e).mean()

    model = QuantileNet()
    x = torch.rand(64, 1) * 4 - 2
    y = torch.sin(x.squeeze(-1)) + (0.1 + 0.3 * x.squeeze(-1).abs()) * torch.randn(64)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)

    def train_step(x, y):
        opt.zero_grad()
        loss = pinball(model(x), y, model.qs)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(8)])
    model.eval()
    with torch.no_grad():
        pred = model(x)
        inside = ((y >= pred[:, 0]) & (y <= pred[:, 2])).float().mean()
    env.rec("non crossing", bool((pred.diff(dim=-1) >= 0).all()))
    env.rec("coverage", inside.item())
    env.rec("params", list(model.parameters()))


def lora_finetune(torch, env):
    """LoRA: a pretrained MLP is frozen (requires_grad_(False)), each nn.Linear is replaced
    (setattr over named_children) by a wrapper adding (alpha / r) * B A x with A
    kaiming-initialised and B zero; only the LoRA parameters train (filtered by
    requires_grad); the trainable-parameter count; a state_dict holding only the lora_
    keys; merging B A into the base weight gives the same outputs."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class LoRALinear(nn.Module):
        def __init__(self, base, r=2, alpha=4):
            super().__init__()
            self.base = base
            self.scale = alpha / r
            self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
            self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

        def forward(self, x):
            return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scale

    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 12), nn.ReLU(),
                          nn.Linear(12, 2))
    x = torch.randn(24, 6)
    y = (x[:, :2].sum(1) > 0).long()
    pre = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        pre.zero_grad()
        F.cross_entropy(model(x), 1 - y).backward()
        pre.step()
    model.requires_grad_(False)
    for name, child in list(model.named_children()):
        if isinstance(child, nn.Linear):
            setattr(model, name, LoRALinear(child))
    trainable = [p for p in model.parameters() if p.requires_grad]
    env.rec("counts", (sum(p.numel() for p in trainable),
                       sum(p.numel() for p in model.parameters())))
    opt = torch.optim.AdamW(trainable, lr=0.01)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(6)])
    lora_state = {k: v for k, v in model.state_dict().items() if "lora_" in k}
    env.rec("lora keys", sorted(lora_state))
    with torch.no_grad():
        before = model(x)
        for name, child in list(model.named_children()):
            if isinstance(child, LoRALinear):
                child.base.weight += child.scale * child.lora_B @ child.lora_A
                setattr(model, name, child.base)
        after = model(x)
    env.rec("merged close", torch.allclose(before, after, atol=1e-5))
    env.rec("frozen grads", [p.grad is None for p in model.parameters()])
    env.rec("merged", list(model.parameters()))


def manual_loss_scaling(torch, env):
    """Dynamic loss scaling written out: the loss is multiplied by a Python float scale,
    gradients are unscaled in place (p.grad.div_), torch.isfinite over all grads decides
    whether optimizer.step() runs; on overflow the scale halves and the step is skipped,
    after two good steps it doubles; gradient accumulation over two micro-batches; one
    batch holds a huge value so its gradients overflow to inf."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    xs = [torch.randn(6, 4) for _ in range(6)]
    ys = [torch.randn(6, 1) for _ in range(6)]
    xs[3][0, 0] = 3e38
    state = {"scale": 2.0 ** 10, "good": 0}

    def micro_step(x, y, scale):
        loss = F.mse_loss(model(x), y) / 2
        (loss * scale).backward()
        return loss.detach()

    step = env.step(micro_step)
    hist = []
    for i in range(0, 6, 2):
        opt.zero_grad()
        losses = [step(xs[j], ys[j], state["scale"]) for j in (i, i + 1)]
        grads = [p.grad for p in model.parameters()]
        finite = all(bool(torch.isfinite(g).all()) for g in grads)
        if finite:
            for g in grads:
                g.div_(state["scale"])
            opt.step()
            state["good"] += 1
            if state["good"] == 2:
                state["scale"] *= 2
                state["good"] = 0
        else:
            state["scale"] /= 2
            state["good"] = 0
        hist.append((sum(v.item() for v in losses), finite, state["scale"]))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def cox_survival(torch, env):
    """A Cox proportional-hazards network (DeepSurv): risk scores sorted by descending
    survival time (argsort), the negative partial log-likelihood
    -sum_{events} (r_i - logcumsumexp(r)_i) / n_events, Adam with L2 weight decay, the
    concordance index computed with broadcast comparisons under no_grad."""
    nn = torch.nn
    torch.manual_seed(0)
    n = 40
    x = torch.randn(n, 4)
    true_risk = x[:, 0] - 0.5 * x[:, 1]
    time = torch.exp(-true_risk) * torch.rand(n) * 5
    event = (torch.rand(n) < 0.7).float()
    # (no output bias: the partial likelihood ignores a constant shift of the risks)
    model = nn.Sequential(nn.Linear(4, 8), nn.SELU(), nn.AlphaDropout(0.0),
                          nn.Linear(8, 1, bias=False))
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-3)

    def neg_partial_ll(risk, time, event):
        order = torch.argsort(time, descending=True)
        risk, event = risk[order], event[order]
        log_cum = torch.logcumsumexp(risk, dim=0)
        return -((risk - log_cum) * event).sum() / event.sum()

    def train_step(x, time, event):
        model.train()
        opt.zero_grad()
        loss = neg_partial_ll(model(x).squeeze(-1), time, event)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, time, event) for _ in range(8)])
    model.eval()
    with torch.no_grad():
        r = model(x).squeeze(-1)
        comparable = (time[:, None] < time[None, :]) & (event[:, None] == 1)
        concordant = (r[:, None] > r[None, :]) & comparable
        c_index = concordant.sum().float() / comparable.sum().float()
    env.rec("c-index", c_index.item())
    env.rec("params", list(model.parameters()))


def hamiltonian_nn(torch, env):
    """A Hamiltonian neural network on a mass-spring system: H(q, p) from an MLP, the
    symplectic gradient (dH/dp, -dH/dq) from torch.autograd.grad(H.sum(), x,
    create_graph=True) matched to the true time derivatives; a trajectory rolled out
    with leapfrog-free Euler steps needing grad inside torch.enable_grad at eval."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                          nn.Linear(16, 1))

    def time_derivative(x, create_graph=True):
        x = x.requires_grad_(True) if not x.requires_grad else x
        H = model(x).sum()
        (dH,) = torch.autograd.grad(H, x, create_graph=create_graph)
        dHdq, dHdp = dH.unbind(-1)
        return torch.stack([dHdp, -dHdq], -1)

    qp = torch.randn(32, 2)
    dqp = torch.stack([qp[:, 1], -qp[:, 0]], -1)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(qp, dqp):
        opt.zero_grad()
        loss = F.mse_loss(time_derivative(qp.clone()), dqp)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(qp, dqp) for _ in range(6)])
    model.eval()
    state = torch.tensor([[1.0, 0.0]])
    traj = []
    with torch.no_grad():
        for _ in range(4):
            with torch.enable_grad():
                d = time_derivative(state.clone(), create_graph=False)
            state = state + 0.1 * d
            traj.append(state.clone())
    env.rec("traj", torch.cat(traj))
    env.rec("energy", [model(s).item() for s in traj])
    env.rec("params", list(model.parameters()))
