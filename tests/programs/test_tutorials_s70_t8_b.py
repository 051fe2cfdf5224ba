"""Stop 70 (t8), file b: set, pointer and metric-learning programs from blog posts and paper
re-implementations, run with PyTorch, with llgrad eagerly and with llgrad compiling the
training step through tutorial_harness.py.

- Deep Sets (Zaheer et al., the "sum of digits" blog demo): variable-size sets padded to a
  batch with a 0/1 mask, phi applied per element, masked sum pooling, rho on the sum;
- a Pointer Network sorting numbers (Vinyals et al. re-implementations): an LSTM encoder,
  an LSTMCell decoder fed the pointed-at input (teacher forcing through torch.gather), the
  already-pointed positions masked with masked_fill(-inf) kept by scatter over a bool mask;
- Prototypical Networks (few-shot learning tutorials): N-way K-shot episodes cut from a
  tensor by index lists, prototypes by mean over the shots, logits -cdist(...)**2,
  log_softmax and accuracy per episode;
- a soft decision tree (Frosst & Hinton re-implementations): inner-node routing
  probabilities from one Linear, path probabilities built level by level with
  repeat_interleave and cat, leaf softmax distributions, the tree's mixture log-loss."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def deep_sets(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class DeepSet(nn.Module):
        def __init__(self, d_in=3, d_hid=16):
            super().__init__()
            self.phi = nn.Sequential(nn.Linear(d_in, d_hid), nn.ReLU(), nn.Linear(d_hid, d_hid))
            self.rho = nn.Sequential(nn.Linear(d_hid, d_hid), nn.ReLU(), nn.Linear(d_hid, 1))

        def forward(self, x, mask):
            h = self.phi(x)                                  # (B, N, H)
            h = (h * mask.unsqueeze(-1)).sum(dim=1)          # masked sum pooling
            return self.rho(h).squeeze(-1)

    lengths = [env.choice(6) + 2 for _ in range(24)]
    max_len = max(lengths)
    elems = env.randn(24, max_len, 3)
    mask = torch.zeros(24, max_len)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
    target = (elems[..., 0] * mask).sum(1) + (elems[..., 1] * mask).max(1).values

    model = env.init(DeepSet())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x, m, t):
        pred = model(x, m)
        loss = F.mse_loss(pred, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    losses = []
    for epoch in range(4):
        for i in range(0, 24, 8):
            losses.append(step(elems[i:i + 8], mask[i:i + 8], target[i:i + 8]).item())
    env.rec("losses", losses)
    env.rec("params", dict(model.state_dict()))
    with torch.no_grad():   # permutation invariance of the trained model
        perm = torch.tensor([2, 0, 1] + list(range(3, max_len)))
        env.rec("permuted", model(elems[:, perm], mask[:, perm]) - model(elems, mask))


def pointer_network(torch, env):
    nn, F = torch.nn, torch.nn.functional
    seq_len, hidden = 5, 16

    class PointerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(1, hidden)
            self.encoder = nn.LSTM(hidden, hidden, batch_first=True)
            self.decoder = nn.LSTMCell(hidden, hidden)
            self.W1 = nn.Linear(hidden, hidden, bias=False)
            self.W2 = nn.Linear(hidden, hidden, bias=False)
            self.v = nn.Linear(hidden, 1, bias=False)
            self.start = nn.Parameter(torch.zeros(hidden))

        def forward(self, x, targets):
            B = x.size(0)
            emb = self.embed(x.unsqueeze(-1))                 # (B, L, H)
            enc, (h, c) = self.encoder(emb)
            h, c = h[0], c[0]
            dec_in = self.start.unsqueeze(0).expand(B, -1)
            mask = torch.zeros(B, seq_len, dtype=torch.bool)
            all_logits = []
            enc_proj = self.W1(enc)
            for t in range(seq_len):
                h, c = self.decoder(dec_in, (h, c))
                scores = self.v(torch.tanh(enc_proj + self.W2(h).unsqueeze(1))).squeeze(-1)
                scores = scores.masked_fill(mask, float("-inf"))
                all_logits.append(scores)
                idx = targets[:, t]                           # teacher forcing
                mask = mask.scatter(1, idx.unsqueeze(1), True)
                dec_in = torch.gather(emb, 1, idx.view(B, 1, 1).expand(B, 1, hidden)).squeeze(1)
            return torch.stack(all_logits, dim=1)             # (B, L, L)

    model = env.init(PointerNet())
    # (eps 1e-6: some decoder gradients are 1e-11, where Adam's default eps turns the last
    # bit of a float32 sum into a visible step)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-6)
    xs = env.rand(32, seq_len)
    ys = torch.argsort(xs, dim=1)

    def train_step(x, y):
        logits = model(x, y)
        loss = F.cross_entropy(logits.reshape(-1, seq_len), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        acc = (logits.argmax(-1) == y).float().mean()
        return loss.detach(), acc

    step = env.step(train_step)
    losses, accs = [], []
    for epoch in range(3):
        for i in range(0, 32, 16):
            loss, acc = step(xs[i:i + 16], ys[i:i + 16])
            losses.append(loss.item())
            accs.append(acc.item())
    env.rec("losses", losses)
    env.rec("accs", accs)
    env.rec("params", dict(model.state_dict()))
    env.rec("start grad", model.start.grad)


def prototypical_networks(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_classes, per_class, dim = 8, 6, 10
    centers = env.randn(n_classes, dim, scale=2.0)
    data = centers.repeat_interleave(per_class, 0) + env.randn(n_classes * per_class, dim)
    labels = torch.arange(n_classes).repeat_interleave(per_class)

    # (no biases: one before BatchNorm and one under translation-invariant distances get
    # gradients that are zero up to rounding, which Adam turns into steps of either sign)
    encoder = env.init(nn.Sequential(nn.Linear(dim, 32, bias=False), nn.BatchNorm1d(32),
                                     nn.ReLU(), nn.Linear(32, 16, bias=False)))
    opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    n_way, k_shot, n_query = 3, 2, 3

    def make_episode():
        classes = [env.choice(n_classes) for _ in range(n_way)]
        while len(set(classes)) < n_way:
            classes = [env.choice(n_classes) for _ in range(n_way)]
        support, query = [], []
        for c in classes:
            idx = [c * per_class + j for j in range(per_class)]
            shift = env.choice(per_class)
            idx = idx[shift:] + idx[:shift]
            support.append(data[idx[:k_shot]])
            query.append(data[idx[k_shot:k_shot + n_query]])
        return torch.cat(support), torch.cat(query)

    def train_step(support, query, query_labels):
        encoder.train()
        z = encoder(torch.cat([support, query]))
        z_support, z_query = z[:n_way * k_shot], z[n_way * k_shot:]
        prototypes = z_support.view(n_way, k_shot, -1).mean(1)
        dists = torch.cdist(z_query, prototypes) ** 2
        log_p = F.log_softmax(-dists, dim=1)
        loss = F.nll_loss(log_p, query_labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (log_p.argmax(1) == query_labels).float().mean()
        return loss, acc

    step = env.step(train_step)
    query_labels = torch.arange(n_way).repeat_interleave(n_query)
    losses, accs = [], []
    for episode in range(8):
        s, q = make_episode()
        loss, acc = step(s, q, query_labels)
        losses.append(loss.item())
        accs.append(acc.item())
    env.rec("losses", losses)
    env.rec("accs", accs)
    env.rec("params", dict(encoder.state_dict()))
    if env.compiled:
        assert step.n_traces <= 2, step.n_traces


def soft_decision_tree(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class SoftTree(nn.Module):
        def __init__(self, d_in, n_classes, depth=3):
            super().__init__()
            self.depth = depth
            self.n_inner, self.n_leaf = 2 ** depth - 1, 2 ** depth
            self.inner = nn.Linear(d_in, self.n_inner)
            self.beta = nn.Parameter(torch.ones(1))
            self.leaves = nn.Parameter(torch.zeros(self.n_leaf, n_classes))

        def forward(self, x):
            route = torch.sigmoid(self.beta * self.inner(x))      # (B, n_inner)
            path = torch.ones(x.size(0), 1)
            begin = 0
            for level in range(self.depth):
                width = 2 ** level
                p = route[:, begin:begin + width]                 # this level's nodes
                path = path.repeat_interleave(2, dim=1)
                both = torch.stack([p, 1 - p], dim=2).view(x.size(0), 2 * width)
                path = path * both
                begin += width
            return path, F.softmax(self.leaves, dim=1)

    model = env.init(SoftTree(4, 3))
    with torch.no_grad():
        model.leaves.copy_(env.randn(8, 3, scale=0.1))
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.9)
    X, y = env.randn(36, 4), env.randint(0, 3, (36,))

    def train_step(x, t):
        path, leaf_dist = model(x)
        probs = path @ leaf_dist                                 # mixture over leaves
        loss = -torch.log(probs.gather(1, t.unsqueeze(1)) + 1e-8).mean()
        penalty = (path.mean(0) - 1.0 / model.n_leaf).pow(2).sum()
        total = loss + 0.1 * penalty
        opt.zero_grad()
        total.backward()
        opt.step()
        return loss, path.sum(1).mean()

    step = env.step(train_step)
    losses, mass = [], []
    for epoch in range(5):
        for i in range(0, 36, 12):
            loss, m = step(X[i:i + 12], y[i:i + 12])
            losses.append(loss.item())
            mass.append(m.item())
    env.rec("losses", losses)
    env.rec("path mass", mass)
    env.rec("params", dict(model.state_dict()))
    env.rec("beta grad", model.beta.grad)


PROGRAMS = {"deep_sets": deep_sets, "pointer_network": pointer_network,
            "prototypical_networks": prototypical_networks,
            "soft_decision_tree": soft_decision_tree}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
