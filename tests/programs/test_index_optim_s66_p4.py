"""Sweep 66 (p4), tutorial-style programs built on idioms the earlier sweeps touch little, run
with PyTorch, with llgrad eagerly and with llgrad compiling the training step
(tutorial_harness.py):

- feature hashing with signed ids: Python-style `%` and `//` on negative int64 tensors,
  torch.div(rounding_mode='floor' / 'trunc'), fmod against remainder, `%` and floor
  division of float tensors (a gradient flows through them), int32 and uint8 arithmetic
  that wraps, bucketize / searchsorted(right=True) bins used as embedding indices;
- a hand-written Adam over model.parameters() inside the step: moments in a dict keyed by
  parameter, bias correction from a register_buffer step counter (`b1 ** t` of a long
  tensor), cosine LR computed with math from a nonlocal Python counter the step bumps, an
  EMA of the loss in a float buffer, and RMSprop by `p.data -= ...` for the second group;
- an einsum-heavy attention reader: bilinear scores by einsum, masked mean pooling with
  integer lengths (float / int64 promotion), diag and trace by einsum, hand label smoothing
  with scatter_ into a full_like target;
- d2l-style dropout from scratch (a torch.rand mask) with weight decay written into the
  loss by hand, and a from-scratch softmax regression updated over a params list;
- integer bookkeeping in a custom module: a long buffer histogram by bincount(minlength),
  an int counter `+= (pred == y).sum()`, argmax/topk ids turned into floats;
- a step-counter buffer read as a Python int picking a cycle's phase (`k = n.item() % 3`).

test_counter_phase_int reads the counter by int(self.n) instead: int() must return a real
int, so the trace would hold one value of a counter that changes every call; the step runs
eagerly with a warning naming the line, with eager's numbers (the compile contract).
"""
import copy
import math

import pytest

torch = pytest.importorskip("torch")

import tutorial_harness  # noqa: E402
from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def hashed_features(torch, env):
    nn, F = torch.nn, torch.nn.functional
    NB, D = 13, 6
    emb = env.init(nn.Embedding(NB, D))
    bins_emb = env.init(nn.Embedding(6, D))
    head = env.init(nn.Linear(D + 8, 3))
    scale = nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([*emb.parameters(), *bins_emb.parameters(), *head.parameters(),
                           scale], lr=0.1, momentum=0.5)
    edges = torch.tensor([-1.0, -0.25, 0.25, 1.0])

    def train_step(raw, x, y):
        h = (raw * 2654435761 + 7) % NB               # Python-style: never negative
        q = torch.div(raw, 3, rounding_mode="floor")
        t = torch.div(raw, 3, rounding_mode="trunc")
        f, r = torch.fmod(raw, 5), torch.remainder(raw, 5)
        fl = raw // 4
        ids = (h + q.abs()) % NB
        bins = torch.bucketize(x, edges)                # 0..4
        pos = torch.searchsorted(edges, x, right=True)
        small = raw.to(torch.int32) * 3 // 2
        wrapped = (raw % 256).to(torch.uint8) + 200     # uint8 wraps around
        xf = x * scale[0]
        # (`xf // 0.3` has no derivative in PyTorch: div's rounding modes have a zero one)
        frac = torch.stack([xf % 0.5, torch.div(xf, 0.3, rounding_mode="floor"),
                            torch.fmod(xf, 0.4) * scale[1], -xf % 0.3], 1)
        feats = torch.cat([
            frac,
            torch.stack([(f - r).float().mean(1), (q - t).float().mean(1),
                         fl.float().mean(1) / 4, (raw / 4).mean(1)], 1)], 1)
        e = emb(ids).mean(1) + bins_emb(bins) + bins_emb(pos)
        loss = F.cross_entropy(head(torch.cat([e, feats], 1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), (h, q, t, f, r, fl, bins, pos, small, wrapped), frac.detach()

    step = env.step(train_step)
    for it in range(3):
        loss, ints, frac = step(env.randint(-40, 40, (8, 5)), env.randn(8),
                                env.randint(0, 3, (8,)))
        env.rec(f"loss {it}", loss)
        env.rec(f"ints {it}", ints)
        env.rec(f"dtypes {it}", [v.dtype for v in ints])
        env.rec(f"frac {it}", frac)
    env.rec("params", (emb.weight, bins_emb.weight, head.weight, scale, scale.grad))


def handwritten_adam(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16))
            self.out = nn.Linear(16, 2)
            self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))
            self.register_buffer("ema_loss", torch.zeros(()))

        def forward(self, x):
            return self.out(torch.relu(self.body(x)))

    model = env.init(Model())
    adam_params = list(model.body.parameters())
    rms_params = list(model.out.parameters())
    moments = {p: (torch.zeros_like(p), torch.zeros_like(p)) for p in adam_params}
    squares = [torch.zeros_like(p) for p in rms_params]
    b1, b2, eps, base_lr, T = 0.9, 0.999, 1e-8, 2e-2, 6
    calls = 0
    lrs = []

    def train_step(x, y):
        nonlocal calls
        lr = base_lr * 0.5 * (1 + math.cos(math.pi * min(calls, T) / T))
        calls += 1
        lrs.append(lr)
        loss = F.mse_loss(model(x), y)
        for p in model.parameters():
            p.grad = None
        loss.backward()
        with torch.no_grad():
            model.num_updates += 1
            t = model.num_updates
            bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
            for p in adam_params:
                m, v = moments[p]
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                p.addcdiv_(m / bc1, (v / bc2).sqrt() + eps, value=-lr)
            model.ema_loss.mul_(0.8).add_(0.2 * loss)
        for p, sq in zip(rms_params, squares):
            sq.data = 0.9 * sq.data + 0.1 * p.grad.data ** 2
            p.data -= lr * p.grad.data / (sq.data.sqrt() + 1e-6)
        return loss.item(), bc1

    step = env.step(train_step)
    for it in range(5):
        loss, bc1 = step(env.randn(10, 6), env.randn(10, 2))
        env.rec(f"loss {it}", loss)
        env.rec(f"bc1 {it}", (bc1, bc1.dtype))
    env.rec("lrs", lrs)
    env.rec("calls", calls)
    env.rec("buffers", (model.num_updates, model.num_updates.dtype, model.ema_loss))
    env.rec("moments", [moments[p] for p in adam_params])
    env.rec("squares", squares)
    env.rec("params", dict(model.state_dict()))


