"""Stop 70 (t8), file f: programs that differentiate through gradients and keep target
networks, from paper re-implementations and RL tutorials, run with PyTorch, with llgrad
eagerly and with llgrad compiling the step through tutorial_harness.py.

- a contractive autoencoder (Rifai et al.): the encoder's Jacobian taken by
  torch.autograd.grad with `is_grads_batched=True` over the rows of an identity (the
  "batched grad" recipe from the autograd docs), its squared Frobenius norm added to the
  reconstruction loss with create_graph=True;
- TD3 (Fujimoto et al., the author's TD3.py at toy size): twin critics in one module,
  target networks from copy.deepcopy, target policy smoothing with
  `(torch.randn_like(action) * policy_noise).clamp(-noise_clip, noise_clip)`, the actor
  updated every second call (a Python counter on the agent), Polyak averaging by
  `target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)`;
- input-gradient regularisation ("double backpropagation", Drucker & LeCun, as the
  adversarial-robustness blog posts write it): `x.requires_grad_()` inside the step, the
  input gradient taken with create_graph=True, its norm penalised, the model's parameter
  grads from both terms."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def contractive_autoencoder(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d_in, d_h = 8, 4

    class CAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(d_in, d_h)
            self.dec = nn.Linear(d_h, d_in)

        def forward(self, x):
            h = torch.sigmoid(self.enc(x))
            return h, torch.sigmoid(self.dec(h))

    model = env.init(CAE())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = env.rand(24, d_in)
    lam = 1e-2

    def train_step(x):
        x = x.clone().requires_grad_(True)
        h, recon = model(x)
        basis = torch.eye(d_h).unsqueeze(1).expand(d_h, x.shape[0], d_h)
        jac, = torch.autograd.grad(h, x, grad_outputs=basis, is_grads_batched=True,
                                   create_graph=True)              # (d_h, B, d_in)
        contractive = jac.pow(2).sum() / x.shape[0]
        loss = F.binary_cross_entropy(recon, x.detach()) + lam * contractive
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), contractive.detach()

    step = env.step(train_step)
    losses, pens = [], []
    for epoch in range(4):
        for i in range(0, 24, 8):
            loss, pen = step(data[i:i + 8])
            losses.append(loss.item())
            pens.append(pen.item())
    # (the analytic penalty for a sigmoid encoder: sum_j (h_j(1-h_j))^2 ||W_j||^2)
    with torch.no_grad():
        h = torch.sigmoid(model.enc(data[:8]))
        analytic = ((h * (1 - h)) ** 2 @ model.enc.weight.pow(2).sum(1)).mean()
    env.rec("losses", losses)
    env.rec("penalties", pens)
    env.rec("analytic", analytic)
    env.rec("params", dict(model.state_dict()))


def td3(torch, env):
    nn, F = torch.nn, torch.nn.functional
    state_dim, action_dim, max_action = 3, 1, 2.0

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(state_dim, 16), nn.Linear(16, action_dim)

        def forward(self, state):
            return max_action * torch.tanh(self.l2(F.relu(self.l1(state))))

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(state_dim + action_dim, 16), nn.Linear(16, 1)
            self.l4, self.l5 = nn.Linear(state_dim + action_dim, 16), nn.Linear(16, 1)

        def forward(self, state, action):
            sa = torch.cat([state, action], 1)
            return self.l2(F.relu(self.l1(sa))), self.l5(F.relu(self.l4(sa)))

        def Q1(self, state, action):
            return self.l2(F.relu(self.l1(torch.cat([state, action], 1))))

    class TD3:
        def __init__(self, discount=0.99, tau=0.05, policy_noise=0.2, noise_clip=0.5,
                     policy_freq=2):
            self.actor = env.init(Actor())
            self.actor_target = copy.deepcopy(self.actor)
            self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-3)
            self.critic = env.init(Critic())
            self.critic_target = copy.deepcopy(self.critic)
            self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-3)
            self.discount, self.tau = discount, tau
            self.policy_noise, self.noise_clip = policy_noise, noise_clip
            self.policy_freq = policy_freq
            self.total_it = 0

        def train(self, state, action, next_state, reward, not_done):
            self.total_it += 1
            with torch.no_grad():
                noise = (torch.randn_like(action) * self.policy_noise).clamp(
                    -self.noise_clip, self.noise_clip)
                next_action = (self.actor_target(next_state) + noise).clamp(
                    -max_action, max_action)
                target_Q1, target_Q2 = self.critic_target(next_state, next_action)
                target_Q = torch.min(target_Q1, target_Q2)
                target_Q = reward + not_done * self.discount * target_Q
            current_Q1, current_Q2 = self.critic(state, action)
            critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
            self.critic_optimizer.zero_grad()
            critic_loss.backward()
            self.critic_optimizer.step()
            actor_loss = None
            if self.total_it % self.policy_freq == 0:
                actor_loss = -self.critic.Q1(state, self.actor(state)).mean()
                self.actor_optimizer.zero_grad()
                actor_loss.backward()
                self.actor_optimizer.step()
                for param, target_param in zip(self.critic.parameters(),
                                               self.critic_target.parameters()):
                    target_param.data.copy_(self.tau * param.data
                                            + (1 - self.tau) * target_param.data)
                for param, target_param in zip(self.actor.parameters(),
                                               self.actor_target.parameters()):
                    target_param.data.copy_(self.tau * param.data
                                            + (1 - self.tau) * target_param.data)
            return critic_loss.detach(), actor_loss

    agent = TD3()
    step = env.step(agent.train)
    buffer = (env.randn(40, state_dim), env.rand(40, action_dim) * 4 - 2,
              env.randn(40, state_dim), env.randn(40, 1), (env.rand(40, 1) > 0.1).float())
    c_losses, a_losses = [], []
    for it in range(8):
        idx = env.randint(0, 40, (10,))
        c, a = step(*[b[idx] for b in buffer])
        c_losses.append(c.item())
        a_losses.append(None if a is None else a.item())
    env.rec("critic losses", c_losses)
    env.rec("actor losses", a_losses)
    env.rec("total_it", agent.total_it)
    env.rec("actor", dict(agent.actor.state_dict()))
    env.rec("critic target", dict(agent.critic_target.state_dict()))
    env.rec("actor target", dict(agent.actor_target.state_dict()))
    if env.compiled:
        assert step.n_traces <= 3, step.n_traces


def double_backprop(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(6, 20), nn.Softplus(), nn.Linear(20, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    X, y = env.randn(30, 6), env.randint(0, 3, (30,))

    def train_step(x, t, lam):
        x.requires_grad_()
        loss = F.cross_entropy(model(x), t)
        grad_x, = torch.autograd.grad(loss, x, create_graph=True)
        penalty = grad_x.flatten(1).norm(2, dim=1).pow(2).mean()
        total = loss + lam * penalty
        opt.zero_grad()
        total.backward()
        opt.step()
        return loss.detach(), penalty.detach()

    step = env.step(train_step)
    hist = []
    for epoch in range(4):
        for i in range(0, 30, 10):
            xb = X[i:i + 10].clone()
            loss, pen = step(xb, y[i:i + 10], 10.0 if epoch else 0.0)
            hist.append((loss.item(), pen.item()))
            env.rec(f"x grad {epoch} {i}", xb.grad)
    env.rec("hist", hist)
    env.rec("params", dict(model.state_dict()))
    env.rec("grads", [p.grad for p in model.parameters()])


PROGRAMS = {"contractive_autoencoder": contractive_autoencoder, "td3": td3,
            "double_backprop": double_backprop}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
