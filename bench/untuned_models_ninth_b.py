"""untuned_models_ninth.py's mixture density network, causal linear-attention LM and Mamba LM
(that file holds the other three, build() and the runner): each _name(lib, small) -> (model,
optimizer, loss closure[, {"clip"/"scheduler"/...}]), seeded by build."""
import math


def _mdn(lib, small):
    # (sagelywizard/pytorch-mdn's MDN, gaussian_probability and mdn_loss, behind its example's
    # tanh MLP, on the inverse-sine toy problem made 2-d)
    nn = lib.nn
    batch, hidden, n_gauss = (32, 16, 3) if small else (1024, 128, 8)
    ONEOVERSQRT2PI = 1.0 / math.sqrt(2 * math.pi)

    class MDN(nn.Module):
        def __init__(self, in_features, out_features, num_gaussians):
            super(MDN, self).__init__()
            self.in_features, self.out_features = in_features, out_features
            self.num_gaussians = num_gaussians
            self.pi = nn.Sequential(nn.Linear(in_features, num_gaussians), nn.Softmax(dim=1))
            self.sigma = nn.Linear(in_features, out_features * num_gaussians)
            self.mu = nn.Linear(in_features, out_features * num_gaussians)

        def forward(self, minibatch):
            pi = self.pi(minibatch)
            sigma = lib.exp(self.sigma(minibatch))
            sigma = sigma.view(-1, self.num_gaussians, self.out_features)
            mu = self.mu(minibatch)
            mu = mu.view(-1, self.num_gaussians, self.out_features)
            return pi, sigma, mu

    def gaussian_probability(sigma, mu, target):
        target = target.unsqueeze(1).expand_as(sigma)
        ret = ONEOVERSQRT2PI * lib.exp(-0.5 * ((target - mu) / sigma) ** 2) / sigma
        return lib.prod(ret, 2)

    def mdn_loss(pi, sigma, mu, target):
        prob = pi * gaussian_probability(sigma, mu, target)
        nll = -lib.log(lib.sum(prob, dim=1))
        return lib.mean(nll)

    model = nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                          MDN(hidden, 2, n_gauss))
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    y = lib.rand(batch, 2) * 2 - 1
    x = y + 0.3 * lib.sin(2 * math.pi * y) + 0.05 * lib.randn(batch, 2)

    def loss():
        pi, sigma, mu = model(x)
        return mdn_loss(pi, sigma, mu, y)
    return model, opt, loss


