"""Sweep 66 (p3), tutorial-style programs in domains and idioms the earlier sweeps skip, run
with PyTorch, with llgrad eagerly and with llgrad compiling the training step
(tutorial_harness.py):

- staged transfer learning: a backbone trained, then frozen (requires_grad_(False)) with
  its BatchNorm layers switched to eval inside a train()-mode model, the head replaced
  (model.fc = nn.Linear), then layer2 unfrozen and added by opt.add_param_group with its
  own lr, a StepLR over both groups; the same compiled step throughout;
- prioritized-replay double DQN: n-step targets, importance-sampling weights, Huber loss
  with reduction='none', the TD errors returned and written into a NumPy priority array,
  a hard target copy by load_state_dict every few steps;
- a neural cellular automaton: fixed Sobel perception by a depthwise conv2d (groups=C),
  a stochastic update mask and the alive mask by max_pool2d, several CA steps unrolled in
  the compiled step, a sample pool written back with pool[idx] = x.detach();
- an energy-based model trained by contrastive divergence with short-run Langevin
  dynamics: autograd.grad of the energy with respect to the samples inside the step;
- BYOL: online network + predictor, a target network updated by an EMA of the online
  weights (p_t.mul_(m).add_(p_o.detach(), alpha=1 - m) under no_grad) inside the compiled
  step, the symmetric normalised-MSE loss;
- ArcFace's additive angular margin (acos/cos of normalised logits, one_hot margin) with
  a center loss whose centers move by index_add_ under no_grad inside the step.

prioritized_dqn_numpy_in_step (a strict xfail) keeps the priority update inside the step:
Tensor.numpy() of a traced tensor runs the step eagerly, with a warning naming the line."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def finetune_staged(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self, n_out):
            super().__init__()
            self.layer1 = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6),
                                        nn.ReLU(), nn.MaxPool2d(2))
            self.layer2 = nn.Sequential(nn.Conv2d(6, 8, 3, padding=1), nn.BatchNorm2d(8),
                                        nn.ReLU(), nn.AdaptiveAvgPool2d(1))
            self.fc = nn.Linear(8, n_out)

        def forward(self, x):
            return self.fc(torch.flatten(self.layer2(self.layer1(x)), 1))

    model = env.init(Net(5))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(2):
        env.rec(f"pretrain {it}", step(env.randn(8, 3, 8, 8), env.randint(0, 5, (8,))))

    # fine-tune: freeze the backbone, BatchNorm statistics frozen too, a new 3-class head
    for p in model.parameters():
        p.requires_grad_(False)
    model.fc = env.init(nn.Linear(8, 3))
    model.train()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eval()
    opt = torch.optim.SGD(model.fc.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for it in range(3):
        env.rec(f"head {it}", step(env.randn(8, 3, 8, 8), env.randint(0, 3, (8,))))
        sched.step()
    env.rec("frozen bn", (model.layer1[1].running_mean, model.layer2[1].running_var))
    env.rec("frozen grad", model.layer1[0].weight.grad)

    for p in model.layer2.parameters():
        p.requires_grad_(True)
    opt.add_param_group({"params": list(model.layer2.parameters()), "lr": 0.01})
    for it in range(3):
        env.rec(f"unfrozen {it}", step(env.randn(8, 3, 8, 8), env.randint(0, 3, (8,))))
        sched.step()
        env.rec(f"lrs {it}", [g["lr"] for g in opt.param_groups])
    env.rec("params", dict(model.state_dict()))
    env.rec("layer2 grad", model.layer2[0].weight.grad)


def prioritized_dqn(torch, env, numpy_in_step=False):
    """numpy_in_step: the step writes its TD errors into the NumPy priorities itself
    (`priorities[idx.numpy()] = td.detach().abs().numpy() + 1e-3`), as many RL codes do."""
    nn, F = torch.nn, torch.nn.functional
    S, A, N_STEP, GAMMA, CAP, B = 4, 3, 2, 0.9, 32, 8

    def make():
        return nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, A))

    policy, target = env.init(make()), make()
    target.load_state_dict(policy.state_dict())
    target.eval()
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2, amsgrad=True)

    states = env.randn(CAP, S)
    actions = env.randint(0, A, (CAP,))
    rewards = env.randn(CAP, N_STEP)
    next_states = env.randn(CAP, S)
    dones = env.rand(CAP) < 0.2
    priorities = np.ones(CAP)

    def train_step(idx, weights):
        s, a, r = states[idx], actions[idx], rewards[idx]
        q = policy(s).gather(1, a.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            best = policy(next_states[idx]).argmax(1, keepdim=True)       # double DQN
            q_next = target(next_states[idx]).gather(1, best).squeeze(1)
            discounts = GAMMA ** torch.arange(N_STEP, dtype=torch.float32)
            ret = (r * discounts).sum(1)
            y = ret + (GAMMA ** N_STEP) * q_next * (~dones[idx]).float()
        td = q - y
        loss = (weights * F.smooth_l1_loss(q, y, reduction="none")).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(policy.parameters(), 1.0)
        opt.step()
        if numpy_in_step:
            priorities[idx.numpy()] = td.detach().abs().numpy() + 1e-3
        return loss.item(), td.detach().abs()

    step = env.step(train_step)
    for it in range(6):
        p = priorities ** 0.6
        p = p / p.sum()
        idx_np = env.np.choice(CAP, B, replace=False, p=p)
        w = (CAP * p[idx_np]) ** -0.4
        w = (w / w.max()).astype(np.float32)
        loss, td = step(env.tensor(idx_np.astype(np.int64)), env.tensor(w))
        if not numpy_in_step:
            priorities[idx_np] = td.numpy() + 1e-3
        env.rec(f"loss {it}", loss)
        env.rec(f"priorities {it}", priorities.copy())
        if it % 3 == 2:
            target.load_state_dict(policy.state_dict())
    env.rec("params", dict(policy.state_dict()))


def prioritized_dqn_numpy_in_step(torch, env):
    prioritized_dqn(torch, env, numpy_in_step=True)


def neural_ca(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C, H, POOL, B = 6, 10, 8, 3

    class CA(nn.Module):
        def __init__(self):
            super().__init__()
            sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8
            ident = torch.zeros(3, 3)
            ident[1, 1] = 1.0
            kernel = torch.stack([ident, sobel, sobel.T])                  # (3, 3, 3)
            self.register_buffer("kernel", kernel.repeat(C, 1, 1)[:, None])
            self.w1 = nn.Conv2d(3 * C, 32, 1)
            self.w2 = nn.Conv2d(32, C, 1, bias=False)

        def perceive(self, x):
            return F.conv2d(x, self.kernel, padding=1, groups=C)

        def forward(self, x, fire):
            pre = F.max_pool2d(x[:, 3:4], 3, 1, 1) > 0.1
            dx = self.w2(F.relu(self.w1(self.perceive(x))))
            x = x + dx * fire
            post = F.max_pool2d(x[:, 3:4], 3, 1, 1) > 0.1
            return x * (pre & post).float()

    ca = env.init(CA())
    with torch.no_grad():
        ca.w2.weight.mul_(0.1)
    opt = torch.optim.Adam(ca.parameters(), lr=2e-3)
    target = env.rand(4, H, H)
    pool = torch.zeros(POOL, C, H, H)
    pool[:, 3:, H // 2, H // 2] = 1.0

    def train_step(idx, fires):
        x = pool[idx]
        for k in range(fires.shape[0]):
            x = ca(x, fires[k])
        loss = F.mse_loss(x[:, :4], target.expand(x.shape[0], -1, -1, -1))
        opt.zero_grad()
        loss.backward()
        for p in ca.parameters():
            p.grad.div_(p.grad.norm() + 1e-8)
        opt.step()
        pool[idx] = x.detach()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        idx = env.tensor(env.np.choice(POOL, B, replace=False).astype(np.int64))
        fires = (env.rand(3, B, 1, H, H) < 0.5).float()
        env.rec(f"loss {it}", step(idx, fires))
    env.rec("pool", pool)
    env.rec("params", dict(ca.state_dict()))


def ebm_langevin(torch, env):
    nn = torch.nn
    D = 2
    energy = env.init(nn.Sequential(nn.Linear(D, 32), nn.SiLU(), nn.Linear(32, 32), nn.SiLU(),
                                    nn.Linear(32, 1)))
    opt = torch.optim.Adam(energy.parameters(), lr=1e-3, betas=(0.0, 0.999))

    def langevin(x, noises, step_size=0.1):
        x = x.clone().requires_grad_(True)
        for k in range(noises.shape[0]):
            e = energy(x).sum()
            g, = torch.autograd.grad(e, x)
            x = (x - 0.5 * step_size * g + math.sqrt(step_size) * 0.1 * noises[k]).detach()
            x.requires_grad_(True)
        return x.detach()

    def train_step(data, init, noises):
        for p in energy.parameters():
            p.requires_grad_(False)
        neg = langevin(init, noises)
        for p in energy.parameters():
            p.requires_grad_(True)
        pos_e, neg_e = energy(data), energy(neg)
        loss = pos_e.mean() - neg_e.mean() + 0.1 * (pos_e ** 2 + neg_e ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), neg

    step = env.step(train_step)
    for it in range(4):
        data = env.randn(16, D) * 0.3 + 1.0
        loss, neg = step(data, env.rand(16, D) * 4 - 2, env.randn(5, 16, D))
        env.rec(f"loss {it}", loss)
        env.rec(f"neg {it}", neg)
    env.rec("params", dict(energy.state_dict()))


def byol(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def mlp(i, h, o):
        return nn.Sequential(nn.Linear(i, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Linear(h, o))

    online = env.init(nn.Sequential(mlp(8, 16, 16), mlp(16, 16, 6)))     # encoder + projector
    predictor = env.init(mlp(6, 16, 6))
    target = env.init(nn.Sequential(mlp(8, 16, 16), mlp(16, 16, 6)))
    target.load_state_dict(online.state_dict())
    for p in target.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(list(online.parameters()) + list(predictor.parameters()), lr=0.05,
                          momentum=0.9, weight_decay=1e-4)

    def regression(p, z):
        return 2 - 2 * F.cosine_similarity(p, z.detach(), dim=-1)

    def train_step(v1, v2, m):
        p1, p2 = predictor(online(v1)), predictor(online(v2))
        with torch.no_grad():
            z1, z2 = target(v1), target(v2)
        loss = (regression(p1, z2) + regression(p2, z1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for po, pt in zip(online.parameters(), target.parameters()):
                pt.mul_(m).add_(po.detach(), alpha=1 - m)
            for bo, bt in zip(online.buffers(), target.buffers()):
                bt.copy_(bo)
        return loss.detach()

    step = env.step(train_step)
    base = 0.9
    for it in range(4):
        x = env.randn(12, 8)
        v1, v2 = x + 0.1 * env.randn(12, 8), x * (1 + 0.1 * env.randn(12, 8))
        m = 1 - (1 - base) * (math.cos(math.pi * it / 4) + 1) / 2
        env.rec(f"loss {it}", step(v1, v2, m))
    env.rec("target", dict(target.state_dict()))
    env.rec("online", dict(online.state_dict()))


def arcface_center(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D, K, S, M, ALPHA = 8, 5, 16.0, 0.3, 0.5
    backbone = env.init(nn.Sequential(nn.Linear(10, 16), nn.PReLU(), nn.Linear(16, D)))
    W = nn.Parameter(env.randn(K, D))
    centers = torch.zeros(K, D)
    opt = torch.optim.SGD(list(backbone.parameters()) + [W], lr=0.05, momentum=0.9)

    def train_step(x, y):
        emb = backbone(x)
        cos = F.linear(F.normalize(emb), F.normalize(W)).clamp(-1 + 1e-6, 1 - 1e-6)
        theta = torch.acos(cos)
        onehot = F.one_hot(y, K).float()
        logits = S * torch.cos(theta + M * onehot)
        center_loss = ((emb - centers[y]) ** 2).sum(1).mean()
        loss = F.cross_entropy(logits, y) + 0.01 * center_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            diff = centers[y] - emb
            count = torch.bincount(y, minlength=K).float()
            delta = torch.zeros(K, D).index_add_(0, y, diff)
            centers.sub_(ALPHA * delta / (1 + count[:, None]))
        return loss.detach(), logits.argmax(1)

    step = env.step(train_step)
    for it in range(4):
        loss, pred = step(env.randn(16, 10), env.randint(0, K, (16,)))
        env.rec(f"loss {it}", loss)
        env.rec(f"pred {it}", pred)
    env.rec("centers", centers)
    env.rec("W", W)
    env.rec("params", dict(backbone.state_dict()))


PROGRAMS = {
    "finetune_staged": finetune_staged,
    "prioritized_dqn": prioritized_dqn,
    "prioritized_dqn_numpy_in_step": pytest.param(prioritized_dqn_numpy_in_step, marks=(
        pytest.mark.xfail(strict=True, reason="Tensor.numpy() of a traced tensor written into "
                          "a NumPy array inside the step sends the step to eager with a "
                          "warning; target: compiled, no warning, eager's numbers"),)),
    "neural_ca": neural_ca,
    "ebm_langevin": ebm_langevin,
    "byol": byol,
    "arcface_center": arcface_center,
}
FAST = ("prioritized_dqn",)


@pytest.mark.parametrize("name,program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
