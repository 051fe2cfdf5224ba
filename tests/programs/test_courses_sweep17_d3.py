"""Sweep 17 (D), part 3: nanoGPT (model.py's GPT with weight tying, the flash and the
masked-softmax attention, configure_optimizers' decay groups, gradient accumulation,
clip_grad_norm_, the cosine learning-rate schedule, generate with top-k and
crop_block_size) and a decoder loop whose KV cache grows by torch.cat across calls of one
compiled step. Written with torch as a module parameter; run with PyTorch, with llgrad
eagerly and with llgrad.compile (see tutorial_harness.py)."""
import inspect
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


TEXT = ("first citizen: before we proceed any further, hear me speak. all: speak, speak. "
        "first citizen: you are all resolved rather to die than to famish? all: resolved. "
        "resolved. first citizen: first, you know caius marcius is chief enemy to the people.")

@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 32
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16
    dropout: float = 0.0
    bias: bool = False

def make_gpt(torch):
    nn, F = torch.nn, torch.nn.functional

    class LayerNorm(nn.Module):
        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None
        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            self.dropout = config.dropout
            self.flash = config.flash
            if not self.flash:
                self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))
        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.flash:
                y = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            y = self.resid_dropout(self.c_proj(y))
            return y

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)
        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP(config)
        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            ))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith('c_proj.weight'):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02/math.sqrt(2 * config.n_layer))

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n_params -= self.transformer.wpe.weight.numel()
            return n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= self.config.block_size
            pos = torch.arange(0, t, dtype=torch.long, device=device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def crop_block_size(self, block_size):
            assert block_size <= self.config.block_size
            self.config.block_size = block_size
            self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
            for block in self.transformer.h:
                if hasattr(block.attn, 'bias'):
                    block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]

        def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
            param_dict = {pn: p for pn, p in self.named_parameters()}
            param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {'params': decay_params, 'weight_decay': weight_decay},
                {'params': nodecay_params, 'weight_decay': 0.0}
            ]
            num_decay_params = sum(p.numel() for p in decay_params)
            num_nodecay_params = sum(p.numel() for p in nodecay_params)
            fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters
            use_fused = fused_available and device_type == 'cuda'
            extra_args = dict(fused=True) if use_fused else dict()
            optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
            return optimizer, (len(decay_params), num_decay_params, len(nodecay_params), num_nodecay_params, fused_available)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float('Inf')
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx
    return GPT


def nanogpt(torch, env, flash=True):
    GPT = make_gpt(torch)
    chars = sorted(list(set(TEXT)))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]
    torch.manual_seed(1337)
    config = GPTConfig(vocab_size=len(chars))
    config.flash = flash
    model = GPT(config)
    env.rec("nparams", model.get_num_params())
    env.rec("tied", model.transformer.wte.weight is model.lm_head.weight)
    env.rec("state keys", sorted(model.state_dict().keys()))
    optimizer, info = model.configure_optimizers(0.1, 1e-2, (0.9, 0.95), 'cpu')
    env.rec("optim info", info)
    block_size, batch_size = config.block_size, 4

    def get_batch(split):
        d = train_data if split == 'train' else val_data
        ix = torch.randint(len(d) - block_size, (batch_size,))
        x = torch.stack([d[i:i+block_size] for i in ix])
        y = torch.stack([d[i+1:i+1+block_size] for i in ix])
        return x, y

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ['train', 'val']:
            losses = torch.zeros(3)
            for k in range(3):
                X, Y = get_batch(split)
                logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    warmup_iters, lr_decay_iters, learning_rate, min_lr = 3, 10, 1e-2, 1e-3
    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    def train_step(X, Y):
        logits, loss = model(X, Y)
        loss = loss / 2
        loss.backward()
        return loss
    train_step = env.step(train_step)
    X, Y = get_batch('train')
    for iter_num in range(8):
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        for micro_step in range(2):
            loss = train_step(X, Y)
            X, Y = get_batch('train')
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        env.rec(f"loss {iter_num}", loss.item() * 2)
        env.rec(f"norm {iter_num}", norm)
    env.rec("losses", estimate_loss())
    env.rec("state", model.state_dict())
    env.rec("opt state", [optimizer.state[p]['exp_avg_sq'] for p in model.parameters()])
    context = torch.zeros((1, 1), dtype=torch.long)
    y = model.generate(context, 20, temperature=0.8, top_k=5)
    env.rec("generated", ''.join(itos[i] for i in y[0].tolist()))
    model.crop_block_size(8)
    env.rec("cropped", (model.transformer.wpe.weight.shape, model.get_num_params()))
    y = model.generate(torch.tensor([[1, 2], [3, 4]]), 12, top_k=None)
    env.rec("generated crop", y)
    X, Y = get_batch('val')
    env.rec("cropped loss", model(X[:, :8].contiguous(), Y[:, :8].contiguous())[1])


