"""Tutorial programs on sequence models and training tricks, written as blog posts write
them (seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): contrastive predictive coding (GRU context, InfoNCE per offset), a
minGRU trained with its log-space parallel scan (logcumsumexp), a Luong-attention decoder
with scheduled sampling decided by torch.rand, AWD-LSTM regularisation (embedding dropout,
locked dropout, AR / TAR, ASGD), sharpness-aware minimisation (two passes per step),
post-hoc temperature scaling with LBFGS plus conformal prediction sets."""
import math


def cpc_infonce_gru(torch, env):
    """Contrastive predictive coding on 1-D sequences: a strided Conv1d encoder gives
    z_t, an nn.GRU (batch_first) summarises c_t, one linear predictor W_k per offset k
    scores every z_{t+k} in the batch (a B x B matrix), InfoNCE is cross entropy against
    torch.arange(B); the prediction accuracy per offset is logged."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    B, D, K = 6, 8, 2

    class CPC(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv1d(1, D, 4, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv1d(D, D, 3, padding=1))
            self.gru = nn.GRU(D, D, batch_first=True)
            self.W = nn.ModuleList([nn.Linear(D, D, bias=False) for _ in range(K)])

        def forward(self, x, t=3):
            z = self.enc(x).transpose(1, 2)
            c, _ = self.gru(z[:, :t + 1])
            ct = c[:, -1]
            losses, accs = [], []
            for k in range(1, K + 1):
                logits = z[:, t + k] @ self.W[k - 1](ct).t()
                labels = torch.arange(x.shape[0])
                losses.append(F.cross_entropy(logits, labels))
                accs.append((logits.argmax(1) == labels).float().mean())
            return torch.stack(losses).mean(), torch.stack(accs)

    model = CPC()
    t = torch.arange(16.0)
    freqs = torch.linspace(0.2, 1.2, B)
    x = torch.sin(freqs[:, None] * t[None] + torch.rand(B, 1) * 6).unsqueeze(1)
    x = x + 0.05 * torch.randn_like(x)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    def train_step(x):
        opt.zero_grad()
        loss, acc = model(x)
        loss.backward()
        opt.step()
        return loss.item(), [a.item() for a in acc]

    step = env.step(train_step)
    env.rec("hist", [step(x) for _ in range(5)])
    env.rec("params", list(model.parameters()))


def mingru_logspace_scan(torch, env):
    """minGRU (Feng et al.): h_t = (1 - z_t) h_{t-1} + z_t h~_t computed in parallel in log
    space: log z = -softplus(-k), log(1 - z) = -softplus(k), a_star = cumsum of log(1 - z),
    h = exp(a_star + logcumsumexp(log z + log g(h~) - a_star)) with g(x) = x + 0.5 for
    x >= 0 else sigmoid(x) (torch.where); checked against the sequential loop; trained on
    a running-mean task."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    def log_g(x):
        return torch.where(x >= 0, torch.log(F.relu(x) + 0.5), -F.softplus(-x))

    class MinGRU(nn.Module):
        def __init__(self, d_in, d):
            super().__init__()
            self.to_zh = nn.Linear(d_in, 2 * d)

        def forward(self, x, sequential=False):
            k, h_tilde = self.to_zh(x).chunk(2, dim=-1)
            if sequential:
                z = torch.sigmoid(k)
                g = torch.where(h_tilde >= 0, h_tilde + 0.5, torch.sigmoid(h_tilde))
                h = torch.zeros_like(g[:, 0])
                out = []
                for t in range(x.shape[1]):
                    h = (1 - z[:, t]) * h + z[:, t] * g[:, t]
                    out.append(h)
                return torch.stack(out, 1)
            log_z, log_coeff = -F.softplus(-k), -F.softplus(k)
            a_star = log_coeff.cumsum(dim=1)
            log_h = a_star + torch.logcumsumexp(log_z + log_g(h_tilde) - a_star, dim=1)
            return log_h.exp()

    model = nn.ModuleDict({"rnn": MinGRU(1, 8), "out": nn.Linear(8, 1)})
    x = torch.randn(4, 10, 1)
    y = x.cumsum(1) / torch.arange(1, 11).view(1, -1, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model["out"](model["rnn"](x)), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(6)])
    with torch.no_grad():
        par, seq = model["rnn"](x), model["rnn"](x, sequential=True)
    env.rec("parallel == sequential", torch.allclose(par, seq, rtol=1e-4, atol=1e-5))
    env.rec("h", par)
    env.rec("params", list(model.parameters()))


