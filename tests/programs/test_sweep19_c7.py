"""Sweep 19 (C), part 7: GRPO's loss over a group of sampled completions (rewards
normalised within each group, per-token log-probabilities gathered from log_softmax, the
clipped ratio against the old policy, the k3 KL estimator against a frozen reference copy,
masked by the completion mask) and PyHessian's top Hessian eigenvalue by power iteration on
Hessian-vector products (autograd.grad with create_graph, then grad_outputs=v without
retain_graph, which frees the graph of the loss the function returns; the vectors
normalised as a list of tensors) with a sharpness-aware step after it.
Run with PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def grpo(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, P, C, G, n_prompts = 10, 3, 4, 4, 2

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 8)
            self.rnn = nn.GRU(8, 12, batch_first=True)
            self.head = nn.Linear(12, V)

        def forward(self, ids):
            h, _ = self.rnn(self.emb(ids))
            return self.head(h)

    policy = env.init(Policy())
    ref = copy.deepcopy(policy)
    for p in ref.parameters():
        p.requires_grad_(False)
    old = copy.deepcopy(policy)
    opt = torch.optim.Adam(policy.parameters(), lr=5e-3)
    beta, eps = 0.04, 0.2

    def per_token_logps(model, ids):
        logits = model(ids)[:, P - 1:-1, :]
        logps = logits.log_softmax(dim=-1)
        return torch.gather(logps, dim=2, index=ids[:, P:].unsqueeze(-1)).squeeze(-1)

    def grpo_loss(ids, rewards, mask, old_logps):
        mean = rewards.view(-1, G).mean(dim=1).repeat_interleave(G, dim=0)
        std = rewards.view(-1, G).std(dim=1).repeat_interleave(G, dim=0)
        advantages = (rewards - mean) / (std + 1e-4)
        logps = per_token_logps(policy, ids)
        with torch.inference_mode():
            ref_logps = per_token_logps(ref, ids)
        kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        coef_1 = torch.exp(logps - old_logps)
        coef_2 = torch.clamp(coef_1, 1 - eps, 1 + eps)
        per_token_loss = -torch.min(coef_1 * advantages.unsqueeze(1), coef_2 * advantages.unsqueeze(1))
        per_token_loss = per_token_loss + beta * kl
        loss = ((per_token_loss * mask).sum(dim=1) / mask.sum(dim=1)).mean()
        clipped = ((coef_1 - coef_2).abs() > 0).float()
        return loss, (kl * mask).sum() / mask.sum(), (clipped * mask).sum() / mask.sum()

    def train_step(ids, rewards, mask, old_logps):
        loss, kl, clip_frac = grpo_loss(ids, rewards, mask, old_logps)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
        opt.step()
        return loss, kl, clip_frac
    train_step = env.step(train_step)
    prompts = env.randint(0, V, (n_prompts, P)).repeat_interleave(G, dim=0)
    for it in range(2):
        completions = env.randint(0, V, (n_prompts * G, C))
        ids = torch.cat([prompts, completions], dim=1)
        eos = (completions == 0).int()
        mask = (torch.arange(C).expand(n_prompts * G, C) <= torch.where(
            eos.any(1), eos.argmax(1), C).unsqueeze(1)).float()
        rewards = ((completions % 2 == 0).float() * mask).sum(1)
        with torch.no_grad():
            old_logps = per_token_logps(old, ids)
        for k in range(3):      # (mu iterations per generation)
            env.rec(f"gen{it} iter{k}", train_step(ids, rewards, mask, old_logps))
        old.load_state_dict(policy.state_dict())
    env.rec("params", dict(policy.named_parameters()))


def hessian_power_iteration(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)))
    X, y = env.randn(12, 4), env.randint(0, 3, (12,))
    params = [p for p in model.parameters() if p.requires_grad]

    def group_product(xs, ys):
        return sum([torch.sum(x * y) for (x, y) in zip(xs, ys)])

    def normalization(v):
        s = group_product(v, v)
        s = s ** 0.5
        s = s.cpu().item()
        return [vi / (s + 1e-6) for vi in v]

    def hvp(X, y, v):
        loss = F.cross_entropy(model(X), y)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        Hv = torch.autograd.grad(grads, params, grad_outputs=v, only_inputs=True, retain_graph=False)
        return loss, list(Hv)
    hvp = env.step(hvp)

    def eigenvalue(maxIter=12, tol=1e-3):
        v = [env.randn(*p.shape) for p in params]
        v = normalization(v)
        eigenvalue = None
        for i in range(maxIter):
            _, Hv = hvp(X, y, v)
            tmp_eigenvalue = group_product(Hv, v).cpu().item()
            v = normalization(Hv)
            if eigenvalue is None:
                eigenvalue = tmp_eigenvalue
            else:
                if abs(eigenvalue - tmp_eigenvalue) / (abs(eigenvalue) + 1e-6) < tol:
                    break
                eigenvalue = tmp_eigenvalue
        return eigenvalue, v, i

    def trace_hutchinson(n=3):
        out = []
        for _ in range(n):
            v = [(env.rand(*p.shape) > 0.5).float() * 2 - 1 for p in params]
            _, Hv = hvp(X, y, v)
            out.append(group_product(Hv, v).item())
        return out

    top, v, iters = eigenvalue()
    env.rec("top eigenvalue", top)
    env.rec("iterations", iters)
    env.rec("eigenvector", v)
    env.rec("hutchinson", trace_hutchinson())
    # SAM-style: ascend along the gradient, take the gradient there, descend from the start
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def sam_step(X, y, rho=0.05):
        loss = F.cross_entropy(model(X), y)
        loss.backward()
        grad_norm = torch.norm(torch.stack([p.grad.norm(p=2) for p in params]), p=2)
        eps = []
        with torch.no_grad():
            for p in params:
                e = p.grad * (rho / (grad_norm + 1e-12))
                p.add_(e)
                eps.append(e)
        opt.zero_grad()
        F.cross_entropy(model(X), y).backward()
        with torch.no_grad():
            for p, e in zip(params, eps):
                p.sub_(e)
        opt.step()
        opt.zero_grad()
        return loss
    sam_step = env.step(sam_step)
    for i in range(4):
        env.rec(f"sam{i}", sam_step(X, y))
    env.rec("params", params)
    env.rec("top after", eigenvalue(maxIter=5)[0])


@pytest.mark.parametrize("program", [grpo, hessian_power_iteration])
def test_rl_and_curvature(program):
    run_tutorial(program)
