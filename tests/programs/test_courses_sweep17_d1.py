"""Sweep 17 (D), part 1: Karpathy's makemore lectures 1-3: bigram counts sampled with
torch.multinomial and a seeded torch.Generator, the one-hot neural bigram, the MLP over an
embedding table C[X], and the hand-written Linear / BatchNorm1d / Tanh classes with
retain_grad, update:data ratios and torch.histogram of the activations; lecture 5's
WaveNet with torch.nn modules.
Written as the lectures write them (torch as a module parameter), run with PyTorch, with
llgrad eagerly and with llgrad.compile; llgrad's generators give PyTorch's draws for a seed,
so the sampled names and tokens are compared too. See tutorial_harness.py."""
import math  # noqa: F401

import numpy as np  # noqa: F401
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402
from courses_sweep17_words import WORDS, build  # noqa: E402,F401

pytestmark = pytest.mark.torch


def bigram(torch, env):
    F = torch.nn.functional
    words = WORDS
    chars = sorted(list(set(''.join(words))))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi['.'] = 0
    itos = {i: s for s, i in stoi.items()}
    V = len(stoi)
    N = torch.zeros((V, V), dtype=torch.int32)
    for w in words:
        chs = ['.'] + list(w) + ['.']
        for ch1, ch2 in zip(chs, chs[1:]):
            N[stoi[ch1], stoi[ch2]] += 1
    env.rec("N", N)
    p = N[0].float()
    p = p / p.sum()
    g = torch.Generator().manual_seed(2147483647)
    ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
    env.rec("ix", ix)
    env.rec("rand", torch.rand(3, generator=g))
    P = (N + 1).float()
    P /= P.sum(1, keepdims=True)
    env.rec("P", P)
    g = torch.Generator().manual_seed(2147483647)
    outs = []
    for i in range(5):
        out = []
        ix = 0
        while True:
            p = P[ix]
            ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
            out.append(itos[ix])
            if ix == 0:
                break
        outs.append(''.join(out))
    env.rec("samples", outs)
    log_likelihood = 0.0
    n = 0
    for w in words[:5]:
        chs = ['.'] + list(w) + ['.']
        for ch1, ch2 in zip(chs, chs[1:]):
            prob = P[stoi[ch1], stoi[ch2]]
            logprob = torch.log(prob)
            log_likelihood += logprob
            n += 1
    env.rec("nll", -log_likelihood / n)
    env.rec("nll type", type(log_likelihood).__name__)
    xs, ys = [], []
    for w in words:
        chs = ['.'] + list(w) + ['.']
        for ch1, ch2 in zip(chs, chs[1:]):
            xs.append(stoi[ch1]); ys.append(stoi[ch2])
    xs = torch.tensor(xs); ys = torch.tensor(ys)
    num = xs.nelement()
    g = torch.Generator().manual_seed(2147483647)
    W = torch.randn((V, V), generator=g, requires_grad=True)

    def step(W):
        xenc = F.one_hot(xs, num_classes=V).float()
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W**2).mean()
        W.grad = None
        loss.backward()
        return loss
    step = env.step(step)
    for k in range(6):
        loss = step(W)
        env.rec(f"loss{k}", loss.item())
        env.rec(f"grad{k}", W.grad)
        W.data += -50 * W.grad
    g = torch.Generator().manual_seed(2147483647)
    outs = []
    for i in range(4):
        out = []
        ix = 0
        while True:
            xenc = F.one_hot(torch.tensor([ix]), num_classes=V).float()
            logits = xenc @ W
            counts = logits.exp()
            p = counts / counts.sum(1, keepdims=True)
            ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
            out.append(itos[ix])
            if ix == 0:
                break
        outs.append(''.join(out))
    env.rec("nn samples", outs)


