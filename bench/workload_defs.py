"""The workloads of bench/workloads.py: their data, the hand-written NumPy forward +
backward (the reference every system is checked against, run in float64), and one loss
body per workload written against a small op namespace `K`, so llgrad, torch and jax run
the very same expression.

Only NumPy is imported here: the peers are imported by bench/peers.py when asked for."""
import math

import numpy as np

GELU_K = math.sqrt(2.0 / math.pi)
LN_EPS = 1e-5


class Workload:
    def __init__(self, key, title, make, names, diff, reference, body, mem=True, rtol=1e-4):
        self.key, self.title = key, title
        self.make = make            # rng -> list of float32 / int64 arrays (the arguments)
        self.names = names          # argument names, for the JSON and the error report
        self.diff = diff            # argument positions the gradient is taken of
        self.reference = reference  # arrays -> (loss, [grads]), hand-written NumPy
        self.body = body            # (K, *args) -> scalar loss, for the autodiff systems
        self.mem = mem              # whether the peak-memory column is measured
        self.rtol = rtol

    def data(self, seed=0):
        return self.make(np.random.default_rng(seed))


def _f32(a):
    return np.asarray(a, dtype=np.float32)


def _linear_params(rng, sizes):
    out = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(n_in)
        out += [_f32(rng.uniform(-bound, bound, (n_in, n_out))),
                _f32(rng.uniform(-bound, bound, n_out))]
    return out


# ---- W1 / W2: MLP + softmax cross-entropy ------------------------------------------------------
def _mlp_data(batch, sizes):
    def make(rng):
        x = _f32(rng.standard_normal((batch, sizes[0])))
        y = rng.integers(0, sizes[-1], batch).astype(np.int64)
        return [x, y] + _linear_params(rng, sizes)
    return make


def _mlp_reference(act):
    """Forward and backward of x -> [act(x @ w + b)]* -> logits -> mean cross-entropy."""
    def ref(x, y, *params):
        ws, bs = params[0::2], params[1::2]
        hs, h = [x], x
        for k, (w, b) in enumerate(zip(ws, bs)):
            z = h @ w + b
            h = z if k == len(ws) - 1 else (np.tanh(z) if act == "tanh" else np.maximum(z, 0))
            hs.append(h)
        logits = hs[-1]
        n = logits.shape[0]
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        s = e.sum(axis=1, keepdims=True)
        logp = logits - m - np.log(s)
        loss = -logp[np.arange(n), y].mean()
        dz = e / s
        dz[np.arange(n), y] -= 1
        dz /= n
        grads = [None] * len(params)
        for k in range(len(ws) - 1, -1, -1):
            grads[2 * k] = hs[k].T @ dz
            grads[2 * k + 1] = dz.sum(axis=0)
            if k:
                dh = dz @ ws[k].T
                dz = dh * (1 - hs[k] * hs[k]) if act == "tanh" else dh * (hs[k] > 0)
        return loss, grads
    return ref


def _mlp_body(act, n_layers):
    def body(K, x, y, *params):
        h = x
        for k in range(n_layers):
            h = h @ params[2 * k] + params[2 * k + 1]
            if k < n_layers - 1:
                h = K.tanh(h) if act == "tanh" else K.relu(h)
        return K.cross_entropy(h, y)
    return body


def _mlp_names(n_layers):
    return ["x", "y"] + [f"{p}{k + 1}" for k in range(n_layers) for p in ("w", "b")]


# ---- W3: elementwise on 1M floats ----------------------------------------------------------------
def _w3_make(rng):
    n = 1_000_000
    return [_f32(rng.standard_normal(n)) for _ in range(3)]


def _w3_reference(x, w, b):
    t = np.tanh(x * w + b)
    s = 1 / (1 + np.exp(-x))
    loss = (t * s + 0.5 * x * x).sum()
    du = s * (1 - t * t)
    dx = du * w + t * s * (1 - s) + x
    return loss, [dx, du * x, du]


def _w3_body(K, x, w, b):
    return K.sum(K.tanh(x * w + b) * K.sigmoid(x) + 0.5 * x * x)


# ---- W4: layer norm + tanh-GELU ------------------------------------------------------------------
def _w4_make(rng):
    return [_f32(rng.standard_normal((512, 1024))),
            _f32(1 + 0.1 * rng.standard_normal(1024)), _f32(0.1 * rng.standard_normal(1024))]


