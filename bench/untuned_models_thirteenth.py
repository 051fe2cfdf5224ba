"""Five more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-06): a PixelCNN (jzbontar/pixelcnn-pytorch: masked
convolutions that multiply their weight's .data by a mask buffer inside forward, BatchNorm, a
256-way cross-entropy per pixel), an RWKV-4 language model (BlinkDL/RWKV-LM: token shift by
nn.ZeroPad2d((0, 0, 1, -1)), the WKV exponential-decay recurrence as a Python loop over tokens
in its numerically stable form, squared-ReLU channel mixing), a Transformer-XL (kimiyoung/
transformer-xl's mem_transformer.py: relative positional attention with _rel_shift, einsum
scores, a detached memory of each layer's hidden states carried from one step to the next),
and in untuned_models_thirteenth_b.py a Neural Turing Machine on the copy task (loudinthecloud/
pytorch-ntm: an LSTM controller, content addressing by cosine similarity, a circular shift by
conv1d per batch row written into a zeros tensor, sharpening, erase/add writes; RMSprop with
momentum, gradients clipped by value) and a ResNeXt with squeeze-and-excitation (grouped 3x3
convolutions, SELayer, SGD with Nesterov momentum).

    python bench/untuned_models_thirteenth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), jax.jit (where written, in
untuned_models_thirteenth_jax.py), llgrad eager and llgrad compiled, 1 thread each; the checks,
the timing and its printout are untuned_models_eleventh.py's (main there).
build(lib, name, small=True) makes the tests' smaller versions."""
import math
import os
import sys

import untuned_models_thirteenth_b
from untuned_models_fifth import training_step

NAMES = ("pixelcnn", "rwkv", "txl", "ntm", "resnext")


def _maker(name):
    return getattr(untuned_models_thirteenth_b, "_" + name, None) or globals()["_" + name]


def build(lib, name, small=False):
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def raw(lib, name, small=False):
    """(model, optimizer, loss, extras) of the maker itself (the jax versions start from it)."""
    return _maker(name)(lib, small)


