"""Tutorial programs whose training step uses an idiom llgrad.compile does not keep as
compiled code yet (test_programs_sweep10.py marks them xfail with the reason; eager runs
give torch's numbers): a VAE whose KL weight is a module attribute annealed every epoch,
per-parameter gradient clipping by tensor hooks, a OneCycleLR stepped inside the training
step, a step returning accuracies with .tolist(), a step collecting losses.append(
loss.item()) in a loop and returning the list."""


def kl_annealing_attribute(torch, env):
    """A VAE with KL annealing written the common way: model.beta = min(1, epoch / 10) set
    before each epoch and read in the step (loss = recon + model.beta * kl); twelve epochs
    of one batch each."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(6, 8)
            self.mu, self.logvar = nn.Linear(8, 2), nn.Linear(8, 2)
            self.dec = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 6))
            self.beta = 0.0

        def forward(self, x):
            h = F.relu(self.enc(x))
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            return self.dec(z), mu, logvar

    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x = torch.randn(16, 6)

    def train_step(x):
        opt.zero_grad()
        recon, mu, logvar = model(x)
        kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        loss = F.mse_loss(recon, x) + model.beta * kl
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for epoch in range(12):
        model.beta = min(1.0, epoch / 10)
        hist.append(step(x))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def hook_gradient_clipping(torch, env):
    """Per-parameter gradient clipping registered once with
    p.register_hook(lambda grad: torch.clamp(grad, -clip, clip)) (a PyTorch-forums
    recipe); the hooks run inside the compiled step's backward."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    for p in model.parameters():
        p.register_hook(lambda grad: torch.clamp(grad, -0.1, 0.1))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = torch.randn(12, 4), torch.randn(12, 1) * 3

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(5)])
    env.rec("params", list(model.parameters()))


def onecycle_inside_step(torch, env):
    """The Hugging Face / fastai habit of stepping the scheduler inside the training step:
    OneCycleLR with Adam, whose cycle_momentum writes param_group['betas'] every step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=6)
    x, y = torch.randn(10, 3), torch.randn(10, 1)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(6)])
    env.rec("betas", opt.param_groups[0]["betas"])
    env.rec("params", list(model.parameters()))


def accuracy_tolist_return(torch, env):
    """A multi-head classifier whose step returns the per-head accuracies as
    `accs.tolist()`; their values change from step to step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Linear(5, 6)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    x = torch.randn(16, 5)
    y = torch.stack([(x[:, 0] > 0).long(), (x[:, 1] > 0).long(), (x[:, 2] > 0).long()], 1)

    def train_step(x, y):
        opt.zero_grad()
        logits = model(x).view(-1, 3, 2)
        loss = F.cross_entropy(logits.reshape(-1, 2), y.reshape(-1))
        loss.backward()
        opt.step()
        accs = (logits.argmax(-1) == y).float().mean(0)
        return loss.item(), accs.tolist()

    step = env.step(train_step)
    env.rec("hist", [step(x + 0.3 * i, y) for i in range(12)])
    env.rec("params", list(model.parameters()))


def appended_item_losses(torch, env):
    """A step training two models on one batch that collects `losses.append(loss.item())`
    in its loop and returns the list."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    models = [nn.Linear(3, 1), nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))]
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
    x, y = torch.randn(8, 3), torch.randn(8, 1)

    def train_step(x, y):
        losses = []
        for m, opt in zip(models, opts):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(10)])
    env.rec("params", [list(m.parameters()) for m in models])
