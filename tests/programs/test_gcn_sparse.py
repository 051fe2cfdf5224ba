"""pytorch/examples' GCN as its main.py writes it (a sparse normalised adjacency built with
to_sparse, sparse_coo_tensor, dense + sparse and sparse products; torch.spmm in the layers;
sparse input features; Adam with weight decay; NLLLoss over a train mask), on a seeded
synthetic graph of Cora's kind: llgrad's losses and accuracy equal torch's, eagerly and with
the step under llgrad.compile (which runs it eagerly: its inputs are sparse)."""
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
