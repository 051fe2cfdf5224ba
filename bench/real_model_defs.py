"""The models of bench/real_models.py, written once against torch's API (llgrad has the same
names), with their data, losses, initial weights, the runners that time them in torch and
llgrad (loss + gradients, or a whole AdamW step), their analytic GEMM FLOP counts, and the
measurement of this machine's GEMM rate that turns those counts into a bound.

    import real_model_defs as d
    model = d.MAKE["cnn_bn"](torch)            # or llgrad
    state, names = d.torch_state("cnn_bn")     # torch's initial weights, parameter names
    arrays = d.data("cnn_bn")                  # NumPy inputs (and targets)
    loss = d.loss_fn("cnn_bn", torch)          # loss(model, *arrays as tensors)
    r = d.build_lib("llgrad compiled", "cnn_bn", state, arrays, step_mode=False)
    r.threads = 1; r.block(10)                 # -> (wall s, CPU s) of 10 calls
    d.gemm_flops("cnn_bn")                     # GEMM FLOPs of the loss and its gradients
"""
import time

import numpy as np

WORKLOADS = ("block", "stack4", "cnn", "cnn_bn", "lstm", "gru")
TITLES = {
    "block": "pre-LN transformer block: batch 8, 64 tokens, width 128, 4 heads, causal "
             "softmax attention, GELU MLP 512; loss mean((y - t)^2)",
    "stack4": "4 of those pre-LN blocks in sequence (same sizes and loss)",
    "cnn": "small CNN: batch 32 of 3x32x32, conv3x3(16)+ReLU+maxpool2, conv3x3(32)+ReLU+"
           "maxpool2, linear(2048->10), cross-entropy",
    "cnn_bn": "CNN with BatchNorm (training mode): batch 32 of 3x32x32, conv3x3(16, no bias)+"
              "BN+ReLU, conv3x3(32, no bias)+BN+ReLU, avg_pool2d(2), linear(8192->10), "
              "cross-entropy",
    "lstm": "LSTM sequence model: batch 32, 32 steps, input 32, nn.LSTM hidden 128, "
            "linear(128->10) per step, cross-entropy",
    "gru": "GRU sequence model: batch 32, 32 steps, input 32, nn.GRU hidden 128, "
           "linear(128->10) per step, cross-entropy",
}
LR, WEIGHT_DECAY = 1e-3, 1e-2         # AdamW (torch's default weight decay)
# the block's sizes (jax's version in real_model_jax.py reads them too)
BATCH, TOKENS, WIDTH, HEADS, HIDDEN = 8, 64, 128, 4, 512


def _block(lib):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
            self.fc1, self.fc2 = nn.Linear(WIDTH, HIDDEN), nn.Linear(HIDDEN, WIDTH)

        def forward(self, x, mask):
            b, t, c = x.shape
            d = c // HEADS
            q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, HEADS, d).permute(2, 0, 3, 1, 4)
            s = (q @ k.transpose(-2, -1)) * (1.0 / d ** 0.5)
            a = F.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
            h = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, c))
            return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))
    return Block()


def _stack4(lib):
    nn = lib.nn

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([_block(lib) for _ in range(4)])

        def forward(self, x, mask):
            for b in self.blocks:
                x = b(x, mask)
            return x
    return Stack()


def _cnn(lib):
    nn, F = lib.nn, lib.nn.functional

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)
            self.c2 = nn.Conv2d(16, 32, 3, padding=1)
            self.fc = nn.Linear(32 * 8 * 8, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.c1(x)), 2)
            x = F.max_pool2d(F.relu(self.c2(x)), 2)
            return self.fc(x.reshape(x.shape[0], -1))
    return CNN()


def _cnn_bn(lib):
    nn, F = lib.nn, lib.nn.functional

    class CNNBN(nn.Module):
        # no conv bias before a BatchNorm, as tutorials write it: BN subtracts the batch
        # mean, so such a bias has a zero gradient (rounding noise, which AdamW would turn
        # into steps of ~lr and the parameter check into a false mismatch)
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.c2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(32)
            self.fc = nn.Linear(32 * 16 * 16, 10)

        def forward(self, x):
            x = F.relu(self.bn1(self.c1(x)))
            x = F.avg_pool2d(F.relu(self.bn2(self.c2(x))), 2)
            return self.fc(x.reshape(x.shape[0], -1))
    return CNNBN()


def _rnn(kind):
    def make(lib):
        nn = lib.nn

        class Seq(nn.Module):
            def __init__(self):
                super().__init__()
                setattr(self, kind, getattr(nn, kind.upper())(32, 128, batch_first=True))
                self.head = nn.Linear(128, 10)

            def forward(self, x):
                return self.head(getattr(self, kind)(x)[0]).reshape(-1, 10)
        return Seq()
    return make


MAKE = {"block": _block, "stack4": _stack4, "cnn": _cnn, "cnn_bn": _cnn_bn,
        "lstm": _rnn("lstm"), "gru": _rnn("gru")}


def data(key):
    rng = np.random.default_rng(0)
    if key in ("block", "stack4"):
        x = rng.standard_normal((BATCH, TOKENS, WIDTH)).astype(np.float32)
        t = rng.standard_normal((BATCH, TOKENS, WIDTH)).astype(np.float32)
        mask = np.triu(np.ones((TOKENS, TOKENS), dtype=bool), 1)
        return [x, mask, t]
    if key in ("cnn", "cnn_bn"):
        return [rng.standard_normal((32, 3, 32, 32)).astype(np.float32),
                rng.integers(0, 10, 32).astype(np.int64)]
    return [rng.standard_normal((32, 32, 32)).astype(np.float32),
            rng.integers(0, 10, 32 * 32).astype(np.int64)]


