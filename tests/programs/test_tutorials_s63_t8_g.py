"""Sweep 63 (t8), file g: the official PyTorch DQN tutorial's optimisation step with its
epsilon-greedy action selection and a replay memory kept in tensors, run with PyTorch, with
llgrad eagerly and with llgrad compiling the whole step through tutorial_harness.py.

select_action's `EPS_END + (EPS_START - EPS_END) * math.exp(-1. * steps_done / EPS_DECAY)`
reads a Python counter that moves every call: math.exp of it read the number, so compile
guarded the counter by value, traced once per step and ran eagerly with a recompile-limit
warning from the ninth step on (fixed: math.exp of a traced number is recorded as an op,
runtime/symbolic_math.py, as math.cos and math.sqrt were). The memory pushes by
torch.roll and a write of the head under no_grad; the soft target update rebuilds the
target's state_dict as the tutorial does. A ring buffer written at a Python int pointer
(`torch.arange(self.position, self.position + n) % capacity`) still guards the pointer by
value: a strict xfail names the target."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def dqn_tensor_replay(torch, env, n_steps=12, ring_pointer=False):
    nn, F = torch.nn, torch.nn.functional
    obs_dim, n_actions, capacity, batch = 4, 2, 16, 6

    class ReplayMemory(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("states", torch.zeros(capacity, obs_dim))
            self.register_buffer("actions", torch.zeros(capacity, dtype=torch.long))
            self.register_buffer("rewards", torch.zeros(capacity))
            self.register_buffer("next_states", torch.zeros(capacity, obs_dim))
            self.position = 0
            self.size = 0

        @torch.no_grad()
        def push(self, s, a, r, s2):
            n = s.shape[0]
            if ring_pointer:        # (the write position a Python int that moves each call)
                idx = torch.arange(self.position, self.position + n) % capacity
                self.states[idx] = s
                self.actions[idx] = a
                self.rewards[idx] = r
                self.next_states[idx] = s2
            else:                   # (newest first: the buffers rolled, the head written)
                for name, v in (("states", s), ("actions", a), ("rewards", r),
                                ("next_states", s2)):
                    buf = torch.roll(getattr(self, name), n, 0)
                    buf[:n] = v
                    setattr(self, name, buf)
            self.position = (self.position + n) % capacity
            self.size = min(self.size + n, capacity)

    policy_net = env.init(nn.Sequential(nn.Linear(obs_dim, 16), nn.ReLU(),
                                        nn.Linear(16, n_actions)))
    target_net = env.init(nn.Sequential(nn.Linear(obs_dim, 16), nn.ReLU(),
                                        nn.Linear(16, n_actions)))
    target_net.load_state_dict(policy_net.state_dict())
    memory = ReplayMemory()
    optimizer = torch.optim.AdamW(policy_net.parameters(), lr=1e-3, amsgrad=True)
    counters = {"steps_done": 0}
    EPS_START, EPS_END, EPS_DECAY, GAMMA, TAU = 0.9, 0.05, 10, 0.99, 0.005

    def train_step(state, u, random_actions, next_state, reward, sample_u):
        eps = EPS_END + (EPS_START - EPS_END) * \
            math.exp(-1. * counters["steps_done"] / EPS_DECAY)
        counters["steps_done"] += 1
        with torch.no_grad():
            greedy = policy_net(state).max(1).indices
        action = torch.where(u > eps, greedy, random_actions)
        memory.push(state, action, reward, next_state)
        idx = (sample_u * memory.size).long()
        s_b, a_b = memory.states[idx], memory.actions[idx]
        r_b, s2_b = memory.rewards[idx], memory.next_states[idx]
        state_action_values = policy_net(s_b).gather(1, a_b.unsqueeze(1))
        with torch.no_grad():
            next_state_values = target_net(s2_b).max(1).values
        expected = (next_state_values * GAMMA) + r_b
        criterion = nn.SmoothL1Loss()
        loss = criterion(state_action_values, expected.unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key]*TAU + \
                target_net_state_dict[key]*(1-TAU)
        target_net.load_state_dict(target_net_state_dict)
        return loss.detach(), action, memory.position, memory.size

    step = env.step(train_step)
    for it in range(n_steps):
        env.rec(f"step {it}", step(env.randn(3, obs_dim), env.rand(3), env.randint(0, 2, (3,)),
                                   env.randn(3, obs_dim), env.randn(3), env.rand(batch)))
    env.rec("memory", dict(memory.state_dict()))
    env.rec("params", {**policy_net.state_dict(),
                       **{"target." + k: v for k, v in target_net.state_dict().items()}})


@pytest.mark.slow      # (twelve steps, three runs: ~5 s; tests/compile/test_math_exp_s63_t8.py is
# the fast test of the fix)
def test_dqn_epsilon_greedy_compiles_over_12_steps():
    _, _, compiled = run_tutorial(dqn_tensor_replay, rtol=1e-4, atol=1e-5)
    assert [cf.n_traces for cf in compiled.steps] == [2]    # (the counter 0, then traced)


@pytest.mark.slow
def test_dqn_ring_pointer_memory_compiles():
    # (the write pointer an input: arange(p, p + n) traced as arange(0, n) + p,
    # runtime/traced_ranges.py; was a trace per position and eager past the ninth)
    _, _, compiled = run_tutorial(lambda torch, env: dqn_tensor_replay(torch, env,
                                                                       ring_pointer=True),
                                  rtol=1e-4, atol=1e-5)
    assert [cf.n_traces for cf in compiled.steps] == [2]