def mlp(torch, env):
    F = torch.nn.functional
    Xtr, Ytr, stoi, itos = build(torch, WORDS)
    V = len(stoi)
    g = torch.Generator().manual_seed(2147483647)
    C = torch.randn((V, 10), generator=g)
    W1 = torch.randn((30, 64), generator=g)
    b1 = torch.randn(64, generator=g)
    W2 = torch.randn((64, V), generator=g)
    b2 = torch.randn(V, generator=g)
    parameters = [C, W1, b1, W2, b2]
    env.rec("nparams", sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True
    lre = torch.linspace(-3, 0, 1000)
    lrs = 10**lre
    env.rec("lrs", lrs)

    def fwd(Xb, Yb):
        emb = C[Xb]
        h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        return loss
    fwd = env.step(fwd)
    lossi = []
    for i in range(30):
        ix = torch.randint(0, Xtr.shape[0], (32,), generator=g)
        loss = fwd(Xtr[ix], Ytr[ix])
        lr = 0.1 if i < 20 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.log10().item())
    env.rec("lossi", lossi)
    env.rec("params", parameters)
    with torch.no_grad():
        emb = C[Xtr]
        h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
        env.rec("full", F.cross_entropy(h @ W2 + b2, Ytr))
    g = torch.Generator().manual_seed(2147483647 + 10)
    outs = []
    for _ in range(5):
        out = []
        context = [0] * 3
        while True:
            emb = C[torch.tensor([context])]
            h = torch.tanh(emb.view(1, -1) @ W1 + b1)
            logits = h @ W2 + b2
            probs = F.softmax(logits, dim=1)
            ix = torch.multinomial(probs, num_samples=1, generator=g).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0 or len(out) > 20:
                break
        outs.append(''.join(itos[i] for i in out))
    env.rec("samples", outs)