def einsum_reader(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, K, L = 20, 8, 4, 7

    class Reader(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            self.W = nn.Parameter(torch.randn(D, D) * 0.1)
            self.heads = nn.Parameter(torch.randn(2, D, D) * 0.1)
            self.cls = nn.Linear(D, K)

        def forward(self, tokens, lengths):
            h = self.emb(tokens)                                      # B L D
            mask = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
            scores = torch.einsum("bld,de,bme->blm", h, self.W, h) / math.sqrt(D)
            scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
            ctx = torch.einsum("blm,bmd->bld", scores.softmax(-1), h)
            multi = torch.einsum("bld,hde->bhle", ctx, self.heads).sum(1)
            pooled = (multi * mask[..., None]).sum(1) / lengths[:, None]   # float / long
            gram = torch.einsum("bld,bmd->blm", h, h)
            diag = torch.einsum("bii->bi", gram)
            trace = torch.einsum("ii", self.W)
            return self.cls(pooled), diag, trace

    model = env.init(Reader())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    smooth = 0.1

    def train_step(tokens, lengths, y):
        logits, diag, trace = model(tokens, lengths)
        logp = logits.log_softmax(-1)
        target = torch.full_like(logp, smooth / (K - 1))
        target.scatter_(1, y[:, None], 1 - smooth)
        loss = (-target * logp).sum(-1).mean() + 1e-3 * trace ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), diag.detach().sum(1), target

    step = env.step(train_step)
    for it in range(3):
        lengths = env.randint(1, L + 1, (6,))
        tokens = env.randint(1, V, (6, L)) * (env.torch.arange(L)[None] < lengths[:, None])
        env.rec(f"step {it}", step(tokens, lengths, env.randint(0, K, (6,))))
    env.rec("params", dict(model.state_dict()))
    env.rec("grads", [p.grad for p in model.parameters()])


def d2l_dropout_softmax(torch, env):
    """d2l's dropout_layer from scratch (a torch.rand mask: its draws are the library's,
    compared eager against compiled only) and weight decay added to the loss by hand, then
    softmax regression from scratch over a params list, minibatch SGD under no_grad."""
    nn = torch.nn

    def dropout_layer(X, dropout):
        if dropout == 1:
            return torch.zeros_like(X)
        mask = (torch.rand(X.shape) > dropout).float()
        return mask * X / (1.0 - dropout)

    W1, b1 = env.randn(12, 16, scale=0.1).requires_grad_(), torch.zeros(16, requires_grad=True)
    W2, b2 = env.randn(16, 4, scale=0.1).requires_grad_(), torch.zeros(4, requires_grad=True)
    params = [W1, b1, W2, b2]

    def l2_penalty(w):
        return (w ** 2).sum() / 2

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    def train_step(X, y, p_drop, lambd):
        H = torch.relu(X @ W1 + b1)
        H = dropout_layer(H, p_drop)
        logits = H @ W2 + b2
        l = nn.functional.cross_entropy(logits, y, reduction="none") + lambd * l2_penalty(W1)
        l.sum().backward()
        sgd(params, 0.1, X.shape[0])
        return l.mean().detach()

    step = env.step(train_step)
    for it in range(3):
        X, y = env.randn(8, 12), env.randint(0, 4, (8,))
        env.rec(f"loss drop {it}", step(X, y, 0.5, 0.01), cross=False)
    for it in range(2):     # (no dropout: the draws do not matter, torch's numbers)
        env.rec(f"loss p0 {it}", step(env.randn(8, 12), env.randint(0, 4, (8,)), 0.0, 0.01))
        env.rec(f"loss p1 {it}", step(env.randn(8, 12), env.randint(0, 4, (8,)), 1, 0.0))
    env.rec("params", params, cross=False)

    # softmax regression from scratch: W, b updated over a params list
    W = env.randn(12, 4, scale=0.01).requires_grad_()
    b = torch.zeros(4, requires_grad=True)

    def softmax(X):
        X_exp = torch.exp(X)
        return X_exp / X_exp.sum(1, keepdim=True)

    def net(X):
        return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)

    def cross_entropy(y_hat, y):
        return -torch.log(y_hat[range(len(y_hat)), y])

    def accuracy(y_hat, y):
        y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    def softmax_step(X, y):
        y_hat = net(X)
        l = cross_entropy(y_hat, y)
        l.sum().backward()
        sgd([W, b], 0.5, X.shape[0])
        return float(l.sum()), accuracy(y_hat, y), y.numel()

    step2 = env.step(softmax_step)
    for it in range(3):
        env.rec(f"softmax {it}", step2(env.randn(8, 3, 4), env.randint(0, 4, (8,))))
    env.rec("softmax params", (W, b, W.grad))


