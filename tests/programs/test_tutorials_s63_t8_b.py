"""Sweep 63 (t8), file b: custom autograd Functions and masking written the way user code
writes them, run with PyTorch, with llgrad eagerly and with llgrad compiling the whole
training step through tutorial_harness.py.

- a top-1 mixture-of-experts router whose custom Function returns the gate values and the
  expert indices, the indices marked non-differentiable (ctx.mark_non_differentiable) and
  the probabilities saved by ctx.save_for_backward; an in-place leaky clamp Function that
  modifies its input and says so (ctx.mark_dirty); the load-balancing loss from the
  indices' one_hot;
- BERT's masked-language-model collator run inside the step: boolean masks from given
  uniform draws, `labels[~masked] = -100`, `inputs[replaced] = mask_id`, random tokens put
  by a mask, a tied embedding / output projection and torch.where with Python scalars."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def moe_router_functions(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Top1Gate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits):
            probs = torch.softmax(logits, dim=-1)
            gate, idx = probs.max(dim=-1)
            ctx.save_for_backward(probs, idx)
            ctx.mark_non_differentiable(idx)
            return gate, idx

        @staticmethod
        def backward(ctx, grad_gate, grad_idx):
            probs, idx = ctx.saved_tensors
            onehot = F.one_hot(idx, probs.shape[-1]).to(probs.dtype)
            g = grad_gate.unsqueeze(-1) * onehot            # (d gate / d probs)
            grad_logits = probs * (g - (g * probs).sum(-1, keepdim=True))
            return grad_logits

    class LeakyClamp_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x > 0)
            x.mul_(torch.where(x > 0, 1.0, 0.1))
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            positive, = ctx.saved_tensors
            return grad * torch.where(positive, 1.0, 0.1)

    class MoE(nn.Module):
        def __init__(self, d, n_experts):
            super().__init__()
            self.router = nn.Linear(d, n_experts)
            self.experts = nn.ModuleList([nn.Linear(d, d) for _ in range(n_experts)])
            self.n_experts = n_experts

        def forward(self, x):
            gate, idx = Top1Gate.apply(self.router(x))
            out = torch.zeros_like(x)
            for e, expert in enumerate(self.experts):
                sel = idx == e
                out = out + torch.where(sel.unsqueeze(-1), expert(x), 0.0)
            out = out * gate.unsqueeze(-1)
            frac = F.one_hot(idx, self.n_experts).float().mean(0)
            prob = torch.softmax(self.router(x), -1).mean(0)
            aux = self.n_experts * (frac * prob).sum()
            return out, aux, idx

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(6, 12)
            self.moe = MoE(12, 3)
            self.out = nn.Linear(12, 4)

        def forward(self, x):
            h = LeakyClamp_.apply(self.inp(x))
            h, aux, idx = self.moe(h)
            return self.out(h), aux, idx

    model = env.init(Net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        logits, aux, idx = model(x)
        loss = F.cross_entropy(logits, y) + 0.01 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), aux.detach(), torch.bincount(idx, minlength=3)

    step = env.step(train_step)
    w = env.randn(6, 4)
    for it in range(4):
        x = env.randn(24, 6)
        env.rec(f"step {it}", step(x, (x @ w).argmax(1)))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def bert_mlm_collator(torch, env):
    nn, F = torch.nn, torch.nn.functional
    vocab, mask_id, d, seq = 20, 1, 16, 10

    class TinyMLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(seq, d))
            self.layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
            self.norm = nn.LayerNorm(d)
            self.decoder = nn.Linear(d, vocab)
            self.decoder.weight = self.embed.weight         # (tied)

        def forward(self, ids):
            return self.decoder(self.norm(self.layer(self.embed(ids) + self.pos)))

    model = env.init(TinyMLM())
    # (SGD: the key bias's gradient is zero up to rounding, which Adam would scale to lr)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)

    def mask_tokens(inputs, u_mask, u_replace, u_random, random_words):
        labels = inputs.clone()
        masked_indices = u_mask < 0.3
        special = inputs == 0                           # (padding never masked)
        masked_indices[special] = False
        labels[~masked_indices] = -100
        indices_replaced = (u_replace < 0.8) & masked_indices
        inputs[indices_replaced] = mask_id
        indices_random = (u_random < 0.5) & masked_indices & ~indices_replaced
        inputs[indices_random] = random_words[indices_random]
        return inputs, labels

    def train_step(ids, u_mask, u_replace, u_random, random_words):
        inputs, labels = mask_tokens(ids.clone(), u_mask, u_replace, u_random, random_words)
        logits = model(inputs)
        loss = F.cross_entropy(logits.view(-1, vocab), labels.view(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        n_masked = (labels != -100).sum()
        return loss.detach(), inputs, n_masked

    step = env.step(train_step)
    for it in range(4):
        ids = env.randint(0, vocab, (6, seq))
        env.rec(f"step {it}", step(ids, env.rand(6, seq), env.rand(6, seq), env.rand(6, seq),
                                   env.randint(2, vocab, (6, seq))))
    env.rec("tied", model.decoder.weight is model.embed.weight)
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


# (a transformer layer, four experts' branches: seconds of cold compile each)
@pytest.mark.parametrize("name, program", program_params(
    {"moe_router_functions": moe_router_functions, "bert_mlm_collator": bert_mlm_collator},
    slow=("moe_router_functions", "bert_mlm_collator")))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
