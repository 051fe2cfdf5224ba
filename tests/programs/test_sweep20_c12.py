"""Sweep 20 (C), part 12: 2024-25 interpretability and optimiser code. A sparse
autoencoder as the dictionary-learning write-ups train it: pre-encoder bias subtracted,
ReLU codes, an L1 penalty, the decoder's columns renormalised to unit norm under no_grad
after each step and the gradient component parallel to them removed before it
(`W_dec.grad -= (W_dec.grad * W_dec).sum(-1, keepdim=True) * W_dec`), a dead-feature counter
kept as a tensor, and the fraction of variance explained. Then Muon: a torch.optim.Optimizer
subclass whose @torch.no_grad() step keeps a momentum buffer in self.state[p], takes the
Nesterov blend with lerp_, orthogonalises 2-D updates with the quintic Newton-Schulz
iteration (a / b / c coefficients, X.mT, transposed for tall matrices) and scales by
max(1, rows / cols) ** 0.5, paired with AdamW for the 1-D and embedding parameters. Run with
PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def sparse_autoencoder(torch, env):
    nn = torch.nn
    d_in, d_sae, l1 = 8, 24, 3e-3

    class SAE(nn.Module):
        def __init__(self):
            super().__init__()
            w = env.randn(d_in, d_sae)
            w = w / w.norm(dim=0, keepdim=True)
            self.W_enc = nn.Parameter(w.clone())
            self.W_dec = nn.Parameter(w.t().contiguous())
            self.b_enc = nn.Parameter(torch.zeros(d_sae))
            self.b_dec = nn.Parameter(torch.zeros(d_in))
            self.register_buffer("steps_since_fired", torch.zeros(d_sae, dtype=torch.long))

        def forward(self, x):
            acts = torch.relu((x - self.b_dec) @ self.W_enc + self.b_enc)
            recon = acts @ self.W_dec + self.b_dec
            return recon, acts

        @torch.no_grad()
        def make_decoder_weights_and_grad_unit_norm(self):
            W_dec_normed = self.W_dec / self.W_dec.norm(dim=-1, keepdim=True)
            parallel = (self.W_dec.grad * W_dec_normed).sum(-1, keepdim=True) * W_dec_normed
            self.W_dec.grad -= parallel
            self.W_dec.data = W_dec_normed

    sae = SAE()
    opt = torch.optim.Adam(sae.parameters(), lr=1e-2, betas=(0.9, 0.999))
    acts_data = env.randn(40, d_in) @ env.randn(d_in, d_in) * 0.5

    def train_step(x):
        recon, acts = sae(x)
        l2 = (recon - x).pow(2).sum(-1).mean()
        l1_loss = l1 * acts.abs().sum(-1).mean()
        loss = l2 + l1_loss
        loss.backward()
        sae.make_decoder_weights_and_grad_unit_norm()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            fired = (acts > 0).any(0)
            sae.steps_since_fired += 1
            sae.steps_since_fired[fired] = 0
            fve = 1 - (recon - x).pow(2).sum() / (x - x.mean(0)).pow(2).sum()
        return loss, (acts > 0).float().sum(-1).mean(), fve
    train_step = env.step(train_step)
    for i in range(6):
        b = i % 2
        env.rec(f"step{i}", train_step(acts_data[b * 20:(b + 1) * 20]))
    env.rec("dead", (sae.steps_since_fired >= 4).sum().item())
    env.rec("state", sae.state_dict())
    env.rec("dec norms", sae.W_dec.norm(dim=-1))


def muon(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def zeropower_via_newtonschulz5(G, steps=5):
        a, b, c = (3.4445, -4.7750, 2.0315)
        X = G.float()
        if G.size(-2) > G.size(-1):
            X = X.mT
        X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
        for _ in range(steps):
            A = X @ X.mT
            B = b * A + c * A @ A
            X = a * X + B @ X
        if G.size(-2) > G.size(-1):
            X = X.mT
        return X

    class Muon(torch.optim.Optimizer):
        def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5):
            super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps))

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = p.grad
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = torch.zeros_like(g)
                    buf = state["momentum_buffer"]
                    buf.lerp_(g, 1 - group["momentum"])
                    g = g.lerp_(buf, group["momentum"]) if group["nesterov"] else buf
                    g = zeropower_via_newtonschulz5(g, steps=group["ns_steps"])
                    g *= max(1, p.size(-2) / p.size(-1)) ** 0.5
                    p.add_(g, alpha=-group["lr"])

    model = env.init(nn.Sequential(nn.Embedding(11, 8), nn.Flatten(), nn.Linear(24, 16), nn.ReLU(),
                                   nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 11)))
    hidden = [p for n, p in model.named_parameters() if p.ndim >= 2 and not n.startswith("0.")]
    other = [p for n, p in model.named_parameters() if p.ndim < 2 or n.startswith("0.")]
    optimizers = [Muon(hidden, lr=0.05), torch.optim.AdamW(other, lr=3e-3, betas=(0.9, 0.95))]
    X, y = env.randint(0, 11, (10, 3)), env.randint(0, 11, (10,))

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        for opt in optimizers:
            opt.step()
        model.zero_grad(set_to_none=True)
        return loss
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"loss{i}", train_step(X, y))
    env.rec("state", model.state_dict())
    env.rec("momentum", [optimizers[0].state[p]["momentum_buffer"] for p in hidden])
    ortho = zeropower_via_newtonschulz5(env.randn(6, 4))
    env.rec("ns", ortho.mT @ ortho)


@pytest.mark.parametrize("program", [sparse_autoencoder, muon])
def test_sae_muon(program):
    run_tutorial(program)
