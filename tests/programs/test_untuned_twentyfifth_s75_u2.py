"""Batch 25 (s75, u2): tutorial programs with PyTorch, llgrad eagerly and llgrad compiling the
step (tutorial_harness.py): NeuralSort (Grover et al.'s relaxed permutation matrix from
|s_i - s_j| row sums and a (n + 1 - 2i) scaling, learning to rank against argsort's
one-hot), LSQ quantisation-aware training (a learned step size initialised from the first batch behind
a buffer flag, the gradient-scale and round-pass detach tricks, a per-group lr), Kronecker-adapter fine-tuning of a frozen Linear (torch.kron) beside a
Monarch layer (torch.block_diag of unbound blocks and a reshape-transpose permutation),
CP and Tucker tensor completion (multi-operand einsum, an observed-entry mask), CoordConv
with octave convolutions (linspace / meshgrid coordinate channels, avg_pool2d and nearest
interpolate between the frequency paths) and involution with Meta-ACON trained on ordinal
counts by the squared earth mover's distance (nn.Unfold, cumsum of the class CDF)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-5 s a program, the first
# with torch's import and the builds: the slow set)


def neuralsort_ranking(torch, env):
    nn, F = torch.nn, torch.nn.functional
    B, n, d, tau = 6, 5, 4, 1.0

    def neural_sort(s, tau):                        # s: B, n, 1 (the reference code's form)
        n = s.size(1)
        one = torch.ones((n, 1))
        A_s = torch.abs(s - s.permute(0, 2, 1))
        Bm = torch.matmul(A_s, torch.matmul(one, one.t()))
        scaling = (n + 1 - 2 * (torch.arange(n) + 1)).type(torch.float)
        C = torch.matmul(s, scaling.unsqueeze(0))
        P_max = (C - Bm).permute(0, 2, 1)
        return F.softmax(P_max / tau, dim=-1)

    # (no bias on the score: a shift of every score moves a row of P_max alike, which the
    # softmax drops: its gradient is rounding, which Adam would turn into steps of lr)
    scorer = env.init(nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, 1, bias=False)))
    opt = torch.optim.Adam(scorer.parameters(), lr=1e-2)
    w_true = env.randn(d)

    def train_step(x):
        y = x @ w_true
        perm = torch.argsort(y, dim=1, descending=True)
        P_true = F.one_hot(perm, n).float()
        P_hat = neural_sort(scorer(x), tau)
        loss = -(P_true * torch.log(P_hat + 1e-20)).sum(dim=(1, 2)).mean() / n
        opt.zero_grad()
        loss.backward()
        opt.step()
        correct = (P_hat.argmax(dim=-1) == perm).float()
        return loss.detach(), correct.mean(), correct.all(dim=1).sum().item()
    step = env.step(train_step)
    for t in range(5):
        loss, acc, exact = step(env.randn(B, n, d))
        env.rec(f"loss {t}", loss)
        env.rec(f"line {t}", f"step {t}: loss {loss.item():.4f} acc {acc.item():.3f} "
                             f"exact {exact}")
    env.rec("params", dict(scorer.named_parameters()))


def lsq_quantization(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def grad_scale(x, scale):
        y, y_grad = x, x * scale
        return (y - y_grad).detach() + y_grad

    def round_pass(x):
        return (x.round() - x).detach() + x

    class LSQ(nn.Module):
        """Esser et al.'s learned step size: the step initialised from the first batch."""
        def __init__(self, nbits, signed):
            super().__init__()
            self.Qn = -2 ** (nbits - 1) if signed else 0
            self.Qp = 2 ** (nbits - 1) - 1 if signed else 2 ** nbits - 1
            self.alpha = nn.Parameter(torch.tensor(1.0))
            self.register_buffer("init_state", torch.zeros(1))

        def forward(self, x):
            if self.training and self.init_state == 0:
                self.alpha.data.copy_(2 * x.abs().mean() / math.sqrt(self.Qp))
                self.init_state.fill_(1)
            g = 1.0 / math.sqrt(x.numel() * self.Qp)
            alpha = grad_scale(self.alpha, g)
            return round_pass((x / alpha).clamp(self.Qn, self.Qp)) * alpha

    class QLinear(nn.Linear):
        def __init__(self, i, o, nbits=4):
            super().__init__(i, o)
            self.wq, self.aq = LSQ(nbits, True), LSQ(nbits, False)

        def forward(self, x):
            return F.linear(self.aq(x), self.wq(self.weight), self.bias)

    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), QLinear(12, 12), nn.ReLU(),
                          QLinear(12, 3))
    env.init(model)
    params = [p for n, p in model.named_parameters() if not n.endswith("alpha")]
    steps = [p for n, p in model.named_parameters() if n.endswith("alpha")]
    opt = torch.optim.SGD([{"params": params}, {"params": steps, "lr": 1e-3}],
                          lr=0.05, momentum=0.9)

    def train_step(x, y):
        model.train()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    for t in range(5):
        env.rec(f"loss {t}", step(env.randn(10, 6), env.randint(0, 3, (10,))))
    model.eval()
    with torch.no_grad():
        w_int = (model[2].weight / model[2].wq.alpha).round().clamp(-8, 7)
        env.rec("int weights", w_int)
        env.rec("levels used", len(torch.unique(w_int)))
    env.rec("params", dict(model.named_parameters()))
    env.rec("buffers", dict(model.named_buffers()))