def nanogpt_noflash(torch, env):
    nanogpt(torch, env, flash=False)


def kv_cat(torch, env):
    """A KV cache grown by torch.cat in a decoder loop, and its attention checked
    against the full causal attention (scaled_dot_product_attention)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(3)
    qkv = nn.Linear(16, 48)
    x = torch.randn(2, 7, 16)
    def step(xt, past_k, past_v):
        q, k, v = qkv(xt).view(2, 1, 3, 2, 8).permute(2, 0, 3, 1, 4)
        k = torch.cat([past_k, k], dim=-2)
        v = torch.cat([past_v, v], dim=-2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(8)
        return att.softmax(-1) @ v, k, v
    step = env.step(step)
    pk = torch.zeros(2, 2, 0, 8)
    pv = torch.zeros(2, 2, 0, 8)
    outs = []
    for t in range(7):
        y, pk, pv = step(x[:, t:t+1], pk, pv)
        outs.append(y)
    inc = torch.cat(outs, dim=2)
    q, k, v = qkv(x).view(2, 7, 3, 2, 8).permute(2, 0, 3, 1, 4)
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    env.rec("inc", inc)
    env.rec("close", torch.allclose(inc, full, atol=1e-6))
    loss = inc.pow(2).sum()
    loss.backward()
    env.rec("grads", (qkv.weight.grad, qkv.bias.grad))


@pytest.mark.parametrize("program", [pytest.param(nanogpt, marks=pytest.mark.slow),
                                     nanogpt_noflash, kv_cat])
def test_program(program):
    run_tutorial(program)


def _chain(compiled):
    """Each call's result is the next call's input, with its graph (not detached); one
    backward at the end through every call."""
    llgrad.manual_seed(0)
    lin, lin2 = llgrad.nn.Linear(4, 4), llgrad.nn.Linear(4, 4)

    def step(x, past):
        return lin(x) * past.tanh() + lin2(past)

    def shift(x, past):
        return llgrad.cat([past[1:], lin(x) * past[-1:]], 0)
    f, g = (llgrad.compile(step), llgrad.compile(shift)) if compiled else (step, shift)
    x = llgrad.randn(1, 4, requires_grad=True)
    p, q = llgrad.zeros(1, 4) + 0.5, llgrad.ones(3, 4)
    for _ in range(4):
        p = f(x, p + 1)
        q = g(x, q)
    (p.sum() + (q * q).sum()).backward()
    return [t.grad.numpy().copy() for t in (lin.weight, lin.bias, lin2.weight, x)], p, q


def test_results_fed_back_with_their_graph_compile():
    """A compiled call whose input came from an earlier call's graph (sharing its leaves)
    ran eagerly with a warning: the derivation of its backward went on past that input
    into the earlier graph (to reach the shared parameters). It ends at the input now, and
    the gradients of one backward through the chain are eager's."""
    want, p0, q0 = _chain(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, p1, q1 = _chain(True)
    np.testing.assert_allclose(p1.detach().numpy(), p0.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(q1.detach().numpy(), q0.detach().numpy(), rtol=1e-6)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