def scheduled_sampling_luong(torch, env):
    """A GRU encoder-decoder with Luong 'general' attention (score = h_dec W h_enc^T,
    softmax, context concatenated, tanh(W_c [c; h])); scheduled sampling: at each decoder
    step `torch.rand(1).item() < ratio` chooses the gold token or the model's argmax; the
    ratio decays by epoch; the teacher-forced choices are logged."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, E, H, BOS = 8, 6, 10, 0

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.enc = nn.GRU(E, H, batch_first=True)
            self.dec = nn.GRUCell(E, H)
            self.W_a = nn.Linear(H, H, bias=False)
            self.W_c = nn.Linear(2 * H, H)
            self.out = nn.Linear(H, V)

        def forward(self, src, tgt, ratio):
            enc_out, h = self.enc(self.emb(src))
            h = h.squeeze(0)
            inp = torch.full((src.shape[0],), BOS, dtype=torch.long)
            logits, forced = [], []
            for t in range(tgt.shape[1]):
                h = self.dec(self.emb(inp), h)
                scores = torch.bmm(self.W_a(enc_out), h.unsqueeze(2)).squeeze(2)
                attn = F.softmax(scores, dim=1)
                ctx = torch.bmm(attn.unsqueeze(1), enc_out).squeeze(1)
                o = self.out(torch.tanh(self.W_c(torch.cat([ctx, h], 1))))
                logits.append(o)
                teacher = torch.rand(1).item() < ratio
                forced.append(teacher)
                inp = tgt[:, t] if teacher else o.argmax(1)
            return torch.stack(logits, 1), forced

    model = Seq2Seq()
    src = torch.randint(1, V, (4, 5))
    tgt = src.flip(1)[:, :3]
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(src, tgt, ratio):
        model.train()
        opt.zero_grad()
        logits, forced = model(src, tgt, ratio)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item(), forced

    step = env.step(train_step)
    env.rec("hist", [step(src, tgt, max(0.0, 1.0 - 0.25 * epoch)) for epoch in range(6)])
    env.rec("params", list(model.parameters()))


def awd_lstm_regularisation(torch, env):
    """AWD-LSTM's regularisers on a word LM: embedding dropout (a Bernoulli mask over the
    embedding matrix's rows, scaled, used through F.embedding), locked (variational)
    dropout with one mask per sequence shared over time, activation regularisation
    (alpha * h.pow(2).mean()) and temporal AR (beta * (h[1:] - h[:-1]).pow(2).mean()),
    weight tying, truncated BPTT with the hidden state detached between compiled calls,
    torch.optim.ASGD."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, T = 12, 8, 5

    class LockedDropout(nn.Module):
        def forward(self, x, p=0.3):
            if not self.training or p == 0:
                return x
            mask = x.new_empty(1, x.shape[1], x.shape[2]).bernoulli_(1 - p) / (1 - p)
            return x * mask.expand_as(x)

    class AWD(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.lstm = nn.LSTM(D, D)
            self.lockdrop = LockedDropout()
            self.dec = nn.Linear(D, V)
            self.dec.weight = self.emb.weight

        def embedded_dropout(self, words, p=0.1):
            if not self.training:
                return self.emb(words)
            mask = self.emb.weight.new_empty((V, 1)).bernoulli_(1 - p) / (1 - p)
            return F.embedding(words, self.emb.weight * mask)

        def forward(self, words, hidden):
            x = self.lockdrop(self.embedded_dropout(words), 0.2)
            raw, hidden = self.lstm(x, hidden)
            out = self.lockdrop(raw, 0.3)
            return self.dec(out), hidden, raw, out

    model = AWD()
    corpus = torch.randint(0, V, (T * 4 + 1, 3))
    opt = torch.optim.ASGD(model.parameters(), lr=0.5, t0=0, lambd=0.0, weight_decay=1.2e-6)

    def train_step(x, y, hidden):
        model.train()
        hidden = tuple(h.detach() for h in hidden)
        opt.zero_grad()
        logits, hidden, raw, dropped = model(x, hidden)
        loss = F.cross_entropy(logits.view(-1, V), y.reshape(-1))
        ar = 2 * dropped.pow(2).mean()
        tar = 1 * (raw[1:] - raw[:-1]).pow(2).mean()
        (loss + ar + tar).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        return loss.item(), hidden

    step = env.step(train_step)
    hidden = (torch.zeros(1, 3, D), torch.zeros(1, 3, D))
    hist = []
    for _ in range(2):
        for i in range(0, T * 4, T):
            loss, hidden = step(corpus[i:i + T], corpus[i + 1:i + 1 + T], hidden)
            hist.append(loss)
    env.rec("hist", hist)
    env.rec("hidden", hidden)
    env.rec("ax", [opt.state[p]["ax"] for p in model.parameters()])
    env.rec("params", list(model.parameters()))


def sam_optimizer(torch, env):
    """Sharpness-aware minimisation written as a wrapper optimizer (a torch.optim.Optimizer
    subclass holding a base SGD): first_step climbs to w + rho g / ||g|| (saving e_w in
    self.state), the closure recomputes the loss there, second_step restores w and lets
    the base optimizer step with the sharp gradient; BatchNorm in the model."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class SAM(torch.optim.Optimizer):
        def __init__(self, params, base_cls, rho=0.05, **kwargs):
            super().__init__(params, dict(rho=rho, **kwargs))
            self.base = base_cls(self.param_groups, **kwargs)
            self.param_groups = self.base.param_groups

        @torch.no_grad()
        def first_step(self):
            norm = torch.norm(torch.stack([p.grad.norm(p=2) for g in self.param_groups
                                           for p in g["params"] if p.grad is not None]), p=2)
            for g in self.param_groups:
                scale = g["rho"] / (norm + 1e-12)
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    e_w = p.grad * scale
                    p.add_(e_w)
                    self.state[p]["e_w"] = e_w
            self.zero_grad()

        @torch.no_grad()
        def second_step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    if "e_w" in self.state[p]:
                        p.sub_(self.state[p]["e_w"])
            self.base.step()
            self.zero_grad()

    model = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9)
    x = torch.randn(24, 4)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()

    def train_step(x, y):
        model.train()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.first_step()
        F.cross_entropy(model(x), y).backward()
        opt.second_step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(5)])
    env.rec("buffers", list(model.buffers()))
    env.rec("params", list(model.parameters()))


def temperature_scaling_conformal(torch, env):
    """Calibration after training: a classifier trained a few compiled steps, then a
    temperature T = exp(log_t) fitted on held-out logits by torch.optim.LBFGS with a
    closure; the expected calibration error over confidence bins by torch.bucketize; a
    split-conformal threshold from torch.quantile of 1 - p_true gives prediction sets."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    x = torch.randn(60, 4)
    y = (x @ torch.tensor([1.0, -2.0, 0.5, 0.0]) + 0.5 * torch.randn(60) > 0).long()
    y = y + (x[:, 3] > 1).long()
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x[:30], y[:30]) for _ in range(8)])
    with torch.no_grad():
        logits = model(x[30:])
    labels = y[30:]
    log_t = torch.zeros(1, requires_grad=True)
    # (no strong-Wolfe line search and no tolerance_change: their tests near a threshold
    # turn one-ulp differences of the loss into different steps or an earlier stop)
    lbfgs = torch.optim.LBFGS([log_t], lr=0.5, max_iter=10, tolerance_change=0.0)

    def closure():
        lbfgs.zero_grad()
        loss = F.cross_entropy(logits / log_t.exp(), labels)
        loss.backward()
        return loss

    lbfgs.step(closure)
    env.rec("temperature", log_t.exp())
    with torch.no_grad():
        probs = F.softmax(logits / log_t.exp(), dim=1)
        conf, pred = probs.max(1)
        bins = torch.bucketize(conf, torch.linspace(0, 1, 6)[1:-1])
        ece = torch.zeros(())
        for b in range(5):
            sel = bins == b
            if sel.any():
                acc = (pred[sel] == labels[sel]).float().mean()
                ece += sel.float().mean() * (conf[sel].mean() - acc).abs()
        scores = 1 - probs.gather(1, labels[:, None]).squeeze(1)
        n = scores.shape[0]
        q = torch.quantile(scores, min(1.0, math.ceil((n + 1) * 0.9) / n),
                           interpolation="higher")
        sets = probs >= 1 - q
    env.rec("bins", bins)
    env.rec("ece", ece)
    env.rec("q", q)
    env.rec("set sizes", sets.sum(1))
