"""The three functions whose printed IR is golden (test_trace.py). Line numbers matter:
the IR names them, so edit this file only together with the golden texts."""
import llgrad.nn.functional as F


def mlp_loss(x, w1, b1, w2, b2, y):
    h = (x @ w1 + b1).tanh()
    logits = h @ w2 + b2
    return F.cross_entropy(logits, y)


def layer_norm(x, gamma, beta):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / (var + 1e-5).sqrt() * gamma + beta


def inplace_on_view(x, v):
    h = x * 2
    h[:, 1:] = v
    x.t()[0].mul_(3)
    return h.sum(0) + x[1]
