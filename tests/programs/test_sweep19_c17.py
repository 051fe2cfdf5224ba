"""Sweep 19 (C), part 17: a deep equilibrium layer solved by Anderson acceleration as the
implicit-layers tutorial writes it (history buffers written in place under no_grad, the
bordered Gram system by bmm and torch.linalg.solve, a break once the residual read with
.item() is small, the backward hook solving the adjoint with the same solver through
autograd.grad, registered inside the compiled step; in float64), and a graph transformer
with Laplacian eigenvector positional encodings (the normalised Laplacian's eigh, signs
fixed by the largest entry and flipped per step from NumPy, edge attention with a softmax
over incoming edges by scatter_reduce amax and index_add_). Run with PyTorch, with llgrad
eagerly and with llgrad.compile (tutorial_harness.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def anderson_deq(torch, env):
    nn, F = torch.nn, torch.nn.functional
    autograd = torch.autograd

    def anderson(f, x0, m=4, lam=1e-4, max_iter=25, tol=1e-3, beta=1.0):
        bsz, d = x0.shape
        X = torch.zeros(bsz, m, d, dtype=x0.dtype)
        Fb = torch.zeros(bsz, m, d, dtype=x0.dtype)
        X[:, 0], Fb[:, 0] = x0.view(bsz, -1), f(x0).view(bsz, -1)
        X[:, 1], Fb[:, 1] = Fb[:, 0], f(Fb[:, 0].view_as(x0)).view(bsz, -1)
        H = torch.zeros(bsz, m + 1, m + 1, dtype=x0.dtype)
        H[:, 0, 1:] = H[:, 1:, 0] = 1
        y = torch.zeros(bsz, m + 1, 1, dtype=x0.dtype)
        y[:, 0] = 1
        res = []
        for k in range(2, max_iter):
            n = min(k, m)
            G = Fb[:, :n] - X[:, :n]
            H[:, 1:n + 1, 1:n + 1] = torch.bmm(G, G.transpose(1, 2)) + lam * torch.eye(n, dtype=x0.dtype)[None]
            alpha = torch.linalg.solve(H[:, :n + 1, :n + 1], y[:, :n + 1])[:, 1:n + 1, 0]
            X[:, k % m] = beta * (alpha[:, None] @ Fb[:, :n])[:, 0] + (1 - beta) * (alpha[:, None] @ X[:, :n])[:, 0]
            Fb[:, k % m] = f(X[:, k % m].view_as(x0)).view(bsz, -1)
            res.append((Fb[:, k % m] - X[:, k % m]).norm().item() / (1e-5 + Fb[:, k % m].norm().item()))
            if res[-1] < tol:
                break
        return X[:, k % m].view_as(x0), res

    class ResNetLayer(nn.Module):
        def __init__(self, n, hidden):
            super().__init__()
            self.lin1 = nn.Linear(n, hidden)
            self.lin2 = nn.Linear(hidden, n)
            self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(n)
            self.lin1.weight.data.normal_(0, 0.01)
            self.lin2.weight.data.normal_(0, 0.01)

        def forward(self, z, x):
            y = self.norm1(F.relu(self.lin1(z)))
            return self.norm2(F.relu(z + self.lin2(y) + x))

    class DEQFixedPoint(nn.Module):
        def __init__(self, f, solver, **kwargs):
            super().__init__()
            self.f, self.solver, self.kwargs = f, solver, kwargs

        def forward(self, x):
            with torch.no_grad():
                z, self.forward_res = self.solver(lambda z: self.f(z, x), torch.zeros_like(x), **self.kwargs)
            z = self.f(z, x)
            z0 = z.clone().detach().requires_grad_()
            f0 = self.f(z0, x)

            def backward_hook(grad):
                g, self.backward_res = self.solver(
                    lambda y: autograd.grad(f0, z0, y, retain_graph=True)[0] + grad, grad, **self.kwargs)
                return g
            z.register_hook(backward_hook)
            return z

    inp = nn.Linear(5, 8)
    deq = DEQFixedPoint(ResNetLayer(8, 16), anderson, tol=1e-4, max_iter=25, m=5)
    head = nn.Linear(8, 3)
    # (in float64: Anderson's bordered Gram system is near singular by the last iterations,
    # and float32 rounding, torch's or llgrad's, moves the iterate by the tolerance)
    model = env.init(nn.Sequential(inp, deq, head)).double()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    X, y = env.randn(6, 5).double(), env.randint(0, 3, (6,))

    def train_step(X, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), y)
        loss.backward()
        opt.step()
        return loss, len(deq.forward_res), len(deq.backward_res)
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"step{i}", train_step(X, y))
    env.rec("params", list(model.parameters()))


def graph_transformer_lap_pe(torch, env):
    nn, F = torch.nn, torch.nn.functional
    N, k, D, Hh = 9, 3, 8, 2
    rng = np.random.default_rng(3)
    und = {(i, i + 1) for i in range(N - 1)} | {(int(a), int(b)) for a, b in rng.integers(0, N, (6, 2)) if a < b}
    edges = sorted(und | {(b, a) for a, b in und})
    src = torch.tensor([a for a, _ in edges])
    dst = torch.tensor([b for _, b in edges])
    A = torch.zeros(N, N)
    A[src, dst] = 1.0
    deg = A.sum(1)
    Dm = torch.diag(deg.clamp(min=1) ** -0.5)
    L = torch.eye(N) - Dm @ A @ Dm
    evals, evecs = torch.linalg.eigh(L.double())
    pe = evecs[:, 1:k + 1].float()
    pe = pe * torch.sign(pe.gather(0, pe.abs().argmax(0, keepdim=True)))

    class GTLayer(nn.Module):
        def __init__(self):
            super().__init__()
            # (Dwivedi & Bresson's use_bias=False and layer_norm=True: a key bias, or biases
            # before a batch norm, have zero gradients up to rounding, which Adam amplifies)
            self.Q, self.K, self.V = (nn.Linear(D, D, bias=False) for _ in range(3))
            self.O = nn.Linear(D, D)
            self.bn1, self.bn2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.ffn = nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU(), nn.Linear(2 * D, D))

        def forward(self, h):
            dh = D // Hh
            q, kk, v = (m(h).view(N, Hh, dh) for m in (self.Q, self.K, self.V))
            score = (q[dst] * kk[src]).sum(-1) / dh ** 0.5
            smax = torch.zeros(N, Hh).scatter_reduce(0, dst[:, None].expand(-1, Hh), score,
                                                     reduce="amax", include_self=False)
            e = (score - smax[dst]).exp()
            denom = torch.zeros(N, Hh).index_add_(0, dst, e)
            a = e / denom[dst]
            out = torch.zeros(N, Hh, dh).index_add_(0, dst, a[..., None] * v[src])
            h = self.bn1(h + self.O(out.reshape(N, D)))
            return self.bn2(h + self.ffn(h))

    class GT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Linear(4, D)
            self.pe = nn.Linear(k, D)
            self.layers = nn.ModuleList([GTLayer(), GTLayer()])
            self.out = nn.Linear(D, 2)

        def forward(self, x, pe):
            h = self.emb(x) + self.pe(pe)
            for layer in self.layers:
                h = layer(h)
            return self.out(h)

    model = env.init(GT())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x, y = env.randn(N, 4), env.randint(0, 2, (N,))

    def train_step(x, pe, y):
        model.train()
        loss = F.cross_entropy(model(x, pe), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    env.rec("eigenvalues", evals)
    env.rec("pe", pe)
    for i in range(5):
        flip = torch.tensor(np.where(rng.random(k) < 0.5, -1.0, 1.0), dtype=torch.float32)
        env.rec(f"loss{i}", train_step(x, pe * flip, y))
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x, pe).softmax(-1))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [pytest.param(anderson_deq, marks=pytest.mark.slow),
                                     graph_transformer_lap_pe])
def test_implicit_and_graph(program):
    run_tutorial(program)