def int_bookkeeping(torch, env):
    nn, F = torch.nn, torch.nn.functional
    K = 5

    class Tracker(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, K))
            self.register_buffer("pred_hist", torch.zeros(K, dtype=torch.long))
            self.register_buffer("correct", torch.zeros((), dtype=torch.long))
            self.register_buffer("seen", torch.zeros((), dtype=torch.int32))

        def forward(self, x, y):
            logits = self.net(x)
            pred = logits.argmax(-1)
            with torch.no_grad():
                self.pred_hist += torch.bincount(pred, minlength=K)
                self.correct += (pred == y).sum()
                self.seen += y.numel()
            return logits

    model = env.init(Tracker())
    opt = torch.optim.SGD(model.parameters(), lr=0.2)

    def train_step(x, y):
        logits = model(x, y)
        top2 = logits.topk(2, -1).indices
        rank_feat = (top2[:, 0] - top2[:, 1]).abs().float() / K
        loss = F.cross_entropy(logits, y) + 0.01 * (rank_feat * logits.std(-1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = model.correct.float() / model.seen
        return loss.detach(), acc, top2

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randn(12, 8), env.randint(0, K, (12,))))
    env.rec("buffers", (model.pred_hist, model.correct, model.seen,
                        [b.dtype for b in model.buffers()]))
    env.rec("params", dict(model.net.state_dict()))


def counter_phase(torch, env, read=int):
    """A step counter buffer read into a Python int that picks the phase of a cycle
    (`k = int(self.n) % 3`), as curriculum and cyclic schedules do; read=Tensor.item is
    the same program with `self.n.item() % 3`."""
    nn = torch.nn

    class Cyclic(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 4), nn.Linear(4, 1)
            self.register_buffer("n", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.n += 1
            k = read(self.n) % 3
            return self.b(self.a(x).tanh() * (k + 1)), k

    model = env.init(Cyclic())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def train_step(x, y):
        out, k = model(x)
        loss = (out.squeeze(1) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), k

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", step(env.randn(4, 3), env.randn(4)))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {
    "hashed_features": hashed_features,
    "handwritten_adam": handwritten_adam,
    "einsum_reader": einsum_reader,
    "d2l_dropout_softmax": d2l_dropout_softmax,
    "int_bookkeeping": int_bookkeeping,
    "counter_phase_item": lambda torch, env: counter_phase(torch, env, lambda t: t.item()),
}
FAST = ("handwritten_adam", "int_bookkeeping", "counter_phase_item")


@pytest.mark.parametrize("name,program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)


class _WaitingEnv(tutorial_harness.Env):
    """Each compiled call waits for its build (LLGRAD_COMPILE=background): the next call
    runs the native entry and reads its guards, as in sync mode."""
    def step(self, fn, **options):
        cf = super().step(fn, **options)

        def call(*args):
            try:
                return cf(*args)
            finally:
                cf.wait()
        return call


def test_counter_phase_int():
    import llgrad
    states = []
    ref = tutorial_harness.Env(torch, "torch", states)
    counter_phase(torch, ref)
    eager = tutorial_harness.Env(llgrad, "eager", copy.deepcopy(states))
    counter_phase(llgrad, eager)
    compiled = _WaitingEnv(llgrad, "compiled", copy.deepcopy(states))
    with pytest.warns(UserWarning, match=r"running eagerly: the value read from a tensor at "
                      r"test_index_optim_s66_p4\.py:\d+ changes from call to call"):
        counter_phase(llgrad, compiled)
    tutorial_harness.compare(ref.records, eager.records, "eager vs torch", True, 2e-4, 1e-5)
    tutorial_harness.compare(eager.records, compiled.records, "compiled vs eager", False, 0, 0)
