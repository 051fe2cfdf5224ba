"""Sweep 20 (C), part 16: routed and scanned models. A Mixtral-style sparse MoE layer: a
router's top-2 logits softmaxed, and each expert run on the tokens routed to it, found with
torch.where(selected == i) and accumulated with index_add_, plus the Switch load-balancing
auxiliary loss (fraction routed times mean router probability, via one_hot). Then a Mamba-
style selective SSM: in_proj split into x and a gate with chunk, a depthwise causal Conv1d
(padding d_conv - 1, sliced to L), softplus(dt), A = -exp(A_log), discretised dA / dBx by
einsum, a Python loop over time building ys with torch.stack, the D skip and the SiLU gate.
Run with PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def sparse_moe(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D, E, K = 8, 4, 2

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(D, E, bias=False)
            self.experts = nn.ModuleList([nn.Sequential(nn.Linear(D, 16), nn.GELU(), nn.Linear(16, D))
                                          for _ in range(E)])

        def forward(self, x):
            B, T, _ = x.shape
            x = x.view(-1, D)
            router_logits = self.gate(x)
            weights, selected = torch.topk(router_logits, K, dim=-1)
            weights = F.softmax(weights, dim=-1, dtype=torch.float).to(x.dtype)
            out = torch.zeros_like(x)
            for i, expert in enumerate(self.experts):
                idx, nth = torch.where(selected == i)
                if idx.numel() == 0:
                    continue
                out.index_add_(0, idx, weights[idx, nth, None] * expert(x[idx]))
            probs = F.softmax(router_logits, dim=-1)
            mask = F.one_hot(selected, E).float().sum(1)
            aux = E * (mask.mean(0) / K * probs.mean(0)).sum()
            return out.view(B, T, D), aux

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(5, D)
            self.moe = MoE()
            self.out = nn.Linear(D, 3)

        def forward(self, x):
            h = self.inp(x)
            m, aux = self.moe(h)
            return self.out((h + m).mean(1)), aux

    model = env.init(Net())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    X, y = env.randn(4, 5, 5), env.randint(0, 3, (4,))

    def train_step(x, y):
        logits, aux = model(x)
        loss = F.cross_entropy(logits, y) + 0.01 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, aux
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"step{i}", train_step(X, y))
    env.rec("state", model.state_dict())


def mamba(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d_model, d_state, d_conv, expand = 6, 4, 3, 2
    d_inner = expand * d_model
    dt_rank = 2

    class MambaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
            self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
            self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
            self.dt_proj = nn.Linear(dt_rank, d_inner)
            A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
            self.A_log = nn.Parameter(torch.log(A))
            self.D = nn.Parameter(torch.ones(d_inner))
            self.out_proj = nn.Linear(d_inner, d_model, bias=False)

        def ssm(self, x):
            A = -torch.exp(self.A_log.float())
            x_dbl = self.x_proj(x)
            delta, B, C = x_dbl.split([dt_rank, d_state, d_state], dim=-1)
            delta = F.softplus(self.dt_proj(delta))
            return self.selective_scan(x, delta, A, B, C, self.D)

        def selective_scan(self, u, delta, A, B, C, D):
            b, l, d_in = u.shape
            deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
            deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
            x = torch.zeros((b, d_in, d_state))
            ys = []
            for i in range(l):
                x = deltaA[:, i] * x + deltaB_u[:, i]
                ys.append(torch.einsum("bdn,bn->bd", x, C[:, i, :]))
            y = torch.stack(ys, dim=1)
            return y + u * D

        def forward(self, x):
            b, l, _ = x.shape
            x_and_res = self.in_proj(x)
            x, res = x_and_res.chunk(2, dim=-1)
            x = x.transpose(1, 2)
            x = self.conv1d(x)[:, :, :l]
            x = F.silu(x.transpose(1, 2))
            y = self.ssm(x) * F.silu(res)
            return self.out_proj(y)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, d_model)
            self.block = MambaBlock()
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, 10)

        def forward(self, ids):
            h = self.emb(ids)
            h = h + self.block(self.norm(h))
            return self.head(h)

    model = env.init(Model())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    ids = env.randint(0, 10, (3, 7))

    def train_step(ids):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 10), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss{i}", train_step(ids))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [pytest.param(sparse_moe, marks=pytest.mark.slow), mamba])
def test_routed_scanned(program):
    run_tutorial(program)
