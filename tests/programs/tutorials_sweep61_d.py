"""Sweep 61 (H1), fourth file: the Temporal Fusion Transformer's blocks (gated residual
networks, variable selection, interpretable attention, a quantile loss) and a small SAGAN
(self-attention over feature maps, spectral_norm, the hinge loss, TTUR). Programs
`f(torch, env)`, see tutorial_harness.py."""
import math

def tft_variable_selection(torch, env):
    """The Temporal Fusion Transformer's building blocks (Lim et al.; pytorch-forecasting's
    modules written out): gated linear units and gated residual networks (ELU, dropout, GLU
    gate, LayerNorm, an optional context vector and a skip projection), a variable
    selection network (a GRN per input variable, softmax weights from a GRN of the flattened
    inputs, weighted sum by einsum), an LSTM encoder, interpretable multi-head attention
    (shared values, heads averaged) under a causal mask, and a quantile (pinball) loss over
    three quantiles; Adam with clip_grad_norm_; the variable weights recorded."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(40)
    n_vars, d, T, H, quantiles = 3, 8, 10, 2, (0.1, 0.5, 0.9)

    class GatedLinearUnit(nn.Module):
        def __init__(self, d_in, d_out, dropout=0.1):
            super().__init__()
            self.dropout = nn.Dropout(dropout)
            self.fc = nn.Linear(d_in, d_out * 2)

        def forward(self, x):
            return F.glu(self.fc(self.dropout(x)), dim=-1)

    class GatedResidualNetwork(nn.Module):
        def __init__(self, d_in, d_hidden, d_out, context_size=None, dropout=0.1):
            super().__init__()
            self.skip = nn.Linear(d_in, d_out) if d_in != d_out else None
            self.fc1 = nn.Linear(d_in, d_hidden)
            self.context = nn.Linear(context_size, d_hidden, bias=False) if context_size else None
            self.elu = nn.ELU()
            self.fc2 = nn.Linear(d_hidden, d_hidden)
            self.gate = GatedLinearUnit(d_hidden, d_out, dropout)
            self.norm = nn.LayerNorm(d_out)

        def forward(self, x, context=None):
            residual = self.skip(x) if self.skip is not None else x
            x = self.fc1(x)
            if context is not None:
                x = x + self.context(context)
            x = self.fc2(self.elu(x))
            return self.norm(self.gate(x) + residual)

    class VariableSelectionNetwork(nn.Module):
        def __init__(self, n_vars, d, context_size):
            super().__init__()
            self.prescalers = nn.ModuleList([nn.Linear(1, d) for _ in range(n_vars)])
            self.single = nn.ModuleList([GatedResidualNetwork(d, d, d) for _ in range(n_vars)])
            self.flattened = GatedResidualNetwork(n_vars * d, d, n_vars, context_size)

        def forward(self, x, context):                  # x (B, T, n_vars)
            embs = [pre(x[..., i:i + 1]) for i, pre in enumerate(self.prescalers)]
            flat = torch.cat(embs, dim=-1)
            weights = torch.softmax(self.flattened(flat, context), dim=-1)   # (B, T, n_vars)
            processed = torch.stack([grn(e) for grn, e in zip(self.single, embs)], dim=-1)
            return torch.einsum("btdv,btv->btd", processed, weights), weights

    class InterpretableMultiHeadAttention(nn.Module):
        def __init__(self, d, n_head):
            super().__init__()
            self.d_k = d // n_head
            self.q = nn.ModuleList([nn.Linear(d, self.d_k) for _ in range(n_head)])
            # (no key bias: its gradient is zero up to rounding, which Adam makes steps of)
            self.k = nn.ModuleList([nn.Linear(d, self.d_k, bias=False) for _ in range(n_head)])
            self.v = nn.Linear(d, self.d_k)            # shared across heads
            self.out = nn.Linear(self.d_k, d)

        def forward(self, x, mask):
            v = self.v(x)
            heads, attns = [], []
            for q_lin, k_lin in zip(self.q, self.k):
                scores = q_lin(x) @ k_lin(x).transpose(1, 2) / math.sqrt(self.d_k)
                attn = torch.softmax(scores.masked_fill(mask, -1e9), dim=-1)
                heads.append(attn @ v)
                attns.append(attn)
            return self.out(torch.stack(heads).mean(0)), torch.stack(attns, dim=1)

    class TinyTFT(nn.Module):
        def __init__(self):
            super().__init__()
            self.static = nn.Embedding(4, d)
            self.vsn = VariableSelectionNetwork(n_vars, d, d)
            self.lstm = nn.LSTM(d, d, batch_first=True)
            self.post_lstm = GatedResidualNetwork(d, d, d)
            self.attn = InterpretableMultiHeadAttention(d, H)
            self.post_attn = GatedResidualNetwork(d, d, d)
            self.head = nn.Linear(d, len(quantiles))

        def forward(self, x, series_id):
            ctx = self.static(series_id).unsqueeze(1).expand(-1, x.size(1), -1)
            h, weights = self.vsn(x, ctx)
            out, _ = self.lstm(h)
            z = self.post_lstm(out + h)
            mask = torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool), diagonal=1)
            a, attn = self.attn(z, mask)
            y = self.post_attn(a + z)
            return self.head(y), weights, attn

    def quantile_loss(pred, target):
        losses = []
        for i, q in enumerate(quantiles):
            err = target - pred[..., i]
            losses.append(torch.max((q - 1) * err, q * err).unsqueeze(-1))
        return torch.cat(losses, dim=-1).sum(-1).mean()

    series_id = env.randint(0, 4, (6,))
    t = torch.arange(T + 1).float()
    phase = env.rand(6, 1) * 6.28
    base = torch.sin(t / 2 + phase) + 0.1 * env.randn(6, T + 1)
    x = torch.stack([base[:, :-1], torch.cos(t[:-1] / 3).expand(6, -1),
                     env.randn(6, T)], dim=-1)
    y = base[:, 1:]

    model = env.init(TinyTFT())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(x, sid, y):
        model.train()
        pred, weights, _ = model(x, sid)
        loss = quantile_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss.item(), weights.mean(dim=(0, 1)).detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(x, series_id, y))
    model.eval()
    with torch.no_grad():
        pred, weights, attn = model(x, series_id)
    env.rec("eval", (quantile_loss(pred, y), weights, attn))
    env.rec("params", dict(model.state_dict()))


def sagan_hinge(torch, env):
    """A small SAGAN (Zhang et al.; the popular PyTorch re-implementations): a self-attention
    block over conv feature maps (1x1 query/key/value convs, bmm attention over positions,
    a learned gamma initialised at 0), spectral_norm on the discriminator's convs
    (nn.utils.spectral_norm: one power iteration per forward in train mode), the hinge loss
    (relu(1 - D(x)) + relu(1 + D(G(z))), -D(G(z)) for G), two-timescale Adam (TTUR) with
    betas (0, 0.9), a fixed z for samples under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    SN = nn.utils.spectral_norm
    torch.manual_seed(41)
    zdim, ch = 6, 8

    class SelfAttn(nn.Module):
        def __init__(self, in_dim):
            super().__init__()
            self.query_conv = nn.Conv2d(in_dim, in_dim // 4, 1)
            self.key_conv = nn.Conv2d(in_dim, in_dim // 4, 1)
            self.value_conv = nn.Conv2d(in_dim, in_dim, 1)
            self.gamma = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            b, c, w, h = x.size()
            proj_query = self.query_conv(x).view(b, -1, w * h).permute(0, 2, 1)
            proj_key = self.key_conv(x).view(b, -1, w * h)
            attention = F.softmax(torch.bmm(proj_query, proj_key), dim=-1)
            proj_value = self.value_conv(x).view(b, -1, w * h)
            out = torch.bmm(proj_value, attention.permute(0, 2, 1)).view(b, c, w, h)
            return self.gamma * out + x, attention

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(zdim, ch * 4 * 4)
            self.up = nn.Sequential(nn.Upsample(scale_factor=2),
                                    nn.Conv2d(ch, ch, 3, padding=1, bias=False),
                                    nn.BatchNorm2d(ch), nn.ReLU())
            self.attn = SelfAttn(ch)
            self.out = nn.Conv2d(ch, 1, 3, padding=1)

        def forward(self, z):
            x = self.up(self.fc(z).view(-1, ch, 4, 4))
            x, _ = self.attn(x)
            return torch.tanh(self.out(x))

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = SN(nn.Conv2d(1, ch, 3, padding=1))
            self.attn = SelfAttn(ch)
            self.c2 = SN(nn.Conv2d(ch, ch, 4, stride=2, padding=1))
            self.fc = SN(nn.Linear(ch * 4 * 4, 1))

        def forward(self, x):
            x = F.leaky_relu(self.c1(x), 0.1)
            x, attn = self.attn(x)
            x = F.leaky_relu(self.c2(x), 0.1)
            return self.fc(x.flatten(1)).squeeze(1)

    G, D = env.init(Generator()), env.init(Discriminator())
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_d = torch.optim.Adam(D.parameters(), lr=4e-4, betas=(0.0, 0.9))
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 8), torch.linspace(-1, 1, 8), indexing="ij")
    centres = env.rand(16, 2) - 0.5
    real = torch.tanh(3 * (0.5 - ((yy - centres[:, :1, None]) ** 2 +
                                  (xx - centres[:, 1:, None]) ** 2).sqrt())).unsqueeze(1)
    fixed_z = env.randn(4, zdim)

    def d_step(x_real):
        z = torch.randn(x_real.size(0), zdim)
        with torch.no_grad():
            fake = G(z)
        d_loss = F.relu(1.0 - D(x_real)).mean() + F.relu(1.0 + D(fake)).mean()
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        return d_loss.item()

    def g_step(n):
        z = torch.randn(n, zdim)
        g_loss = -D(G(z)).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        return g_loss.item(), G.attn.gamma.detach().clone()

    d_step, g_step = env.step(d_step), env.step(g_step)
    for it in range(4):
        b = (it * 8) % 16
        env.rec(f"d {it}", d_step(real[b:b + 8]))
        env.rec(f"g {it}", g_step(8))
    env.rec("G", dict(G.state_dict()))
    env.rec("D", dict(D.state_dict()))
    G.eval()
    with torch.no_grad():
        env.rec("samples", G(fixed_z))
