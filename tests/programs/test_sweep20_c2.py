"""Sweep 20 (C), part 2: hand-written autograd. A custom autograd.Function pair as the
"extending torch.autograd" docs write them: a fused linear + squared-ReLU whose backward
is decorated @once_differentiable, saves inputs with ctx.save_for_backward, checks
ctx.needs_input_grad and returns None for an optional bias; a straight-through estimator
(round in forward, identity in backward) for a quantisation-aware layer; both trained with
Adam inside a compiled step. Then a GCN-style message-passing layer written with
index_select / scatter_add_ / index_add_ over an edge list, degree normalisation by
bincount-free `index_add_` of ones, and graph-level mean pooling via scatter_add_ with a
batch vector. Run with PyTorch, with llgrad eagerly and with llgrad.compile
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def custom_functions(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from importlib import import_module
    once_differentiable = import_module(torch.__name__ + ".autograd.function").once_differentiable

    class LinearSquaredReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias=None):
            z = x.mm(weight.t())
            if bias is not None:
                z += bias.unsqueeze(0).expand_as(z)
            ctx.save_for_backward(x, weight, z)
            ctx.has_bias = bias is not None
            return F.relu(z) ** 2

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_out):
            x, weight, z = ctx.saved_tensors
            gz = grad_out * 2 * z.clamp(min=0)
            gx = gw = gb = None
            if ctx.needs_input_grad[0]:
                gx = gz.mm(weight)
            if ctx.needs_input_grad[1]:
                gw = gz.t().mm(x)
            if ctx.has_bias and ctx.needs_input_grad[2]:
                gb = gz.sum(0)
            return gx, gw, gb

    class RoundSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            return torch.round(x * scale) / scale

        @staticmethod
        def backward(ctx, g):
            return g, None

    class QATNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Parameter(env.randn(16, 6) * 0.4)
            self.b1 = nn.Parameter(torch.zeros(16))
            self.w2 = nn.Parameter(env.randn(12, 16) * 0.3)
            self.head = nn.Linear(12, 3)

        def forward(self, x):
            h = LinearSquaredReLU.apply(x, self.w1, self.b1)
            h = RoundSTE.apply(h, 8.0)
            h = LinearSquaredReLU.apply(h, self.w2)
            return self.head(h)

    model = QATNet()
    env.init(model.head)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    X, y = env.randn(20, 6), env.randint(0, 3, (20,))

    def train_step(x, y):
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss.detach(), out.argmax(1)
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"step{i}", train_step(X, y))
    env.rec("params", dict(model.named_parameters()))
    # a frozen input: needs_input_grad[0] is False, gx stays None
    xin = env.randn(4, 6).requires_grad_(False)
    w = model.w1.detach().clone().requires_grad_()
    fn = env.step(lambda x, w: torch.autograd.grad(LinearSquaredReLU.apply(x, w).sum(), w)[0])
    env.rec("gw", fn(xin, w))


def gcn_message_passing(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_nodes, n_feat, n_graphs = 14, 5, 3
    src = env.randint(0, n_nodes, (40,))
    dst = env.randint(0, n_nodes, (40,))
    loops = torch.arange(n_nodes)
    edge_index = torch.stack([torch.cat([src, loops]), torch.cat([dst, loops])])
    batch = torch.tensor([0] * 5 + [1] * 4 + [2] * 5)

    class GCNConv(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.lin = nn.Linear(cin, cout, bias=False)
            self.bias = nn.Parameter(torch.zeros(cout))

        def forward(self, x, edge_index):
            row, col = edge_index
            deg = torch.zeros(x.size(0), dtype=x.dtype).index_add_(0, col, torch.ones(col.numel()))
            deg_inv_sqrt = deg.pow(-0.5)
            deg_inv_sqrt[deg_inv_sqrt == float("inf")] = 0
            norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
            h = self.lin(x)
            msg = norm.view(-1, 1) * h.index_select(0, row)
            out = torch.zeros_like(h).scatter_add_(0, col.unsqueeze(-1).expand_as(msg), msg)
            return out + self.bias

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNConv(n_feat, 16)
            self.conv2 = GCNConv(16, 16)
            self.cls = nn.Linear(16, 2)

        def forward(self, x, edge_index, batch):
            x = F.relu(self.conv1(x, edge_index))
            x = F.relu(self.conv2(x, edge_index))
            pooled = torch.zeros(n_graphs, x.size(1)).scatter_add_(
                0, batch.view(-1, 1).expand(-1, x.size(1)), x)
            counts = torch.zeros(n_graphs).index_add_(0, batch, torch.ones(batch.numel()))
            return self.cls(pooled / counts.unsqueeze(1))

    model = env.init(Net())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=5e-4)
    x = env.randn(n_nodes, n_feat)
    y = torch.tensor([0, 1, 1])

    def train_step():
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, edge_index, batch), y)
        loss.backward()
        opt.step()
        return loss.item()
    train_step = env.step(train_step)
    env.rec("losses", [train_step() for _ in range(6)])

    @torch.no_grad()
    def test():
        model.eval()
        pred = model(x, edge_index, batch).argmax(dim=1)
        return int((pred == y).sum()) / len(y)
    env.rec("acc", env.step(test)())
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [custom_functions, gcn_message_passing])
def test_custom_autograd_and_gnn(program):
    run_tutorial(program)
