"""Sweep 20 (C), part 1: Karpathy's makemore, part 3 and part 5. The hand-rolled Linear /
BatchNorm1d / Tanh classes of "Building makemore part 3" (kaiming-scaled weights, the last
layer's gamma shrunk under no_grad, every layer's `.out.retain_grad()` in a diagnostics pass
(the retained gradients read after the compiled step), the update-to-data ratios read with
.item(), running statistics updated inside `with torch.no_grad()`,
an eval split with `layer.training = False`), and the WaveNet of part 5 (FlattenConsecutive
views, a BatchNorm1d that reduces over dims (0, 1) for 3-D inputs). Run with PyTorch, with
llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _layers(torch, env):
    class Linear:
        def __init__(self, fan_in, fan_out, bias=True):
            self.weight = env.randn(fan_in, fan_out) / fan_in ** 0.5
            self.bias = torch.zeros(fan_out) if bias else None

        def __call__(self, x):
            self.out = x @ self.weight
            if self.bias is not None:
                self.out += self.bias
            return self.out

        def parameters(self):
            return [self.weight] + ([] if self.bias is None else [self.bias])

    class BatchNorm1d:
        def __init__(self, dim, eps=1e-5, momentum=0.1):
            self.eps, self.momentum, self.training = eps, momentum, True
            self.gamma, self.beta = torch.ones(dim), torch.zeros(dim)
            self.running_mean, self.running_var = torch.zeros(dim), torch.ones(dim)

        def __call__(self, x):
            if self.training:
                dim = 0 if x.ndim == 2 else (0, 1)
                xmean = x.mean(dim, keepdim=True)
                xvar = x.var(dim, keepdim=True)
            else:
                xmean, xvar = self.running_mean, self.running_var
            xhat = (x - xmean) / torch.sqrt(xvar + self.eps)
            self.out = self.gamma * xhat + self.beta
            if self.training:
                with torch.no_grad():
                    self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
                    self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
            return self.out

        def parameters(self):
            return [self.gamma, self.beta]

    class Tanh:
        def __call__(self, x):
            self.out = torch.tanh(x)
            return self.out

        def parameters(self):
            return []

    return Linear, BatchNorm1d, Tanh


def makemore_part3(torch, env):
    F = torch.nn.functional
    Linear, BatchNorm1d, Tanh = _layers(torch, env)
    vocab, block, n_embd, n_hidden = 27, 3, 6, 20
    C = env.randn(vocab, n_embd)
    layers = [Linear(n_embd * block, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
              Linear(n_hidden, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
              Linear(n_hidden, vocab, bias=False), BatchNorm1d(vocab)]
    with torch.no_grad():
        layers[-1].gamma *= 0.1
        for layer in layers[:-1]:
            if isinstance(layer, Linear):
                layer.weight *= 5 / 3
    parameters = [C] + [p for layer in layers for p in layer.parameters()]
    for p in parameters:
        p.requires_grad = True
    Xtr, Ytr = env.randint(0, vocab, (64, block)), env.randint(0, vocab, (64,))

    def step(Xb, Yb, lr, retain=False):
        emb = C[Xb]
        x = emb.view(emb.shape[0], -1)
        for layer in layers:
            x = layer(x)
        loss = F.cross_entropy(x, Yb)
        if retain:      # (the diagnostics pass: every layer's output keeps its gradient)
            for layer in layers:
                layer.out.retain_grad()
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -lr * p.grad
        ud = [((lr * p.grad).std() / p.data.std()).log10().item() for p in parameters]
        grads = [layer.out.grad.std() for layer in layers if isinstance(layer, Tanh)] if retain else []
        return loss, ud, grads

    step = env.step(step)
    lossi = []
    for i in range(6):
        ix = env.randint(0, Xtr.shape[0], (16,))
        lr = 0.1 if i < 4 else 0.01
        loss, ud, grads = step(Xtr[ix], Ytr[ix], lr)
        lossi.append(loss.log10().item())
        env.rec(f"ud{i}", ud)
        env.rec(f"gstd{i}", grads)
    env.rec("lossi", lossi)
    for i in range(2):
        loss, ud, grads = step(Xtr[:16], Ytr[:16], 0.01, retain=True)
        env.rec(f"diag{i}", (loss, ud, grads))
        outs = [layer.out for layer in layers]
        env.rec(f"retained{i}", ([o.retains_grad for o in outs], [o.grad for o in outs],
                                 [o.requires_grad for o in outs], [o.is_leaf for o in outs]))
    env.rec("running", [layers[1].running_mean, layers[4].running_var])

    @torch.no_grad()
    def split_loss(X, Y):
        x = C[X].view(X.shape[0], -1)
        for layer in layers:
            x = layer(x)
        return F.cross_entropy(x, Y)
    for layer in layers:
        layer.training = False
    env.rec("val", env.step(split_loss)(Xtr[:32], Ytr[:32]))
    env.rec("params", parameters)


def makemore_wavenet(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class FlattenConsecutive(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def forward(self, x):
            B, T, C = x.shape
            x = x.view(B, T // self.n, C * self.n)
            if x.shape[1] == 1:
                x = x.squeeze(1)
            return x

    class BatchNorm1d(nn.Module):       # reduces over (0, 1) for (B, T, C) inputs
        def __init__(self, dim, eps=1e-5, momentum=0.1):
            super().__init__()
            self.eps, self.momentum = eps, momentum
            self.gamma = nn.Parameter(torch.ones(dim))
            self.beta = nn.Parameter(torch.zeros(dim))
            self.register_buffer("running_mean", torch.zeros(dim))
            self.register_buffer("running_var", torch.ones(dim))

        def forward(self, x):
            if self.training:
                dim = 0 if x.ndim == 2 else (0, 1)
                xmean, xvar = x.mean(dim, keepdim=True), x.var(dim, keepdim=True, unbiased=True)
                with torch.no_grad():
                    self.running_mean.mul_(1 - self.momentum).add_(self.momentum * xmean.squeeze())
                    self.running_var.lerp_(xvar.squeeze(), self.momentum)
            else:
                xmean, xvar = self.running_mean, self.running_var
            return self.gamma * (x - xmean) / torch.sqrt(xvar + self.eps) + self.beta

    vocab, n_embd, n_hidden = 27, 8, 16
    model = nn.Sequential(
        nn.Embedding(vocab, n_embd),
        FlattenConsecutive(2), nn.Linear(n_embd * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), nn.Tanh(),
        FlattenConsecutive(2), nn.Linear(n_hidden * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), nn.Tanh(),
        FlattenConsecutive(2), nn.Linear(n_hidden * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), nn.Tanh(),
        nn.Linear(n_hidden, vocab))
    env.init(model)
    with torch.no_grad():
        model[-1].weight *= 0.1
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    X, Y = env.randint(0, vocab, (48, 8)), env.randint(0, vocab, (48,))

    def train_step(xb, yb):
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()
    train_step = env.step(train_step)
    losses = []
    for i in range(5):
        ix = env.randint(0, 48, (12,))
        losses.append(train_step(X[ix], Y[ix]))
        if i == 3:
            for g in opt.param_groups:
                g["lr"] = 0.05
    env.rec("losses", losses)
    model.eval()
    evaluate = env.step(torch.no_grad()(lambda x: F.softmax(model(x), dim=1)))
    env.rec("probs", evaluate(X[:5]))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [makemore_part3, makemore_wavenet])
def test_makemore(program):
    run_tutorial(program)
