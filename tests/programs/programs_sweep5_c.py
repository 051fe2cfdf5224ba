"""Programs of common kinds: a ConvLSTM next-frame predictor (a conv cell whose gates come
from one convolution, split by torch.chunk, unrolled over frames); a causal self-attention
LM with rotary position embeddings (RoPE built from torch.outer/cos/sin,
F.scaled_dot_product_attention with is_causal); an importance-weighted autoencoder (IWAE:
k samples per input, logsumexp of the log weights, torch.distributions log-probs); a
hypernetwork that generates the weights of a target network per task (F.linear with
generated weights, torch.func.functional_call). Programs `f(torch, env)`, see
tutorial_harness.py."""
import math


def conv_lstm(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class ConvLSTMCell(nn.Module):
        def __init__(self, in_ch, hid_ch, k=3):
            super().__init__()
            self.hid_ch = hid_ch
            self.conv = nn.Conv2d(in_ch + hid_ch, 4 * hid_ch, k, padding=k // 2)

        def forward(self, x, state):
            h, c = state
            gates = self.conv(torch.cat([x, h], dim=1))
            i, f, o, g = torch.chunk(gates, 4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            return h, c

        def init_hidden(self, b, size):
            return (torch.zeros(b, self.hid_ch, *size), torch.zeros(b, self.hid_ch, *size))

    class Predictor(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = ConvLSTMCell(1, 6)
            self.out = nn.Conv2d(6, 1, 1)

        def forward(self, frames, future):
            b, t, _, hgt, wid = frames.shape
            state = self.cell.init_hidden(b, (hgt, wid))
            for k in range(t):
                state = self.cell(frames[:, k], state)
            preds, x = [], torch.sigmoid(self.out(state[0]))
            for _ in range(future):
                preds.append(x)
                state = self.cell(x, state)
                x = torch.sigmoid(self.out(state[0]))
            return torch.stack(preds, dim=1)

    model = env.init(Predictor())
    optimizer = optim.RMSprop(model.parameters(), lr=3e-3, alpha=0.9)
    # a blob moving one pixel right per frame
    base = torch.zeros(2, 7, 1, 6, 6)
    for k in range(7):
        base[0, k, 0, 2:4, k % 5:k % 5 + 2] = 1.0
        base[1, k, 0, k % 5:k % 5 + 2, 1:3] = 1.0
    frames = (base + 0.05 * env.rand(2, 7, 1, 6, 6)).clamp(0, 1)

    def train_step(seq):
        optimizer.zero_grad()
        pred = model(seq[:, :4], 3)
        loss = F.binary_cross_entropy(pred, seq[:, 4:])
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", train_step(frames))
    with torch.no_grad():
        env.rec("prediction", model(frames[:, :4], 3))


def rope_attention(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    V, D, H, T = 11, 16, 2, 8

    def rope_tables(head_dim, seq_len, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(seq_len).float(), freqs)
        return torch.cos(angles), torch.sin(angles)

    def apply_rope(x, cos, sin):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
        return rotated.flatten(-2)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.RMSNorm(D), nn.RMSNorm(D)
            self.qkv = nn.Linear(D, 3 * D, bias=False)
            self.proj = nn.Linear(D, D, bias=False)
            self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * D, D))

        def forward(self, x, cos, sin):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).split(D, dim=2)
            q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))
            q, k = apply_rope(q, cos[:t], sin[:t]), apply_rope(k, cos[:t], sin[:t])
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, D))
            return x + self.mlp(self.norm2(x))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(D, V, bias=False)
            self.head.weight = self.emb.weight
            cos, sin = rope_tables(D // H, T)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

        def forward(self, idx, targets=None):
            x = self.emb(idx)
            for block in self.blocks:
                x = block(x, self.cos, self.sin)
            logits = self.head(x)
            if targets is None:
                return logits, None
            return logits, F.cross_entropy(logits.view(-1, V), targets.reshape(-1))

    model = env.init(LM())
    env.rec("state keys", list(model.state_dict().keys()))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
    data = env.randint(0, V, (4, T + 1))

    def train_step(x, y):
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item(), norm

    train_step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", train_step(data[:, :-1], data[:, 1:]))
    # greedy continuation, cropping the context as nanoGPT's generate does
    idx = data[:2, :3]
    with torch.no_grad():
        for _ in range(6):
            logits, _ = model(idx[:, -T:])
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    env.rec("generated", idx)


def iwae(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    D = torch.distributions
    x_dim, z_dim, k = 10, 3, 5

    class IWAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(x_dim, 24), nn.Tanh(), nn.Linear(24, 2 * z_dim))
            self.dec = nn.Sequential(nn.Linear(z_dim, 24), nn.Tanh(), nn.Linear(24, x_dim))

        def forward(self, x, eps):
            mu, log_var = self.enc(x).chunk(2, dim=-1)
            std = torch.exp(0.5 * log_var)
            z = mu + std * eps                                  # (k, batch, z_dim)
            log_q = D.Normal(mu, std).log_prob(z).sum(-1)
            log_p_z = D.Normal(torch.zeros_like(z), torch.ones_like(z)).log_prob(z).sum(-1)
            logits = self.dec(z)
            log_p_x = D.Bernoulli(logits=logits).log_prob(x.expand_as(logits)).sum(-1)
            log_w = log_p_x + log_p_z - log_q
            bound = torch.logsumexp(log_w, dim=0) - math.log(eps.size(0))
            # the normalised importance weights, for the effective sample size
            w = F.softmax(log_w, dim=0).detach()
            return bound.mean(), (1.0 / (w ** 2).sum(0)).mean()

    model = env.init(IWAE())
    optimizer = optim.Adam(model.parameters(), lr=3e-3, eps=1e-4)
    data = (env.rand(16, x_dim) > 0.6).float()

    def train_step(x, eps):
        optimizer.zero_grad()
        bound, ess = model(x, eps)
        (-bound).backward()
        optimizer.step()
        return bound.item(), ess

    train_step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", train_step(data, env.randn(k, 16, z_dim)))
    with torch.no_grad():
        elbo, _ = model(data, env.randn(1, 16, z_dim))
        iw, _ = model(data, env.randn(20, 16, z_dim))
    env.rec("bounds", (elbo, iw))


def hypernetwork(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    functional_call = torch.func.functional_call
    n_tasks, emb_dim = 4, 6

    target = env.init(nn.Sequential(nn.Linear(1, 12), nn.Tanh(), nn.Linear(12, 1)))
    shapes = {n: p.shape for n, p in target.named_parameters()}
    sizes = {n: p.numel() for n, p in target.named_parameters()}
    n_weights = sum(sizes.values())

    class HyperNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.task_emb = nn.Embedding(n_tasks, emb_dim)
            self.body = nn.Sequential(nn.Linear(emb_dim, 32), nn.ReLU())
            self.out = nn.Linear(32, n_weights)
            with torch.no_grad():
                self.out.weight.mul_(0.1)

        def forward(self, task):
            flat = self.out(self.body(self.task_emb(task)))
            params, start = {}, 0
            for name, shape in shapes.items():
                params[name] = flat[start:start + sizes[name]].view(shape)
                start += sizes[name]
            return params

    hyper = env.init(HyperNet())
    optimizer = optim.Adam(hyper.parameters(), lr=5e-3)
    x = torch.linspace(-2, 2, 16)[:, None]
    slopes = env.randn(n_tasks)
    ys = [torch.tanh(s * x) for s in slopes]

    def train_step(task_ids):
        optimizer.zero_grad()
        total = 0.0
        for t in task_ids:
            params = hyper(torch.tensor(t))
            pred = functional_call(target, params, (x,))
            # the same net by hand, with F.linear on the generated weights
            h = torch.tanh(F.linear(x, params["0.weight"], params["0.bias"]))
            by_hand = F.linear(h, params["2.weight"], params["2.bias"])
            total = total + F.mse_loss(pred, ys[t]) + 0.0 * (by_hand - pred).abs().sum()
        loss = total / len(task_ids)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", train_step([it % n_tasks, (it + 1) % n_tasks]))
    with torch.no_grad():
        params = hyper(torch.arange(n_tasks)[2])
        env.rec("generated", params)
        env.rec("target untouched", target.state_dict())
