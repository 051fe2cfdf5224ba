"""Sweep 62 (t1), file c: reinforcement-learning tutorial programs run with PyTorch, with
llgrad eagerly and with llgrad compiling each whole update (tutorial_harness.py): the same
losses, parameters and gradients, no llgrad warning (no eager fallback), compiled code for
every step. In-step sampling uses the library's own generator (llgrad's streams are
torch's), so those draws are compared with torch too.

- categorical DQN (C51, "Rainbow is all you need" 06): a replay buffer, a target network
  hard-updated by load_state_dict, the distributional projection by floor/ceil and two
  index_add_ into a flat view, next_dist[range(batch), next_action], log of gathered atoms;
- soft actor-critic (pranz24/pytorch-soft-actor-critic): a tanh-squashed Gaussian policy
  with Normal.rsample and the log-det correction, twin Q critics and a Polyak-averaged
  target, automatic entropy tuning, three optimizers in one step; alpha computed at each
  use (pytorch_sac) compiles; pranz24's alpha = log_alpha.exp() kept on the agent (a
  tensor whose graph the next update's policy backward reaches) runs eagerly with a
  warning, a fallback compile needs (that backward runs a node made outside the traced
  call, freeing it and writing log_alpha.grad), checked to equal eager and torch;
- REINFORCE with a learned baseline over a whole batched rollout inside the compiled step:
  Categorical(logits).sample() and log_prob/entropy at every time step, the environment as
  tensor ops (one_hot states, clamp moves), discounted returns by a reverse loop."""
import pytest

torch = pytest.importorskip("torch")

import copy  # noqa: E402
import warnings  # noqa: E402

import llgrad  # noqa: E402
from tutorial_harness import Env, compare, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def c51_categorical_dqn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_states, n_actions, atom_size, v_min, v_max = 6, 2, 11, 0.0, 5.0
    batch_size, gamma, target_update = 8, 0.9, 3
    support = torch.linspace(v_min, v_max, atom_size)

    class Network(nn.Module):
        def __init__(self, in_dim, out_dim, atom_size, support):
            super().__init__()
            self.support, self.out_dim, self.atom_size = support, out_dim, atom_size
            self.layers = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, 32),
                                        nn.ReLU(), nn.Linear(32, out_dim * atom_size))

        def forward(self, x):
            return torch.sum(self.dist(x) * self.support, dim=2)

        def dist(self, x):
            q_atoms = self.layers(x).view(-1, self.out_dim, self.atom_size)
            return F.softmax(q_atoms, dim=-1).clamp(min=1e-3)    # (avoids nans)

    dqn = env.init(Network(n_states, n_actions, atom_size, support))
    dqn_target = Network(n_states, n_actions, atom_size, support)
    dqn_target.load_state_dict(dqn.state_dict())
    dqn_target.eval()
    optimizer = torch.optim.Adam(dqn.parameters(), lr=1e-3)

    def compute_dqn_loss(state, next_state, action, reward, done):
        delta_z = float(v_max - v_min) / (atom_size - 1)
        with torch.no_grad():
            next_action = dqn_target(next_state).argmax(1)
            next_dist = dqn_target.dist(next_state)
            next_dist = next_dist[range(batch_size), next_action]
            t_z = reward + (1 - done) * gamma * support
            t_z = t_z.clamp(min=v_min, max=v_max)
            b = (t_z - v_min) / delta_z
            l = b.floor().long()
            u = b.ceil().long()
            offset = (torch.linspace(0, (batch_size - 1) * atom_size, batch_size).long()
                      .unsqueeze(1).expand(batch_size, atom_size))
            proj_dist = torch.zeros(next_dist.size())
            proj_dist.view(-1).index_add_(0, (l + offset).view(-1),
                                          (next_dist * (u.float() - b)).view(-1))
            proj_dist.view(-1).index_add_(0, (u + offset).view(-1),
                                          (next_dist * (b - l.float())).view(-1))
        dist = dqn.dist(state)
        log_p = torch.log(dist[range(batch_size), action])
        return -(proj_dist * log_p).sum(1).mean()

    def update_model(state, next_state, action, reward, done):
        loss = compute_dqn_loss(state, next_state, action, reward, done)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    update = env.step(update_model)
    memory, pos, epsilon, n_updates = [], 0, 0.5, 0
    for t in range(40):                     # a chain: reward 1 and reset at the right end
        s = F.one_hot(torch.tensor(pos), n_states).float()
        if env.rand(1).item() < epsilon:
            a = env.choice(n_actions)
        else:
            with torch.no_grad():
                a = dqn(s.unsqueeze(0)).argmax().item()
        nxt = max(0, min(n_states - 1, pos + (1 if a == 1 else -1)))
        done = nxt == n_states - 1
        memory.append((s, F.one_hot(torch.tensor(nxt), n_states).float(), a, float(done),
                       float(done)))
        pos = 0 if done else nxt
        if len(memory) >= batch_size and t % 4 == 3:
            idx = [env.choice(len(memory)) for _ in range(batch_size)]
            st, ns, ac, rw, dn = zip(*[memory[i] for i in idx])
            env.rec(f"update {n_updates}", update(torch.stack(st), torch.stack(ns),
                                                  torch.tensor(ac), torch.tensor(rw)[:, None],
                                                  torch.tensor(dn)[:, None]))
            n_updates += 1
            if n_updates % target_update == 0:
                dqn_target.load_state_dict(dqn.state_dict())
            epsilon = max(0.1, epsilon - 0.05)
    env.rec("grads", _grads(dqn))
    env.rec("params", dict(dqn.state_dict()))
    env.rec("target", dict(dqn_target.state_dict()))


