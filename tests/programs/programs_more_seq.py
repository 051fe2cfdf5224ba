"""Embedding, sequence and graph programs: word2vec skip-gram with negative sampling
(Embedding, bmm, logsigmoid), an LSTM time-series forecaster (sliding windows, MSE,
teacher forcing), a graph network passing messages with index_add_ / scatter_add_ over a
dense normalised adjacency, nn.Embedding(padding_idx=..., max_norm=...) in a bag-of-words
classifier, and CrossEntropyLoss with label smoothing, class weights and ignore_index.
Programs `f(torch, env)`, see tutorial_harness.py."""


def word2vec(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    vocab, dim, n_neg = 20, 8, 4

    class SkipGram(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_embed = nn.Embedding(vocab, dim)
            self.out_embed = nn.Embedding(vocab, dim)

        def forward(self, center, context, negatives):
            v = self.in_embed(center).unsqueeze(2)                  # (B, D, 1)
            u = self.out_embed(context).unsqueeze(1)                # (B, 1, D)
            neg = self.out_embed(negatives)                         # (B, K, D)
            pos_score = torch.bmm(u, v).squeeze()                   # (B,)
            neg_score = torch.bmm(neg.neg(), v).squeeze(2)          # (B, K)
            loss = -(F.logsigmoid(pos_score) + F.logsigmoid(neg_score).sum(1))
            return loss.mean()

    model = env.init(SkipGram())
    optimizer = optim.Adam(model.parameters(), lr=0.05)

    corpus = env.randint(0, vocab, (40,)).tolist()
    window = 2
    pairs = [(corpus[i], corpus[j]) for i in range(len(corpus))
             for j in range(max(0, i - window), min(len(corpus), i + window + 1)) if i != j]
    centers = torch.tensor([p[0] for p in pairs])
    contexts = torch.tensor([p[1] for p in pairs])
    counts = torch.bincount(torch.tensor(corpus), minlength=vocab).float()
    noise_dist = counts.pow(0.75) / counts.pow(0.75).sum()
    env.rec("noise_dist", noise_dist)

    def train_step(c, o, neg):
        optimizer.zero_grad()
        loss = model(c, o, neg)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    B = 16
    for i in range(4):
        sl = slice(i * B, (i + 1) * B)
        neg = env.randint(0, vocab, (B, n_neg))
        env.rec(f"loss {i}", train_step(centers[sl], contexts[sl], neg))
    emb = model.in_embed.weight.detach()
    normed = F.normalize(emb, dim=1)
    sims = normed @ normed[:3].t()
    env.rec("similar", sims.topk(3, dim=0).indices)
    env.rec("embed", emb)
    # negatives drawn from the noise distribution with the library's own generator
    neg = torch.multinomial(noise_dist, B * n_neg, replacement=True).view(B, n_neg)
    env.rec("rand loss", train_step(centers[:B], contexts[:B], neg), cross=False)


def lstm_forecaster(torch, env):
    nn, optim = torch.nn, torch.optim

    class Forecaster(nn.Module):
        def __init__(self, hidden=8):
            super().__init__()
            self.lstm = nn.LSTM(1, hidden, num_layers=2, batch_first=True)
            self.cell = nn.LSTMCell(1, hidden)
            self.fc = nn.Linear(hidden, 1)

        def forward(self, window, target=None, horizon=3, teacher_forcing=True):
            out, (h, c) = self.lstm(window)
            y = self.fc(out[:, -1])
            hx, cx = h[-1], c[-1]
            preds = [y]
            for t in range(1, horizon):
                inp = target[:, t - 1] if teacher_forcing and target is not None else y
                hx, cx = self.cell(inp, (hx, cx))
                y = self.fc(hx)
                preds.append(y)
            return torch.stack(preds, dim=1)

    t = torch.arange(0, 60, dtype=torch.float32) * 0.3
    series = torch.sin(t) + 0.5 * torch.cos(0.5 * t)
    seq_len, horizon = 8, 3
    windows = series.unfold(0, seq_len + horizon, 2)          # sliding windows
    x = windows[:, :seq_len].unsqueeze(-1)
    y = windows[:, seq_len:].unsqueeze(-1)
    env.rec("windows", (x.shape, y.shape))

    model = env.init(Forecaster())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.MSELoss()

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        pred = model(x, y, horizon)
        loss = criterion(pred, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    for epoch in range(2):
        for i in range(0, x.shape[0], 8):
            env.rec(f"loss {epoch} {i}", train_step(x[i:i + 8], y[i:i + 8]))
    model.eval()
    with torch.no_grad():
        pred = model(x[:4], horizon=horizon, teacher_forcing=False)
        env.rec("free running", (pred, criterion(pred, y[:4])))
    env.rec("state", model.state_dict())


def gnn(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_nodes, n_feat, n_cls = 10, 5, 3
    src = env.randint(0, n_nodes, (24,))
    dst = env.randint(0, n_nodes, (24,))
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    loops = torch.arange(n_nodes)
    edge_index = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
    x = env.randn(n_nodes, n_feat)
    labels = env.randint(0, n_cls, (n_nodes,))
    train_mask = torch.zeros(n_nodes, dtype=torch.bool)
    train_mask[:6] = True

    # degree normalisation and a dense normalised adjacency
    row, col = edge_index
    deg = torch.zeros(n_nodes).scatter_add_(0, col, torch.ones(col.size(0)))
    norm = deg.pow(-0.5)[row] * deg.pow(-0.5)[col]
    adj = torch.zeros(n_nodes, n_nodes)
    adj.index_put_((col, row), norm, accumulate=True)
    env.rec("graph", (deg, norm, adj))

    class GCNLayer(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.lin = nn.Linear(cin, cout, bias=False)
            self.bias = nn.Parameter(torch.zeros(cout))

        def forward(self, x, edge_index, norm):
            h = self.lin(x)
            row, col = edge_index
            msg = h[row] * norm.view(-1, 1)
            out = torch.zeros_like(h).index_add_(0, col, msg)
            return out + self.bias

    class SAGELayer(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.lin_self = nn.Linear(cin, cout)
            self.lin_neigh = nn.Linear(cin, cout)

        def forward(self, x, edge_index):
            row, col = edge_index
            idx = col.view(-1, 1).expand(-1, x.size(1))
            agg = torch.zeros_like(x).scatter_add_(0, idx, x[row])
            cnt = torch.zeros(x.size(0)).scatter_add_(0, col, torch.ones(col.size(0)))
            agg = agg / cnt.clamp(min=1).unsqueeze(1)
            return self.lin_self(x) + self.lin_neigh(agg)

    class GNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNLayer(n_feat, 8)
            self.conv2 = SAGELayer(8, 8)
            self.out = nn.Linear(8, n_cls)

        def forward(self, x, edge_index, norm, adj):
            h = F.relu(self.conv1(x, edge_index, norm))
            h = F.relu(self.conv2(h, edge_index))
            h = h + adj @ h                       # dense propagation
            return self.out(h)

    model = env.init(GNN())
    optimizer = optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)

    def train_step(x, edge_index, norm, adj):
        model.train()
        optimizer.zero_grad()
        out = model(x, edge_index, norm, adj)
        loss = F.cross_entropy(out[train_mask], labels[train_mask])
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss {i}", train_step(x, edge_index, norm, adj))
    model.eval()
    with torch.no_grad():
        pred = model(x, edge_index, norm, adj).argmax(dim=1)
        acc = (pred[~train_mask] == labels[~train_mask]).float().mean()
    env.rec("eval", (pred, acc))
    env.rec("state", model.state_dict())


def embedding_padding_max_norm(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    vocab, pad = 12, 0

    class BagClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, 6, padding_idx=pad, max_norm=1.0)
            self.fc = nn.Linear(6, 2)

        def forward(self, tokens):
            e = self.emb(tokens)                                   # (B, T, D)
            mask = (tokens != pad).unsqueeze(-1).float()
            return self.fc((e * mask).sum(1) / mask.sum(1).clamp(min=1))

    model = env.init(BagClassifier())
    env.rec("init pad row", model.emb.weight[pad])
    optimizer = optim.SGD(model.parameters(), lr=0.5)
    tokens = env.randint(1, vocab, (6, 5))
    tokens[:, 3:] = pad
    tokens[0, 1:] = pad
    y = env.randint(0, 2, (6,))

    def train_step(tokens, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens), y)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    for i in range(3):
        env.rec(f"loss {i}", train_step(tokens, y))
        env.rec(f"pad grad {i}", model.emb.weight.grad[pad])
        env.rec(f"weight {i}", model.emb.weight)
    env.rec("norms", model.emb.weight.norm(dim=1))
    # functional form with max_norm renormalises the given weight in place
    w = model.emb.weight.detach().clone() * 3
    out = F.embedding(torch.tensor([[1, 2], [2, 0]]), w, padding_idx=0, max_norm=2.0,
                      norm_type=1.0)
    env.rec("functional", (out, w))


def label_smoothing_ce(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_cls = 5
    weight = torch.tensor([1.0, 2.0, 0.5, 1.5, 1.0])
    model = env.init(nn.Sequential(nn.Linear(7, 16), nn.GELU(), nn.Linear(16, n_cls)))
    criteria = {
        "smooth": nn.CrossEntropyLoss(label_smoothing=0.1),
        "smooth_weight": nn.CrossEntropyLoss(weight=weight, label_smoothing=0.2),
        "smooth_weight_ignore": nn.CrossEntropyLoss(weight=weight, ignore_index=-100,
                                                    label_smoothing=0.15),
        "ignore_sum": nn.CrossEntropyLoss(ignore_index=2, reduction="sum",
                                          label_smoothing=0.1),
        "none": nn.CrossEntropyLoss(weight=weight, ignore_index=1, reduction="none",
                                    label_smoothing=0.3),
    }
    optimizer = optim.AdamW(model.parameters(), lr=1e-2)
    x = env.randn(10, 7)
    y = env.randint(0, n_cls, (10,))
    y_ign = y.clone()
    y_ign[[1, 4]] = -100
    probs = F.softmax(env.randn(10, n_cls), dim=1)

    def train_step(x, y, y_ign, probs):
        optimizer.zero_grad()
        out = model(x)
        losses = [criteria["smooth"](out, y), criteria["smooth_weight"](out, y),
                  criteria["smooth_weight_ignore"](out, y_ign),
                  criteria["ignore_sum"](out, y) / 10,
                  criteria["none"](out, y).mean(),
                  F.cross_entropy(out, probs, label_smoothing=0.1)]
        loss = sum(losses)
        loss.backward()
        optimizer.step()
        return [l.detach() for l in losses]

    train_step = env.step(train_step)
    for i in range(3):
        env.rec(f"losses {i}", train_step(x, y, y_ign, probs))
    env.rec("state", model.state_dict())
    # 3-D input (N, C, d) with ignore_index and smoothing
    out = model(x).view(2, 5, n_cls).transpose(1, 2)
    tgt = y.view(2, 5).clone()
    tgt[0, 0] = -100
    loss = F.cross_entropy(out, tgt, weight=weight, label_smoothing=0.25)
    loss.backward()
    env.rec("nd loss", (loss, model[0].weight.grad))
