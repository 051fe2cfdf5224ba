"""Programs of common kinds: a PixelCNN (masked convolutions that mask their weights in
forward, a softmax over the intensity levels per pixel, bits per dim, greedy sampling); a
graph attention network (GAT layers with masked attention over an adjacency matrix,
multi-head concat);
an LR range test followed by training with early stopping (ExponentialLR, restoring the
model's and optimiser's state_dicts, keeping the best weights with copy.deepcopy).
Programs `f(torch, env)`, see tutorial_harness.py."""
import copy
import math


def pixelcnn(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    LEVELS = 4                                  # (intensity levels per pixel)

    class MaskedConv2d(nn.Conv2d):
        def __init__(self, mask_type, *args, **kwargs):
            super(MaskedConv2d, self).__init__(*args, **kwargs)
            assert mask_type in {"A", "B"}
            self.register_buffer("mask", self.weight.data.clone())
            _, _, kH, kW = self.weight.size()
            self.mask.fill_(1)
            self.mask[:, :, kH // 2, kW // 2 + (mask_type == "B"):] = 0
            self.mask[:, :, kH // 2 + 1:] = 0

        def forward(self, x):
            self.weight.data *= self.mask
            return super(MaskedConv2d, self).forward(x)

    fm = 8
    net = nn.Sequential(
        MaskedConv2d("A", 1, fm, 5, 1, 2, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        MaskedConv2d("B", fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        MaskedConv2d("B", fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        nn.Conv2d(fm, LEVELS, 1))
    net = env.init(net)
    optimizer = optim.Adam(net.parameters(), lr=1e-2)
    images = (env.rand(16, 1, 6, 6) * LEVELS).floor().clamp(max=LEVELS - 1)
    images[:, :, :, ::2] = images[:, :, :, 1::2]       # (a structure to learn)

    def train_step(x):
        net.train()
        target = x[:, 0].long()
        inp = x / (LEVELS - 1)
        loss = F.cross_entropy(net(inp), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item(), loss.item() / math.log(2)     # nats and bits per dim

    train_step = env.step(train_step)
    for epoch in range(3):
        env.rec(f"loss {epoch}", train_step(images[:8]))
        env.rec(f"loss {epoch} b", train_step(images[8:]))

    net.eval()
    with torch.no_grad():
        sample = torch.zeros(2, 1, 6, 6)
        for i in range(6):
            for j in range(6):
                probs = F.softmax(net(sample / (LEVELS - 1))[:, :, i, j], dim=1)
                sample[:, :, i, j] = probs.argmax(dim=1, keepdim=True).float()
        test_nll = F.cross_entropy(net(images / (LEVELS - 1)), images[:, 0].long())
    env.rec("sample", (sample, test_nll))
    env.rec("masked weights", net[3].weight)


def graph_attention(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class GraphAttentionLayer(nn.Module):
        def __init__(self, in_features, out_features, dropout, alpha, concat=True):
            super(GraphAttentionLayer, self).__init__()
            self.dropout, self.concat = dropout, concat
            self.W = nn.Parameter(torch.empty(size=(in_features, out_features)))
            nn.init.xavier_uniform_(self.W.data, gain=1.414)
            self.a = nn.Parameter(torch.empty(size=(2 * out_features, 1)))
            nn.init.xavier_uniform_(self.a.data, gain=1.414)
            self.out_features = out_features
            self.leakyrelu = nn.LeakyReLU(alpha)

        def forward(self, h, adj):
            Wh = torch.mm(h, self.W)
            e = self._prepare_attentional_mechanism_input(Wh)
            zero_vec = -9e15 * torch.ones_like(e)
            attention = torch.where(adj > 0, e, zero_vec)
            attention = F.softmax(attention, dim=1)
            attention = F.dropout(attention, self.dropout, training=self.training)
            h_prime = torch.matmul(attention, Wh)
            return F.elu(h_prime) if self.concat else h_prime

        def _prepare_attentional_mechanism_input(self, Wh):
            Wh1 = torch.matmul(Wh, self.a[:self.out_features, :])
            Wh2 = torch.matmul(Wh, self.a[self.out_features:, :])
            return self.leakyrelu(Wh1 + Wh2.T)

    class GAT(nn.Module):
        def __init__(self, nfeat, nhid, nclass, dropout, alpha, nheads):
            super(GAT, self).__init__()
            self.dropout = dropout
            self.attentions = [GraphAttentionLayer(nfeat, nhid, dropout=dropout, alpha=alpha,
                                                   concat=True) for _ in range(nheads)]
            for i, attention in enumerate(self.attentions):
                self.add_module('attention_{}'.format(i), attention)
            self.out_att = GraphAttentionLayer(nhid * nheads, nclass, dropout=dropout,
                                               alpha=alpha, concat=False)

        def forward(self, x, adj):
            x = F.dropout(x, self.dropout, training=self.training)
            x = torch.cat([att(x, adj) for att in self.attentions], dim=1)
            x = F.dropout(x, self.dropout, training=self.training)
            x = F.elu(self.out_att(x, adj))
            return F.log_softmax(x, dim=1)

    n_nodes, n_feat, n_class = 20, 6, 3
    labels = env.randint(0, n_class, (n_nodes,))
    features = env.randn(n_nodes, n_feat) + F.one_hot(labels, n_feat).float()
    same = (labels[:, None] == labels[None, :]).float()
    adj = ((env.rand(n_nodes, n_nodes) < 0.15 + 0.35 * same).float() + torch.eye(n_nodes))
    adj = ((adj + adj.T) > 0).float()
    features = features / features.abs().sum(1, keepdim=True)        # row-normalised
    idx_train, idx_val = torch.arange(0, 12), torch.arange(12, 20)

    model = env.init(GAT(n_feat, 4, n_class, dropout=0.0, alpha=0.2, nheads=2))
    optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def accuracy(output, labels):
        preds = output.max(1)[1].type_as(labels)
        correct = preds.eq(labels).double()
        return correct.sum() / len(labels)

    def train(features, adj):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        return loss_train.data.item(), acc_train.data.item()

    train = env.step(train)
    for epoch in range(5):
        env.rec(f"train {epoch}", train(features, adj))
        model.eval()
        with torch.no_grad():
            output = model(features, adj)
            env.rec(f"val {epoch}", (F.nll_loss(output[idx_val], labels[idx_val]),
                                     accuracy(output[idx_val], labels[idx_val])))
    env.rec("state", model.state_dict())


def lr_finder_early_stopping(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    model = env.init(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3)))
    x, y = env.randn(64, 5), env.randint(0, 3, (64,))
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    x_train, y_train, x_val, y_val = x[:48], y[:48], x[48:], y[48:]
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def train_step(xb, yb):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)

    # LR range test: raise the learning rate exponentially, stop when the loss diverges,
    # then put the model and the optimiser back as they were
    model_state = copy.deepcopy(model.state_dict())
    optim_state = copy.deepcopy(optimizer.state_dict())
    scheduler = optim.lr_scheduler.ExponentialLR(optimizer, gamma=4.0)
    lrs, losses, best_loss, avg_loss = [], [], float("inf"), 0.0
    for i in range(10):
        loss = train_step(x_train[:16], y_train[:16])
        avg_loss = 0.7 * avg_loss + 0.3 * loss
        smoothed = avg_loss / (1 - 0.7 ** (i + 1))
        lrs.append(scheduler.get_last_lr()[0])
        losses.append(smoothed)
        if smoothed > 4 * best_loss:
            break
        best_loss = min(best_loss, smoothed)
        scheduler.step()
    env.rec("range test", (lrs, losses))
    best_lr = lrs[losses.index(min(losses))] / 10
    model.load_state_dict(model_state)
    optimizer.load_state_dict(optim_state)
    for group in optimizer.param_groups:
        group["lr"] = best_lr

    # training with early stopping on the validation loss
    best_val, best_weights, patience, bad_epochs = float("inf"), None, 2, 0
    for epoch in range(12):
        for start in range(0, 48, 16):
            env.rec(f"loss {epoch} {start}", train_step(x_train[start:start + 16],
                                                        y_train[start:start + 16]))
        model.eval()
        with torch.no_grad():
            val_loss = criterion(model(x_val), y_val).item()
        env.rec(f"val {epoch}", val_loss)
        if val_loss < best_val - 1e-4:
            best_val, bad_epochs = val_loss, 0
            best_weights = copy.deepcopy(model.state_dict())
        else:
            bad_epochs += 1
            if bad_epochs >= patience:
                break
    model.load_state_dict(best_weights)
    model.eval()
    with torch.no_grad():
        accuracy = (model(x_val).argmax(1) == y_val).float().mean()
    env.rec("best", (best_val, epoch, accuracy, model.state_dict()))