def kron_adapter_monarch(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n, nb = 16, 4                       # (features, Monarch blocks of n // nb)
    b = n // nb

    class KronAdapter(nn.Module):
        def __init__(self, base, a=(4, 4), scale=0.5):
            super().__init__()
            self.base, self.scale = base, scale
            out_f, in_f = base.weight.shape
            self.A = nn.Parameter(torch.zeros(a[0], a[1]))
            self.B = nn.Parameter(torch.ones(out_f // a[0], in_f // a[1]) * 0.1)

        def forward(self, x):
            delta = torch.kron(self.A, self.B) * self.scale
            return F.linear(x, self.base.weight + delta, self.base.bias)

    class Monarch(nn.Module):
        def __init__(self):
            super().__init__()
            self.L = nn.Parameter(torch.empty(nb, b, b))
            self.R = nn.Parameter(torch.empty(nb, b, b))
            self.register_buffer("perm", torch.arange(n).reshape(nb, b).t().reshape(-1))

        def forward(self, x):
            R = torch.block_diag(*self.R.unbind(0))
            L = torch.block_diag(*self.L.unbind(0))
            x = (x @ R.t())[:, self.perm]
            return (x @ L.t())[:, self.perm]

    base = env.init(nn.Linear(n, n))
    base.requires_grad_(False)
    model = nn.Sequential(KronAdapter(base), nn.GELU(), Monarch(), nn.LayerNorm(n),
                          nn.Linear(n, 3))
    env.init(model[4])
    with torch.no_grad():
        model[2].L.copy_(env.randn(nb, b, b, scale=0.5))
        model[2].R.copy_(env.randn(nb, b, b, scale=0.5))
    trainable = [p for p in model.parameters() if p.requires_grad]
    env.rec("trainable", sum(p.numel() for p in trainable))
    opt = torch.optim.AdamW(trainable, lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=3)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()
    step = env.step(train_step)
    for t in range(5):
        env.rec(f"loss {t}", step(env.randn(8, n), env.randint(0, 3, (8,))))
    env.rec("lr", sched.get_last_lr())
    env.rec("params", dict(model.named_parameters()))
    env.rec("base frozen", all(not p.requires_grad for p in base.parameters()))


def tensor_completion(torch, env):
    nn = torch.nn
    I, J, K, R = 6, 5, 4, 3

    class CP(nn.Module):
        def __init__(self):
            super().__init__()
            self.factors = nn.ParameterList([nn.Parameter(env.randn(m, R, scale=0.5))
                                             for m in (I, J, K)])

        def forward(self):
            a, b, c = self.factors
            return torch.einsum("ir,jr,kr->ijk", a, b, c)

    class Tucker(nn.Module):
        def __init__(self, ranks=(2, 2, 2)):
            super().__init__()
            self.core = nn.Parameter(env.randn(*ranks, scale=0.5))
            self.U = nn.ParameterList([nn.Parameter(env.randn(m, r, scale=0.5))
                                       for m, r in zip((I, J, K), ranks)])

        def forward(self):
            return torch.einsum("pqr,ip,jq,kr->ijk", self.core, *self.U)

    a, b, c = env.randn(I, 2), env.randn(J, 2), env.randn(K, 2)
    truth = torch.einsum("ir,jr,kr->ijk", a, b, c)
    mask = env.rand(I, J, K) < 0.6
    models = [CP(), Tucker()]
    opts = [torch.optim.Adam(models[0].parameters(), lr=0.05),
            torch.optim.RMSprop(models[1].parameters(), lr=0.01, alpha=0.9)]

    def train_step(model, opt):
        pred = model()
        loss = ((pred - truth)[mask] ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            held = ((pred - truth)[~mask] ** 2).mean().sqrt()
            rel = torch.linalg.norm(pred - truth) / torch.linalg.norm(truth)
        return loss.detach(), held, rel
    step = env.step(train_step)
    for t in range(4):
        for name, m, o in zip(("cp", "tucker"), models, opts):
            loss, held, rel = step(m, o)
            env.rec(f"{name} loss {t}", loss)
            env.rec(f"{name} line {t}", f"{name} {t}: train {loss.item():.5f} "
                                        f"held-out rmse {held.item():.4f} rel {rel.item():.4f}")
    env.rec("cp", dict(models[0].named_parameters()))
    env.rec("tucker", dict(models[1].named_parameters()))


def coordconv_octave(torch, env):
    nn, F = torch.nn, torch.nn.functional
    S = 8

    class AddCoords(nn.Module):
        def forward(self, x):
            b, _, h, w = x.shape
            yy, xx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w),
                                    indexing="ij")
            coords = torch.stack([xx, yy]).unsqueeze(0).expand(b, -1, -1, -1)
            return torch.cat([x, coords.to(x.dtype)], dim=1)

    class OctConv(nn.Module):
        def __init__(self, c_in, c_out, alpha=0.5):
            super().__init__()
            li, lo = int(alpha * c_in), int(alpha * c_out)
            hi, ho = c_in - li, c_out - lo
            self.h2h, self.h2l = nn.Conv2d(hi, ho, 3, padding=1), nn.Conv2d(hi, lo, 3, padding=1)
            self.l2h, self.l2l = nn.Conv2d(li, ho, 3, padding=1), nn.Conv2d(li, lo, 3, padding=1)

        def forward(self, x):
            x_h, x_l = x
            y_h = self.h2h(x_h) + F.interpolate(self.l2h(x_l), scale_factor=2, mode="nearest")
            y_l = self.l2l(x_l) + self.h2l(F.avg_pool2d(x_h, 2))
            return F.relu(y_h), F.relu(y_l)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.coords = AddCoords()
            self.stem = nn.Conv2d(3, 8, 1)
            self.oct = OctConv(8, 8)
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * S * S + 4 * (S // 2) ** 2, 2),
                                      nn.Tanh())

        def forward(self, img):
            x = self.stem(self.coords(img))
            x_h, x_l = x[:, :4], F.avg_pool2d(x[:, 4:], 2)
            y_h, y_l = self.oct((x_h, x_l))
            return self.head(torch.cat([y_h.flatten(1), y_l.flatten(1)], dim=1))

    model = env.init(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    def batch(bs):
        pos = env.randint(0, S, (bs, 2))
        img = torch.zeros(bs, 1, S, S)
        img[torch.arange(bs), 0, pos[:, 1], pos[:, 0]] = 1.0
        return img, pos.float() / (S - 1) * 2 - 1

    def train_step(img, target):
        pred = model(img)
        loss = F.mse_loss(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), (pred - target).abs().max()
    step = env.step(train_step)
    for t in range(4):
        loss, err = step(*batch(6))
        env.rec(f"loss {t}", loss)
        env.rec(f"err {t}", err)
    env.rec("params", dict(model.named_parameters()))


def involution_acon_emd(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C, K, G, S, NC = 4, 3, 2, 6, 5

    class Involution(nn.Module):
        def __init__(self, channels, kernel_size=3, groups=2, reduction=2):
            super().__init__()
            self.k, self.g = kernel_size, groups
            # (no conv bias before a training-mode BatchNorm: its gradient is rounding)
            self.reduce = nn.Sequential(nn.Conv2d(channels, channels // reduction, 1, bias=False),
                                        nn.BatchNorm2d(channels // reduction), nn.ReLU())
            self.span = nn.Conv2d(channels // reduction, kernel_size ** 2 * groups, 1)
            self.unfold = nn.Unfold(kernel_size, 1, (kernel_size - 1) // 2, 1)

        def forward(self, x):
            b, c, h, w = x.shape
            weight = self.span(self.reduce(x))
            weight = weight.view(b, self.g, self.k ** 2, h, w).unsqueeze(2)
            out = self.unfold(x).view(b, self.g, c // self.g, self.k ** 2, h, w)
            return (weight * out).sum(dim=3).view(b, c, h, w)

    class MetaACON(nn.Module):
        def __init__(self, width, r=2):
            super().__init__()
            self.p1 = nn.Parameter(torch.ones(1, width, 1, 1) * 1.5)
            self.p2 = nn.Parameter(torch.ones(1, width, 1, 1) * 0.5)
            self.fc1 = nn.Conv2d(width, max(r, width // r), 1)
            self.fc2 = nn.Conv2d(max(r, width // r), width, 1)

        def forward(self, x):
            beta = torch.sigmoid(self.fc2(self.fc1(x.mean(dim=2, keepdim=True)
                                                   .mean(dim=3, keepdim=True))))
            dpx = (self.p1 - self.p2) * x
            return dpx * torch.sigmoid(beta * dpx) + self.p2 * x

    model = env.init(nn.Sequential(nn.Conv2d(1, C, 3, padding=1), Involution(C),
                                   MetaACON(C), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                   nn.Linear(C, NC)))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def emd2_loss(logits, y):
        cdf_p = torch.cumsum(F.softmax(logits, dim=1), dim=1)
        cdf_y = torch.cumsum(F.one_hot(y, NC).to(logits.dtype), dim=1)
        return ((cdf_p - cdf_y) ** 2).sum(dim=1).mean()

    def train_step(img, y):
        model.train()
        logits = model(img)
        loss = emd2_loss(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        expected = (F.softmax(logits, 1) * torch.arange(NC).float()).sum(1)
        return loss.detach(), (expected - y).abs().mean()
    step = env.step(train_step)
    for t in range(4):
        img = (env.rand(6, 1, S, S) > 0.85).float()
        count = img.flatten(1).sum(1).clamp(max=NC - 1).long()
        loss, mae = step(img, count)
        env.rec(f"loss {t}", loss)
        env.rec(f"mae {t}", mae)
    env.rec("params", dict(model.named_parameters()))
    env.rec("buffers", dict(model.named_buffers()))


PROGRAMS = {f.__name__: f for f in (neuralsort_ranking, lsq_quantization, kron_adapter_monarch,
                                    tensor_completion, coordconv_octave, involution_acon_emd)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