def batchnorm_classes(torch, env):
    F = torch.nn.functional
    Xtr, Ytr, stoi, itos = build(torch, WORDS)
    V = len(stoi)
    g = torch.Generator().manual_seed(2147483647)

    class Linear:
        def __init__(self, fan_in, fan_out, bias=True):
            self.weight = torch.randn((fan_in, fan_out), generator=g) / fan_in**0.5
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
            self.eps = eps
            self.momentum = momentum
            self.training = True
            self.gamma = torch.ones(dim)
            self.beta = torch.zeros(dim)
            self.running_mean = torch.zeros(dim)
            self.running_var = torch.ones(dim)
        def __call__(self, x):
            if self.training:
                xmean = x.mean(0, keepdim=True)
                xvar = x.var(0, keepdim=True)
            else:
                xmean = self.running_mean
                xvar = self.running_var
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

    n_embd, n_hidden = 10, 32
    C = torch.randn((V, n_embd), generator=g)
    layers = [
        Linear(n_embd * 3, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        Linear(n_hidden, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        Linear(n_hidden, V, bias=False), BatchNorm1d(V),
    ]
    with torch.no_grad():
        layers[-1].gamma *= 0.1
        for layer in layers[:-1]:
            if isinstance(layer, Linear):
                layer.weight *= 5 / 3
    parameters = [C] + [p for layer in layers for p in layer.parameters()]
    for p in parameters:
        p.requires_grad = True
    ud = []
    for i in range(12):
        ix = torch.randint(0, Xtr.shape[0], (32,), generator=g)
        Xb, Yb = Xtr[ix], Ytr[ix]
        emb = C[Xb]
        x = emb.view(emb.shape[0], -1)
        for layer in layers:
            x = layer(x)
        loss = F.cross_entropy(x, Yb)
        for layer in layers:
            layer.out.retain_grad()
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < 8 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        env.rec(f"loss{i}", loss.item())
        with torch.no_grad():
            ud.append([((lr * p.grad).std() / p.data.std()).log10().item() for p in parameters])
    env.rec("ud", ud)
    for i, layer in enumerate(layers[:-1]):
        if isinstance(layer, Tanh):
            t = layer.out
            env.rec(f"tanh{i}", (t.mean().item(), t.std().item(), (t.abs() > 0.97).float().mean().item() * 100))
            hy, hx = torch.histogram(t, density=True)
            env.rec(f"hist{i}", (hy, hx))
            tg = layer.out.grad
            env.rec(f"tanhgrad{i}", (tg.mean().item(), tg.std().item()))
    for p in parameters:
        if p.ndim == 2:
            env.rec(f"w{tuple(p.shape)}", (p.grad.mean().item(), p.grad.std().item(), (p.grad.std() / p.std()).item()))
    for layer in layers:
        layer.training = False
    with torch.no_grad():
        x = C[Xtr].view(Xtr.shape[0], -1)
        for layer in layers:
            x = layer(x)
        env.rec("eval", F.cross_entropy(x, Ytr))
    env.rec("running", [l.running_var for l in layers if isinstance(l, BatchNorm1d)])


def wavenet_nn(torch, env):
    """The same hierarchy with torch.nn modules: BatchNorm1d wants (N, C, L), so the
    lecture's FlattenConsecutive + transpose variant."""
    nn, F = torch.nn, torch.nn.functional
    block_size = 8
    Xtr, Ytr, stoi, itos = build(torch, WORDS, block_size)
    V = len(stoi)
    torch.manual_seed(42)

    class FlattenConsecutive(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.n = n
        def forward(self, x):
            B, T, C = x.shape
            x = x.reshape(B, T // self.n, C * self.n)
            return x.squeeze(1) if x.shape[1] == 1 else x

    class BN(nn.BatchNorm1d):
        def forward(self, x):
            if x.ndim == 3:
                return super().forward(x.transpose(1, 2)).transpose(1, 2)
            return super().forward(x)

    model = nn.Sequential(
        nn.Embedding(V, 8),
        FlattenConsecutive(2), nn.Linear(16, 24, bias=False), BN(24), nn.Tanh(),
        FlattenConsecutive(2), nn.Linear(48, 24, bias=False), BN(24), nn.Tanh(),
        FlattenConsecutive(2), nn.Linear(48, 24, bias=False), BN(24), nn.Tanh(),
        nn.Linear(24, V))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(Xb, Yb):
        loss = F.cross_entropy(model(Xb), Yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    step = env.step(step)
    for i in range(10):
        ix = torch.randint(0, Xtr.shape[0], (32,))
        env.rec(f"loss{i}", step(Xtr[ix], Ytr[ix]))
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        env.rec("eval", F.cross_entropy(model(Xtr), Ytr))


@pytest.mark.parametrize("program", [bigram, mlp, batchnorm_classes, wavenet_nn])
def test_makemore(program):
    run_tutorial(program)


def test_histogram_bins_default_to_100():
    """torch.histogram(t, density=True) (the lecture's plot of the tanh activations): bins
    is 100 unless given; llgrad required it."""
    import llgrad
    a = np.random.default_rng(0).standard_normal(50).astype(np.float32)
    for call in (lambda lib, t: lib.histogram(t, density=True),
                 lambda lib, t: t.histogram(), lambda lib, t: t.histogram(range=(-1.0, 1.0))):
        want = call(torch, torch.tensor(a))
        got = call(llgrad, llgrad.tensor(a))
        for w, g in zip(want, got):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-7)


def test_multinomial_without_replacement_past_the_nonzero_categories():
    """More samples than nonzero probabilities: PyTorch returns zero-probability categories
    in the order its topk leaves ties (p / q ties at 0)."""
    import llgrad
    got = []
    for lib in (torch, llgrad):
        g = lib.Generator().manual_seed(7)
        p = lib.zeros(2, 40)
        p[0, 9] = 1
        p[1, 3] = p[1, 5] = 0.5
        got.append(lib.multinomial(p, 3, generator=g).numpy())
    np.testing.assert_array_equal(got[1], got[0])