def loss_fn(key, lib):
    F = lib.nn.functional
    if key in ("block", "stack4"):
        def block_loss(model, x, mask, t):
            return ((model(x, mask) - t) ** 2).mean()
        return block_loss

    def ce_loss(model, x, y):
        return F.cross_entropy(model(x), y)
    ce_loss.__name__ = f"{key}_loss"
    return ce_loss


def torch_state(key):
    """-> (state_dict as NumPy arrays, parameter names in order): every system starts
    from these weights (torch's initialisation, seed 0)."""
    import torch
    torch.manual_seed(0)
    model = MAKE[key](torch)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return state, [n for n, _ in model.named_parameters()]


# ---- the runners of torch and llgrad ---------------------------------------------------------
def set_threads(t):
    import torch

    import llgrad
    torch.set_num_threads(t)
    llgrad.set_num_threads(t)           # (and NumPy's OpenBLAS)


def train_step(model, opt, compute_loss, inputs):
    # module-level: a closure holding the model would make its tensors captured inputs
    # of llgrad's compiled step, read by the full guard walk on every call; the inputs
    # in one tuple, not *args: llgrad's guard walker does not serve a *args signature
    opt.zero_grad()
    loss = compute_loss(model, *inputs)
    loss.backward()
    opt.step()
    return loss.detach()


class Runner:
    """step() runs one call (loss + gradients, or a training step); fetch(result) ->
    (loss, {name: NumPy gradient or parameter}, copied); block(n) -> (wall s, CPU s)."""
    def __init__(self, system, step, fetch):
        self.system, self.step, self.fetch = system, step, fetch

    def block(self, n):
        set_threads(self.threads)
        step = self.step
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            step()
        return time.perf_counter() - t0, time.process_time() - c0


def build_lib(system, key, state, arrays, step_mode):
    """torch eager, torch.compile, llgrad eager, llgrad compiled."""
    if system.startswith("llgrad"):
        import llgrad as lib
    else:
        import torch as lib
    model = MAKE[key](lib)
    model.load_state_dict({k: lib.tensor(v.copy()) for k, v in state.items()})
    names, params = zip(*model.named_parameters())
    args = [lib.tensor(a.copy()) for a in arrays]
    fn = loss_fn(key, lib)
    if system == "torch.compile":
        fn = lib.compile(fn, dynamic=False)
    if step_mode:
        opt = lib.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY)
        run = lib.compile(train_step) if system == "llgrad compiled" else train_step

        inputs = tuple(args)

        def step():
            return run(model, opt, fn, inputs)

        def fetch(res):
            return float(res.item()), {n: np.array(p.detach().numpy()) for n, p in
                                       zip(names, params)}
    else:
        if system == "llgrad compiled":
            fn = lib.compile(fn)

        def step():
            loss = fn(model, *args)
            return loss, lib.autograd.grad(loss, params)

        def fetch(res):
            return float(res[0].item()), {n: np.array(g.numpy()) for n, g in
                                          zip(names, res[1])}
    return Runner(system, step, fetch)


# ---- the bound: GEMM FLOPs at this machine's GEMM rate ----------------------------------------
def _gemms(key):
    """[(m, n, k, products)]: each GEMM of the forward, and how many m*n*k products it
    costs with its gradients: 3 (forward, input gradient, weight gradient), or 2 where the
    input is the data (no gradient wanted). Convolutions count as im2col GEMMs
    (m = batch*out_h*out_w, k = in_channels*3*3); the recurrent product counts 3 at
    every step (the first one's h0 gradient is not wanted: < 1/32 too many)."""
    if key in ("block", "stack4"):
        n_tok, d = BATCH * TOKENS, WIDTH // HEADS
        one = [(n_tok, 3 * WIDTH, WIDTH, 3), (n_tok, WIDTH, WIDTH, 3),
               (n_tok, HIDDEN, WIDTH, 3), (n_tok, WIDTH, HIDDEN, 3),
               (BATCH * HEADS * TOKENS, TOKENS, d, 3),       # q @ k^T (causal: all of it)
               (BATCH * HEADS * TOKENS, d, TOKENS, 3)]       # a @ v
        return one * (4 if key == "stack4" else 1)
    if key == "cnn":
        return [(32 * 32 * 32, 16, 27, 2), (32 * 16 * 16, 32, 144, 3), (32, 10, 2048, 3)]
    if key == "cnn_bn":
        return [(32 * 32 * 32, 16, 27, 2), (32 * 32 * 32, 32, 144, 3), (32, 10, 8192, 3)]
    gates = 128 * (4 if key == "lstm" else 3)
    return [(32 * 32, gates, 32, 2), (32 * 32, gates, 128, 3), (32 * 32, 10, 128, 3)]


def gemm_flops(key):
    """GEMM FLOPs (2 per multiply-add) of one loss and all its gradients; a training step
    adds no GEMM (the optimiser is elementwise)."""
    return sum(2 * m * n * k * p for m, n, k, p in _gemms(key))


def gemm_rate(seconds=0.5, size=512):
    """This machine's float32 GEMM rate in FLOP/s: NumPy's size^3 matmul (the order of the
    workloads' largest products) on the threads NumPy has now (the caller pins 1), the
    fastest of many single calls (~2 ms each, short enough to fall between the time
    slices of other engineers' jobs): a bound wants the machine at its best."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    out = np.empty_like(a)
    np.matmul(a, b, out=out)
    best, t_end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        np.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - t0)
    return 2 * size ** 3 / best