def _linattn(lib, small):
    # (a character LM on "Transformers are RNNs" (Katharopoulos et al. 2020) causal linear
    # attention as its pure-PyTorch versions write it: elu(x) + 1, the key-value outer products'
    # cumsum over time and the normaliser's; pre-LN blocks with GELU MLPs, AdamW, clip 1.0)
    nn, F = lib.nn, lib.nn.functional
    batch, seq, d, heads, n_layers, vocab = (2, 8, 16, 2, 1, 20) if small else (16, 64, 64, 4, 2, 96)

    def elu_feature_map(x):
        return F.elu(x) + 1

    def causal_linear_attention(q, k, v, eps=1e-6):
        q, k = elu_feature_map(q), elu_feature_map(k)
        kv = lib.einsum('bhnd,bhne->bhnde', k, v).cumsum(dim=2)
        num = lib.einsum('bhnd,bhnde->bhne', q, kv)
        den = lib.einsum('bhnd,bhnd->bhn', q, k.cumsum(dim=2)) + eps
        return num / den.unsqueeze(-1)

    class LinearAttention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.to_qkv = nn.Linear(dim, 3 * dim, bias=False)
            self.to_out = nn.Linear(dim, dim)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.to_qkv(x).chunk(3, dim=-1)
            q, k, v = (t.reshape(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            out = causal_linear_attention(q, k, v)
            return self.to_out(out.transpose(1, 2).reshape(b, n, -1))

    class Block(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = LinearAttention(dim, heads)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim),
                                     nn.Dropout(0.1))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class LinearTransformerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(lib.zeros(1, seq, d))
            self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(n_layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos[:, :idx.size(1)]
            return self.head(self.ln_f(self.blocks(x)))

    m = LinearTransformerLM()
    opt = lib.optim.AdamW(m.parameters(), lr=3e-4)
    data = lib.randint(0, vocab, (batch, seq + 1))
    x, y = data[:, :-1], data[:, 1:]
    return m, opt, lambda: F.cross_entropy(m(x).view(-1, vocab), y.reshape(-1)), {"clip": 1.0}


def _mamba(lib, small):
    # (johnma2006/mamba-minimal's model.py with einops' rearrange/repeat/einsum written as
    # transpose, repeat and torch.einsum)
    nn, F = lib.nn, lib.nn.functional
    batch, seq, d_model, n_layer, vocab = (2, 6, 8, 1, 20) if small else (8, 32, 64, 2, 96)
    d_state, expand, d_conv = 16 if not small else 4, 2, 4
    d_inner = expand * d_model
    dt_rank = math.ceil(d_model / 16)

    class MambaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(d_model, d_inner * 2, bias=False)
            self.conv1d = nn.Conv1d(in_channels=d_inner, out_channels=d_inner, bias=True,
                                    kernel_size=d_conv, groups=d_inner, padding=d_conv - 1)
            self.x_proj = nn.Linear(d_inner, dt_rank + d_state * 2, bias=False)
            self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
            A = lib.arange(1, d_state + 1).float().repeat(d_inner, 1)
            self.A_log = nn.Parameter(lib.log(A))
            self.D = nn.Parameter(lib.ones(d_inner))
            self.out_proj = nn.Linear(d_inner, d_model, bias=False)

        def forward(self, x):
            (b, l, d) = x.shape
            x_and_res = self.in_proj(x)
            (x, res) = x_and_res.split(split_size=[d_inner, d_inner], dim=-1)
            x = x.transpose(1, 2)
            x = self.conv1d(x)[:, :, :l]
            x = x.transpose(1, 2)
            x = F.silu(x)
            y = self.ssm(x)
            y = y * F.silu(res)
            return self.out_proj(y)

        def ssm(self, x):
            (d_in, n) = self.A_log.shape
            A = -lib.exp(self.A_log.float())
            D = self.D.float()
            x_dbl = self.x_proj(x)
            (delta, B, C) = x_dbl.split(split_size=[dt_rank, n, n], dim=-1)
            delta = F.softplus(self.dt_proj(delta))
            return self.selective_scan(x, delta, A, B, C, D)

        def selective_scan(self, u, delta, A, B, C, D):
            (b, l, d_in) = u.shape
            n = A.shape[1]
            deltaA = lib.exp(lib.einsum('bld,dn->bldn', delta, A))
            deltaB_u = lib.einsum('bld,bln,bld->bldn', delta, B, u)
            x = lib.zeros((b, d_in, n))
            ys = []
            for i in range(l):
                x = deltaA[:, i] * x + deltaB_u[:, i]
                y = lib.einsum('bdn,bn->bd', x, C[:, i, :])
                ys.append(y)
            y = lib.stack(ys, dim=1)
            return y + u * D

    class RMSNorm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(lib.ones(d_model))

        def forward(self, x):
            return x * lib.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class ResidualBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.mixer = MambaBlock()
            self.norm = RMSNorm(d_model)

        def forward(self, x):
            return self.mixer(self.norm(x)) + x

    class Mamba(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, d_model)
            self.layers = nn.ModuleList([ResidualBlock() for _ in range(n_layer)])
            self.norm_f = RMSNorm(d_model)
            self.lm_head = nn.Linear(d_model, vocab, bias=False)
            self.lm_head.weight = self.embedding.weight

        def forward(self, input_ids):
            x = self.embedding(input_ids)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm_f(x))

    m = Mamba()
    opt = lib.optim.AdamW(m.parameters(), lr=1e-3)
    data = lib.randint(0, vocab, (batch, seq + 1))
    x, y = data[:, :-1], data[:, 1:]
    return m, opt, lambda: F.cross_entropy(m(x).reshape(-1, vocab), y.reshape(-1))
