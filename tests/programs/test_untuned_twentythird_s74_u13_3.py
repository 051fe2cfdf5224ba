"""Batch 23 (s74, u13), part 3: a capsule network (squash, routing by agreement over detached
predictions with the last iteration on the live ones, 5-D broadcast matmul, margin loss and a
masked reconstruction), SSD-style hard negative mining (a double argsort rank, boolean masks,
unique with counts, nonzero and masked_select inside the compiled step: data-dependent shapes)
and PCGrad gradient surgery (per-task autograd.grad, a Python branch on the sign of a dot
product, flat gradients written back into .grad)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-4 s a program: the slow set)


def capsule_routing(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_in, d_in, n_out, d_out = 8, 4, 3, 6

    def squash(s, dim=-1, eps=1e-8):
        sq = (s ** 2).sum(dim=dim, keepdim=True)
        return sq / (1 + sq) * s / torch.sqrt(sq + eps)

    class CapsNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 8, 3)
            self.primary = nn.Conv2d(8, 8, 3)               # (-> b, 8, 2, 2: 8 capsules of 4)
            self.W = nn.Parameter(0.1 * torch.ones(1, n_in, n_out, d_out, d_in))
            self.decoder = nn.Sequential(nn.Linear(n_out * d_out, 16), nn.ReLU(), nn.Linear(16, 36),
                                         nn.Sigmoid())

        def forward(self, x, y=None, iters=3):
            h = F.relu(self.conv(x))
            u = self.primary(h)
            u = u.view(x.size(0), 2, d_in, 4).permute(0, 1, 3, 2)
            u = u.reshape(x.size(0), n_in, d_in)
            u = squash(u)
            # (b, n_in, n_out, d_out)
            u_hat = torch.matmul(self.W, u[:, :, None, :, None]).squeeze(-1)
            b = torch.zeros(x.size(0), n_in, n_out)
            u_hat_detached = u_hat.detach()
            for r in range(iters):
                c = F.softmax(b, dim=2)
                if r == iters - 1:
                    v = squash((c.unsqueeze(-1) * u_hat).sum(dim=1))
                else:
                    v = squash((c.unsqueeze(-1) * u_hat_detached).sum(dim=1))
                    b = b + (u_hat_detached * v.unsqueeze(1)).sum(-1)
            lengths = v.norm(dim=-1)
            if y is None:
                y = lengths.argmax(dim=1)
            mask = F.one_hot(y, n_out).float()
            recon = self.decoder((v * mask.unsqueeze(-1)).flatten(1))
            return lengths, recon

    def margin_loss(lengths, y, m_pos=0.9, m_neg=0.1, lam=0.5):
        T = F.one_hot(y, n_out).float()
        L = T * F.relu(m_pos - lengths) ** 2 + lam * (1 - T) * F.relu(lengths - m_neg) ** 2
        return L.sum(dim=1).mean()

    model = env.init(CapsNet())
    with torch.no_grad():
        model.W.add_(env.randn(1, n_in, n_out, d_out, d_in, scale=0.3))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x, y):
        lengths, recon = model(x, y)
        loss = margin_loss(lengths, y) + 0.0005 * F.mse_loss(recon, x.flatten(1), reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), (lengths.argmax(1) == y).sum().item()
    step = env.step(train_step)
    x, y = env.rand(6, 1, 6, 6), env.randint(0, n_out, (6,))
    for t in range(4):
        loss, correct = step(x, y)
        env.rec(f"step {t}", f"loss {loss.item():.5f} correct {correct}")
        env.rec(f"loss {t}", loss)
    with torch.no_grad():
        lengths, _ = model(x)
    env.rec("lengths", lengths)
    env.rec("params", dict(model.named_parameters()))


def hard_negative_mining(torch, env):
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def train_step(x, y):
        logits = m(x)
        ce = F.cross_entropy(logits, y, reduction="none")
        pos = y > 0                                     # (class 0: background)
        num_pos = pos.long().sum(dim=0, keepdim=True)
        num_neg = torch.clamp(3 * num_pos, max=pos.size(0) - 1)
        loss_c = ce.clone()
        loss_c[pos] = 0
        _, loss_idx = loss_c.sort(0, descending=True)
        _, idx_rank = loss_idx.sort(0)
        neg = idx_rank < num_neg.expand_as(idx_rank)
        sel = ce[pos | neg]
        loss = sel.sum() / num_pos.sum().clamp(min=1)
        uniq, counts = torch.unique(y[neg], return_counts=True)
        nz = torch.nonzero(pos).squeeze(1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), sel.shape[0], uniq, counts, nz, torch.masked_select(ce, pos).detach()
    step = env.step(train_step)
    for t in range(4):
        env.rec(f"{t}", step(env.randn(10, 4), env.randint(0, 3, (10,))))
    env.rec("p", dict(m.named_parameters()))


def grad_surgery(torch, env):
    # PCGrad: project conflicting task gradients
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)))
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    params = list(m.parameters())

    def train_step(x, y1, y2):
        out = m(x)
        losses = [F.mse_loss(out[:, 0], y1), F.binary_cross_entropy_with_logits(out[:, 1], y2)]
        grads = []
        for i, l in enumerate(losses):
            g = torch.autograd.grad(l, params, retain_graph=i == 0)
            grads.append(torch.cat([t.reshape(-1) for t in g]))
        g0, g1 = grads
        dot = torch.dot(g0, g1)
        if dot < 0:
            g0p = g0 - dot / g1.norm() ** 2 * g1
            g1p = g1 - dot / g0.norm() ** 2 * g0
        else:
            g0p, g1p = g0, g1
        merged = g0p + g1p
        off = 0
        for p in params:
            n = p.numel()
            p.grad = merged[off:off + n].view_as(p).clone()
            off += n
        opt.step()
        return torch.stack(losses).detach(), bool(dot < 0)
    step = env.step(train_step)
    x = env.randn(8, 4)
    for t in range(5):
        env.rec(f"{t}", step(x, x[:, 0] - x[:, 1], (x[:, 2] > 0).float()))
    env.rec("p", dict(m.named_parameters()))

PROGRAMS = {f.__name__: f for f in (capsule_routing, hard_negative_mining, grad_surgery)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
