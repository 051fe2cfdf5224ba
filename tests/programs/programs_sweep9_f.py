"""Tutorial programs on losses and layers that blog posts build by hand (seeded with
torch.manual_seed, modules built by their constructors; see tutorial_harness.py): sliced
score matching (random projections, a Jacobian-vector product by autograd.grad with
create_graph), BPR for implicit feedback (logsigmoid of score differences), CORAL ordinal
regression (shared weights, rank thresholds, cumulative targets), a tied-weight
autoencoder (F.linear with the encoder's weight transposed), multi-head attention with a
key padding mask and per-head weights, a DataLoader epoch whose last batch is smaller."""


def sliced_score_matching(torch, env):
    """Sliced score matching (Song et al.): for random projections v, the loss
    v^T (ds/dx) v + 0.5 (v^T s)^2 with the Jacobian-vector product from
    autograd.grad((s * v).sum(), x, create_graph=True); the projections drawn with randn
    inside the step."""
    nn = torch.nn
    torch.manual_seed(0)
    score = nn.Sequential(nn.Linear(2, 16), nn.Softplus(), nn.Linear(16, 2))
    opt = torch.optim.Adam(score.parameters(), lr=1e-3)
    data = torch.randn(16, 2) * 0.5 + 1.0

    def train_step(x):
        x = x.clone().requires_grad_(True)
        v = torch.randn_like(x)
        s = score(x)
        sv = (s * v).sum()
        (gv,) = torch.autograd.grad(sv, x, create_graph=True)
        loss = ((gv * v).sum(-1) + 0.5 * (s * v).sum(-1) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(data) for _ in range(5)])
    env.rec("params", list(score.parameters()))


def bpr_implicit_feedback(torch, env):
    """Bayesian personalised ranking: user and item embeddings, a positive and a sampled
    negative item per interaction, the loss -logsigmoid(x_ui - x_uj) plus L2 on the
    embeddings used; sparse-looking updates through Embedding's dense gradient."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class BPR(nn.Module):
        def __init__(self, n_users=6, n_items=10, d=4):
            super().__init__()
            self.user = nn.Embedding(n_users, d)
            self.item = nn.Embedding(n_items, d)
            nn.init.normal_(self.user.weight, std=0.1)
            nn.init.normal_(self.item.weight, std=0.1)

        def forward(self, u, i, j):
            pu, qi, qj = self.user(u), self.item(i), self.item(j)
            x_uij = (pu * qi).sum(-1) - (pu * qj).sum(-1)
            reg = pu.norm(dim=-1).pow(2) + qi.norm(dim=-1).pow(2) + qj.norm(dim=-1).pow(2)
            return -F.logsigmoid(x_uij).mean(), reg.mean()

    model = BPR()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    u = torch.randint(0, 6, (12,))
    i = torch.randint(0, 10, (12,))
    j = torch.randint(0, 10, (12,))

    def train_step(u, i, j):
        opt.zero_grad()
        loss, reg = model(u, i, j)
        (loss + 1e-3 * reg).backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(u, i, j) for _ in range(5)])
    with torch.no_grad():
        scores = model.user.weight @ model.item.weight.t()
        env.rec("top3", scores.topk(3, dim=1).indices)
    env.rec("params", list(model.parameters()))


def coral_ordinal(torch, env):
    """CORAL ordinal regression (Cao et al.): one shared weight vector, K-1 rank biases,
    targets levels[i, k] = (y_i > k), the loss of binary cross entropies through
    logsigmoid; predictions as the count of probabilities above 0.5."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    K = 5

    class CoralNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            self.fc = nn.Linear(8, 1, bias=False)
            self.linear_1_bias = nn.Parameter(torch.zeros(K - 1).float())

        def forward(self, x):
            logits = self.fc(self.features(x)) + self.linear_1_bias
            return logits, torch.sigmoid(logits)

    def levels_from_labels(y):
        return (y.unsqueeze(1) > torch.arange(K - 1).unsqueeze(0)).float()

    def coral_loss(logits, levels):
        val = -torch.sum(F.logsigmoid(logits) * levels
                         + (F.logsigmoid(logits) - logits) * (1 - levels), dim=1)
        return torch.mean(val)

    model = CoralNet()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(12, 4), torch.randint(0, K, (12,))

    def train_step(x, y):
        opt.zero_grad()
        logits, probas = model(x)
        loss = coral_loss(logits, levels_from_labels(y))
        loss.backward()
        opt.step()
        predicted = (probas > 0.5).sum(dim=1)
        return loss.item(), (predicted - y).abs().float().mean().item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(5)])
    env.rec("params", list(model.parameters()))