def sac_twin_q(torch, env, alpha_kept=False):
    """alpha_kept=False: alpha as a property, log_alpha.exp() at each use (denisyarats/
    pytorch_sac); True: pranz24's self.alpha = self.log_alpha.exp() kept on the agent, so
    the policy loss's backward reaches the ExpBackward made by the previous update."""
    nn, F = torch.nn, torch.nn.functional
    Normal = torch.distributions.Normal
    obs_dim, act_dim, hidden, batch, gamma, tau = 4, 2, 16, 8, 0.99, 0.05
    LOG_SIG_MAX, LOG_SIG_MIN, epsilon = 2, -20, 1e-6

    class QNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1, self.linear2 = nn.Linear(obs_dim + act_dim, hidden), nn.Linear(hidden, 1)
            self.linear4, self.linear5 = nn.Linear(obs_dim + act_dim, hidden), nn.Linear(hidden, 1)

        def forward(self, state, action):
            xu = torch.cat([state, action], 1)
            return self.linear2(F.relu(self.linear1(xu))), self.linear5(F.relu(self.linear4(xu)))

    class GaussianPolicy(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1 = nn.Linear(obs_dim, hidden)
            self.mean_linear = nn.Linear(hidden, act_dim)
            self.log_std_linear = nn.Linear(hidden, act_dim)
            self.action_scale, self.action_bias = torch.tensor(2.0), torch.tensor(0.0)

        def forward(self, state):
            x = F.relu(self.linear1(state))
            log_std = torch.clamp(self.log_std_linear(x), min=LOG_SIG_MIN, max=LOG_SIG_MAX)
            return self.mean_linear(x), log_std

        def sample(self, state):
            mean, log_std = self.forward(state)
            std = log_std.exp()
            normal = Normal(mean, std)
            x_t = normal.rsample()      # (mean + std * N(0,1): the reparameterisation trick)
            y_t = torch.tanh(x_t)
            action = y_t * self.action_scale + self.action_bias
            log_prob = normal.log_prob(x_t)
            log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + epsilon)
            log_prob = log_prob.sum(1, keepdim=True)
            return action, log_prob, torch.tanh(mean) * self.action_scale + self.action_bias

    class SAC:
        def __init__(self, critic, policy):
            self.critic = critic
            self.critic_optim = torch.optim.Adam(self.critic.parameters(), lr=3e-3)
            self.critic_target = QNetwork()
            self.critic_target.load_state_dict(self.critic.state_dict())
            self.policy = policy
            self.policy_optim = torch.optim.Adam(self.policy.parameters(), lr=3e-3)
            self.target_entropy = -float(act_dim)
            self.log_alpha = torch.zeros(1, requires_grad=True)
            if alpha_kept:
                self.alpha = self.log_alpha.exp()
            self.alpha_optim = torch.optim.Adam([self.log_alpha], lr=3e-3)

        def __getattr__(self, name):      # (the property of pytorch_sac's agent)
            if name == "alpha":
                return self.log_alpha.exp()
            raise AttributeError(name)

        def update_parameters(self, state, action, reward, next_state, mask):
            with torch.no_grad():
                next_action, next_log_pi, _ = self.policy.sample(next_state)
                q1_next, q2_next = self.critic_target(next_state, next_action)
                min_qf_next_target = torch.min(q1_next, q2_next) - self.alpha * next_log_pi
                next_q_value = reward + mask * gamma * min_qf_next_target
            qf1, qf2 = self.critic(state, action)
            qf_loss = F.mse_loss(qf1, next_q_value) + F.mse_loss(qf2, next_q_value)
            self.critic_optim.zero_grad()
            qf_loss.backward()
            self.critic_optim.step()

            pi, log_pi, _ = self.policy.sample(state)
            qf1_pi, qf2_pi = self.critic(state, pi)
            alpha = self.alpha if alpha_kept else self.alpha.detach()
            policy_loss = ((alpha * log_pi) - torch.min(qf1_pi, qf2_pi)).mean()
            self.policy_optim.zero_grad()
            policy_loss.backward()
            self.policy_optim.step()

            alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()
            self.alpha_optim.zero_grad()
            alpha_loss.backward()
            self.alpha_optim.step()
            if alpha_kept:
                self.alpha = self.log_alpha.exp()

            for target_param, param in zip(self.critic_target.parameters(),
                                           self.critic.parameters()):
                target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)
            return qf_loss.item(), policy_loss.item(), alpha_loss.item()

    # (the networks made outside SAC.__init__: compile guards what the functions of the
    # agent's class read, so an __init__ reading the harness's growing env would re-trace)
    agent = SAC(env.init(QNetwork()), env.init(GaussianPolicy()))
    update = env.step(agent.update_parameters)
    states = env.randn(40, obs_dim)
    actions = env.rand(40, act_dim) * 4 - 2
    rewards = -(states[:, :1] ** 2) - 0.1 * (actions ** 2).sum(1, keepdim=True)
    next_states = 0.9 * states + 0.1 * actions.sum(1, keepdim=True)
    masks = (env.rand(40, 1) > 0.1).float()
    for it in range(5):
        idx = env.randint(0, 40, (batch,))
        env.rec(f"update {it}", update(states[idx], actions[idx], rewards[idx],
                                       next_states[idx], masks[idx]))
    env.rec("alpha", agent.alpha)
    env.rec("log_alpha grad", agent.log_alpha.grad)
    env.rec("critic grads", _grads(agent.critic))
    env.rec("policy grads", _grads(agent.policy))
    env.rec("critic", dict(agent.critic.state_dict()))
    env.rec("target", dict(agent.critic_target.state_dict()))
    env.rec("policy", dict(agent.policy.state_dict()))
    with torch.no_grad():
        env.rec("greedy action", agent.policy.sample(states[:3])[2])