def _pixelcnn(lib, small):
    nn, F = lib.nn, lib.nn.functional
    batch, size, fm, n_b = (2, 5, 4, 1) if small else (8, 16, 32, 4)
    levels = 256

    class MaskedConv2d(nn.Conv2d):
        def __init__(self, mask_type, *args, **kwargs):
            super(MaskedConv2d, self).__init__(*args, **kwargs)
            assert mask_type in {'A', 'B'}
            self.register_buffer('mask', self.weight.data.clone())
            _, _, kH, kW = self.weight.size()
            self.mask.fill_(1)
            self.mask[:, :, kH // 2, kW // 2 + (mask_type == 'B'):] = 0
            self.mask[:, :, kH // 2 + 1:] = 0

        def forward(self, x):
            self.weight.data *= self.mask
            return super(MaskedConv2d, self).forward(x)

    layers = [MaskedConv2d('A', 1, fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True)]
    for _ in range(n_b):
        layers += [MaskedConv2d('B', fm, fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True)]
    net = nn.Sequential(*layers, nn.Conv2d(fm, levels, 1))
    optimizer = lib.optim.Adam(net.parameters())
    pixels = lib.randint(0, levels, (batch, 1, size, size))
    inp, target = pixels.to(lib.get_default_dtype()) / (levels - 1), pixels[:, 0]

    def loss():
        return F.cross_entropy(net(inp), target)
    return net, optimizer, loss, {"data": (inp, target)}


def _rwkv(lib, small):
    nn, F = lib.nn, lib.nn.functional
    batch, seq, n_embd, n_layer, vocab = (2, 5, 8, 1, 11) if small else (8, 32, 64, 2, 128)

    def wkv(w, u, k, v):
        # (the CUDA kernel's forward as a loop: a, b the decayed sums, p their common exponent)
        B, T, C = k.shape
        w = -lib.exp(w)
        a = lib.zeros(B, C)
        b = lib.zeros(B, C)
        p = lib.full((B, C), -1e38)
        ys = []
        for t in range(T):
            kk, vv = k[:, t], v[:, t]
            ww = u + kk
            q = lib.maximum(p, ww)
            e1, e2 = lib.exp(p - q), lib.exp(ww - q)
            ys.append((e1 * a + e2 * vv) / (e1 * b + e2))
            ww = w + p
            q = lib.maximum(ww, kk)
            e1, e2 = lib.exp(ww - q), lib.exp(kk - q)
            a = e1 * a + e2 * vv
            b = e1 * b + e2
            p = q
        return lib.stack(ys, dim=1)

    class RWKV_TimeMix(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            ratio_0_to_1 = layer_id / max(n_layer - 1, 1)
            ratio_1_to_almost0 = 1.0 - layer_id / n_layer
            decay_speed = lib.ones(n_embd)
            for h in range(n_embd):
                decay_speed[h] = -5 + 8 * (h / (n_embd - 1)) ** (0.7 + 1.3 * ratio_0_to_1)
            self.time_decay = nn.Parameter(decay_speed)
            zigzag = lib.tensor([(i + 1) % 3 - 1 for i in range(n_embd)]) * 0.5
            self.time_first = nn.Parameter(lib.ones(n_embd) * math.log(0.3) + zigzag)
            x = lib.ones(1, 1, n_embd)
            for i in range(n_embd):
                x[0, 0, i] = i / n_embd
            self.time_mix_k = nn.Parameter(lib.pow(x, ratio_1_to_almost0))
            self.time_mix_v = nn.Parameter(lib.pow(x, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
            self.time_mix_r = nn.Parameter(lib.pow(x, 0.5 * ratio_1_to_almost0))
            self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
            self.key = nn.Linear(n_embd, n_embd, bias=False)
            self.value = nn.Linear(n_embd, n_embd, bias=False)
            self.receptance = nn.Linear(n_embd, n_embd, bias=False)
            self.output = nn.Linear(n_embd, n_embd, bias=False)

        def jit_func(self, x):
            xx = self.time_shift(x)
            xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
            xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
            xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
            k, v, r = self.key(xk), self.value(xv), self.receptance(xr)
            return lib.sigmoid(r), k, v

        def forward(self, x):
            sr, k, v = self.jit_func(x)
            return self.output(sr * wkv(self.time_decay, self.time_first, k, v))

    class RWKV_ChannelMix(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
            ratio_1_to_almost0 = 1.0 - layer_id / n_layer
            x = lib.ones(1, 1, n_embd)
            for i in range(n_embd):
                x[0, 0, i] = i / n_embd
            self.time_mix_k = nn.Parameter(lib.pow(x, ratio_1_to_almost0))
            self.time_mix_r = nn.Parameter(lib.pow(x, ratio_1_to_almost0))
            self.key = nn.Linear(n_embd, 4 * n_embd, bias=False)
            self.receptance = nn.Linear(n_embd, n_embd, bias=False)
            self.value = nn.Linear(4 * n_embd, n_embd, bias=False)

        def forward(self, x):
            xx = self.time_shift(x)
            xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
            xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
            k = lib.square(lib.relu(self.key(xk)))
            return lib.sigmoid(self.receptance(xr)) * self.value(k)

    class Block(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            self.layer_id = layer_id
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            if self.layer_id == 0:
                self.ln0 = nn.LayerNorm(n_embd)
            self.att, self.ffn = RWKV_TimeMix(layer_id), RWKV_ChannelMix(layer_id)

        def forward(self, x):
            if self.layer_id == 0:
                x = self.ln0(x)
            x = x + self.att(self.ln1(x))
            return x + self.ffn(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, n_embd)
            self.blocks = nn.Sequential(*[Block(i) for i in range(n_layer)])
            self.ln_out = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx):
            return self.head(self.ln_out(self.blocks(self.emb(idx))))

    model = GPT()
    optimizer = lib.optim.Adam(model.parameters(), lr=6e-4, betas=(0.9, 0.99), eps=1e-8)
    text = lib.randint(0, vocab, (batch, seq + 1))
    inp, target = text[:, :-1], text[:, 1:]

    def loss():
        logits = model(inp)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), target.reshape(-1))
    return model, optimizer, loss, {"clip": 1.0, "data": (inp, target)}


def _txl(lib, small):
    nn, F = lib.nn, lib.nn.functional
    qlen, mem_len, batch, d_model, n_head, d_inner, n_layer, vocab = (
        (4, 4, 2, 8, 2, 16, 1, 11) if small else (32, 32, 8, 64, 4, 256, 2, 256))
    d_head = d_model // n_head

    class PositionalEmbedding(nn.Module):
        def __init__(self, demb):
            super().__init__()
            inv_freq = 1 / (10000 ** (lib.arange(0.0, demb, 2.0) / demb))
            self.register_buffer('inv_freq', inv_freq)

        def forward(self, pos_seq):
            sinusoid_inp = lib.ger(pos_seq, self.inv_freq)
            return lib.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)[:, None, :]

    class RelPartialLearnableMultiHeadAttn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
            self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
            self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
            self.layer_norm = nn.LayerNorm(d_model)
            self.scale = 1 / (d_head ** 0.5)

        def _rel_shift(self, x):
            zero_pad = lib.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
            x_padded = lib.cat([zero_pad, x], dim=1)
            x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
            return x_padded[1:].view_as(x)

        def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems):
            qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
            cat = lib.cat([mems, w], 0)
            w_heads, r_head_k = self.qkv_net(cat), self.r_net(r)
            w_head_q, w_head_k, w_head_v = lib.chunk(w_heads, 3, dim=-1)
            w_head_q = w_head_q[-qlen:]
            klen = w_head_k.size(0)
            w_head_q = w_head_q.view(qlen, bsz, n_head, d_head)
            w_head_k = w_head_k.view(klen, bsz, n_head, d_head)
            w_head_v = w_head_v.view(klen, bsz, n_head, d_head)
            r_head_k = r_head_k.view(rlen, n_head, d_head)
            AC = lib.einsum('ibnd,jbnd->ijbn', (w_head_q + r_w_bias, w_head_k))
            BD = self._rel_shift(lib.einsum('ibnd,jnd->ijbn', (w_head_q + r_r_bias, r_head_k)))
            attn_score = (AC + BD) * self.scale
            attn_score = attn_score.float().masked_fill(
                attn_mask[:, :, :, None], -float('inf')).type_as(attn_score)
            attn_prob = F.softmax(attn_score, dim=1)
            attn_vec = lib.einsum('ijbn,jbnd->ibnd', (attn_prob, w_head_v))
            attn_vec = attn_vec.contiguous().view(attn_vec.size(0), attn_vec.size(1), n_head * d_head)
            return self.layer_norm(w + self.o_net(attn_vec))

    class PositionwiseFF(nn.Module):
        def __init__(self):
            super().__init__()
            self.CoreNet = nn.Sequential(nn.Linear(d_model, d_inner), nn.ReLU(inplace=True),
                                         nn.Linear(d_inner, d_model))
            self.layer_norm = nn.LayerNorm(d_model)

        def forward(self, inp):
            return self.layer_norm(inp + self.CoreNet(inp))

    class RelPartialLearnableDecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.dec_attn = RelPartialLearnableMultiHeadAttn()
            self.pos_ff = PositionwiseFF()

        def forward(self, dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask=None, mems=None):
            return self.pos_ff(self.dec_attn(dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask, mems))

    class MemTransformerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_emb = nn.Embedding(vocab, d_model)
            self.emb_scale = d_model ** 0.5
            self.layers = nn.ModuleList([RelPartialLearnableDecoderLayer() for _ in range(n_layer)])
            self.pos_emb = PositionalEmbedding(d_model)
            self.r_w_bias = nn.Parameter(lib.Tensor(n_head, d_head).normal_(0.0, 0.02))
            self.r_r_bias = nn.Parameter(lib.Tensor(n_head, d_head).normal_(0.0, 0.02))
            self.out_layer = nn.Linear(d_model, vocab)

        def init_mems(self):
            param = next(self.parameters())
            return [lib.empty(0, dtype=param.dtype, device=param.device) for _ in range(n_layer + 1)]

        def _update_mems(self, hids, mems, qlen, mlen):
            with lib.no_grad():
                new_mems = []
                end_idx = mlen + max(0, qlen)
                beg_idx = max(0, end_idx - mem_len)
                for i in range(len(hids)):
                    cat = lib.cat([mems[i], hids[i]], dim=0)
                    new_mems.append(cat[beg_idx:end_idx].detach())
            return new_mems

        def _forward(self, dec_inp, mems):
            qlen, bsz = dec_inp.size()
            word_emb = self.word_emb(dec_inp) * self.emb_scale
            mlen = mems[0].size(0)
            klen = mlen + qlen
            dec_attn_mask = lib.triu(word_emb.new_ones(qlen, klen), diagonal=1 + mlen).bool()[:, :, None]
            hids = []
            pos_seq = lib.arange(klen - 1, -1, -1.0, device=word_emb.device, dtype=word_emb.dtype)
            pos_emb = self.pos_emb(pos_seq)
            core_out = word_emb
            hids.append(core_out)
            for i, layer in enumerate(self.layers):
                core_out = layer(core_out, pos_emb, self.r_w_bias, self.r_r_bias,
                                 dec_attn_mask=dec_attn_mask, mems=mems[i])
                hids.append(core_out)
            return core_out, self._update_mems(hids, mems, qlen, mlen)

        def forward(self, data, target, *mems):
            if not mems:
                mems = self.init_mems()
            hidden, new_mems = self._forward(data, mems=mems)
            logit = self.out_layer(hidden)
            loss = F.cross_entropy(logit.view(-1, logit.size(-1)), target.reshape(-1))
            return [loss] + new_mems

    model = MemTransformerLM()
    optimizer = lib.optim.Adam(model.parameters(), lr=2.5e-4)
    text = lib.randint(0, vocab, (qlen + 1, batch))      # (time-major, as the reference's iterator)
    data, target = text[:-1], text[1:]
    carried = {"mems": tuple()}

    def loss():
        ret = model(data, target, *carried["mems"])
        carried["mems"] = tuple(ret[1:])
        return ret[0]
    return model, optimizer, loss, {"clip": 0.25, "data": (data, target)}


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    os.environ["PJRT_NPROC"] = "1"                      # (read when jax starts)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false").strip()
    import untuned_models_thirteenth_jax
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=raw, jax_models=untuned_models_thirteenth_jax)
