"""pytorch/examples' GCN and GAT as their main.py write them (a sparse normalised adjacency built with
to_sparse, sparse_coo_tensor, dense + sparse and sparse products; torch.spmm in the layers;
sparse input features; Adam with weight decay; NLLLoss over a train mask), on a seeded
synthetic graph of Cora's kind: llgrad's losses and accuracy equal torch's, eagerly and with
the step under llgrad.compile (the GCN's sparse inputs are guarded by their entries and
its step is compiled; the GAT's inputs are dense once built)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _graph(lib, nodes=300, features=120, edges=900):
    rng = np.random.default_rng(0)
    content = (rng.random((nodes, features)) < 0.05).astype(np.int32)
    labels = lib.LongTensor(rng.integers(0, 7, nodes))
    pairs = rng.integers(0, nodes, (edges, 2)).astype(np.int32)
    x = lib.FloatTensor(content)
    scale = 1 / lib.sum(x, dim=1)
    scale[scale == float("inf")] = 0
    x = lib.diag(scale).to_sparse() @ x
    adj = lib.sparse_coo_tensor(pairs.T, lib.ones(edges), (nodes, nodes), dtype=lib.int64)
    adj = lib.eye(nodes) + adj
    degree = lib.sqrt(1 / lib.sum(adj, dim=1))
    degree[degree == float("inf")] = 0
    degree = lib.diag(degree).to_sparse()
    adj = degree @ adj @ degree
    return x.to_sparse(), labels, adj.to_sparse()


def _train(lib, compiled, epochs=12):
    nn, F = lib.nn, lib.nn.functional

    class GraphConv(nn.Module):
        def __init__(self, fan_in, fan_out):
            super().__init__()
            self.kernel = nn.Parameter(lib.Tensor(fan_in, fan_out))
            nn.init.xavier_normal_(self.kernel)
            self.bias = nn.Parameter(lib.Tensor(fan_out))
            nn.init.zeros_(self.bias)

        def forward(self, x, adj):
            return lib.spmm(adj, lib.mm(x, self.kernel)) + self.bias

    class GCN(nn.Module):
        def __init__(self, fan_in, hidden, classes):
            super().__init__()
            self.gc1, self.gc2 = GraphConv(fan_in, hidden), GraphConv(hidden, classes)
            self.dropout = nn.Dropout(0.5)

        def forward(self, x, adj):
            x = self.dropout(F.relu(self.gc1(x, adj)))
            return F.log_softmax(self.gc2(x, adj), dim=1)

    lib.manual_seed(42)
    x, labels, adj = _graph(lib)
    order = lib.randperm(len(labels))
    train, held = order[:200], order[200:]
    model = GCN(x.shape[1], 16, int(labels.max().item()) + 1)
    opt = lib.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    loss_fn = nn.NLLLoss()

    def step():
        model.train()
        opt.zero_grad()
        loss = loss_fn(model(x, adj)[train], labels[train])
        loss.backward()
        opt.step()
        return loss
    if compiled:
        step = lib.compile(step)
    losses = [float(step()) for _ in range(epochs)]
    model.eval()
    with lib.no_grad():
        out = model(x, adj)
        acc = float((out[held].argmax(1) == labels[held]).float().mean())
    return np.array(losses), acc


@pytest.mark.parametrize("compiled", [False, True])
def test_gcn_example_matches_torch(compiled):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine, mine_acc = _train(llgrad, compiled)
        theirs, theirs_acc = _train(torch, False)
    np.testing.assert_allclose(mine, theirs, rtol=2e-5)
    assert mine_acc == theirs_acc


def _train_gat(lib, compiled, epochs=6, heads=4, hidden=16):
    nn, F = lib.nn, lib.nn.functional

    class Attention(nn.Module):
        def __init__(self, fan_in, fan_out, n_heads):
            super().__init__()
            self.n_heads, self.n_hidden = n_heads, fan_out
            self.W = nn.Parameter(lib.empty(size=(fan_in, fan_out * n_heads)))
            self.a = nn.Parameter(lib.empty(size=(n_heads, 2 * fan_out, 1)))
            nn.init.xavier_normal_(self.W)
            nn.init.xavier_normal_(self.a)
            self.leakyrelu = nn.LeakyReLU(0.2)

        def forward(self, h, adj):
            n = h.shape[0]
            t = F.dropout(lib.mm(h, self.W), 0.4, training=self.training)
            t = t.view(n, self.n_heads, self.n_hidden).permute(1, 0, 2)
            e = lib.matmul(t, self.a[:, :self.n_hidden, :]) + \
                lib.matmul(t, self.a[:, self.n_hidden:, :]).mT
            e = self.leakyrelu(e)
            e = lib.where(adj > 0, e, -9e16 * lib.ones_like(e))
            att = F.dropout(F.softmax(e, dim=-1), 0.4, training=self.training)
            return lib.matmul(att, t).mean(dim=0)

    class GAT(nn.Module):
        def __init__(self, fan_in, classes):
            super().__init__()
            self.gat1 = Attention(fan_in, hidden, heads)
            self.gat2 = Attention(hidden, classes, 1)

        def forward(self, x, adj):
            return F.log_softmax(self.gat2(F.elu(self.gat1(x, adj)), adj), dim=1)

    lib.manual_seed(13)
    x, labels, adj = _graph(lib, nodes=120, features=40, edges=300)
    x, adj = x.to_dense(), adj.to_dense()
    order = lib.randperm(len(labels))
    train = order[:80]
    model = GAT(x.shape[1], int(labels.max().item()) + 1)
    opt = lib.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)

    def step():
        model.train()
        opt.zero_grad()
        loss = F.nll_loss(model(x, adj)[train], labels[train])
        loss.backward()
        opt.step()
        return loss
    if compiled:
        step = lib.compile(step)
    return np.array([float(step()) for _ in range(epochs)])


@pytest.mark.parametrize("compiled", [False, True])
def test_gat_example_matches_torch(compiled):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine = _train_gat(llgrad, compiled)
        theirs = _train_gat(torch, False)
    np.testing.assert_allclose(mine, theirs, rtol=2e-5)
