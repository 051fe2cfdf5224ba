"""Sweep 20 (C), part 11: a Llama-style decoder as the reference implementations write it.
RMSNorm with torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) and `.type_as(x)`,
rotary embeddings from precompute_freqs_cis (torch.outer, torch.polar) applied in real
arithmetic on (even, odd) pairs from freqs_cis.real / .imag, and through complex numbers
(stacked once at init, as real tensors) and through complex numbers as Meta's reference
does (view_as_complex of the reshaped q/k, multiplied, view_as_real, flatten(3)), which
compile runs eagerly, grouped-query attention with repeat_kv (expand + reshape), SwiGLU
feed-forward, a causal mask made with torch.full(-inf).triu(1), training with AdamW, then
greedy generation through a KV cache written in place (`self.cache_k[:bsz, start:start +
seqlen] = xk`) under torch.inference_mode, checked against the uncached forward. Run with
PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def llama(torch, env, complex_rope=False):
    nn, F = torch.nn, torch.nn.functional
    dim, n_heads, n_kv_heads, V, max_seq, n_layers = 16, 4, 2, 19, 12, 2
    head_dim = dim // n_heads

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d))

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            return self._norm(x.float()).type_as(x) * self.weight

    def precompute_freqs_cis(d, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, d, 2)[: (d // 2)].float() / d))
        t = torch.arange(end, dtype=torch.float32)
        freqs = torch.outer(t, freqs)
        return torch.polar(torch.ones_like(freqs), freqs)

    def reshape_for_broadcast(freqs_cis, x):
        shape = [d if i == 1 or i == x.ndim - 1 else 1 for i, d in enumerate(x.shape)]
        return freqs_cis.view(*shape)

    def apply_rotary_emb(xq, xk, freqs_cis):
        if not complex_rope:
            return apply_rotary_real(xq, xk, freqs_cis)
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    def apply_rotary_real(xq, xk, freqs_cis):
        # the same rotation on (even, odd) pairs in real arithmetic (torchtune's form)
        cos = reshape_for_broadcast(freqs_cis[0], xq[..., ::2])
        sin = reshape_for_broadcast(freqs_cis[1], xq[..., ::2])

        def rot(x):
            x = x.float().reshape(*x.shape[:-1], -1, 2)
            x0, x1 = x.unbind(-1)
            return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(3)
        return rot(xq).type_as(xq), rot(xk).type_as(xk)

    def repeat_kv(x, n_rep):
        bs, slen, n_kv, hd = x.shape
        if n_rep == 1:
            return x
        return x[:, :, :, None, :].expand(bs, slen, n_kv, n_rep, hd).reshape(bs, slen, n_kv * n_rep, hd)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(dim, n_heads * head_dim, bias=False)
            self.wk = nn.Linear(dim, n_kv_heads * head_dim, bias=False)
            self.wv = nn.Linear(dim, n_kv_heads * head_dim, bias=False)
            self.wo = nn.Linear(n_heads * head_dim, dim, bias=False)
            self.cache_k = None
            self.cache_v = None

        def forward(self, x, start_pos, freqs_cis, mask, use_cache=False):
            bsz, seqlen, _ = x.shape
            xq = self.wq(x).view(bsz, seqlen, n_heads, head_dim)
            xk = self.wk(x).view(bsz, seqlen, n_kv_heads, head_dim)
            xv = self.wv(x).view(bsz, seqlen, n_kv_heads, head_dim)
            xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
            if use_cache:
                self.cache_k[:bsz, start_pos:start_pos + seqlen] = xk
                self.cache_v[:bsz, start_pos:start_pos + seqlen] = xv
                keys = self.cache_k[:bsz, :start_pos + seqlen]
                values = self.cache_v[:bsz, :start_pos + seqlen]
            else:
                keys, values = xk, xv
            keys = repeat_kv(keys, n_heads // n_kv_heads).transpose(1, 2)
            values = repeat_kv(values, n_heads // n_kv_heads).transpose(1, 2)
            xq = xq.transpose(1, 2)
            scores = torch.matmul(xq, keys.transpose(2, 3)) / head_dim ** 0.5
            if mask is not None:
                scores = scores + mask
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            output = torch.matmul(scores, values)
            return self.wo(output.transpose(1, 2).contiguous().view(bsz, seqlen, -1))

    class FeedForward(nn.Module):
        def __init__(self, hidden=24):
            super().__init__()
            self.w1 = nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)
            self.w3 = nn.Linear(dim, hidden, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class TransformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.feed_forward = Attention(), FeedForward()
            self.attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)

        def forward(self, x, start_pos, freqs_cis, mask, use_cache):
            h = x + self.attention(self.attention_norm(x), start_pos, freqs_cis, mask, use_cache)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(V, dim)
            self.layers = nn.ModuleList([TransformerBlock() for _ in range(n_layers)])
            self.norm = RMSNorm(dim)
            self.output = nn.Linear(dim, V, bias=False)
            self.freqs_cis = precompute_freqs_cis(head_dim, max_seq * 2)
            if not complex_rope:    # (cos and sin as real tensors, made once outside the step)
                self.freqs_cis = torch.stack([self.freqs_cis.real, self.freqs_cis.imag])

        def setup_cache(self, bsz):
            for layer in self.layers:
                layer.attention.cache_k = torch.zeros(bsz, max_seq, n_kv_heads, head_dim)
                layer.attention.cache_v = torch.zeros(bsz, max_seq, n_kv_heads, head_dim)

        def forward(self, tokens, start_pos=0, use_cache=False):
            _bsz, seqlen = tokens.shape
            h = self.tok_embeddings(tokens)
            freqs_cis = self.freqs_cis[..., start_pos:start_pos + seqlen, :]
            mask = None
            if seqlen > 1:
                mask = torch.full((seqlen, seqlen), float("-inf")).triu(1)
                mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask]).type_as(h)
            for layer in self.layers:
                h = layer(h, start_pos, freqs_cis, mask, use_cache)
            return self.output(self.norm(h)).float()

    model = env.init(Transformer())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    data = env.randint(0, V, (3, 9))

    def train_step(tokens):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss{i}", train_step(data))
    env.rec("state", model.state_dict())

    forward = env.step(model.forward)
    model.setup_cache(2)
    with torch.inference_mode():
        tokens = data[:2, :4]
        logits = forward(tokens, 0, True)
        out = [tokens]
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        pos = tokens.shape[1]
        for _ in range(4):
            out.append(nxt)
            logits = forward(nxt, pos, True)
            pos += 1
            nxt = logits[:, -1].argmax(-1, keepdim=True)
        gen = torch.cat(out, dim=1)
        full = model(gen)
    env.rec("generated", gen)
    env.rec("last logits", (logits[:, -1], full[:, -1]))
    env.rec("cache", model.layers[1].attention.cache_k)


def test_llama():
    run_tutorial(llama)


def test_llama_complex_rope_eager():
    """Meta's complex-number rotary embeddings: eager equals torch, and the compiled step
    (its complex ops called back from native code: ir/complex_regions.py) equals eager,
    with no warning."""
    import copy
    import warnings

    import llgrad
    from tutorial_harness import Env, compare
    states = []
    tenv = Env(torch, "torch", states)
    llama(torch, tenv, complex_rope=True)
    eager = Env(llgrad, "eager", copy.deepcopy(states))
    llama(llgrad, eager, complex_rope=True)
    compare(tenv.records, eager.records, "eager vs torch", True, 1e-5, 1e-6)
    compiled = Env(llgrad, "compiled", copy.deepcopy(states))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        llama(llgrad, compiled, complex_rope=True)
    assert not [str(w.message) for w in caught if "llgrad" in str(w.message)]
    compare(eager.records, compiled.records, "compiled vs eager", False, 1e-5, 1e-6)
