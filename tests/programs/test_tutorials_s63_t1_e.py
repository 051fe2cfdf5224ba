"""Sweep 63 (t1), file e: tutorial and paper-reference programs run with PyTorch, with
llgrad eagerly and with llgrad compiling each whole training step through
tutorial_harness.py (the same per-step losses, parameters and gradients, no llgrad
warning, compiled code for every step).

- xLSTM's sLSTM (Beck et al.): exponential input gate, sigmoid forget gate in log space,
  the stabiliser state m_t = max(log f + m_{t-1}, i~) by torch.maximum, normaliser state
  n, recurrent weights block-diagonal over heads (torch.block_diag of per-head blocks);
- learning Koopman invariant subspaces (Takeishi et al.): an encoder whose time-shifted
  embeddings are related by the least-squares linear operator A = Y X^+ (torch.linalg.pinv
  inside the loss), the residual ||Y - A X|| plus a reconstruction decoder;
- alignment and uniformity on the hypersphere (Wang & Isola's reference code verbatim):
  (x - y).norm(p=2, dim=1).pow(2).mean() and torch.pdist(x, p=2).pow(2).mul(-t).exp()
  .mean().log() on normalised embeddings of two augmented views."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def xlstm_slstm_block_diag(torch, env):
    nn, F = torch.nn, torch.nn.functional
    vocab, d_in, hidden, heads, seq, batch = 16, 8, 8, 2, 6, 4
    head_dim = hidden // heads

    class sLSTMCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.W = nn.Linear(d_in, 4 * hidden, bias=False)  # (z, i, f, o input weights)
            # (no input-gate bias: from zero states, adding one constant to every i~
            # scales c and n alike and leaves h = c / n unchanged, so its gradient is
            # rounding noise, which AdamW would scale up to lr-sized steps)
            self.b_z, self.b_f, self.b_o = (nn.Parameter(torch.zeros(hidden)) for _ in range(3))
            # recurrent weights: per gate, one block per head (no mixing between heads)
            self.R = nn.Parameter(torch.randn(4, heads, head_dim, head_dim) / head_dim ** 0.5)

        def recurrent(self, h):
            blocks = [torch.block_diag(*self.R[g].unbind(0)) for g in range(4)]
            return torch.cat([h @ b.t() for b in blocks], dim=-1)

        def forward(self, x_t, state):
            h, c, n, m = state
            z_, i_, f_, o_ = (self.W(x_t) + self.recurrent(h)).chunk(4, dim=-1)
            z_, f_, o_ = z_ + self.b_z, f_ + self.b_f, o_ + self.b_o
            log_f = F.logsigmoid(f_)
            m_new = torch.maximum(log_f + m, i_)           # stabiliser
            i = torch.exp(i_ - m_new)
            f = torch.exp(log_f + m - m_new)
            c = f * c + i * torch.tanh(z_)
            n = f * n + i
            h = torch.sigmoid(o_) * (c / n)
            return h, (h, c, n, m_new)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_in)
            self.cell = sLSTMCell()
            self.norm = nn.GroupNorm(heads, hidden)       # (xLSTM: head-wise normalisation)
            self.out = nn.Linear(hidden, vocab)

        def forward(self, tokens):
            b = tokens.size(0)
            zeros = torch.zeros(b, hidden)
            state = (zeros, zeros, zeros, zeros)
            x, outs = self.embed(tokens), []
            for t in range(tokens.size(1)):
                h, state = self.cell(x[:, t], state)
                outs.append(self.out(self.norm(h)))
            return torch.stack(outs, 1)

    model = env.init(Model())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95),
                                  weight_decay=0.1)

    def train_step(tokens):
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        start = env.randint(0, vocab, (batch, 1))
        tokens = (start + torch.arange(seq + 1) * 3) % vocab     # (a learnable sequence)
        env.rec(f"step {it}", step(tokens))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def lkis_koopman_pinv(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d_obs, d_latent, n_traj, t_len = 3, 4, 3, 10

    def simulate(x0, steps):
        """A damped rotation observed through a nonlinearity (the data stream's system)."""
        theta = 0.3
        rot = torch.tensor([[0.95 * torch.cos(torch.tensor(theta)).item(),
                             -0.95 * torch.sin(torch.tensor(theta)).item()],
                            [0.95 * torch.sin(torch.tensor(theta)).item(),
                             0.95 * torch.cos(torch.tensor(theta)).item()]])
        xs = [x0]
        for _ in range(steps - 1):
            xs.append(xs[-1] @ rot.t())
        s = torch.stack(xs, 1)                                # (traj, T, 2)
        return torch.cat([s, (s[..., :1] ** 2 - s[..., 1:] ** 2)], -1)

    class LKIS(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(d_obs, 16), nn.PReLU(), nn.Linear(16, d_latent))
            self.decoder = nn.Sequential(nn.Linear(d_latent, 16), nn.PReLU(), nn.Linear(16, d_obs))

        def forward(self, obs):
            g = self.encoder(obs)                             # (traj, T, d_latent)
            X = g[:, :-1].reshape(-1, d_latent).t()           # (d_latent, N)
            Y = g[:, 1:].reshape(-1, d_latent).t()
            A = Y @ torch.linalg.pinv(X)                      # least-squares Koopman operator
            residual = ((Y - A @ X) ** 2).sum(0).mean()
            recon = F.mse_loss(self.decoder(g), obs)
            return residual, recon, A

    model = env.init(LKIS())
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    def train_step(obs):
        optimizer.zero_grad()
        residual, recon, A = model(obs)
        loss = residual + 0.5 * recon
        loss.backward()
        optimizer.step()
        return loss.detach(), residual.detach(), A.detach()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", step(simulate(env.randn(n_traj, 2), t_len)))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def alignment_uniformity_pdist(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d_in, d_out, batch = 10, 6, 12

    def align_loss(x, y, alpha=2):
        return (x - y).norm(p=2, dim=1).pow(alpha).mean()

    def uniform_loss(x, t=2):
        return torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()

    encoder = env.init(nn.Sequential(nn.Linear(d_in, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                     nn.Linear(16, d_out)))
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    align_w, unif_w, unif_t = 1.0, 1.0, 2

    def train_step(view1, view2):
        encoder.train()
        optimizer.zero_grad()
        x = F.normalize(encoder(view1), dim=1)
        y = F.normalize(encoder(view2), dim=1)
        align = align_loss(x, y)
        unif = (uniform_loss(x, t=unif_t) + uniform_loss(y, t=unif_t)) / 2
        loss = align_w * align + unif_w * unif
        loss.backward()
        optimizer.step()
        return loss.detach(), align.detach(), unif.detach()

    step = env.step(train_step)
    data = env.randn(32, d_in)
    for it in range(6):
        idx = env.randint(0, 32, (batch,))
        base = data[idx]
        env.rec(f"step {it}", step(base + 0.1 * env.randn(batch, d_in),
                                   base * (1 + 0.1 * env.randn(batch, d_in))))
    env.rec("grads", _grads(encoder))
    env.rec("params", dict(encoder.state_dict()))


PROGRAMS = {
    "xlstm_slstm_block_diag": xlstm_slstm_block_diag,
    "lkis_koopman_pinv": lkis_koopman_pinv,
    "alignment_uniformity_pdist": alignment_uniformity_pdist,
}


# (over ~1 s each on an idle machine, most of it cold compile)
SLOW = {'xlstm_slstm_block_diag'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    _, _, compiled = run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces == 1, (cf.fn.__name__, cf.n_traces)
