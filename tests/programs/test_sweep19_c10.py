"""Sweep 19 (C), part 10: the Temporal Fusion Transformer's gated residual network and
variable selection network (ELU, GLU through F.glu, a context vector added by an optional
Linear, LayerNorm on the skip, softmax weights over per-variable GRNs stacked and weighted)
feeding an LSTM quantile forecaster with the pinball loss; and a 1-Lipschitz network
(GroupSort activation by reshape and sort, weights orthonormalised by Bjorck iterations in
the forward, the hinge Kantorovich-Rubinstein loss). Run with PyTorch, with llgrad eagerly
and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def tft_vsn_quantiles(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_vars, H, T, B = 3, 8, 5, 4
    quantiles = [0.1, 0.5, 0.9]

    class GatedLinearUnit(nn.Module):
        def __init__(self, input_size, output_size, dropout=0.0):
            super().__init__()
            self.dropout = nn.Dropout(dropout)
            self.fc = nn.Linear(input_size, output_size * 2)

        def forward(self, x):
            return F.glu(self.fc(self.dropout(x)), dim=-1)

    class GatedResidualNetwork(nn.Module):
        def __init__(self, input_size, hidden_size, output_size, context_size=None):
            super().__init__()
            self.skip = nn.Linear(input_size, output_size) if input_size != output_size else None
            self.fc1 = nn.Linear(input_size, hidden_size)
            self.context = nn.Linear(context_size, hidden_size, bias=False) if context_size else None
            self.elu = nn.ELU()
            self.fc2 = nn.Linear(hidden_size, hidden_size)
            self.glu = GatedLinearUnit(hidden_size, output_size)
            self.norm = nn.LayerNorm(output_size)

        def forward(self, x, context=None):
            residual = self.skip(x) if self.skip is not None else x
            x = self.fc1(x)
            if context is not None:
                x = x + self.context(context)
            x = self.fc2(self.elu(x))
            return self.norm(self.glu(x) + residual)

    class VariableSelectionNetwork(nn.Module):
        def __init__(self, input_sizes, hidden_size, context_size=None):
            super().__init__()
            self.flattened = GatedResidualNetwork(sum(input_sizes), hidden_size, len(input_sizes),
                                                  context_size)
            self.single = nn.ModuleList([GatedResidualNetwork(s, hidden_size, hidden_size)
                                         for s in input_sizes])

        def forward(self, variables, context=None):
            flat = torch.cat(variables, dim=-1)
            weights = F.softmax(self.flattened(flat, context), dim=-1).unsqueeze(-2)
            outs = torch.stack([grn(v) for grn, v in zip(self.single, variables)], dim=-1)
            return (outs * weights).sum(dim=-1), weights.squeeze(-2)

    class TFTLite(nn.Module):
        def __init__(self):
            super().__init__()
            self.static = nn.Embedding(4, 6)
            self.vsn = VariableSelectionNetwork([1, 2, 1], H, context_size=6)
            self.lstm = nn.LSTM(H, H, batch_first=True)
            self.post = GatedResidualNetwork(H, H, H)
            self.head = nn.Linear(H, len(quantiles))

        def forward(self, series, covs, static_id):
            ctx = self.static(static_id).unsqueeze(1).expand(-1, series.size(1), -1)
            x, w = self.vsn([series[..., :1], covs, series[..., 1:]], ctx)
            h, _ = self.lstm(x)
            return self.head(self.post(h[:, -1])), w

    def quantile_loss(pred, target):
        losses = []
        for i, q in enumerate(quantiles):
            errors = target - pred[:, i]
            losses.append(torch.max((q - 1) * errors, q * errors).unsqueeze(1))
        return torch.mean(torch.sum(torch.cat(losses, dim=1), dim=1))

    model = env.init(TFTLite())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    series, covs = env.randn(B, T, 2), env.randn(B, T, 2)
    static_id, target = env.randint(0, 4, (B,)), env.randn(B)

    def train_step(series, covs, static_id, target):
        model.train()
        pred, w = model(series, covs, static_id)
        loss = quantile_loss(pred, target)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        opt.step()
        return loss, w.mean(dim=(0, 1))
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"step{i}", train_step(series, covs, static_id, target))
    env.rec("params", dict(model.named_parameters()))


def lipschitz_groupsort(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def group_sort(x, group_size=2):
        n, d = x.shape
        x = x.view(n, d // group_size, group_size)
        return x.sort(dim=-1)[0].view(n, d)

    def bjorck(w, iters=8, beta=0.5):
        w = w / w.norm(p="fro")         # (scaled into the basin of the iteration)
        for _ in range(iters):
            w = (1 + beta) * w - beta * w.mm(w.t().mm(w))
        return w

    class BjorckLinear(nn.Linear):
        def forward(self, x):
            return F.linear(x, bjorck(self.weight.t()).t(), self.bias)

    model = env.init(nn.Sequential(BjorckLinear(2, 8), nn.Identity(), BjorckLinear(8, 8),
                                   nn.Identity(), BjorckLinear(8, 1)))

    def forward(x):
        h = group_sort(model[0](x))
        h = group_sort(model[2](h))
        return model[4](h).squeeze(-1)

    def hkr_loss(out, y, alpha=10.0, margin=0.2):
        kr = (out * y).mean()
        hinge = F.relu(margin - y * out).mean()
        return -kr + alpha * hinge

    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    X = env.randn(24, 2)
    y = torch.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)

    def train_step(X, y):
        opt.zero_grad()
        out = forward(X)
        loss = hkr_loss(out, y)
        loss.backward()
        opt.step()
        return loss, (torch.sign(out) == y).float().mean()
    train_step = env.step(train_step)
    for i in range(6):
        env.rec(f"step{i}", train_step(X, y))
    with torch.no_grad():
        W = bjorck(model[2].weight.t())
        env.rec("orthonormal", torch.linalg.svdvals(W))
        a, b = env.randn(10, 2), env.randn(10, 2)
        ratio = (forward(a) - forward(b)).abs() / (a - b).norm(dim=1)
        env.rec("lipschitz", ratio.max().item() <= 1.0 + 1e-3)
    env.rec("params", list(model.parameters()))


@pytest.mark.parametrize("program", [pytest.param(tft_vsn_quantiles, marks=pytest.mark.slow),
                                     lipschitz_groupsort])
def test_forecasting_and_lipschitz(program):
    run_tutorial(program)