def _w4_reference(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(var + LN_EPS)
    xhat = xc * rstd
    z = xhat * gamma + beta
    th = np.tanh(GELU_K * (z + 0.044715 * (z * z * z)))
    y = 0.5 * z * (1 + th)
    loss = (y * y).mean()
    dy = 2 * y / y.size
    dz = dy * (0.5 * (1 + th) + 0.5 * z * (1 - th * th) * GELU_K * (1 + 3 * 0.044715 * z * z))
    dxhat = dz * gamma
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return loss, [dx, (dz * xhat).sum(axis=0), dz.sum(axis=0)]


def _w4_body(K, x, gamma, beta):
    y = K.gelu_tanh(K.layer_norm(x) * gamma + beta)
    return K.mean(y * y)


# ---- W5: 20 cheap elementwise ops on 16 elements -------------------------------------------------
def _w5_make(rng):
    return [_f32(rng.standard_normal(16))]


def _w5_body(K, x):
    h = x * 0.5 + 1.0           # 1, 2
    h = K.tanh(h)               # 3
    h = h * x                   # 4
    h = h - 0.25                # 5
    h = -h                      # 6
    h = K.sigmoid(h)            # 7
    h = h + x                   # 8
    h = h * h                   # 9
    h = h * 0.3 - 0.1           # 10, 11
    h = K.tanh(h)               # 12
    h = h + 2.0                 # 13
    h = h * x                   # 14
    h = K.sigmoid(h)            # 15
    h = h - x                   # 16
    h = h * 1.5                 # 17
    h = -h                      # 18
    h = K.tanh(h)               # 19
    h = h + 0.5                 # 20
    return K.sum(h)


def _w5_reference(x):
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    a1 = np.tanh(x * 0.5 + 1.0)
    a2 = -(a1 * x - 0.25)
    a3 = sig(a2)
    a4 = a3 + x
    a5 = np.tanh(a4 * a4 * 0.3 - 0.1)
    a6 = (a5 + 2.0) * x
    a7 = sig(a6)
    a8 = np.tanh(-((a7 - x) * 1.5))
    loss = (a8 + 0.5).sum()
    # backward, op by op in reverse
    g = np.ones_like(x)
    g = g * (1 - a8 * a8) * -1.5            # tanh, neg, *1.5
    dx = -g                                  # h - x
    g = g * a7 * (1 - a7)                    # sigmoid
    dx = dx + g * (a5 + 2.0)                 # h * x (x side)
    g = g * x * (1 - a5 * a5) * 0.3 * 2 * a4  # (h*x), tanh, *0.3, h*h
    dx = dx + g                              # h + x
    g = g * a3 * (1 - a3) * -1               # sigmoid, neg
    dx = dx + g * a1                         # h * x (x side)
    g = g * x * (1 - a1 * a1) * 0.5          # h * x, tanh, x*0.5
    return loss, [dx + g]


WORKLOADS = {
    "W1": Workload("W1", "MLP 64-128-128-10 tanh, batch 32, cross-entropy",
                   _mlp_data(32, (64, 128, 128, 10)), _mlp_names(3), list(range(2, 8)),
                   _mlp_reference("tanh"), _mlp_body("tanh", 3), mem=False),
    "W2": Workload("W2", "MLP 784-512-256-10 relu, batch 256, cross-entropy",
                   _mlp_data(256, (784, 512, 256, 10)), _mlp_names(3), list(range(2, 8)),
                   _mlp_reference("relu"), _mlp_body("relu", 3)),
    "W3": Workload("W3", "sum(tanh(x*w+b)*sigmoid(x) + 0.5*x*x), 1M elements",
                   _w3_make, ["x", "w", "b"], [0, 1, 2], _w3_reference, _w3_body),
    "W4": Workload("W4", "mean(gelu_tanh(layer_norm(x)*gamma+beta)^2), x 512x1024",
                   _w4_make, ["x", "gamma", "beta"], [0, 1, 2], _w4_reference, _w4_body),
    "W5": Workload("W5", "20 elementwise ops on 16 elements, sum",
                   _w5_make, ["x"], [0], _w5_reference, _w5_body, mem=False),
}


def reference64(wl, arrays):
    """The check values: the hand-written NumPy forward + backward in float64."""
    a64 = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]
    loss, grads = wl.reference(*a64)
    return float(loss), [np.asarray(g) for g in grads]


def max_rel_err(loss, grads, ref):
    """max over the loss and every gradient of max|got - ref| / max|ref|."""
    rl, rg = ref
    errs = [abs(float(loss) - rl) / max(abs(rl), 1e-30)]
    if len(grads) != len(rg):
        return math.inf
    for g, r in zip(grads, rg):
        g = np.asarray(g, dtype=np.float64)
        if g.shape != r.shape:
            return math.inf
        errs.append(float(np.abs(g - r).max()) / max(float(np.abs(r).max()), 1e-30))
    err = max(errs)
    return math.inf if math.isnan(err) else err
