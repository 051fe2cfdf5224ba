"""Sweep 17 (D), part 2: makemore lectures 4-5: 'becoming a backprop ninja' (every
intermediate's gradient written by hand and compared with autograd's through
retain_grad, the forward compiled and retain_grad on its outputs) and the WaveNet
hierarchy (FlattenConsecutive, a BatchNorm1d over (0, 1)) hand-written (with torch.nn:
part 1).
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


def ninja(torch, env):
    F = torch.nn.functional
    Xtr, Ytr, stoi, itos = build(torch, WORDS)
    vocab_size = len(stoi)
    n_embd, n_hidden, block_size = 10, 64, 3
    g = torch.Generator().manual_seed(2147483647)
    C = torch.randn((vocab_size, n_embd), generator=g)
    W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5/3)/((n_embd * block_size)**0.5)
    b1 = torch.randn(n_hidden, generator=g) * 0.1
    W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1
    b2 = torch.randn(vocab_size, generator=g) * 0.1
    bngain = torch.randn((1, n_hidden)) * 0.1 + 1.0
    bnbias = torch.randn((1, n_hidden)) * 0.1
    parameters = [C, W1, b1, W2, b2, bngain, bnbias]
    for p in parameters:
        p.requires_grad = True
    batch_size = 32
    n = batch_size
    ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
    Xb, Yb = Xtr[ix], Ytr[ix]

    def forward(Xb, Yb):
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hprebn = embcat @ W1 + b1
        bnmeani = 1/n*hprebn.sum(0, keepdim=True)
        bndiff = hprebn - bnmeani
        bndiff2 = bndiff**2
        bnvar = 1/(n-1)*(bndiff2).sum(0, keepdim=True)
        bnvar_inv = (bnvar + 1e-5)**-0.5
        bnraw = bndiff * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        logit_maxes = logits.max(1, keepdim=True).values
        norm_logits = logits - logit_maxes
        counts = norm_logits.exp()
        counts_sum = counts.sum(1, keepdims=True)
        counts_sum_inv = counts_sum**-1
        probs = counts * counts_sum_inv
        logprobs = probs.log()
        loss = -logprobs[range(n), Yb].mean()
        ts = [logprobs, probs, counts, counts_sum, counts_sum_inv, norm_logits, logit_maxes,
              logits, h, hpreact, bnraw, bnvar_inv, bnvar, bndiff2, bndiff, hprebn, bnmeani,
              embcat, emb]
        return loss, ts
    forward = env.step(forward)
    loss, ts = forward(Xb, Yb)
    for p in parameters:
        p.grad = None
    for t in ts:
        t.retain_grad()
    loss.backward()
    (logprobs, probs, counts, counts_sum, counts_sum_inv, norm_logits, logit_maxes,
     logits, h, hpreact, bnraw, bnvar_inv, bnvar, bndiff2, bndiff, hprebn, bnmeani,
     embcat, emb) = ts
    env.rec("loss", loss.item())

    def cmp(s, dt, t):
        ex = torch.all(dt == t.grad).item()
        app = torch.allclose(dt, t.grad)
        maxdiff = (dt - t.grad).abs().max().item()
        env.rec(s, (app, dt))
        env.rec(s + " maxdiff<1e-6", maxdiff < 1e-6)
        env.rec(s + " types", (type(ex).__name__, type(app).__name__, type(maxdiff).__name__))

    dlogprobs = torch.zeros_like(logprobs)
    dlogprobs[range(n), Yb] = -1.0/n
    dprobs = (1.0 / probs) * dlogprobs
    dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
    dcounts = counts_sum_inv * dprobs
    dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv
    dcounts += torch.ones_like(counts) * dcounts_sum
    dnorm_logits = counts * dcounts
    dlogits = dnorm_logits.clone()
    dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
    dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    dhpreact = (1.0 - h**2) * dh
    dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
    dbnraw = bngain * dhpreact
    dbnbias = dhpreact.sum(0, keepdim=True)
    dbndiff = bnvar_inv * dbnraw
    dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
    dbnvar = (-0.5*(bnvar + 1e-5)**-1.5) * dbnvar_inv
    dbndiff2 = (1.0/(n-1))*torch.ones_like(bndiff2) * dbnvar
    dbndiff += (2*bndiff) * dbndiff2
    dhprebn = dbndiff.clone()
    dbnmeani = (-dbndiff).sum(0)
    dhprebn += 1.0/n * (torch.ones_like(hprebn) * dbnmeani)
    dembcat = dhprebn @ W1.T
    dW1 = embcat.T @ dhprebn
    db1 = dhprebn.sum(0)
    demb = dembcat.view(emb.shape)
    dC = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            dC[ix] += demb[k, j]
    for name, d, t in [("logprobs", dlogprobs, logprobs), ("probs", dprobs, probs),
                       ("counts_sum_inv", dcounts_sum_inv, counts_sum_inv),
                       ("counts_sum", dcounts_sum, counts_sum), ("counts", dcounts, counts),
                       ("norm_logits", dnorm_logits, norm_logits),
                       ("logit_maxes", dlogit_maxes, logit_maxes), ("logits", dlogits, logits),
                       ("h", dh, h), ("W2", dW2, W2), ("b2", db2, b2),
                       ("hpreact", dhpreact, hpreact), ("bngain", dbngain, bngain),
                       ("bnbias", dbnbias, bnbias), ("bnraw", dbnraw, bnraw),
                       ("bnvar_inv", dbnvar_inv, bnvar_inv), ("bnvar", dbnvar, bnvar),
                       ("bndiff2", dbndiff2, bndiff2), ("bndiff", dbndiff, bndiff),
                       ("bnmeani", dbnmeani, bnmeani), ("hprebn", dhprebn, hprebn),
                       ("embcat", dembcat, embcat), ("W1", dW1, W1), ("b1", db1, b1),
                       ("emb", demb, emb), ("C", dC, C)]:
        cmp(name, d, t)
    # exercise 2: the fast cross-entropy and batchnorm backward
    loss_fast = F.cross_entropy(logits, Yb)
    env.rec("fast", (loss_fast.item() - loss.item()) < 1e-6)
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    cmp("logits fast", dlogits, logits)
    hpreact_fast = bngain * (hprebn - hprebn.mean(0, keepdim=True)) / torch.sqrt(hprebn.var(0, keepdim=True, unbiased=True) + 1e-5) + bnbias
    env.rec("bn max diff small", (hpreact_fast - hpreact).abs().max().item() < 1e-6)
    dhprebn = bngain*bnvar_inv/n * (n*dhpreact - dhpreact.sum(0) - n/(n-1)*bnraw*(dhpreact*bnraw).sum(0))
    cmp("hprebn fast", dhprebn, hprebn)
    # exercise 4: training with manual gradients only
    with torch.no_grad():
        for i in range(5):
            ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
            Xb, Yb = Xtr[ix], Ytr[ix]
            emb = C[Xb]
            embcat = emb.view(emb.shape[0], -1)
            hprebn = embcat @ W1 + b1
            bnmean = hprebn.mean(0, keepdim=True)
            bnvar = hprebn.var(0, keepdim=True, unbiased=True)
            bnvar_inv = (bnvar + 1e-5)**-0.5
            bnraw = (hprebn - bnmean) * bnvar_inv
            hpreact = bngain * bnraw + bnbias
            h = torch.tanh(hpreact)
            logits = h @ W2 + b2
            loss = F.cross_entropy(logits, Yb)
            dlogits = F.softmax(logits, 1)
            dlogits[range(n), Yb] -= 1
            dlogits /= n
            dh = dlogits @ W2.T
            dW2 = h.T @ dlogits
            db2 = dlogits.sum(0)
            dhpreact = (1.0 - h**2) * dh
            dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
            dbnbias = dhpreact.sum(0, keepdim=True)
            dhprebn = bngain*bnvar_inv/n * (n*dhpreact - dhpreact.sum(0) - n/(n-1)*bnraw*(dhpreact*bnraw).sum(0))
            dembcat = dhprebn @ W1.T
            dW1 = embcat.T @ dhprebn
            db1 = dhprebn.sum(0)
            demb = dembcat.view(emb.shape)
            dC = torch.zeros_like(C)
            dC.index_add_(0, Xb.view(-1), demb.view(-1, n_embd))
            grads = [dC, dW1, db1, dW2, db2, dbngain, dbnbias]
            for p, grad in zip(parameters, grads):
                p.data += -0.1 * grad
            env.rec(f"manual loss {i}", loss.item())
    env.rec("params", parameters)


def wavenet(torch, env):
    F = torch.nn.functional
    block_size = 8
    Xtr, Ytr, stoi, itos = build(torch, WORDS, block_size)
    vocab_size = len(stoi)
    torch.manual_seed(42)

    class Linear:
        def __init__(self, fan_in, fan_out, bias=True):
            self.weight = torch.randn((fan_in, fan_out)) / fan_in**0.5
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
                if x.ndim == 2:
                    dim = 0
                elif x.ndim == 3:
                    dim = (0, 1)
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

    class Embedding:
        def __init__(self, num_embeddings, embedding_dim):
            self.weight = torch.randn((num_embeddings, embedding_dim))
        def __call__(self, IX):
            self.out = self.weight[IX]
            return self.out
        def parameters(self):
            return [self.weight]

    class FlattenConsecutive:
        def __init__(self, n):
            self.n = n
        def __call__(self, x):
            B, T, C = x.shape
            x = x.view(B, T//self.n, C*self.n)
            if x.shape[1] == 1:
                x = x.squeeze(1)
            self.out = x
            return self.out
        def parameters(self):
            return []

    class Sequential:
        def __init__(self, layers):
            self.layers = layers
        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            self.out = x
            return self.out
        def parameters(self):
            return [p for layer in self.layers for p in layer.parameters()]

    n_embd, n_hidden = 8, 24
    model = Sequential([
        Embedding(vocab_size, n_embd),
        FlattenConsecutive(2), Linear(n_embd * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        FlattenConsecutive(2), Linear(n_hidden*2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        FlattenConsecutive(2), Linear(n_hidden*2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        Linear(n_hidden, vocab_size),
    ])
    with torch.no_grad():
        model.layers[-1].weight *= 0.1
    parameters = model.parameters()
    env.rec("nparams", sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True

    def step(Xb, Yb):
        logits = model(Xb)
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        return loss
    step = env.step(step)
    lossi = []
    for i in range(15):
        ix = torch.randint(0, Xtr.shape[0], (32,))
        loss = step(Xtr[ix], Ytr[ix])
        lr = 0.1 if i < 10 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.log10().item())
    env.rec("lossi", lossi)
    env.rec("lossi view", torch.tensor(lossi[:15]).view(-1, 5).mean(1))
    for layer in model.layers:
        env.rec(layer.__class__.__name__ + " shape", tuple(layer.out.shape))
    env.rec("running", [l.running_mean for l in model.layers if isinstance(l, BatchNorm1d)])
    for layer in model.layers:
        layer.training = False
    with torch.no_grad():
        env.rec("eval", F.cross_entropy(model(Xtr), Ytr).item())
    outs = []
    for _ in range(4):
        out = []
        context = [0] * block_size
        while True:
            logits = model(torch.tensor([context]))
            probs = F.softmax(logits, dim=1)
            ix = torch.multinomial(probs, num_samples=1).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0 or len(out) > 15:
                break
        outs.append(''.join(itos[i] for i in out))
    env.rec("samples", outs)


@pytest.mark.parametrize("program", [ninja, wavenet])
def test_makemore(program):
    run_tutorial(program)