def reinforce_batched_rollout(torch, env):
    nn, F = torch.nn, torch.nn.functional
    Categorical = torch.distributions.Categorical
    n_pos, n_envs, horizon, gamma = 6, 8, 6, 0.9

    class PolicyWithBaseline(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(n_pos, 24), nn.Tanh())
            self.pi = nn.Linear(24, 3)
            self.v = nn.Linear(24, 1)

        def forward(self, s):
            h = self.body(s)
            return self.pi(h), self.v(h).squeeze(-1)

    policy = env.init(PolicyWithBaseline())
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)

    def train_episode(start):
        pos = start
        log_probs, values, rewards, entropies = [], [], [], []
        for _ in range(horizon):
            logits, value = policy(F.one_hot(pos, n_pos).float())
            m = Categorical(logits=logits)
            action = m.sample()
            log_probs.append(m.log_prob(action))
            entropies.append(m.entropy())
            values.append(value)
            pos = (pos + action - 1).clamp(0, n_pos - 1)
            rewards.append((pos == n_pos - 1).float() - 0.05)
        R = torch.zeros(n_envs)
        returns = []
        for r in rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.stack(returns)
        values = torch.stack(values)
        advantage = returns - values.detach()
        policy_loss = -(torch.stack(log_probs) * advantage).mean()
        value_loss = F.smooth_l1_loss(values, returns)
        loss = policy_loss + 0.5 * value_loss - 0.01 * torch.stack(entropies).mean()
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        return loss.detach(), returns[0].mean(), pos

    step = env.step(train_episode)
    torch.manual_seed(5)
    for episode in range(4):
        env.rec(f"episode {episode}", step(env.randint(0, 3, (n_envs,))))
    env.rec("grads", _grads(policy))
    env.rec("params", dict(policy.state_dict()))


PROGRAMS = {        # name: (program, most traces of any of its compiled steps, rtol)
    "c51_categorical_dqn": (c51_categorical_dqn, 1, 1e-5),
    # (log(scale * (1 - tanh(x)^2) + 1e-6) of a saturated sample: one ulp of tanh (NumPy's
    # and torch's float32 tanh differ by one in places) moves a policy loss by 1e-4)
    "sac_twin_q": (sac_twin_q, 1, 5e-4),
    "reinforce_batched_rollout": (reinforce_batched_rollout, 1, 1e-5),
}
SLOW = {"c51_categorical_dqn", "reinforce_batched_rollout"}   # (cold compile: 3.5-7 s)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    program, max_traces, rtol = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, rtol=rtol)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)


def test_sac_alpha_kept_with_graph_falls_back_with_warning():
    """pranz24's SAC: eager equals torch; the compiled update warns once that it runs
    eagerly (its policy backward reaches the ExpBackward of the alpha the previous update
    kept) and gives eager's numbers, draws included."""
    def program(lib, env):
        sac_twin_q(lib, env, alpha_kept=True)

    rtol = PROGRAMS["sac_twin_q"][2]
    states, runs = [], {}
    for mode, lib in (("torch", torch), ("eager", llgrad), ("compiled", llgrad)):
        env = Env(lib, mode, copy.deepcopy(states) if mode != "torch" else states, 0)
        lib.manual_seed(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program(lib, env)
        runs[mode] = env, [str(w.message) for w in caught if "llgrad" in str(w.message)]
    assert runs["eager"][1] == []
    assert len(runs["compiled"][1]) == 1 and "running eagerly" in runs["compiled"][1][0] \
        and "reaches the graph that made one of its inputs" in runs["compiled"][1][0]
    compare(runs["torch"][0].records, runs["eager"][0].records, "eager vs torch", True,
            rtol, 1e-6)
    compare(runs["eager"][0].records, runs["compiled"][0].records, "compiled vs eager",
            False, 1e-6, 1e-7)
