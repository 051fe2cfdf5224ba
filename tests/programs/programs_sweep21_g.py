"""Programs that change the model between compiled calls: the lottery-ticket recipe
(train, prune the smallest weights into mask buffers, rewind the weights to their
initial state_dict with load_state_dict, train again, the mask applied in forward);
weight normalisation by parametrizations.weight_norm, removed half-way with
remove_parametrizations and training continued with a new optimiser; a Gumbel-softmax
categorical VAE (F.gumbel_softmax(hard=True), its temperature annealed as a float argument);
dead-unit re-initialisation (units with no activation re-drawn with reset_parameters-style
init under no_grad and their Adam state zeroed).
Programs `f(torch, env)`, see tutorial_harness.py."""
import copy


def lottery_ticket(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class MaskedLinear(nn.Linear):
        def __init__(self, i, o):
            super().__init__(i, o)
            self.register_buffer("mask", torch.ones(o, i))

        def forward(self, x):
            return F.linear(x, self.weight * self.mask, self.bias)

    model = env.init(nn.Sequential(MaskedLinear(6, 16), nn.ReLU(), MaskedLinear(16, 3)))
    init_state = copy.deepcopy(model.state_dict())
    x, y = env.randn(20, 6), env.randint(0, 3, (20,))

    def make_step(opt):
        def train_step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.item()
        return env.step(train_step)

    for rnd in range(2):
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
        step = make_step(opt)
        env.rec(f"round{rnd}", [step(x, y) for _ in range(4)])
        with torch.no_grad():
            for m in model:
                if isinstance(m, MaskedLinear):
                    alive = (m.weight * m.mask).abs()[m.mask.bool()]
                    threshold = alive.kthvalue(int(0.3 * alive.numel())).values
                    m.mask.mul_((m.weight.abs() > threshold).float())
        masks = {k: v.clone() for k, v in model.state_dict().items() if k.endswith("mask")}
        model.load_state_dict({**init_state, **masks})
        env.rec(f"density{rnd}", [m.mask.mean() for m in model if isinstance(m, MaskedLinear)])
    env.rec("model", model.state_dict())


def weight_norm_removed(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrize
    model = nn.Sequential(nn.Linear(5, 12), nn.GELU(), nn.Linear(12, 1))
    env.init(model)
    for m in model:
        if isinstance(m, nn.Linear):
            nn.utils.parametrizations.weight_norm(m, name="weight", dim=0)
    x, y = env.randn(16, 5), env.randn(16, 1)

    def run(opt, n):
        def train_step(x, y):
            loss = F.smooth_l1_loss(model(x), y, beta=0.5)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        step = env.step(train_step)
        return [step(x, y) for _ in range(n)]

    env.rec("normed", run(torch.optim.Adam(model.parameters(), lr=1e-2), 4))
    env.rec("g", model[0].parametrizations.weight.original0)
    for m in model:
        if isinstance(m, nn.Linear):
            P.remove_parametrizations(m, "weight", leave_parametrized=True)
    env.rec("plain", run(torch.optim.Adam(model.parameters(), lr=1e-2), 4))
    env.rec("model", model.state_dict())


def gumbel_categorical_vae(torch, env):
    nn, F = torch.nn, torch.nn.functional
    N, K, D = 3, 4, 12       # N categorical latents with K classes each

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, N * K))
            self.dec = nn.Sequential(nn.Linear(N * K, 32), nn.ReLU(), nn.Linear(32, D))

        def forward(self, x, temp, hard):
            logits = self.enc(x).view(-1, N, K)
            z = F.gumbel_softmax(logits, tau=temp, hard=hard, dim=-1)
            return self.dec(z.view(-1, N * K)), F.softmax(logits, dim=-1)

    model = env.init(VAE())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(x, temp):
        recon, qy = model(x, temp, True)
        bce = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") / x.size(0)
        log_ratio = torch.log(qy * K + 1e-20)
        kld = torch.sum(qy * log_ratio, dim=-1).mean()
        loss = bce + kld
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), qy

    step = env.step(train_step)
    x = (env.rand(8, D) > 0.5).float()
    temp, anneal_rate, temp_min = 1.0, 0.3, 0.5
    for it in range(5):
        env.rec(f"it{it}", step(x, temp), cross=False)     # (the Gumbel noise: llgrad's)
        temp = max(temp * 2.718281828 ** (-anneal_rate * it), temp_min)
    env.rec("model", model.state_dict(), cross=False)


def dead_unit_reinit(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 1)))
    with torch.no_grad():
        model[0].bias[:4] = -10.0    # (four units that never fire)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = env.randn(16, 4), env.randn(16, 1)
    activity = {}
    model[1].register_forward_hook(lambda m, i, o: activity.__setitem__("a", o.detach()))

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, (activity["a"] > 0).float().mean(0)

    step = env.step(train_step)
    for it in range(6):
        loss, firing = step(x, y)
        env.rec(f"it{it}", (loss, firing))
        if it == 2:
            dead = (firing == 0).nonzero().flatten()
            with torch.no_grad():
                fresh = env.randn(len(dead), 4, scale=0.5)
                model[0].weight[dead] = fresh
                model[0].bias[dead] = 0.0
                model[2].weight[:, dead] = 0.0
                for p in (model[0].weight, model[0].bias):
                    st = opt.state[p]
                    st["exp_avg"][dead] = 0.0
                    st["exp_avg_sq"][dead] = 0.0
            env.rec("dead", dead)
    env.rec("model", model.state_dict())
