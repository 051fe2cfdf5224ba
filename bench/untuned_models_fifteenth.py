"""Five more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-06): a TextCNN sentence classifier (Shawn1993/cnn-text-
classification-pytorch's CNN_Text: Embedding with a padding index, Conv2d of widths 3, 4, 5
over the whole embedding, max_pool1d over time by i.size(2), dropout), a GraphSAGE node
classifier (mean aggregation by index_add_ of x[src] over dst, degrees by index_add_ of ones,
lin_l/lin_r, F.normalize; Cora-sized random graph, a train mask, log_softmax + nll_loss, Adam
with weight decay), a GIN graph classifier (sum aggregation by index_add_, learnable eps,
MLPs with BatchNorm1d, global add pooling per layer sized by int(batch.max()) + 1, readout of
every layer concatenated), and in untuned_models_fifteenth_b.py a PPO update (nikhilbarhate99/
PPO-PyTorch: Monte Carlo returns from Python lists, normalised, an actor-critic evaluated
through torch.distributions.Categorical, the clipped surrogate, MSE value loss and entropy
bonus, K epochs of Adam with two parameter groups, then policy_old.load_state_dict) and a
DeepLabV3 segmenter (torchvision's ASPP and DeepLabHead on a small dilated ResNet: atrous
rates 12, 24, 36 wider than the feature map, ASPPPooling's bilinear F.interpolate, the output
interpolated to the input size, CrossEntropyLoss(ignore_index=255), SGD with a poly LambdaLR).

    python bench/untuned_models_fifteenth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled,
1 thread each (no jax versions in this set); the checks, the timing and its printout are
untuned_models_eleventh.py's (main there). build(lib, name, small=True) makes the tests'
smaller versions."""
import os
import sys
import types

import untuned_models_fifteenth_b
from untuned_models_fifth import training_step

NAMES = ("textcnn", "sage", "gin", "ppo", "deeplab")
OWN_STEP = ("ppo",)     # (makers that return (model, step): PPO's update is its own loop)


def _maker(name):
    return getattr(untuned_models_fifteenth_b, "_" + name, None) or globals()["_" + name]


