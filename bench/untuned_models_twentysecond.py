"""Six more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-08, stop 79): a Reformer language model (lucidrains/
reformer-pytorch's LSHAttention: shared-QK, random rotations drawn each call, buckets by argmax
of cat([R, -R]), sort of bucket * seqlen + position, batched_index_select by gather, chunks
attending to themselves and one back, the self mask, logsumexp-weighted sum over hashes and
the undo sort; AdamW), a Wide & Deep recommender (Cheng et al. 2016 as PyTorch ports write it:
a wide EmbeddingBag(mode="sum", sparse=True) over cross-product feature ids, deep sparse
Embeddings per field concatenated with dense columns into an MLP; SparseAdam for the sparse
tables and Adam for the rest, stepped together by a MultipleOptimizer), a VQ-VAE with an EMA
codebook (rosinality/vq-vae-2-pytorch's Quantize: the codebook a buffer, argmax of -dist,
one_hot, cluster_size and embed_avg moved by .data.mul_().add_(), Laplace-smoothed and copied
into the codebook inside forward, the straight-through estimator; Adam), and in
untuned_models_twentysecond_b.py a Neural CDE (patrick-kidger/torchcde's README classifier on
spirals: a vector field whose output is viewed as a hidden x input matrix and multiplied by
dX/dt of the linear interpolation, torchdiffeq's fixed-grid rk4 (3/8 rule) in Python; Adam),
SuperGlue (magicleap/SuperGluePretrainedNetwork: keypoint encoder of Conv1d + BatchNorm1d,
attentional propagation alternating self and cross layers through Conv1d multi-head attention,
log_optimal_transport's dustbins by cat and expand, Sinkhorn in log space by logsumexp in a
Python loop; the NLL of the known matches; Adam) and Growing Neural Cellular Automata
(the distill.pub model's PyTorch port: Sobel perception by depthwise conv2d of NumPy-made
kernels, fc layers on channels-last, a stochastic fire mask by rand, alive masks by max_pool2d
> 0.1 combined by &, 16 (small: 6) update steps in a Python loop; Adam).

    python bench/untuned_models_twentysecond.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled,
1 thread each; the checks, the timing and its printout are untuned_models_eleventh.py's (main
there). build(lib, name, small=True) makes the tests' smaller versions."""
import os
import sys
import types

import numpy as np

import untuned_models_twentysecond_b
from untuned_models_fifth import training_step

NAMES = ("reformer", "widedeep", "vqema", "ncde", "superglue", "nca")


def _maker(name):
    if hasattr(untuned_models_twentysecond_b, "_" + name):
        return getattr(untuned_models_twentysecond_b, "_" + name)
    return globals()["_" + name]


