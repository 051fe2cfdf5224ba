"""untuned_models_twentyfirst.py's Hyena operator language model (the docstring there says
what it is)."""
import math

import numpy as np


def _hyena(lib, small):
    # (safari/src/models/sequence/hyena.py's HyenaOperator at order 2, HyenaFilter with
    # PositionalEmbedding and ExponentialModulation, fftconv; a two-block LM around it)
    nn, F = lib.nn, lib.nn.functional
    batch, L, d, vocab, n_blocks, f_dim = (2, 16, 8, 11, 1, 8) if small else (
        8, 256, 64, 64, 2, 32)

    def fftconv(u, k, D):
        seqlen = u.shape[-1]
        fft_size = 2 * seqlen
        k_f = lib.fft.rfft(k, n=fft_size) / fft_size
        u_f = lib.fft.rfft(u.to(dtype=k.dtype), n=fft_size)
        y = lib.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
        out = y + u * D.unsqueeze(-1)
        return out.to(dtype=u.dtype)

    class Sin(nn.Module):
        def __init__(self, dim, w=10):
            super().__init__()
            self.freq = nn.Parameter(w * lib.ones(1, dim))

        def forward(self, x):
            return lib.sin(self.freq * x)

    class PositionalEmbedding(nn.Module):
        def __init__(self, emb_dim, seq_len):
            super().__init__()
            self.seq_len = seq_len
            t = lib.linspace(0, 1, self.seq_len)[None, :, None]
            bands = (emb_dim - 1) // 2
            t_rescaled = lib.linspace(0, seq_len - 1, seq_len)[None, :, None]
            w = 2 * math.pi * t_rescaled / seq_len
            f = lib.linspace(1e-4, bands - 1, bands)[None, None]
            z = lib.exp(-1j * f * w)
            z = lib.cat([t, z.real, z.imag], dim=-1)
            self.register_buffer("z", z)
            self.register_buffer("t", t)

        def forward(self, L):
            return self.z[:, :L], self.t[:, :L]

    class ExponentialModulation(nn.Module):
        def __init__(self, d_model, fast_decay_pct=0.3, slow_decay_pct=1.5, target=1e-2,
                     shift=0.0):
            super().__init__()
            self.shift = shift
            max_decay = math.log(target) / fast_decay_pct
            min_decay = math.log(target) / slow_decay_pct
            deltas = lib.linspace(min_decay, max_decay, d_model)[None, None]
            self.register_buffer("deltas", deltas)

        def forward(self, t, x):
            decay = lib.exp(-t * self.deltas.abs())
            return x * (decay + self.shift)

    class HyenaFilter(nn.Module):
        def __init__(self, d_model, emb_dim=3, order=16, seq_len=1024, w=1):
            super().__init__()
            self.d_model = d_model
            self.bias = nn.Parameter(lib.randn(self.d_model))
            self.pos_emb = PositionalEmbedding(emb_dim, seq_len)
            self.implicit_filter = nn.Sequential(
                nn.Linear(emb_dim, order), Sin(dim=order, w=w), nn.Linear(order, order),
                Sin(dim=order, w=w), nn.Linear(order, d_model, bias=False))
            self.modulation = ExponentialModulation(d_model)

        def filter(self, L):
            z, t = self.pos_emb(L)
            h = self.implicit_filter(z)
            return self.modulation(t, h)

        def forward(self, x, L, k=None, bias=None):
            if k is None:
                k = self.filter(L)
            k = k[0] if type(k) is tuple else k
            return fftconv(x, k, bias)

    class HyenaOperator(nn.Module):
        def __init__(self, d_model, l_max, order=2, filter_order=64):
            super().__init__()
            self.d_model, self.l_max, self.order = d_model, l_max, order
            inner_width = d_model * (order + 1)
            self.in_proj = nn.Linear(d_model, inner_width)
            self.out_proj = nn.Linear(d_model, d_model)
            self.short_filter = nn.Conv1d(inner_width, inner_width, 3, padding=2,
                                          groups=inner_width)
            self.filter_fn = HyenaFilter(d_model * (order - 1), order=filter_order,
                                         seq_len=l_max, emb_dim=5)

        def forward(self, u):
            l = u.size(-2)
            l_filter = min(l, self.l_max)
            u = self.in_proj(u).transpose(1, 2)
            uc = self.short_filter(u)[..., :l_filter]
            *x, v = uc.split(self.d_model, dim=1)
            k = self.filter_fn.filter(l_filter)[0]
            k = k.transpose(0, 1).reshape(self.order - 1, self.d_model, l_filter)
            bias = self.filter_fn.bias.reshape(self.order - 1, self.d_model)
            for o, x_i in enumerate(reversed(x[1:])):
                v = v * x_i
                v = self.filter_fn(v, l_filter, k=k[o], bias=bias[o])
            y = (v * x[0]).transpose(1, 2)
            return self.out_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.mixer = HyenaOperator(d, L, filter_order=f_dim)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.mixer(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_blocks))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, idx):
            x = self.emb(idx)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    model = LM()
    opt = lib.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    rng = np.random.RandomState(1)
    data = rng.randint(0, vocab, (batch, L + 1))
    x, y = lib.tensor(data[:, :-1]), lib.tensor(data[:, 1:])

    def loss():
        logits = model(x)
        return F.cross_entropy(logits.view(-1, vocab), y.reshape(-1))
    return model, opt, loss, {"clip": 1.0}
