"""Programs of common kinds: a categorical VAE with Gumbel-softmax latents (F.gumbel_softmax
with hard=True and temperature annealing, a KL to the uniform prior); a set transformer
over padded sets (nn.MultiheadAttention with key_padding_mask, pooling by attention with a
learned seed); a multi-label classifier (BCEWithLogitsLoss, sigmoid thresholds, micro and
macro F1 from torch ops, top-k labels). Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def gumbel_vae(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    latent_dim, categorical_dim = 4, 3

    class VAE_gumbel(nn.Module):
        def __init__(self):
            super(VAE_gumbel, self).__init__()
            self.fc1 = nn.Linear(16, 32)
            self.fc2 = nn.Linear(32, latent_dim * categorical_dim)
            self.fc3 = nn.Linear(latent_dim * categorical_dim, 32)
            self.fc4 = nn.Linear(32, 16)
            self.relu = nn.ReLU()
            self.sigmoid = nn.Sigmoid()

        def encode(self, x):
            return self.fc2(self.relu(self.fc1(x)))

        def decode(self, z):
            return self.sigmoid(self.fc4(self.relu(self.fc3(z))))

        def forward(self, x, temp, hard):
            q = self.encode(x.view(-1, 16))
            q_y = q.view(q.size(0), latent_dim, categorical_dim)
            z = F.gumbel_softmax(q_y, tau=temp, hard=hard)
            return self.decode(z.view(-1, latent_dim * categorical_dim)), \
                F.softmax(q_y, dim=-1).reshape(*q.size())

    def loss_function(recon_x, x, qy):
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, 16), reduction="sum") / x.shape[0]
        log_ratio = torch.log(qy * categorical_dim + 1e-20)
        KLD = torch.sum(qy * log_ratio, dim=-1).mean()
        return BCE + KLD

    model = env.init(VAE_gumbel())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    data = (env.rand(32, 16) > 0.5).float()

    def train_step(data, temp, hard):
        model.train()
        optimizer.zero_grad()
        recon_batch, qy = model(data, temp, hard)
        loss = loss_function(recon_batch, data, qy)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    temp, anneal_rate, temp_min = 1.0, 0.3, 0.5
    for epoch in range(3):
        for start in range(0, 32, 16):
            env.rec(f"loss {epoch} {start}", train_step(data[start:start + 16], temp, True),
                    cross=False)
        temp = max(temp * math.exp(-anneal_rate * (epoch + 1)), temp_min)
    model.eval()
    with torch.no_grad():
        q = model.encode(data[:4]).view(4, latent_dim, categorical_dim)
        z = F.one_hot(q.argmax(-1), categorical_dim).float().view(4, -1)
        env.rec("decoded", model.decode(z), cross=False)
    env.rec("state", model.state_dict(), cross=False)


def set_transformer(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    D = 16

    class MAB(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, num_heads, batch_first=True)
            self.ln0, self.ln1 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.ff = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))

        def forward(self, Q, K, key_padding_mask=None):
            H, _ = self.attn(Q, K, K, key_padding_mask=key_padding_mask, need_weights=False)
            H = self.ln0(Q + H)
            return self.ln1(H + self.ff(H))

    class PMA(nn.Module):
        def __init__(self, dim, num_heads, num_seeds):
            super().__init__()
            self.S = nn.Parameter(torch.empty(1, num_seeds, dim))
            nn.init.xavier_uniform_(self.S)
            self.mab = MAB(dim, num_heads)

        def forward(self, X, key_padding_mask):
            return self.mab(self.S.repeat(X.size(0), 1, 1), X, key_padding_mask)

    class SetTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(2, D)
            self.sab = MAB(D, 2)
            self.pool = PMA(D, 2, 1)
            self.head = nn.Linear(D, 1)

        def forward(self, X, mask):
            h = self.embed(X)
            h = self.sab(h, h, key_padding_mask=mask)
            return self.head(self.pool(h, mask).squeeze(1)).squeeze(-1)

    # target: the largest distance from the origin among a set's points
    def make_sets(n, max_len):
        lengths = env.randint(2, max_len + 1, (n,))
        X = env.randn(n, max_len, 2)
        mask = torch.arange(max_len)[None, :] >= lengths[:, None]      # True: padding
        X = X.masked_fill(mask[..., None], 0.0)
        norms = X.norm(dim=-1).masked_fill(mask, float("-inf"))
        return X, mask, norms.max(dim=1).values

    model = env.init(SetTransformer())
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=6, eta_min=1e-4)
    X, mask, y = make_sets(16, 6)

    def train_step(X, mask, y):
        model.train()
        optimizer.zero_grad()
        loss = F.mse_loss(model(X, mask), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(6):
        env.rec(f"loss {epoch}", train_step(X[epoch % 2::2], mask[epoch % 2::2],
                                            y[epoch % 2::2]))
        scheduler.step()
    model.eval()
    Xt, mt, yt = make_sets(6, 6)
    with torch.no_grad():
        pred = model(Xt, mt)
        # padding must not matter: the same sets with more padding
        Xp = torch.cat([Xt, torch.zeros(6, 2, 2)], dim=1)
        mp = torch.cat([mt, torch.ones(6, 2, dtype=torch.bool)], dim=1)
        env.rec("eval", (pred, F.mse_loss(pred, yt), model(Xp, mp)))


def multilabel(torch, env):
    nn, optim = torch.nn, torch.optim
    n_labels = 5

    model = env.init(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.0),
                                   nn.Linear(32, n_labels)))
    x = env.randn(48, 8)
    w = env.randn(8, n_labels)
    y = ((x @ w) > 0.8).float()
    pos = y[:32].sum(0)
    criterion = nn.BCEWithLogitsLoss(pos_weight=(32 - pos) / pos.clamp(min=1))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def f1_scores(logits, targets, threshold=0.5):
        preds = (torch.sigmoid(logits) > threshold).float()
        tp = (preds * targets).sum(0)
        fp = (preds * (1 - targets)).sum(0)
        fn = ((1 - preds) * targets).sum(0)
        per_label = 2 * tp / (2 * tp + fp + fn).clamp(min=1e-8)
        micro = 2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum()).clamp(min=1e-8)
        return micro, per_label.mean(), per_label

    def train_step(xb, yb):
        model.train()
        optimizer.zero_grad()
        logits = model(xb)
        loss = criterion(logits, yb)
        loss.backward()
        optimizer.step()
        micro, macro, _ = f1_scores(logits.detach(), yb)
        return loss.item(), micro.item(), macro.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        for start in range(0, 32, 16):
            env.rec(f"train {epoch} {start}", train_step(x[start:start + 16],
                                                          y[start:start + 16]))
    model.eval()
    with torch.no_grad():
        logits = model(x[32:])
        env.rec("f1", f1_scores(logits, y[32:]))
        probs = torch.sigmoid(logits)
        top2 = probs.topk(2, dim=1)
        exact = ((probs > 0.5).float() == y[32:]).all(dim=1).float().mean()
        hamming = ((probs > 0.5).float() != y[32:]).float().mean()
    env.rec("eval", (top2.values, top2.indices, exact, hamming))