def tied_autoencoder(torch, env):
    """An autoencoder with tied weights: the decoder is F.linear(h, self.encoder.weight.t(),
    self.dec_bias); a KL sparsity penalty on the mean activations (rho log rho/rho_hat
    ...)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class TiedAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(8, 4)
            self.dec_bias = nn.Parameter(torch.zeros(8))

        def forward(self, x):
            h = torch.sigmoid(self.encoder(x))
            return F.linear(h, self.encoder.weight.t(), self.dec_bias), h

    model = TiedAE()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.rand(10, 8)
    rho = 0.1

    def train_step(x):
        opt.zero_grad()
        recon, h = model(x)
        rho_hat = h.mean(0)
        kl = (rho * torch.log(rho / rho_hat)
              + (1 - rho) * torch.log((1 - rho) / (1 - rho_hat))).sum()
        loss = F.mse_loss(recon, x) + 0.1 * kl
        loss.backward()
        opt.step()
        return loss.item(), kl.item()

    step = env.step(train_step)
    env.rec("hist", [step(x) for _ in range(5)])
    env.rec("params", list(model.parameters()))


def mha_key_padding(torch, env):
    """nn.MultiheadAttention (batch_first) over padded sequences: key_padding_mask from the
    lengths, need_weights=True with average_attn_weights=False (per-head weights), a masked
    mean pool of the outputs, classification; the attention weights at padded keys are 0."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8, padding_idx=0)
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.norm = nn.LayerNorm(8)
            self.out = nn.Linear(8, 3)

        def forward(self, tokens, pad_mask):
            h = self.emb(tokens)
            a, w = self.attn(h, h, h, key_padding_mask=pad_mask, need_weights=True,
                             average_attn_weights=False)
            h = self.norm(h + a)
            keep = (~pad_mask).unsqueeze(-1).float()
            return self.out((h * keep).sum(1) / keep.sum(1)), w

    model = Classifier()
    # (SGD: the key projection's bias has a zero gradient (softmax ignores a shift shared by
    # all keys), rounding noise that Adam would scale up to steps of lr)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    lengths = torch.tensor([5, 3, 4, 2])
    pad_mask = torch.arange(5).unsqueeze(0) >= lengths.unsqueeze(1)
    tokens = torch.randint(1, 20, (4, 5)).masked_fill(pad_mask, 0)
    y = torch.randint(0, 3, (4,))

    def train_step(tokens, pad_mask, y):
        opt.zero_grad()
        logits, w = model(tokens, pad_mask)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss.item(), w.detach()

    step = env.step(train_step)
    hist = [step(tokens, pad_mask, y) for _ in range(4)]
    env.rec("hist", hist)
    env.rec("padded weights", hist[-1][1][1, :, :, 3:].abs().max().item())
    env.rec("params", list(model.parameters()))


def ragged_last_batch_loader(torch, env):
    """The standard epoch loop over a DataLoader(shuffle=True) of 21 samples in batches of 8
    (the last holds 5): the epoch loss as sum(loss.item() * batch size) / len(dataset), an
    accuracy count, a StepLR per epoch; the shuffle orders are torch's."""
    nn, F = torch.nn, torch.nn.functional
    from_data = torch.utils.data
    torch.manual_seed(0)
    X, Y = torch.randn(21, 4), torch.randint(0, 3, (21,))
    ds = from_data.TensorDataset(X, Y)
    loader = from_data.DataLoader(ds, batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)

    def train_step(xb, yb):
        opt.zero_grad()
        out = model(xb)
        loss = F.cross_entropy(out, yb)
        loss.backward()
        opt.step()
        return loss.item(), (out.argmax(1) == yb).sum().item()

    step = env.step(train_step)
    log = []
    for epoch in range(3):
        running, correct, sizes = 0.0, 0, []
        for xb, yb in loader:
            loss, c = step(xb, yb)
            running += loss * xb.size(0)
            correct += c
            sizes.append(xb.size(0))
        sched.step()
        log.append((running / len(ds), correct, sizes))
    env.rec("log", log)
    env.rec("params", list(model.parameters()))