def build(lib, name, small=False):
    np.random.seed(0)
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def _reformer(lib, small):
    # (reformer_pytorch.py's LSHAttention.hash_vectors and forward, batched_index_select,
    # look_one_back, sort_key_val; heads folded into the batch as LSHSelfAttention does)
    nn, F = lib.nn, lib.nn.functional
    batch, seqlen, dim, heads, n_buckets, n_hashes, vocab, depth = (
        (2, 16, 16, 2, 4, 2, 20, 1) if small else (8, 128, 64, 4, 8, 2, 256, 2))
    TOKEN_SELF_ATTN_VALUE = -5e4

    def batched_index_select(values, indices):
        last_dim = values.shape[-1]
        return values.gather(1, indices[:, :, None].expand(-1, -1, last_dim))

    def sort_key_val(t1, t2, dim=-1):
        values, indices = t1.sort(dim=dim)
        t2 = t2.expand_as(t1)
        return values, t2.gather(dim, indices)

    def look_one_back(x):
        x_extra = lib.cat([x[:, -1:, ...], x[:, :-1, ...]], dim=1)
        return lib.cat([x, x_extra], dim=2)

    def max_neg_value(tensor):
        return -lib.finfo(tensor.dtype).max

    class LSHAttention(nn.Module):
        def hash_vectors(self, n_buckets, vecs):
            batch_size = vecs.shape[0]
            rotations_shape = (1, vecs.shape[-1], n_hashes, n_buckets // 2)
            random_rotations = lib.randn(rotations_shape, dtype=vecs.dtype).expand(
                batch_size, -1, -1, -1)
            rotated_vecs = lib.einsum("btf,bfhi->bhti", vecs, random_rotations)
            rotated_vecs = lib.cat([rotated_vecs, -rotated_vecs], dim=-1)
            buckets = lib.argmax(rotated_vecs, dim=-1)
            offsets = lib.arange(n_hashes)
            offsets = lib.reshape(offsets * n_buckets, (1, -1, 1))
            return lib.reshape(buckets + offsets, (batch_size, -1,))

        def forward(self, qk, v):
            batch_size, seqlen, dim = qk.shape
            buckets = self.hash_vectors(n_buckets, qk)
            total_hashes = n_hashes
            ticker = lib.arange(total_hashes * seqlen).unsqueeze(0).expand_as(buckets)
            buckets_and_t = seqlen * buckets + (ticker % seqlen)
            buckets_and_t = buckets_and_t.detach()
            sbuckets_and_t, sticker = sort_key_val(buckets_and_t, ticker, dim=-1)
            _, undo_sort = sticker.sort(dim=-1)
            del ticker
            sbuckets_and_t = sbuckets_and_t.detach()
            sticker = sticker.detach()
            undo_sort = undo_sort.detach()
            st = (sticker % seqlen)
            sqk = batched_index_select(qk, st)
            sv = batched_index_select(v, st)
            chunk_size = total_hashes * n_buckets
            bq_t = bkv_t = lib.reshape(st, (batch_size, chunk_size, -1))
            bqk = lib.reshape(sqk, (batch_size, chunk_size, -1, dim))
            bv = lib.reshape(sv, (batch_size, chunk_size, -1, dim))
            bq = bqk
            bk = F.normalize(bqk, p=2, dim=-1).type_as(bq)
            bk, bv, bkv_t = look_one_back(bk), look_one_back(bv), look_one_back(bkv_t)
            dots = lib.einsum("bhie,bhje->bhij", bq, bk) * (dim ** -0.5)
            masked_value = max_neg_value(dots)
            mask = bq_t[:, :, :, None] < bkv_t[:, :, None, :]       # (causal)
            dots.masked_fill_(mask, masked_value)
            del mask
            self_mask = bq_t[:, :, :, None] == bkv_t[:, :, None, :]
            dots.masked_fill_(self_mask, TOKEN_SELF_ATTN_VALUE)
            del self_mask
            dots_logsumexp = lib.logsumexp(dots, dim=-1, keepdim=True)
            dots = lib.exp(dots - dots_logsumexp).type_as(dots)
            bo = lib.einsum("buij,buje->buie", dots, bv)
            so = lib.reshape(bo, (batch_size, -1, dim))
            slogits = lib.reshape(dots_logsumexp, (batch_size, -1,))
            o = batched_index_select(so, undo_sort)
            logits = slogits.gather(1, undo_sort)
            o = lib.reshape(o, (batch_size, total_hashes, seqlen, dim))
            logits = lib.reshape(logits, (batch_size, total_hashes, seqlen, 1))
            probs = lib.exp(logits - lib.logsumexp(logits, dim=1, keepdim=True))
            return lib.sum(o * probs, dim=1)

    class LSHSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.toqk = nn.Linear(dim, dim, bias=False)
            self.tov = nn.Linear(dim, dim, bias=False)
            self.to_out = nn.Linear(dim, dim)
            self.lsh_attn = LSHAttention()

        def forward(self, x):
            b, t, e = x.shape
            dim_head = e // heads

            def merge_heads(v):
                return v.view(b, t, heads, -1).transpose(1, 2).reshape(b * heads, t, -1)
            qk, v = merge_heads(self.toqk(x)), merge_heads(self.tov(x))
            out = self.lsh_attn(qk, v)
            out = out.view(b, heads, t, dim_head).transpose(1, 2).reshape(b, t, -1)
            return self.to_out(out)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = LSHSelfAttention()
            self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.ff(self.norm2(x))

    class ReformerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_emb = nn.Embedding(vocab, dim)
            self.pos_emb = nn.Embedding(seqlen, dim)
            self.layers = nn.Sequential(*[Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.out = nn.Linear(dim, vocab)

        def forward(self, x):
            x = self.token_emb(x) + self.pos_emb(lib.arange(x.shape[1]))
            return self.out(self.norm(self.layers(x)))

    model = ReformerLM()
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.RandomState(1)
    data = lib.tensor(rng.randint(0, vocab, (batch, seqlen + 1)))
    inp, tgt = data[:, :-1], data[:, 1:]

    def loss():
        return F.cross_entropy(model(inp).transpose(1, 2), tgt)
    return model, opt, loss


def _widedeep(lib, small):
    # (the paper's model as PyTorch ports write it: wide part a sparse linear model over hashed
    # cross-product ids, deep part sparse embeddings + dense features -> ReLU MLP; the sum of
    # both logits into BCEWithLogits)
    nn, F = lib.nn, lib.nn.functional
    batch, fields, card, emb, n_dense, n_cross, hidden = (
        (8, 3, 10, 4, 2, 30, (16, 8)) if small else (512, 8, 1000, 16, 13, 10000, (256, 128, 64)))

    class MultipleOptimizer:
        def __init__(self, *op):
            self.optimizers = op

        def zero_grad(self):
            for op in self.optimizers:
                op.zero_grad()

        def step(self):
            for op in self.optimizers:
                op.step()

    class WideDeep(nn.Module):
        def __init__(self):
            super().__init__()
            self.wide = nn.EmbeddingBag(n_cross, 1, mode="sum", sparse=True)
            self.wide_bias = nn.Parameter(lib.zeros(1))
            self.embeds = nn.ModuleList([nn.Embedding(card, emb, sparse=True)
                                         for _ in range(fields)])
            layers, d = [], fields * emb + n_dense
            for h in hidden:
                layers += [nn.Linear(d, h), nn.ReLU(), nn.Dropout(0.1)]
                d = h
            layers.append(nn.Linear(d, 1))
            self.deep = nn.Sequential(*layers)

        def forward(self, cat, dense, cross):
            wide_out = self.wide(cross) + self.wide_bias
            emb_x = [e(cat[:, i]) for i, e in enumerate(self.embeds)]
            deep_out = self.deep(lib.cat(emb_x + [dense], 1))
            return (wide_out + deep_out).squeeze(1)

    model = WideDeep()
    sparse = [p for n, p in model.named_parameters() if n.startswith(("wide.", "embeds."))]
    dense = [p for n, p in model.named_parameters() if not n.startswith(("wide.", "embeds."))]
    opt = MultipleOptimizer(lib.optim.SparseAdam(sparse, lr=1e-2),
                            lib.optim.Adam(dense, lr=1e-3))
    rng = np.random.RandomState(1)
    cat = rng.randint(0, card, (batch, fields))
    # (crossed columns hashed as the paper's cross-product transformations are)
    crosses = np.stack([(cat[:, i] * 7919 + cat[:, j] * 104729) % n_cross
                        for i in range(fields) for j in range(i + 1, fields)], 1)
    x_cat, x_cross = lib.tensor(cat), lib.tensor(crosses)
    x_dense = lib.tensor(rng.randn(batch, n_dense).astype(np.float32))
    y = lib.tensor((rng.rand(batch) < 0.3).astype(np.float32))
    criterion = nn.BCEWithLogitsLoss()

    def loss():
        return criterion(model(x_cat, x_dense, x_cross), y)
    return model, opt, loss


def _vqema(lib, small):
    # (vqvae.py's Quantize as written there; a one-level encoder/decoder of its ResBlocks'
    # kind around it, latent loss weight 0.25 as train_vqvae.py's)
    nn, F = lib.nn, lib.nn.functional
    batch, size, ch, embed_dim, n_embed = (2, 8, 8, 4, 8) if small else (16, 32, 64, 32, 128)

    class Quantize(nn.Module):
        def __init__(self, dim, n_embed, decay=0.99, eps=1e-5):
            super().__init__()
            self.dim, self.n_embed, self.decay, self.eps = dim, n_embed, decay, eps
            embed = lib.randn(dim, n_embed)
            self.register_buffer("embed", embed)
            self.register_buffer("cluster_size", lib.zeros(n_embed))
            self.register_buffer("embed_avg", embed.clone())

        def forward(self, input):
            flatten = input.reshape(-1, self.dim)
            dist = (flatten.pow(2).sum(1, keepdim=True) - 2 * flatten @ self.embed
                    + self.embed.pow(2).sum(0, keepdim=True))
            _, embed_ind = (-dist).max(1)
            embed_onehot = F.one_hot(embed_ind, self.n_embed).type(flatten.dtype)
            embed_ind = embed_ind.view(*input.shape[:-1])
            quantize = self.embed_code(embed_ind)
            if self.training:
                embed_onehot_sum = embed_onehot.sum(0)
                embed_sum = flatten.transpose(0, 1) @ embed_onehot
                self.cluster_size.data.mul_(self.decay).add_(embed_onehot_sum,
                                                             alpha=1 - self.decay)
                self.embed_avg.data.mul_(self.decay).add_(embed_sum, alpha=1 - self.decay)
                n = self.cluster_size.sum()
                cluster_size = ((self.cluster_size + self.eps)
                                / (n + self.n_embed * self.eps) * n)
                embed_normalized = self.embed_avg / cluster_size.unsqueeze(0)
                self.embed.data.copy_(embed_normalized)
            diff = (quantize.detach() - input).pow(2).mean()
            quantize = input + (quantize - input).detach()
            return quantize, diff, embed_ind

        def embed_code(self, embed_id):
            return F.embedding(embed_id, self.embed.transpose(0, 1))

    class ResBlock(nn.Module):
        def __init__(self, in_channel, channel):
            super().__init__()
            self.conv = nn.Sequential(nn.ReLU(), nn.Conv2d(in_channel, channel, 3, padding=1),
                                      nn.ReLU(inplace=True), nn.Conv2d(channel, in_channel, 1))

        def forward(self, input):
            return self.conv(input) + input

    class VQVAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(3, ch // 2, 4, stride=2, padding=1),
                                     nn.ReLU(inplace=True),
                                     nn.Conv2d(ch // 2, ch, 4, stride=2, padding=1),
                                     ResBlock(ch, ch // 2), nn.ReLU(inplace=True))
            self.quantize_conv = nn.Conv2d(ch, embed_dim, 1)
            self.quantize = Quantize(embed_dim, n_embed)
            self.dec = nn.Sequential(nn.Conv2d(embed_dim, ch, 3, padding=1),
                                     ResBlock(ch, ch // 2), nn.ReLU(inplace=True),
                                     nn.ConvTranspose2d(ch, ch // 2, 4, stride=2, padding=1),
                                     nn.ReLU(inplace=True),
                                     nn.ConvTranspose2d(ch // 2, 3, 4, stride=2, padding=1))

        def forward(self, input):
            quant = self.quantize_conv(self.enc(input)).permute(0, 2, 3, 1)
            quant, diff, _ = self.quantize(quant)
            quant = quant.permute(0, 3, 1, 2)
            return self.dec(quant), diff.unsqueeze(0)

    model = VQVAE()
    opt = lib.optim.Adam(model.parameters(), lr=3e-4)
    rng = np.random.RandomState(1)
    img = lib.tensor(rng.rand(batch, 3, size, size).astype(np.float32) * 2 - 1).to(
        lib.get_default_dtype())
    criterion = nn.MSELoss()

    def loss():
        out, latent_loss = model(img)
        return criterion(out, img) + 0.25 * latent_loss.mean()
    return model, opt, loss


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=None, jax_models=types.SimpleNamespace(NAMES=()))
