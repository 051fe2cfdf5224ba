"""Sweep 60 (H1), second file: pytorch/examples' time-sequence prediction (two LSTMCells
unrolled by hand, LBFGS with a closure, an autoregressive future), a RealNVP flow with
torch.distributions, a top-k mixture of experts with a load-balancing loss, LoRA through
nn.utils.parametrize on a frozen base (merged at the end), MAML on sine tasks with
torch.func.functional_call and a second-order inner loop, and a tiny DDPM (a sinusoidal
time embedding; two samplers under no_grad, one gathering the schedules at a tensor of
steps, one indexing them with the loop's int, `betas[i]`, and `torch.full((n,), i)`).
Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def time_sequence_lbfgs(torch, env):
    nn = torch.nn
    torch.manual_seed(20)
    T, N, L = 20, 8, 16
    x = torch.arange(L).float().unsqueeze(0) + env.randint(-4 * T, 4 * T, (N, 1)).float()
    data = torch.sin(x / T).double()
    inp, target = data[:6, :-1], data[:6, 1:]
    test_inp, test_target = data[6:, :-1], data[6:, 1:]

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, 12)
            self.lstm2 = nn.LSTMCell(12, 12)
            self.linear = nn.Linear(12, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            h_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for i in range(future):      # if we should predict the future
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            return torch.cat(outputs, dim=1)

    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)

    def closure():
        optimizer.zero_grad()
        out = seq(inp)
        loss = criterion(out, target)
        loss.backward()
        return loss

    closure = env.step(closure)
    for i in range(3):
        loss = optimizer.step(closure)
        env.rec(f"step {i}", loss)
        with torch.no_grad():
            future = 5
            pred = seq(test_inp, future=future)
            env.rec(f"test {i}", (criterion(pred[:, :-future], test_target), pred[:, -future:]))
    env.rec("params", dict(seq.state_dict()))


def realnvp_flow(torch, env):
    nn = torch.nn
    D = torch.distributions
    torch.manual_seed(21)
    theta = env.rand(64) * math.pi
    data = torch.stack([torch.cos(theta), torch.sin(theta)], 1) + 0.1 * env.randn(64, 2)

    class Coupling(nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", mask)
            self.s = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2), nn.Tanh())
            self.t = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))

        def forward(self, x):                   # data -> latent
            xm = x * self.mask
            s = self.s(xm) * (1 - self.mask)
            t = self.t(xm) * (1 - self.mask)
            z = xm + (1 - self.mask) * (x - t) * torch.exp(-s)
            return z, -s.sum(dim=1)

        def inverse(self, z):
            zm = z * self.mask
            s = self.s(zm) * (1 - self.mask)
            t = self.t(zm) * (1 - self.mask)
            return zm + (1 - self.mask) * (z * torch.exp(s) + t)

    class RealNVP(nn.Module):
        def __init__(self, n_layers=4):
            super().__init__()
            masks = [torch.tensor([1.0, 0.0]) if i % 2 == 0 else torch.tensor([0.0, 1.0])
                     for i in range(n_layers)]
            self.layers = nn.ModuleList(Coupling(m) for m in masks)
            self.prior = D.MultivariateNormal(torch.zeros(2), torch.eye(2))

        def log_prob(self, x):
            log_det = torch.zeros(x.size(0))
            for layer in self.layers:
                x, ld = layer(x)
                log_det = log_det + ld
            return self.prior.log_prob(x) + log_det

        def sample(self, n):
            z = self.prior.sample((n,))
            for layer in reversed(self.layers):
                z = layer.inverse(z)
            return z

    flow = RealNVP()
    optimizer = torch.optim.Adam(flow.parameters(), lr=3e-3)

    def train_step(xb):
        loss = -flow.log_prob(xb).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(flow.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    step = env.step(train_step)
    for epoch in range(3):
        for s in range(0, 64, 16):
            env.rec(f"e{epoch} s{s}", step(data[s:s + 16]))
    with torch.no_grad():
        env.rec("samples", flow.sample(5))
        env.rec("nll", -flow.log_prob(data).mean())
    env.rec("params", dict(flow.state_dict()))


def moe_topk(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(22)
    d, n_experts, top_k = 8, 4, 2
    X = env.randn(40, d)
    Y = torch.tanh(X[:, :2].sum(1, keepdim=True)) + 0.1 * env.randn(40, 1)

    class Expert(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, 16), nn.Linear(16, d)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(d, n_experts, bias=False)
            self.experts = nn.ModuleList(Expert() for _ in range(n_experts))

        def forward(self, x):
            logits = self.gate(x)
            probs = logits.softmax(dim=-1)
            weights, idx = torch.topk(probs, top_k, dim=-1)
            weights = weights / weights.sum(dim=-1, keepdim=True)
            # (dense dispatch: every expert sees every token, the gates zero the rest; the
            # sparse form, x[torch.where(idx == e)[0]], has a data-dependent length)
            gates = torch.zeros_like(probs).scatter(1, idx, weights)
            expert_out = torch.stack([expert(x) for expert in self.experts], dim=1)
            out = torch.einsum("be,bed->bd", gates, expert_out)
            # Switch-style load balancing: fraction routed x mean gate probability
            frac = F.one_hot(idx[:, 0], n_experts).float().mean(0)
            aux = n_experts * (frac * probs.mean(0)).sum()
            return out, aux

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(d, d)
            self.moe = MoE()
            self.norm = nn.LayerNorm(d)
            self.out = nn.Linear(d, 1)

        def forward(self, x):
            h = self.inp(x)
            m, aux = self.moe(self.norm(h))
            return self.out(h + m), aux

    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(xb, yb):
        pred, aux = model(xb)
        loss = F.mse_loss(pred, yb) + 0.01 * aux
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item(), aux.item()

    step = env.step(train_step)
    for epoch in range(3):
        for s in range(0, 40, 10):
            env.rec(f"e{epoch} s{s}", step(X[s:s + 10], Y[s:s + 10]))
    env.rec("params", dict(model.state_dict()))


def lora_parametrize(torch, env):
    nn = torch.nn
    P = torch.nn.utils.parametrize
    torch.manual_seed(23)
    X = env.randn(32, 12)
    y = (X[:, 0] * X[:, 1] > 0).long()

    base = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 24), nn.ReLU(),
                         nn.Linear(24, 2))
    # "pretrained": a few steps on another target
    pre_opt = torch.optim.SGD(base.parameters(), lr=0.1)
    for _ in range(2):
        pre_opt.zero_grad()
        nn.functional.cross_entropy(base(X), (X[:, 2] > 0).long()).backward()
        pre_opt.step()

    class LoRA(nn.Module):
        def __init__(self, fan_out, fan_in, rank=2, alpha=4.0):
            super().__init__()
            self.A = nn.Parameter(torch.zeros(rank, fan_in))
            self.B = nn.Parameter(torch.zeros(fan_out, rank))
            nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
            self.scale = alpha / rank

        def forward(self, W):
            return W + self.B @ self.A * self.scale

    for p in base.parameters():
        p.requires_grad_(False)
    for layer in (base[0], base[2]):
        P.register_parametrization(layer, "weight", LoRA(*layer.weight.shape))
    trainable = [p for p in base.parameters() if p.requires_grad]
    env.rec("trainable", [tuple(p.shape) for p in trainable])
    optimizer = torch.optim.Adam(trainable, lr=2e-2)

    def train_step(xb, yb):
        loss = nn.functional.cross_entropy(base(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(train_step)
    for epoch in range(3):
        for s in range(0, 32, 8):
            env.rec(f"e{epoch} s{s}", step(X[s:s + 8], y[s:s + 8]))
    env.rec("lora state", dict(base.state_dict()))
    for layer in (base[0], base[2]):
        P.remove_parametrizations(layer, "weight", leave_parametrized=True)
    with torch.no_grad():
        env.rec("merged out", base(X[:6]))
    env.rec("merged", dict(base.state_dict()))


def maml_sine(torch, env):
    nn, F = torch.nn, torch.nn.functional
    functional_call = torch.func.functional_call
    torch.manual_seed(24)
    model = nn.Sequential(nn.Linear(1, 20), nn.ReLU(), nn.Linear(20, 20), nn.ReLU(),
                          nn.Linear(20, 1))
    meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    inner_lr, inner_steps = 0.05, 2

    def task_batch(n_tasks, k):
        amp = env.rand(n_tasks, 1, 1) * 4.5 + 0.5
        phase = env.rand(n_tasks, 1, 1) * math.pi
        xs = env.rand(n_tasks, 2 * k, 1) * 10 - 5
        ys = amp * torch.sin(xs + phase)
        return xs[:, :k], ys[:, :k], xs[:, k:], ys[:, k:]

    def meta_step(xs, ys, xq, yq):
        meta_opt.zero_grad()
        params = dict(model.named_parameters())
        total = 0.0
        for t in range(xs.size(0)):
            fast = params
            for _ in range(inner_steps):
                loss = F.mse_loss(functional_call(model, fast, (xs[t],)), ys[t])
                grads = torch.autograd.grad(loss, list(fast.values()), create_graph=True)
                fast = {n: p - inner_lr * g for (n, p), g in zip(fast.items(), grads)}
            q_loss = F.mse_loss(functional_call(model, fast, (xq[t],)), yq[t])
            q_loss.backward()
            total += q_loss.item()
        for p in model.parameters():
            p.grad.div_(xs.size(0))
        meta_opt.step()
        return total / xs.size(0)

    step = env.step(meta_step)
    for it in range(4):
        env.rec(f"meta {it}", step(*task_batch(3, 5)))
    env.rec("params", dict(model.state_dict()))


def tiny_ddpm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(25)
    T = 20
    betas = torch.linspace(1e-3, 0.2, T)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    data = torch.cat([env.randn(24, 2) * 0.2 + 1.0, env.randn(24, 2) * 0.2 - 1.0])

    def timestep_embedding(t, dim=8):
        half = dim // 2
        freqs = torch.exp(-math.log(1000.0) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2 + 8, 32), nn.SiLU(), nn.Linear(32, 32),
                                     nn.SiLU(), nn.Linear(32, 2))

        def forward(self, x, t):
            return self.net(torch.cat([x, timestep_embedding(t)], dim=1))

    model = Denoiser()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    def q_sample(x0, t, noise):
        a = alphas_cumprod.gather(0, t).unsqueeze(1)
        return a.sqrt() * x0 + (1 - a).sqrt() * noise

    def train_step(x0):
        t = torch.randint(0, T, (x0.size(0),))
        noise = torch.randn_like(x0)
        loss = F.mse_loss(model(q_sample(x0, t, noise), t), noise)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    def extract(a, t, x_shape):
        out = a.gather(-1, t)
        return out.reshape(t.shape[0], *((1,) * (len(x_shape) - 1)))

    sqrt_recip_alphas = torch.sqrt(1.0 / alphas)
    sqrt_one_minus = torch.sqrt(1.0 - alphas_cumprod)

    @torch.no_grad()
    def p_sample(x, t, t_index):
        betas_t = extract(betas, t, x.shape)
        mean = extract(sqrt_recip_alphas, t, x.shape) * (
            x - betas_t * model(x, t) / extract(sqrt_one_minus, t, x.shape))
        if t_index == 0:
            return mean
        return mean + torch.sqrt(betas_t) * torch.randn_like(x)

    @torch.no_grad()
    def p_sample_by_index(x, i):         # (the from-scratch form: the schedules indexed by i)
        t = torch.full((x.size(0),), i, dtype=torch.long)
        eps = model(x, t)
        mean = (x - betas[i] / (1 - alphas_cumprod[i]).sqrt() * eps) / alphas[i].sqrt()
        if i == 0:
            return mean
        return mean + betas[i].sqrt() * torch.randn_like(x)

    step, p_sample = env.step(train_step), env.step(p_sample)
    p_sample_by_index = env.step(p_sample_by_index)
    perm = torch.randperm(48)
    for epoch in range(3):
        for s in range(0, 48, 16):
            env.rec(f"e{epoch} s{s}", step(data[perm[s:s + 16]]))
    x = torch.randn(6, 2)
    for i in reversed(range(T)):
        x = p_sample(x, torch.full((x.size(0),), i, dtype=torch.long), i)
    env.rec("samples", x)
    x = torch.randn(6, 2)
    for i in reversed(range(T)):
        x = p_sample_by_index(x, i)
    env.rec("samples by index", x)
    env.rec("params", dict(model.state_dict()))
