"""The FlexAttention docs' and blog's examples, nearly verbatim (sweep 22, H2 part G):
score_mods (relative position, ALiBi with per-head slopes, tanh soft-capping), mask_mods
(causal, sliding window, document / packed-sequence masking, prefix-LM) turned into
BlockMasks and combined with and_masks / or_masks, GQA, the log-sum-exp returned by
return_aux, and `flex_attention = torch.compile(flex_attention)` as the docs advise, in a
small causal self-attention layer run for inference (PyTorch's CPU FlexAttention has no
backward). Programs `f(torch, env)`, see tutorial_harness.py."""
import importlib


def flex_attention_examples(torch, env):
    nn = torch.nn
    # from torch.nn.attention.flex_attention import flex_attention, create_block_mask, ...
    fa = importlib.import_module(torch.__name__ + ".nn.attention.flex_attention")
    flex_attention, create_block_mask = fa.flex_attention, fa.create_block_mask
    and_masks, or_masks = fa.and_masks, fa.or_masks

    B, H, S, D = 2, 4, 16, 8
    query, key, value = env.randn(B, H, S, D), env.randn(B, H, S, D), env.randn(B, H, S, D)

    def noop(score, b, h, q_idx, kv_idx):
        return score

    env.rec("noop == sdpa", (flex_attention(query, key, value, score_mod=noop),
                             nn.functional.scaled_dot_product_attention(query, key, value)))

    def relative_positional(score, b, h, q_idx, kv_idx):
        return score + (q_idx - kv_idx)

    env.rec("relative", flex_attention(query, key, value, score_mod=relative_positional))

    # ALiBi: a per-head slope times the distance
    alibi_bias = torch.exp2(-((torch.arange(H) + 1) * 8.0 / H))

    def alibi(score, b, h, q_idx, kv_idx):
        bias = alibi_bias[h] * (kv_idx - q_idx)
        return score + bias

    softcap = 20

    def soft_cap(score, b, h, q_idx, kv_idx):
        score = score / softcap
        score = torch.tanh(score)
        score = score * softcap
        return score

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    SLIDING_WINDOW = 4

    def sliding_window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= SLIDING_WINDOW

    sliding_window_causal = and_masks(causal, sliding_window)

    # Document masking: packed sequences, each token attending only within its document
    document_id = torch.zeros(S, dtype=torch.long)
    document_id[5:11] = 1
    document_id[11:] = 2

    def document_causal_mask(b, h, q_idx, kv_idx):
        causal_mask = q_idx >= kv_idx
        document_mask = document_id[q_idx] == document_id[kv_idx]
        return causal_mask & document_mask

    prefix_length = 6

    def prefix_mask(b, h, q_idx, kv_idx):
        return kv_idx <= prefix_length

    prefix_lm_causal = or_masks(prefix_mask, causal)

    masks = {"causal": causal, "sliding_window_causal": sliding_window_causal,
             "document_causal": document_causal_mask, "prefix_lm": prefix_lm_causal}
    block_masks = {name: create_block_mask(m, B=None, H=None, Q_LEN=S, KV_LEN=S,
                                           device="cpu")
                   for name, m in masks.items()}
    env.rec("dense masks", {name: fa.create_mask(m, 1, 1, S, S, device="cpu")
                            for name, m in masks.items()})
    env.rec("block mask shapes", {n: bm.shape for n, bm in block_masks.items()})

    # (each score_mod / mask_mod pair is a guard of the compiled function, in PyTorch too:
    # a handful of pairs, below the recompile limit)
    flex_attention = env.step(flex_attention)
    for name, bm in block_masks.items():
        out, aux = flex_attention(query, key, value, score_mod=alibi, block_mask=bm,
                                  return_aux=fa.AuxRequest(lse=True))
        env.rec(f"{name} alibi", (out, aux.lse))
    env.rec("causal soft_cap", flex_attention(query, key, value, score_mod=soft_cap,
                                              block_mask=block_masks["causal"]))

    # GQA: 4 query heads over 2 key/value heads
    k2, v2 = env.randn(B, 2, S, D), env.randn(B, 2, S, D)
    env.rec("gqa", flex_attention(query, k2, v2, block_mask=block_masks["causal"],
                                  enable_gqa=True))

    class CausalSelfAttention(nn.Module):
        def __init__(self, dim, n_head):
            super().__init__()
            self.n_head = n_head
            self.c_attn = nn.Linear(dim, 3 * dim)
            self.c_proj = nn.Linear(dim, dim)

        def forward(self, x, block_mask, score_mod=None):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    layer = env.init(CausalSelfAttention(16, 4)).eval()
    x = env.randn(B, S, 16)
    with torch.no_grad():
        env.rec("layer document", layer(x, block_masks["document_causal"], alibi))
        env.rec("layer sliding", layer(x, block_masks["sliding_window_causal"]))
