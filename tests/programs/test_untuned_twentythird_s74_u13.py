"""Batch 23 (s74, u13): tutorial programs with PyTorch, llgrad eagerly and llgrad compiling
the step (tutorial_harness.py): slot attention (GRUCell slot updates, a softmax over the slot
axis, attention renormalised over inputs, a spatial-broadcast decoder), GradNorm multi-task
balancing (task weights as parameters, gradient norms of the shared layer by autograd.grad
with create_graph, weights renormalised in place), count regression with zero-inflated
Poisson and Tweedie deviance losses (lgamma, softplus, where), an echo state network (a fixed
reservoir scaled by its spectral radius, a ridge readout by linalg.solve, then SGD fine
tuning) and SwAV (prototypes normalised in place, Sinkhorn-Knopp codes under no_grad, the
swapped prediction loss, prototypes frozen for the first step)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-4 s a program: the slow set)


def slot_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    B, N, D, K, H = 2, 16, 8, 3, 16      # (batch, inputs, dim, slots, hidden)

    class SlotAttention(nn.Module):
        def __init__(self, iters=3, eps=1e-8):
            super().__init__()
            self.iters, self.eps, self.scale = iters, eps, D ** -0.5
            self.slots_mu = nn.Parameter(torch.zeros(1, 1, D))
            self.slots_log_sigma = nn.Parameter(torch.zeros(1, 1, D))
            self.to_q, self.to_k, self.to_v = (nn.Linear(D, D, bias=False) for _ in range(3))
            self.gru = nn.GRUCell(D, D)
            self.mlp = nn.Sequential(nn.Linear(D, H), nn.ReLU(inplace=True), nn.Linear(H, D))
            # (no bias for norm_slots: a shift of every slot's query moves all the dots of an
            # input alike, and the softmax over slots drops it: its gradient is rounding)
            self.norm_input, self.norm_pre_ff = nn.LayerNorm(D), nn.LayerNorm(D)
            self.norm_slots = nn.LayerNorm(D, bias=False)

        def forward(self, inputs, noise):
            b, n, d = inputs.shape
            mu = self.slots_mu.expand(b, K, -1)
            sigma = self.slots_log_sigma.exp().expand(b, K, -1)
            slots = mu + sigma * noise
            inputs = self.norm_input(inputs)
            k, v = self.to_k(inputs), self.to_v(inputs)
            for _ in range(self.iters):
                slots_prev = slots
                q = self.to_q(self.norm_slots(slots))
                dots = torch.einsum("bid,bjd->bij", q, k) * self.scale
                attn = dots.softmax(dim=1) + self.eps
                attn = attn / attn.sum(dim=-1, keepdim=True)
                updates = torch.einsum("bjd,bij->bid", v, attn)
                slots = self.gru(updates.reshape(-1, d), slots_prev.reshape(-1, d))
                slots = slots.reshape(b, -1, d)
                slots = slots + self.mlp(self.norm_pre_ff(slots))
            return slots, attn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(3, D), nn.ReLU(), nn.Linear(D, D))
            self.pos = nn.Parameter(torch.zeros(1, N, D))
            self.sa = SlotAttention()
            self.dec = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, 4))

        def forward(self, x, noise):
            slots, attn = self.sa(self.enc(x) + self.pos, noise)
            # (spatial broadcast: every slot decoded at every position: rgb + alpha mask)
            z = slots.unsqueeze(2) + self.pos.unsqueeze(1)          # b, K, N, D
            out = self.dec(z)
            rgb, masks = out.split([3, 1], dim=-1)
            masks = masks.softmax(dim=1)
            recon = (rgb * masks).sum(dim=1)
            return recon, masks.squeeze(-1), attn

    model = env.init(Model())
    with torch.no_grad():
        model.pos.copy_(env.randn(1, N, D, scale=0.3))
    # (eps: the alpha logits' bias moves every slot alike and the softmax over slots drops it:
    # its gradient is rounding, which Adam's default eps would turn into steps of lr)
    opt = torch.optim.Adam(model.parameters(), lr=4e-3, eps=1e-4)

    def train_step(x, noise):
        recon, masks, attn = model(x, noise)
        loss = F.mse_loss(recon, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach(), norm, masks.argmax(dim=1), attn.detach()
    step = env.step(train_step)
    x = env.rand(B, N, 3)
    for t in range(4):
        loss, norm, seg, attn = step(x, env.randn(B, K, D))
        env.rec(f"loss {t}", loss)
        env.rec(f"norm {t}", norm)
        env.rec(f"attn sums {t}", attn.sum(dim=-1))
    env.rec("seg dtype", seg.dtype)
    env.rec("params", dict(model.named_parameters()))


def gradnorm_multitask(torch, env):
    nn, F = torch.nn, torch.nn.functional
    T, alpha = 2, 1.5

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(5, 12), nn.Tanh())
            self.shared = nn.Linear(12, 12)
            self.heads = nn.ModuleList([nn.Linear(12, 1), nn.Linear(12, 3)])

        def forward(self, x):
            h = torch.relu(self.shared(self.trunk(x)))
            return [head(h) for head in self.heads]

    model = env.init(Net())
    weights = nn.Parameter(torch.ones(T))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    opt_w = torch.optim.Adam([weights], lr=0.02)
    initial = []

    def train_step(x, y_reg, y_cls):
        out = model(x)
        task_losses = torch.stack([F.mse_loss(out[0].squeeze(1), y_reg),
                                   F.cross_entropy(out[1], y_cls)])
        if not initial:
            initial.append(task_losses.detach().clone())
        weighted = weights * task_losses
        total = weighted.sum()
        opt.zero_grad()
        opt_w.zero_grad()
        total.backward(retain_graph=True)
        weights.grad = None
        W = model.shared.weight
        norms = torch.stack([torch.norm(torch.autograd.grad(weighted[i], W, retain_graph=True,
                                                            create_graph=True)[0])
                             for i in range(T)])
        ratio = task_losses.detach() / initial[0]
        inv_rate = ratio / ratio.mean()
        target = (norms.mean() * inv_rate ** alpha).detach()
        gn_loss = (norms - target).abs().sum()
        weights.grad = torch.autograd.grad(gn_loss, weights)[0]
        opt.step()
        opt_w.step()
        with torch.no_grad():
            weights.data = weights.data * T / weights.data.sum()
        return task_losses.detach(), gn_loss.item(), norms.detach()
    step = env.step(train_step)
    x = env.randn(16, 5)
    y_reg = x[:, 0] * 2 - x[:, 1]
    y_cls = (x[:, 2] > 0).long() + (x[:, 3] > 0.5).long()
    for t in range(5):
        losses, gn, norms = step(x, y_reg, y_cls)
        env.rec(f"losses {t}", losses)
        env.rec(f"gn {t}", gn)
        env.rec(f"norms {t}", norms)
    env.rec("weights", weights)
    env.rec("weights is leaf", (weights.is_leaf, weights.requires_grad))
    env.rec("params", dict(model.named_parameters()))


def count_regression(torch, env):
    nn, F = torch.nn, torch.nn.functional
    p = 1.5

    class ZIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.SiLU())
            self.rate = nn.Linear(16, 1)
            self.zero = nn.Linear(16, 1)

        def forward(self, x):
            h = self.body(x)
            return self.rate(h).squeeze(-1), self.zero(h).squeeze(-1)

    def zip_nll(log_rate, zero_logit, y):
        rate = log_rate.exp()
        log_pi = F.logsigmoid(zero_logit)
        log_not_pi = F.logsigmoid(-zero_logit)
        ll_zero = torch.logaddexp(log_pi, log_not_pi - rate)
        ll_pos = log_not_pi + y * log_rate - rate - torch.lgamma(y + 1)
        return -torch.where(y == 0, ll_zero, ll_pos).mean()

    def tweedie(mu, y):
        a = y * torch.pow(mu, 1 - p) / (1 - p)
        b = torch.pow(mu, 2 - p) / (2 - p)
        return (-a + b).mean()

    model = env.init(ZIP())
    model2 = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1), nn.Softplus()))
    opt = torch.optim.Adagrad(list(model.parameters()) + list(model2.parameters()), lr=0.05)
    x = env.randn(32, 4)
    lam = torch.exp(0.5 * x[:, 0] - 0.3 * x[:, 1])
    u = env.rand(32)
    y = torch.floor(lam * 2 * u) * (x[:, 2] > -0.3).float()

    def train_step(x, y):
        log_rate, zero_logit = model(x)
        l1 = zip_nll(log_rate, zero_logit, y)
        mu = model2(x).squeeze(-1) + 1e-4
        l2 = tweedie(mu, y)
        l3 = F.poisson_nll_loss(log_rate, y, log_input=True, full=True)
        loss = l1 + l2 + 0.1 * l3
        opt.zero_grad()
        loss.backward()
        opt.step()
        return torch.stack([l1, l2, l3]).detach()
    step = env.step(train_step)
    for t in range(5):
        ls = step(x, y)
        env.rec(f"losses {t}", ls)
        env.rec(f"print {t}", "zip {:.5f} tweedie {:.5f} poisson {:.5f}".format(*ls.tolist()))
    with torch.no_grad():
        log_rate, zero_logit = model(x)
        pred = torch.sigmoid(-zero_logit) * log_rate.exp()
        env.rec("pred", pred)
        env.rec("mae", F.l1_loss(pred, y).item())
    env.rec("params", [dict(model.named_parameters()), dict(model2.named_parameters())])


def echo_state_network(torch, env):
    nn, F = torch.nn, torch.nn.functional
    R, T_len, washout = 20, 60, 10
    W_in = env.rand(R, 1) - 0.5
    W = env.rand(R, R) - 0.5
    radius = torch.linalg.eigvals(W).abs().max()
    W = W * (0.9 / radius)
    env.rec("radius", radius)
    t = torch.arange(T_len + 1, dtype=torch.float32)
    u = torch.sin(t * 0.3) * torch.cos(t * 0.07)
    inputs, targets = u[:-1], u[1:]

    def run_reservoir(inp):
        x = torch.zeros(R)
        states = []
        for k in range(inp.shape[0]):
            x = 0.7 * x + 0.3 * torch.tanh(W_in @ inp[k:k + 1] + W @ x)
            states.append(x)
        return torch.stack(states)
    X = run_reservoir(inputs)[washout:]
    X = torch.cat([X, torch.ones(X.shape[0], 1)], dim=1)
    Y = targets[washout:].unsqueeze(1)
    lam = 1e-2      # (smaller: an ill-conditioned solve, float32 rounding gets amplified)
    W_out = torch.linalg.solve(X.T @ X + lam * torch.eye(R + 1), X.T @ Y)
    env.rec("ridge mse", F.mse_loss(X @ W_out, Y))

    readout = nn.Linear(R + 1, 1, bias=False)
    with torch.no_grad():
        readout.weight.copy_(W_out.T + 0.05)
    opt = torch.optim.SGD(readout.parameters(), lr=0.1, momentum=0.5, nesterov=True)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)

    def train_step(X, Y):
        loss = F.mse_loss(readout(X), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    step = env.step(train_step)
    for e in range(5):
        env.rec(f"epoch {e}", f"epoch {e} loss {step(X, Y):.6f} lr {sched.get_last_lr()[0]:.5f}")
        sched.step()
    env.rec("readout", readout.weight)


def swav(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_proto, eps, temp = 6, 0.05, 0.1

    class SwAV(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU())
            self.projection = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8))
            self.prototypes = nn.Linear(8, n_proto, bias=False)

        def forward(self, x):
            z = F.normalize(self.projection(self.backbone(x)), dim=1, p=2)
            return z, self.prototypes(z)

    @torch.no_grad()
    def distributed_sinkhorn(out, iters=3):
        Q = torch.exp(out / eps).t()
        Bn, Kn = Q.shape[1], Q.shape[0]
        Q /= torch.sum(Q)
        for _ in range(iters):
            Q /= torch.sum(Q, dim=1, keepdim=True)
            Q /= Kn
            Q /= torch.sum(Q, dim=0, keepdim=True)
            Q /= Bn
        Q *= Bn
        return Q.t()

    model = env.init(SwAV())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def train_step(views, it):
        with torch.no_grad():
            w = model.prototypes.weight.data.clone()
            w = F.normalize(w, dim=1, p=2)
            model.prototypes.weight.copy_(w)
        bs = views[0].shape[0]
        _, output = model(torch.cat(views))
        loss = 0
        for i, crop_id in enumerate([0, 1]):
            with torch.no_grad():
                out = output[bs * crop_id: bs * (crop_id + 1)].detach()
                q = distributed_sinkhorn(out)
            subloss = 0
            for v in [v for v in range(2) if v != crop_id]:
                x = output[bs * v: bs * (v + 1)] / temp
                subloss -= torch.mean(torch.sum(q * F.log_softmax(x, dim=1), dim=1))
            loss += subloss
        loss /= 2
        opt.zero_grad()
        loss.backward()
        if it < 1:
            for name, p in model.named_parameters():
                if "prototypes" in name:
                    p.grad = None
        opt.step()
        return loss.detach(), q.argmax(dim=1)
    step = env.step(train_step)
    base = env.randn(8, 10)
    for it in range(4):
        views = [base + env.randn(8, 10, scale=0.1), base * 0.9 + env.randn(8, 10, scale=0.1)]
        loss, codes = step(views, it)
        env.rec(f"loss {it}", loss)
        env.rec(f"codes {it}", codes)
    env.rec("params", dict(model.named_parameters()))
    env.rec("buffers", dict(model.named_buffers()))


PROGRAMS = {f.__name__: f for f in (slot_attention, gradnorm_multitask, count_regression,
                                    echo_state_network, swav)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
