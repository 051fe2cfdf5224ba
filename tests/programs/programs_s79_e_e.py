"""Training programs (s79, E, e) whose compiled step holds the loop's bookkeeping too: the
scheduler stepped inside it (ReduceLROnPlateau fed the loss tensor, OneCycleLR cycling
momentum, CosineAnnealingWarmRestarts), a validation pass with model.eval() / no_grad
inside the step, and the logged numbers taken with .item()."""


def plateau_in_step(torch, env):
    """scheduler.step(loss) with the loss tensor, inside the compiled step."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=2,
                                                       threshold=1e-2)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step(loss)
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(10, 3), env.randn(10, 1)
    for t in range(40):
        env.rec(f"loss {t}", step(x, y))
        env.rec(f"lr {t}", opt.param_groups[0]["lr"])
    env.rec("bad epochs", sched.num_bad_epochs)
    env.rec("params", model.state_dict())


def onecycle_in_step(torch, env):
    """OneCycleLR (three phases, momentum cycled) stepped inside the compiled step."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=31,
                                                three_phase=True, anneal_strategy="linear")

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss.item(), opt.param_groups[0]["momentum"]
    step = env.step(train_step)
    x, y = env.randn(8, 4), env.randint(0, 3, (8,))
    for t in range(30):
        env.rec(f"step {t}", step(x, y))
    env.rec("params", model.state_dict())


def warm_restarts_in_step(torch, env):
    """CosineAnnealingWarmRestarts stepped (no argument) inside the step, Adam."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=5, T_mult=2)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(8, 4), env.randint(0, 2, (8,))
    for t in range(36):
        env.rec(f"loss {t}", step(x, y))
        env.rec(f"lr {t}", sched.get_last_lr())
    env.rec("params", model.state_dict())


def eval_inside_step(torch, env):
    """A step that trains, then evaluates (model.eval(), no_grad, argmax accuracy) and
    switches back to train mode; BatchNorm and dropout p=0 make the modes differ."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(),
                                   nn.Dropout(0.0), nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y, vx, vy):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(vx)
            val = F.cross_entropy(logits, vy)
            acc = (logits.argmax(1) == vy).float().mean()
        model.train()
        return loss.detach(), val, acc
    step = env.step(train_step)
    x, y = env.randn(12, 4), env.randint(0, 3, (12,))
    vx, vy = env.randn(6, 4), env.randint(0, 3, (6,))
    for t in range(30):
        env.rec(f"step {t}", step(x, y, vx, vy))
    env.rec("training", model.training)
    env.rec("state", model.state_dict())


PROGRAMS = {
    "plateau_in_step": plateau_in_step,
    "onecycle_in_step": onecycle_in_step,
    "warm_restarts_in_step": warm_restarts_in_step,
    "eval_inside_step": eval_inside_step,
}
