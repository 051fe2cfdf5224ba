"""Sweep 17 (D), part 4: a LLaMA-style decoder written by hand, as the from-scratch LLM
courses write it: RMSNorm, rotary embeddings (cos / sin caches, rotate_half), SwiGLU,
grouped-query attention (expand + reshape, or repeat_interleave), LoRA linear layers merged
on eval(), weight tying, a KV cache written in place into buffers by a compiled forward,
the causal mask with hstack, llama's top-p sampling (sort / cumsum / multinomial / gather)
and HF's top-k / top-p filtering (scatter). Run with PyTorch, with llgrad eagerly and with
llgrad.compile (see tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def make_llama(torch):
    nn, F = torch.nn, torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))
        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        def forward(self, x):
            output = self._norm(x.float()).type_as(x)
            return output * self.weight

    class Rotary(nn.Module):
        def __init__(self, dim, max_pos, base=10000.0):
            super().__init__()
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            t = torch.arange(max_pos, dtype=self.inv_freq.dtype)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)
        def forward(self, x, position_ids):
            return self.cos_cached[position_ids].to(x.dtype), self.sin_cached[position_ids].to(x.dtype)

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        cos = cos.unsqueeze(unsqueeze_dim)
        sin = sin.unsqueeze(unsqueeze_dim)
        q_embed = (q * cos) + (rotate_half(q) * sin)
        k_embed = (k * cos) + (rotate_half(k) * sin)
        return q_embed, k_embed

    def repeat_kv(x, n_rep):
        bs, n_kv_heads, slen, head_dim = x.shape
        if n_rep == 1:
            return x
        return (x[:, :, None, :, :].expand(bs, n_kv_heads, n_rep, slen, head_dim)
                .reshape(bs, n_kv_heads * n_rep, slen, head_dim))

    class LoRALinear(nn.Linear):
        def __init__(self, in_features, out_features, r=4, lora_alpha=8, bias=False):
            super().__init__(in_features, out_features, bias=bias)
            self.r = r
            self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
            self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
            self.scaling = lora_alpha / r
            self.weight.requires_grad = False
            self.merged = False
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)
        def train(self, mode=True):
            super().train(mode)
            if not mode and not self.merged:
                self.weight.data += (self.lora_B @ self.lora_A) * self.scaling
                self.merged = True
            elif mode and self.merged:
                self.weight.data -= (self.lora_B @ self.lora_A) * self.scaling
                self.merged = False
            return self
        def forward(self, x):
            result = F.linear(x, self.weight, bias=self.bias)
            if not self.merged:
                result += (x @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * self.scaling
            return result

    class Attention(nn.Module):
        def __init__(self, dim, n_heads, n_kv_heads, max_batch, max_seq, lora, gqa_mode):
            super().__init__()
            self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
            self.n_rep = n_heads // n_kv_heads
            self.head_dim = dim // n_heads
            self.gqa_mode = gqa_mode
            L = LoRALinear if lora else (lambda i, o, bias=False: nn.Linear(i, o, bias=bias))
            self.wq = L(dim, n_heads * self.head_dim, bias=False)
            self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
            self.wv = L(dim, n_kv_heads * self.head_dim, bias=False)
            self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
            self.register_buffer("cache_k", torch.zeros(max_batch, n_kv_heads, max_seq, self.head_dim), persistent=False)
            self.register_buffer("cache_v", torch.zeros(max_batch, n_kv_heads, max_seq, self.head_dim), persistent=False)

        def forward(self, x, start_pos, cos, sin, mask, use_cache):
            bsz, seqlen, _ = x.shape
            xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
            xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
            xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
            xq, xk = apply_rotary_pos_emb(xq, xk, cos, sin)
            if use_cache:
                self.cache_k[:bsz, :, start_pos: start_pos + seqlen] = xk
                self.cache_v[:bsz, :, start_pos: start_pos + seqlen] = xv
                keys = self.cache_k[:bsz, :, : start_pos + seqlen]
                values = self.cache_v[:bsz, :, : start_pos + seqlen]
            else:
                keys, values = xk, xv
            if self.gqa_mode == "expand":
                keys, values = repeat_kv(keys, self.n_rep), repeat_kv(values, self.n_rep)
            else:
                keys = torch.repeat_interleave(keys, dim=1, repeats=self.n_rep)
                values = values.repeat_interleave(self.n_rep, dim=1)
            scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores + mask
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            output = torch.matmul(scores, values)
            output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
            return self.wo(output)

    class FeedForward(nn.Module):
        def __init__(self, dim, hidden_dim, multiple_of):
            super().__init__()
            hidden_dim = int(2 * hidden_dim / 3)
            hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
            self.w1 = nn.Linear(dim, hidden_dim, bias=False)
            self.w2 = nn.Linear(hidden_dim, dim, bias=False)
            self.w3 = nn.Linear(dim, hidden_dim, bias=False)
        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.attention = Attention(cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["max_batch"],
                                       cfg["max_seq"], cfg["lora"], cfg["gqa"])
            self.feed_forward = FeedForward(cfg["dim"], 4 * cfg["dim"], 8)
            self.attention_norm = RMSNorm(cfg["dim"])
            self.ffn_norm = RMSNorm(cfg["dim"])
        def forward(self, x, start_pos, cos, sin, mask, use_cache):
            h = x + self.attention(self.attention_norm(x), start_pos, cos, sin, mask, use_cache)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            self.tok_embeddings = nn.Embedding(cfg["vocab"], cfg["dim"])
            self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layers"]))
            self.norm = RMSNorm(cfg["dim"])
            self.output = nn.Linear(cfg["dim"], cfg["vocab"], bias=False)
            self.output.weight = self.tok_embeddings.weight
            self.rotary = Rotary(cfg["dim"] // cfg["n_heads"], cfg["max_seq"] * 2)

        def forward(self, tokens, start_pos=0, use_cache=False):
            _bsz, seqlen = tokens.shape
            h = self.tok_embeddings(tokens)
            position_ids = torch.arange(start_pos, start_pos + seqlen).unsqueeze(0)
            cos, sin = self.rotary(h, position_ids)
            mask = None
            if seqlen > 1:
                mask = torch.full((seqlen, seqlen), float("-inf"))
                mask = torch.triu(mask, diagonal=1)
                mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask]).type_as(h)
            for layer in self.layers:
                h = layer(h, start_pos, cos, sin, mask, use_cache)
            h = self.norm(h)
            return self.output(h).float()
    return Transformer


def sample_top_p(torch, probs, p):
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort > p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    next_token = torch.multinomial(probs_sort, num_samples=1)
    next_token = torch.gather(probs_idx, -1, next_token)
    return next_token


def top_k_top_p_filtering(torch, logits, top_k=0, top_p=1.0, filter_value=-float("Inf")):
    F = torch.nn.functional
    if top_k > 0:
        indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
        logits[indices_to_remove] = filter_value
    if top_p < 1.0:
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
        sorted_indices_to_remove = cumulative_probs > top_p
        sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
        sorted_indices_to_remove[..., 0] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
        logits = logits.masked_fill(indices_to_remove, filter_value)
    return logits


def llama(torch, env, gqa="expand", lora=False):
    F = torch.nn.functional
    Transformer = make_llama(torch)
    cfg = dict(dim=32, n_heads=4, n_kv_heads=2, n_layers=2, vocab=40, max_batch=2, max_seq=24,
               lora=lora, gqa=gqa)
    torch.manual_seed(0)
    model = Transformer(cfg)
    env.rec("state", model.state_dict())
    env.rec("n trainable", sum(p.numel() for p in model.parameters() if p.requires_grad))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01)

    def train_step(tokens):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        tokens = torch.randint(0, cfg["vocab"], (2, 9))
        env.rec(f"loss {i}", train_step(tokens))
    env.rec("grads", [p.grad for p in params])
    model.eval()
    # generation: prompt prefill, then one token at a time through the KV cache
    fwd = env.step(lambda t, s: model(t, s, use_cache=True))
    prompt_tokens = [[1, 5, 7, 9], [2, 3]]
    bsz = len(prompt_tokens)
    total_len = 9
    pad_id, eos_id = -1, 0
    tokens = torch.full((bsz, total_len), pad_id, dtype=torch.long)
    for k, t in enumerate(prompt_tokens):
        tokens[k, : len(t)] = torch.tensor(t, dtype=torch.long)
    prev_pos = 0
    eos_reached = torch.tensor([False] * bsz)
    input_text_mask = tokens != pad_id
    min_prompt_len = min(len(t) for t in prompt_tokens)
    g = torch.Generator().manual_seed(7)
    with torch.inference_mode():
        for cur_pos in range(min_prompt_len, total_len):
            logits = fwd(tokens[:, prev_pos:cur_pos], prev_pos)
            probs = torch.softmax(logits[:, -1] / 0.8, dim=-1)
            next_token = sample_top_p(torch, probs, 0.9)
            next_token = next_token.reshape(-1)
            next_token = torch.where(input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)
            tokens[:, cur_pos] = next_token
            eos_reached |= (~input_text_mask[:, cur_pos]) & (next_token == eos_id)
            prev_pos = cur_pos
            if all(eos_reached):
                break
        env.rec("tokens", tokens)
        # the cache's logits equal a full forward's
        full = model(tokens[:, :cur_pos])
        env.rec("full logits", full[:, -1])
        env.rec("last logits", logits[:, -1])
        env.rec("cache", model.layers[0].attention.cache_k)
        # HF-style filtering with scatter, a greedy pass and a KV cache made by torch.cat
        logits2 = top_k_top_p_filtering(torch, full[:, -1].clone(), top_k=10, top_p=0.7)
        env.rec("filtered", logits2)
        env.rec("filtered sample", torch.multinomial(F.softmax(logits2, dim=-1), 3, replacement=True, generator=g))
        env.rec("argmax", torch.argmax(full, dim=-1))
    if lora:
        model.train()
        env.rec("unmerged", model.layers[0].attention.wq.weight)

def llama_rep(torch, env):
    llama(torch, env, gqa="interleave", lora=True)


@pytest.mark.parametrize("program", [llama, pytest.param(llama_rep, marks=pytest.mark.slow)])
def test_llama(program):
    run_tutorial(program)
