"""Sweep 63 (t1), file f: reinforcement-learning and finance programs run with PyTorch,
with llgrad eagerly and with llgrad compiling each whole training step through
tutorial_harness.py (the same per-step losses, parameters and gradients, no llgrad
warning, compiled code for every step).

- deep hedging (Buehler et al.): an MLP hedging policy fed (time, log-moneyness, previous
  position) over simulated geometric Brownian paths, proportional transaction costs by
  abs of the position change, the entropic risk measure (log-mean-exp of -lambda * P&L
  by logsumexp) of a short call, a learnable premium;
- a GFlowNet (Malkin et al.'s trajectory balance) on a small hypergrid: forward and
  backward policies from one MLP with masked logits, trajectories sampled in the step by
  inverse-CDF from uniforms (cumsum and a comparison count), the learnable log Z,
  (log Z + sum log P_F - log R - sum log P_B)^2;
- IQN (Dabney et al.): quantile fractions embedded by cos(pi * i * tau), the Hadamard
  product with the state features, the quantile Huber loss against a target network's
  quantiles (a frozen copy by load_state_dict, synced every few steps)."""
import copy
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def deep_hedging_entropic(torch, env):
    nn = torch.nn
    n_steps, n_paths, sigma, strike, cost, risk_aversion = 5, 64, 0.2, 1.0, 1e-3, 1.0
    dt = 1.0 / n_steps

    class Hedger(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                                     nn.Linear(16, 1))
            self.premium = nn.Parameter(torch.tensor(0.05))

        def forward(self, spot):                 # spot: (paths, n_steps + 1)
            position = torch.zeros(spot.size(0))
            pnl = torch.zeros(spot.size(0))
            for t in range(n_steps):
                time_left = torch.full_like(position, 1.0 - t * dt)
                features = torch.stack([time_left, torch.log(spot[:, t] / strike), position], 1)
                new_position = self.net(features).squeeze(1)
                pnl = pnl - cost * spot[:, t] * (new_position - position).abs()
                pnl = pnl + new_position * (spot[:, t + 1] - spot[:, t])
                position = new_position
            payoff = torch.clamp(spot[:, -1] - strike, min=0)
            return pnl - payoff + self.premium

    def entropic_risk(pnl, lam):
        return (torch.logsumexp(-lam * pnl, dim=0) - math.log(pnl.numel())) / lam

    model = env.init(Hedger())
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(spot):
        optimizer.zero_grad()
        pnl = model(spot)
        loss = entropic_risk(pnl, risk_aversion) + model.premium     # (the price: min over p)
        loss.backward()
        optimizer.step()
        return loss.detach(), pnl.mean().detach()

    step = env.step(train_step)
    for it in range(5):
        z = env.randn(n_paths, n_steps)
        log_inc = -0.5 * sigma ** 2 * dt + sigma * math.sqrt(dt) * z
        spot = torch.cat([torch.ones(n_paths, 1), torch.exp(torch.cumsum(log_inc, dim=1))], 1)
        env.rec(f"step {it}", step(spot))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def gflownet_trajectory_balance(torch, env):
    nn, F = torch.nn, torch.nn.functional
    H, ndim, batch = 4, 2, 8
    n_actions = ndim + 1                       # (+1 in one dimension, or stop)

    def reward(x):                              # (the hypergrid's corner modes)
        ax = (x / (H - 1) * 2 - 1).abs()
        return 0.01 + 0.5 * ((ax > 0.5).prod(-1)) + 2.0 * ((ax > 0.6) & (ax < 0.8)).prod(-1)

    class TBModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(ndim * H, 32), nn.LeakyReLU(),
                                     nn.Linear(32, 32), nn.LeakyReLU(),
                                     nn.Linear(32, n_actions + ndim))
            self.logZ = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            logits = self.mlp(F.one_hot(x, H).float().view(x.size(0), -1))
            return logits[:, :n_actions], logits[:, n_actions:]

    model = env.init(TBModel())
    optimizer = torch.optim.Adam([{"params": model.mlp.parameters(), "lr": 1e-3},
                                  {"params": [model.logZ], "lr": 1e-1}])

    def train_step(uniforms):
        optimizer.zero_grad()
        x = torch.zeros(batch, ndim, dtype=torch.long)
        done = torch.zeros(batch, dtype=torch.bool)
        log_pf = torch.zeros(batch)
        log_pb = torch.zeros(batch)
        for t in range(ndim * (H - 1) + 1):
            pf_logits, pb_logits = model(x)
            edge = torch.cat([x == H - 1, torch.zeros(batch, 1, dtype=torch.bool)], 1)
            pf_logits = pf_logits.masked_fill(edge, -1e9)
            logp = F.log_softmax(pf_logits, dim=1)
            cdf = logp.exp().cumsum(1)
            action = (uniforms[:, t:t + 1] > cdf[:, :-1]).sum(1)   # (inverse-CDF sampling)
            live = ~done
            log_pf = log_pf + torch.where(live, logp.gather(1, action[:, None]).squeeze(1),
                                          torch.zeros(batch))
            stop = action == ndim
            move = live & ~stop
            step_vec = F.one_hot(action.clamp(max=ndim - 1), ndim) * move[:, None].long()
            x = x + step_vec
            if t > 0 or bool(move.any()):
                # backward policy of the new state: which dimension the move came from
                _, pb_logits_new = model(x)
                pb_logits_new = pb_logits_new.masked_fill(x == 0, -1e9)
                logpb = F.log_softmax(pb_logits_new, dim=1)
                back = action.clamp(max=ndim - 1)
                log_pb = log_pb + torch.where(move, logpb.gather(1, back[:, None]).squeeze(1),
                                              torch.zeros(batch))
            done = done | stop
        log_r = torch.log(reward(x))
        loss = (model.logZ + log_pf - log_r - log_pb).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss.detach(), x

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", step(env.rand(batch, ndim * (H - 1) + 1)))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def iqn_quantile_huber(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d_state, n_actions, n_cos, n_tau, batch, gamma, kappa = 4, 3, 8, 6, 8, 0.99, 1.0

    class IQN(nn.Module):
        def __init__(self):
            super().__init__()
            self.feature = nn.Sequential(nn.Linear(d_state, 16), nn.ReLU())
            self.cos_embedding = nn.Linear(n_cos, 16)
            self.head = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, n_actions))
            self.register_buffer("pis", math.pi * torch.arange(1, n_cos + 1).float())

        def forward(self, state, taus):                  # taus: (batch, n_tau)
            phi = self.feature(state)                    # (batch, 16)
            cos = torch.cos(taus.unsqueeze(-1) * self.pis)        # (batch, n_tau, n_cos)
            tau_embed = F.relu(self.cos_embedding(cos))
            return self.head(phi.unsqueeze(1) * tau_embed)        # (batch, n_tau, actions)

    def quantile_huber_loss(td, taus):
        """td: (batch, n_tau target, n_tau online) errors; taus: the online fractions."""
        huber = torch.where(td.abs() <= kappa, 0.5 * td.pow(2), kappa * (td.abs() - 0.5 * kappa))
        weight = (taus.unsqueeze(1) - (td.detach() < 0).float()).abs()
        return (weight * huber / kappa).sum(-1).mean(1).mean()

    online = env.init(IQN())
    target = copy.deepcopy(online)
    for p in target.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.Adam(online.parameters(), lr=1e-3, eps=1e-2 / batch)

    def train_step(s, a, r, s2, d, taus, taus2):
        with torch.no_grad():
            q_next = target(s2, taus2)                            # (batch, n_tau, actions)
            a2 = online(s2, taus2).mean(1).argmax(1)              # (double-DQN selection)
            z_next = q_next.gather(2, a2.view(-1, 1, 1).expand(-1, n_tau, 1)).squeeze(2)
            z_target = r.unsqueeze(1) + gamma * (1 - d.unsqueeze(1)) * z_next
        z = online(s, taus).gather(2, a.view(-1, 1, 1).expand(-1, n_tau, 1)).squeeze(2)
        td = z_target.unsqueeze(2) - z.unsqueeze(1)
        loss = quantile_huber_loss(td, taus)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), 10.0)
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        s, s2 = env.randn(batch, d_state), env.randn(batch, d_state)
        a = env.randint(0, n_actions, (batch,))
        r, d = env.randn(batch), (env.rand(batch) < 0.2).float()
        env.rec(f"step {it}", step(s, a, r, s2, d, env.rand(batch, n_tau), env.rand(batch, n_tau)))
        if it % 3 == 2:
            target.load_state_dict(online.state_dict())
    env.rec("grads", _grads(online))
    env.rec("target", dict(target.state_dict()))
    env.rec("params", dict(online.state_dict()))


PROGRAMS = {
    "deep_hedging_entropic": deep_hedging_entropic,
    "gflownet_trajectory_balance": gflownet_trajectory_balance,
    "iqn_quantile_huber": iqn_quantile_huber,
}


# (over ~1 s each on an idle machine, most of it cold compile)
SLOW = {'gflownet_trajectory_balance'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    _, _, compiled = run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces == 1, (cf.fn.__name__, cf.n_traces)