def build(lib, name, small=False):
    if name in OWN_STEP:
        lib.manual_seed(0)
        model, step = _maker(name)(lib, small)
        model.train()
        return model, step
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def _textcnn(lib, small):
    nn, F = lib.nn, lib.nn.functional
    batch, words, vocab, embed, kernels, classes = ((4, 9, 30, 8, 3, 2) if small else
                                                    (64, 48, 5000, 128, 100, 2))

    class CNN_Text(nn.Module):
        def __init__(self, embed_num, embed_dim, class_num, kernel_num, kernel_sizes, dropout):
            super(CNN_Text, self).__init__()
            V, D, C, Ci, Co, Ks = embed_num, embed_dim, class_num, 1, kernel_num, kernel_sizes
            self.embed = nn.Embedding(V, D, padding_idx=1)
            self.convs1 = nn.ModuleList([nn.Conv2d(Ci, Co, (K, D)) for K in Ks])
            self.dropout = nn.Dropout(dropout)
            self.fc1 = nn.Linear(len(Ks) * Co, C)

        def forward(self, x):
            x = self.embed(x)  # (N, W, D)
            x = x.unsqueeze(1)  # (N, Ci, W, D)
            x = [F.relu(conv(x)).squeeze(3) for conv in self.convs1]  # [(N, Co, W), ...]*len(Ks)
            x = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in x]  # [(N, Co), ...]*len(Ks)
            x = lib.cat(x, 1)
            x = self.dropout(x)  # (N, len(Ks)*Co)
            logit = self.fc1(x)  # (N, C)
            return logit

    model = CNN_Text(vocab, embed, classes, kernels, [3, 4, 5], 0.5)
    optimizer = lib.optim.Adam(model.parameters(), lr=0.001)
    text = lib.randint(2, vocab, (batch, words))
    text[:, -words // 4:] = 1          # (the batch padded to its longest sentence)
    target = lib.randint(0, classes, (batch,))

    def loss():
        return F.cross_entropy(model(text), target)
    return model, optimizer, loss, {"data": (text, target)}


def _graph(lib, n, e):
    """A random directed graph of n nodes and e edges with both directions of each, no loops."""
    src = lib.randint(0, n, (e,))
    dst = (src + lib.randint(1, n, (e,))) % n
    return lib.stack([lib.cat([src, dst]), lib.cat([dst, src])])


def _sage(lib, small):
    nn, F = lib.nn, lib.nn.functional
    n, feats, edges, hidden, classes, train = ((12, 6, 20, 8, 3, 5) if small else
                                               (2708, 512, 5278, 64, 7, 140))

    class SAGEConv(nn.Module):
        def __init__(self, in_channels, out_channels, normalize=True):
            super().__init__()
            self.normalize = normalize
            self.lin_l = nn.Linear(in_channels, out_channels)
            self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

        def forward(self, x, edge_index):
            src, dst = edge_index
            out = lib.zeros_like(x).index_add_(0, dst, x[src])
            deg = lib.zeros(x.size(0), dtype=x.dtype).index_add_(
                0, dst, lib.ones(dst.size(0), dtype=x.dtype))
            out = out / deg.clamp(min=1).unsqueeze(-1)
            out = self.lin_l(out) + self.lin_r(x)
            if self.normalize:
                out = F.normalize(out, p=2., dim=-1)
            return out

    class SAGE(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = SAGEConv(feats, hidden)
            self.conv2 = SAGEConv(hidden, classes, normalize=False)

        def forward(self, x, edge_index):
            x = F.dropout(x, p=0.5, training=self.training)
            x = F.relu(self.conv1(x, edge_index))
            x = F.dropout(x, p=0.5, training=self.training)
            x = self.conv2(x, edge_index)
            return F.log_softmax(x, dim=-1)

    model = SAGE()
    optimizer = lib.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    x = (lib.rand(n, feats) < 0.05).float()         # (bag-of-words features)
    x = x / x.sum(1, keepdim=True).clamp(min=1)     # (NormalizeFeatures)
    edge_index = _graph(lib, n, edges)
    y = lib.randint(0, classes, (n,))
    train_mask = lib.zeros(n, dtype=lib.bool)
    train_mask[:train] = True

    def loss():
        out = model(x, edge_index)
        return F.nll_loss(out[train_mask], y[train_mask])
    return model, optimizer, loss, {"data": (x, edge_index, y, train_mask)}


def _gin(lib, small):
    nn, F = lib.nn, lib.nn.functional
    graphs, nodes, feats, hidden, layers, classes = ((3, 4, 5, 8, 2, 2) if small else
                                                     (64, 24, 7, 64, 4, 2))

    class GINConv(nn.Module):
        def __init__(self, mlp, train_eps=True):
            super().__init__()
            self.nn = mlp
            self.eps = nn.Parameter(lib.zeros(1)) if train_eps else 0.

        def forward(self, x, edge_index):
            src, dst = edge_index
            out = lib.zeros_like(x).index_add_(0, dst, x[src])
            return self.nn((1 + self.eps) * x + out)

    def global_add_pool(x, batch):
        size = int(batch.max().item() + 1)
        return lib.zeros(size, x.size(-1), dtype=x.dtype).index_add_(0, batch, x)

    class GIN(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList()
            for i in range(layers):
                mlp = nn.Sequential(nn.Linear(feats if i == 0 else hidden, hidden),
                                    nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
                self.convs.append(GINConv(mlp, train_eps=True))
            self.lin1 = nn.Linear(layers * hidden, hidden)
            self.lin2 = nn.Linear(hidden, classes)

        def forward(self, x, edge_index, batch):
            xs = []
            for conv in self.convs:
                x = conv(x, edge_index)
                xs.append(global_add_pool(x, batch))
            x = F.relu(self.lin1(lib.cat(xs, dim=1)))
            x = F.dropout(x, p=0.5, training=self.training)
            return self.lin2(x)

    model = GIN()
    optimizer = lib.optim.Adam(model.parameters(), lr=0.01)
    sizes = lib.randint(nodes // 2, nodes + 1, (graphs,)).tolist()     # (a DataLoader's batch)
    x = F.one_hot(lib.randint(0, feats, (sum(sizes),)), feats).float()
    edge_parts, batch_parts, offset = [], [], 0
    for g, k in enumerate(sizes):
        edge_parts.append(_graph(lib, k, 2 * k) + offset)
        batch_parts.append(lib.full((k,), g, dtype=lib.long))
        offset += k
    edge_index, batch = lib.cat(edge_parts, 1), lib.cat(batch_parts)
    y = lib.randint(0, classes, (graphs,))

    def loss():
        return F.cross_entropy(model(x, edge_index, batch), y)
    return model, optimizer, loss, {"data": (x, edge_index, batch, y)}


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=None, jax_models=types.SimpleNamespace(NAMES=()))
