"""Sweep 20 (C), part 14: LLM post-training losses, as TRL-style code writes them on a tiny
causal LM. DPO: chosen and rejected sequences concatenated into one batch, per-token log
probs by log_softmax(...).gather(2, labels.unsqueeze(2)).squeeze(2) with the prompt and
padding masked by labels == -100 (the masked labels replaced by 0 before the gather), the
frozen reference model under torch.no_grad in eval(), -F.logsigmoid(beta * (pi_logratios -
ref_logratios)), and chosen / rejected rewards and reward accuracy read with .item(). GRPO:
group-normalised advantages ((r - mean) / (std + 1e-4) over each prompt's group via view and
repeat_interleave), the clipped surrogate with torch.clamp(ratio, 1 - eps, 1 + eps) against
old log probs detached, the k3 KL estimator exp(ref - logp) - (ref - logp) - 1, and a
per-sequence masked mean. Run with PyTorch, with llgrad eagerly and with llgrad.compile
(tutorial_harness.py)."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _tiny_lm(torch, V=13, D=12):
    nn = torch.nn

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.gru = nn.GRU(D, D, batch_first=True)
            self.head = nn.Linear(D, V)

        def forward(self, ids):
            h, _ = self.gru(self.emb(ids))
            return self.head(h)
    return TinyLM()


def _logps(torch, logits, labels):
    labels = labels[:, 1:].clone()
    logits = logits[:, :-1, :]
    loss_mask = labels != -100
    labels[labels == -100] = 0
    per_token = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
    return (per_token * loss_mask).sum(-1), per_token, loss_mask


def dpo(torch, env):
    F = torch.nn.functional
    policy = env.init(_tiny_lm(torch))
    ref = copy.deepcopy(policy)
    ref.requires_grad_(False)
    ref.eval()
    opt = torch.optim.AdamW(policy.parameters(), lr=5e-3)
    beta = 0.1
    prompt = env.randint(1, 13, (3, 3))
    chosen, rejected = env.randint(1, 13, (3, 4)), env.randint(1, 13, (3, 4))
    ids = torch.cat([torch.cat([prompt, chosen], 1), torch.cat([prompt, rejected], 1)])
    labels = ids.clone()
    labels[:, :3] = -100
    labels[1, -1] = -100     # (a padded response)
    labels[4, -2:] = -100

    def dpo_step(ids, labels):
        policy.train()
        logps, _, _ = _logps(torch, policy(ids), labels)
        with torch.no_grad():
            ref_logps, _, _ = _logps(torch, ref(ids), labels)
        n = ids.shape[0] // 2
        pi_logratios = logps[:n] - logps[n:]
        ref_logratios = ref_logps[:n] - ref_logps[n:]
        losses = -F.logsigmoid(beta * (pi_logratios - ref_logratios))
        chosen_rewards = beta * (logps[:n] - ref_logps[:n]).detach()
        rejected_rewards = beta * (logps[n:] - ref_logps[n:]).detach()
        loss = losses.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (chosen_rewards > rejected_rewards).float().mean().item()
        return loss.item(), chosen_rewards.mean().item(), rejected_rewards.mean().item(), acc
    dpo_step = env.step(dpo_step)
    for i in range(5):
        env.rec(f"step{i}", dpo_step(ids, labels))
    env.rec("policy", policy.state_dict())
    env.rec("ref grads", [p.grad for p in ref.parameters()])


def grpo(torch, env):
    policy = env.init(_tiny_lm(torch))
    ref = copy.deepcopy(policy).eval()
    for p in ref.parameters():
        p.requires_grad = False
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    G, eps, kl_beta = 4, 0.2, 0.04
    ids = env.randint(1, 13, (2 * G, 7))
    labels = ids.clone()
    labels[:, :3] = -100
    rewards = env.rand(2 * G)

    def grpo_step(ids, labels, rewards, old_logps):
        grouped = rewards.view(-1, G)
        mean = grouped.mean(dim=1).repeat_interleave(G, dim=0)
        std = grouped.std(dim=1).repeat_interleave(G, dim=0)
        advantages = (rewards - mean) / (std + 1e-4)
        _, logps, mask = _logps(torch, policy(ids), labels)
        with torch.no_grad():
            _, ref_logps, _ = _logps(torch, ref(ids), labels)
        per_token_kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        if old_logps is None:
            old_logps = logps.detach()
        ratio = torch.exp(logps - old_logps)
        clipped = torch.clamp(ratio, 1 - eps, 1 + eps)
        per_token_loss = -torch.min(ratio * advantages.unsqueeze(1), clipped * advantages.unsqueeze(1))
        per_token_loss = per_token_loss + kl_beta * per_token_kl
        loss = ((per_token_loss * mask).sum(dim=1) / mask.sum(dim=1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, logps.detach(), (per_token_kl * mask).sum() / mask.sum()
    grpo_step = env.step(grpo_step)
    loss, old, kl = grpo_step(ids, labels, rewards, None)
    env.rec("first", (loss, kl))
    for i in range(3):      # (several updates on the same rollouts: ratios move off 1)
        loss, _, kl = grpo_step(ids, labels, rewards, old)
        env.rec(f"inner{i}", (loss, kl))
    env.rec("policy", policy.state_dict())


@pytest.mark.parametrize("program", [dpo, grpo])
def test_preference(program):
    run_tutorial(program)
