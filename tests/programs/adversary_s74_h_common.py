"""Session 74 (h): the inputs and helpers the five s74_h comparison files share (fixed
arrays, a deterministic parameter fill, parameter gradients of a fixed weighting)."""
import numpy as np

X = ((np.arange(24, dtype=np.float32).reshape(4, 6) * 7 % 11) - 5) / 4
IMG = ((np.arange(96, dtype=np.float32).reshape(2, 3, 4, 4) * 5 % 13) - 6) / 5
G = lambda a: ("grad", a)   # noqa: E731
TOL = dict(rtol=1e-5, atol=1e-6)


def _fill(torch, m):
    with torch.no_grad():
        for k, p in enumerate(m.parameters()):
            p.copy_(torch.linspace(-0.6, 0.5 + 0.1 * k, p.numel()).reshape(p.shape))
    return m


def pg(torch, out, m):
    """m's parameter grads of a fixed weighting of out (the graph kept for the harness)."""
    ps = [p for p in m.parameters() if p.requires_grad]
    w = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape) % 5 - 2
    return list(torch.autograd.grad((out * w).sum(), ps, retain_graph=True))

_V = ((np.arange(20, dtype=np.float32).reshape(4, 5) * 3 % 7) - 3) / 3
LP = np.log(np.exp(_V) / np.exp(_V).sum(1, keepdims=True)).astype(np.float32)
_r = np.random.RandomState(0)
CTC = np.log(np.exp(_r.randn(6, 2, 4))
             / np.exp(_r.randn(6, 2, 4)).sum(-1, keepdims=True)).astype(np.float32)
CTC = (CTC - np.log(np.exp(CTC).sum(-1, keepdims=True))).astype(np.float32)      # (T, N, C)
A6, B6 = X[0], X[1][::-1].copy()
PH = (1 / (1 + np.exp(-X)) * 0.5).astype(np.float32)
T01 = (np.arange(24).reshape(4, 6) % 3 == 0).astype(np.float32)
CNT = (np.arange(24).reshape(4, 6) % 4).astype(np.float32)
VAR = (np.arange(24, dtype=np.float32).reshape(4, 6) % 5 + 1) / 4
TP = np.exp(LP[::-1].copy())
K = np.array([-6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, -0.25, 0.25, 2.0], np.float32)
