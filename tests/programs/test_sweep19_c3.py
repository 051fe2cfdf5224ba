"""Sweep 19 (C), part 3: Poincare embeddings of a small hierarchy (the distance through
arcosh written with log/sqrt and through torch.acosh, negatives sampled per edge, Riemannian
SGD rescaling the Euclidean gradient by (1 - |p|^2)^2 / 4 and renorm_ back into the ball
under no_grad) and a soft decision tree (Frosst & Hinton: inner nodes' sigmoid routing,
path probabilities grown level by level with repeat, a penalty per node through Python
loops, leaf distributions). Run with PyTorch, with llgrad eagerly and with llgrad.compile
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def poincare_embeddings(torch, env):
    nn, F = torch.nn, torch.nn.functional
    eps = 1e-5
    # a two-level tree: 0 -> 1..3, each child -> 3 leaves (transitive closure)
    edges = []
    for c in range(1, 4):
        edges.append((0, c))
        for k in range(3):
            leaf = 4 + 3 * (c - 1) + k
            edges += [(c, leaf), (0, leaf)]
    edges = torch.tensor(edges)
    n_nodes = 13

    class PoincareModel(nn.Module):
        def __init__(self, size, dim):
            super().__init__()
            self.lt = nn.Embedding(size, dim, sparse=False)
            self.lt.weight.data.uniform_(-1e-3, 1e-3)

        def dist(self, u, v):
            sqdist = torch.sum((u - v) ** 2, dim=-1)
            squnorm = torch.clamp(torch.sum(u * u, dim=-1), 0, 1 - eps)
            sqvnorm = torch.clamp(torch.sum(v * v, dim=-1), 0, 1 - eps)
            x = sqdist / ((1 - squnorm) * (1 - sqvnorm)) * 2 + 1
            z = torch.sqrt(torch.pow(x, 2) - 1)
            return torch.log(x + z)

        def forward(self, inputs):
            e = self.lt(inputs)
            o = e.narrow(1, 1, e.size(1) - 1)
            s = e.narrow(1, 0, 1).expand_as(o)
            return -self.dist(s, o)

    model = PoincareModel(n_nodes, 2)
    model.lt.weight.data = env.rand(n_nodes, 2) * 2e-3 - 1e-3

    class RiemannianSGD(torch.optim.Optimizer):
        def __init__(self, params, lr):
            super().__init__(params, dict(lr=lr))

        @torch.no_grad()
        def step(self, lr=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad
                    p_sqnorm = torch.sum(p * p, dim=-1, keepdim=True)
                    d_p = d_p * ((1 - p_sqnorm) ** 2 / 4).expand_as(d_p)
                    p.add_(d_p, alpha=-(lr or group["lr"]))
                    p.renorm_(2, 0, 1 - eps)

    opt = RiemannianSGD(model.parameters(), lr=0.3)
    n_neg = 4

    def train_step(batch, burnin):
        opt.zero_grad()
        preds = model(batch)
        loss = F.cross_entropy(preds, torch.zeros(batch.size(0), dtype=torch.long))
        loss.backward()
        opt.step(lr=0.03 if burnin else None)
        return loss
    train_step = env.step(train_step)
    for epoch in range(6):
        negs = env.randint(0, n_nodes, (len(edges), n_neg))
        batch = torch.cat([edges, negs], dim=1)
        env.rec(f"loss{epoch}", train_step(batch, epoch < 2))
    w = model.lt.weight.detach()
    env.rec("weight", w)
    env.rec("norms", w.norm(dim=-1))
    u, v = w[edges[:, 0]], w[edges[:, 1]]
    d_acosh = torch.acosh(1 + 2 * ((u - v) ** 2).sum(-1)
                          / ((1 - (u * u).sum(-1)) * (1 - (v * v).sum(-1))))
    env.rec("acosh", d_acosh)
    env.rec("agree", torch.allclose(d_acosh, model.dist(u, v), atol=1e-4))


def soft_decision_tree(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class SDT(nn.Module):
        def __init__(self, input_dim, output_dim, depth=3, lamda=1e-3):
            super().__init__()
            self.depth = depth
            self.internal_node_num_ = 2 ** depth - 1
            self.leaf_node_num_ = 2 ** depth
            self.penalty_list = [lamda * (2 ** (-d)) for d in range(0, depth)]
            self.inner_nodes = nn.Sequential(
                nn.Linear(input_dim + 1, self.internal_node_num_, bias=False), nn.Sigmoid())
            self.leaf_nodes = nn.Linear(self.leaf_node_num_, output_dim, bias=False)

        def forward(self, X, is_training_data=False):
            _mu, _penalty = self._forward(X)
            y_pred = self.leaf_nodes(_mu)
            if is_training_data:
                return y_pred, _penalty
            return y_pred

        def _forward(self, X):
            batch_size = X.size()[0]
            X = self._data_augment(X)
            path_prob = self.inner_nodes(X)
            path_prob = torch.unsqueeze(path_prob, dim=2)
            path_prob = torch.cat((path_prob, 1 - path_prob), dim=2)
            _mu = X.data.new(batch_size, 1, 1).fill_(1.0)
            _penalty = torch.tensor(0.0)
            begin_idx, end_idx = 0, 1
            for layer_idx in range(0, self.depth):
                _path_prob = path_prob[:, begin_idx:end_idx, :]
                _penalty = _penalty + self._cal_penalty(layer_idx, _mu, _path_prob)
                _mu = _mu.view(batch_size, -1, 1).repeat(1, 1, 2)
                _mu = _mu * _path_prob
                begin_idx = end_idx
                end_idx = begin_idx + 2 ** (layer_idx + 1)
            mu = _mu.view(batch_size, self.leaf_node_num_)
            return mu, _penalty

        def _cal_penalty(self, layer_idx, _mu, _path_prob):
            penalty = torch.tensor(0.0)
            batch_size = _mu.size()[0]
            _mu = _mu.view(batch_size, 2 ** layer_idx)
            _path_prob = _path_prob.view(batch_size, 2 ** (layer_idx + 1))
            for node in range(0, 2 ** (layer_idx + 1)):
                alpha = torch.sum(_path_prob[:, node] * _mu[:, node // 2], dim=0) / torch.sum(
                    _mu[:, node // 2], dim=0)
                coeff = self.penalty_list[layer_idx]
                penalty -= 0.5 * coeff * (torch.log(alpha) + torch.log(1 - alpha))
            return penalty

        def _data_augment(self, X):
            batch_size = X.size()[0]
            X = X.view(batch_size, -1)
            bias = torch.ones(batch_size, 1)
            return torch.cat((bias, X), 1)

    tree = env.init(SDT(6, 3, depth=3))
    opt = torch.optim.Adam(tree.parameters(), lr=1e-2, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    X, y = env.randn(20, 6), env.randint(0, 3, (20,))

    def train_step(data, target):
        output, penalty = tree.forward(data, is_training_data=True)
        loss = criterion(output, target.view(-1))
        loss += penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
        pred = output.data.max(1)[1]
        return loss, penalty, pred.eq(target.view(-1).data).sum()
    train_step = env.step(train_step)
    for i in range(6):
        loss, penalty, correct = train_step(X, y)
        env.rec(f"step{i}", (loss, penalty, correct.item()))
    tree.eval()
    with torch.no_grad():
        env.rec("eval", F.softmax(tree(X), dim=1))
    env.rec("params", list(tree.parameters()))


@pytest.mark.parametrize("program", [poincare_embeddings, soft_decision_tree])
def test_geometry_and_trees(program):
    run_tutorial(program)
