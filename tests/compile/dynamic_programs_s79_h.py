"""Programs whose compiled function sees shapes that change between calls (issue 19 item 3),
each written once against a namespace T (torch or llgrad): `program(T, W, compiled)` ->
(the numbers it produced, its Probe). W is a width no other program uses, so that kernel
caches shared in the process do not hide a build from the counters. A Probe calls the
compiled function, waits for its native code (LLGRAD_COMPILE=background as sync), and logs
(n_traces, n_llvm_compiles) after each call."""
import numpy as np
import llgrad

class Probe:
    def __init__(self, fn, compiled, **kw):
        self.compiled = compiled
        self.fn = llgrad.compile(fn, **kw) if compiled else fn
        self.log = []
    def __call__(self, *a, **k):
        r = self.fn(*a, **k)
        if self.compiled:
            self.fn.wait()
            self.log.append((self.fn.n_traces, self.fn.n_llvm_compiles))
        return r

def arr(v):
    if hasattr(v, "detach"):
        return np.array(v.detach().numpy())
    return v

def gpt(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    V, C, BS = 11, 8 + W, 6
    emb, pos, head = nn.Embedding(V, C), nn.Embedding(BS, C), nn.Linear(C, V)
    q = nn.Linear(C, 3 * C)
    def forward(idx):
        B, Tn = idx.shape
        x = emb(idx) + pos(T.arange(Tn))
        qq, k, v = q(x).split(C, dim=2)
        att = qq @ k.transpose(-2, -1) * C ** -0.5
        mask = T.tril(T.ones(BS, BS))[:Tn, :Tn]
        att = att.masked_fill(mask == 0, float("-inf")).softmax(-1)
        return head(att @ v)[:, -1, :]
    p = Probe(forward, compiled)
    idx = T.tensor(np.array([[1, 2], [3, 4]]))
    outs = []
    with T.no_grad():
        for _ in range(9):
            logits = p(idx[:, -BS:])
            outs.append(arr(logits))
            nxt = logits.argmax(-1, keepdim=True)
            idx = T.cat([idx, nxt], 1)
    outs.append(arr(idx))
    return outs, p

def gpt_cache(T, W, compiled):
    # KV cache grown by cat: step takes new token's x and the cache (k, v) of growing length
    T.manual_seed(0)
    nn = T.nn
    C = 8 + W
    q = nn.Linear(C, 3 * C)
    def step(x, kc, vc):
        qq, k, v = q(x).split(C, dim=-1)
        kc = T.cat([kc, k], 1); vc = T.cat([vc, v], 1)
        att = (qq @ kc.transpose(-2, -1) * C ** -0.5).softmax(-1)
        return att @ vc, kc, vc
    p = Probe(step, compiled)
    rng = np.random.default_rng(W)
    kc = T.zeros(2, 0, C); vc = T.zeros(2, 0, C)
    x = T.tensor(rng.standard_normal((2, 1, C)).astype(np.float32))
    outs = []
    with T.no_grad():
        for _ in range(8):
            y, kc, vc = p(x, kc, vc)
            outs.append(arr(y)); x = y
    return outs, p

def gru_greedy(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    H, V = 6 + W, 7
    enc, dec = nn.GRU(5, H, batch_first=True), nn.GRU(5, H, batch_first=True)
    emb, out = nn.Embedding(V, 5), nn.Linear(H, V)
    def encode(src):
        _, h = enc(emb(src)); return h
    def dstep(tok, h):
        o, h = dec(emb(tok), h); return out(o[:, -1]), h
    pe, pd = Probe(encode, compiled), Probe(dstep, compiled)
    rng = np.random.default_rng(W)
    outs = []
    with T.no_grad():
        for L in (3, 5, 4, 7, 6, 8, 2, 9):
            src = T.tensor(rng.integers(0, V, (2, L)))
            h = pe(src); tok = T.zeros(2, 1, dtype=T.long)
            for _ in range(3):
                lg, h = pd(tok, h); tok = lg.argmax(-1, keepdim=True); outs.append(arr(lg))
    return outs, pe

def ragged_train(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    m = nn.Sequential(nn.Linear(4 + W, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = T.optim.SGD(m.parameters(), 0.1)
    def step(x, y):
        opt.zero_grad(); l = nn.functional.cross_entropy(m(x), y); l.backward(); opt.step(); return l
    p = Probe(step, compiled)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((70, 4 + W)).astype(np.float32); Y = rng.integers(0, 3, 70)
    outs = []
    for _ in range(3):
        for i in range(0, 70, 16):
            outs.append(arr(p(T.tensor(X[i:i+16]), T.tensor(Y[i:i+16]))))
    outs += [arr(t) for t in m.parameters()]
    return outs, p

def padded_masked(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    E = 4 + W
    lin = nn.Linear(E, E)
    opt = T.optim.SGD(lin.parameters(), 0.1)
    def step(x, lengths):
        opt.zero_grad()
        Tn = x.shape[1]
        mask = T.arange(Tn)[None, :] < lengths[:, None]
        h = lin(x).tanh() * mask[..., None]
        l = h.sum(1) / lengths[:, None]
        loss = l.pow(2).mean(); loss.backward(); opt.step(); return loss
    p = Probe(step, compiled)
    rng = np.random.default_rng(1)
    outs = []
    for L in (5, 7, 9, 6, 11, 4, 8, 10):
        lens = rng.integers(1, L + 1, 3); lens[0] = L
        outs.append(arr(p(T.tensor(rng.standard_normal((3, L, E)).astype(np.float32)), T.tensor(lens))))
    outs += [arr(t) for t in lin.parameters()]
    return outs, p

def packed(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    rnn = nn.GRU(3, 4 + W, batch_first=True)
    def f(x, lengths):
        pk = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        o, h = rnn(pk)
        o, _ = nn.utils.rnn.pad_packed_sequence(o, batch_first=True)
        return o.sum() + h.sum()
    p = Probe(f, compiled)
    rng = np.random.default_rng(2)
    outs = []
    for L in (5, 7, 6, 8):
        lens = rng.integers(1, L + 1, 3); lens[1] = L
        x = T.tensor(rng.standard_normal((3, L, 3)).astype(np.float32), requires_grad=True)
        r = p(x, T.tensor(lens)); r.backward()
        outs += [arr(r), arr(x.grad)]
    return outs, p

def buckets(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    E = 3 + W
    conv = nn.Conv1d(E, 5, 3, padding=1)
    opt = T.optim.Adam(conv.parameters(), 1e-2)
    def step(x):
        opt.zero_grad(); loss = conv(x.transpose(1, 2)).relu().mean(); loss.backward(); opt.step(); return loss
    p = Probe(step, compiled)
    rng = np.random.default_rng(3)
    outs = []
    for L in (8, 12, 16, 20, 24, 28, 32, 36, 16, 8):
        outs.append(arr(p(T.tensor(rng.standard_normal((4, L, E)).astype(np.float32)))))
    outs += [arr(t) for t in conv.parameters()]
    return outs, p

def multiscale(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(4, 4 + W, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 + W, 3))
    opt = T.optim.SGD(net.parameters(), 0.05, momentum=0.9)
    def step(x, y):
        opt.zero_grad(); l = nn.functional.cross_entropy(net(x), y); l.backward(); opt.step(); return l
    p = Probe(step, compiled)
    rng = np.random.default_rng(4)
    outs = []
    for s in (24, 28, 32, 24, 20, 16, 25):
        x = T.tensor(rng.standard_normal((2, 3, s, s)).astype(np.float32)); y = T.tensor(rng.integers(0, 3, 2))
        outs.append(arr(p(x, y)))
    outs += [arr(t) for t in net.state_dict().values()]
    return outs, p

def infer_b1(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    m = nn.Sequential(nn.Linear(5 + W, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 2))
    def f(x):
        return m(x).softmax(-1)
    p = Probe(f, compiled)
    rng = np.random.default_rng(5)
    outs = []
    with T.no_grad():
        for b in (64, 64, 32, 1, 1, 3, 1, 64):
            outs.append(arr(p(T.tensor(rng.standard_normal((b, 5 + W)).astype(np.float32)))))
    return outs, p

def _rng_in(T, rng, shape):
    return T.tensor(rng.standard_normal(shape).astype(np.float32))

def mark_dyn(T, W, compiled):
    T.manual_seed(0)
    lin = T.nn.Linear(4 + W, 3)
    def f(x):
        return lin(x).softmax(1).sum(-1)
    p = Probe(f, compiled)
    rng = np.random.default_rng(6); outs = []
    for L in (5, 9, 7, 12, 6):
        x = _rng_in(T, rng, (2, L, 4 + W))
        T._dynamo.mark_dynamic(x, 1)
        outs.append(arr(p(x)))
    return outs, p

def dyn_true(T, W, compiled, dynamic=True):
    def f(x):
        return (x * x.shape[0]).cumsum(0) / x.size(0)
    p = Probe(f, compiled, dynamic=dynamic) if compiled else Probe(f, False)
    rng = np.random.default_rng(7); outs = []
    for b in (4, 6, 9, 5, 13, 4):
        outs.append(arr(p(_rng_in(T, rng, (b, 3 + W)))))
    return outs, p

def dyn_false(T, W, compiled):
    return dyn_true(T, W, compiled, dynamic=False)

def bcast_one(T, W, compiled):
    def f(x, y):
        return (x * y).sum(0) + x.mean(1, keepdim=True).sum()
    p = Probe(f, compiled)
    rng = np.random.default_rng(8); outs = []
    for b, c in ((4, 3), (6, 3), (1, 3), (5, 3), (5, 1), (3, 1), (7, 3), (1, 1)):
        outs.append(arr(p(_rng_in(T, rng, (b, 3)), _rng_in(T, rng, (b, c)))))
    return outs, p

def zero_size(T, W, compiled):
    T.manual_seed(0)
    lin = T.nn.Linear(3, 2)
    def f(x):
        y = lin(x)
        return y.sum(), y.relu(), x.shape[0] * 2
    p = Probe(f, compiled)
    rng = np.random.default_rng(9); outs = []
    for b in (4, 6, 0, 5, 0, 8, 1):
        x = _rng_in(T, rng, (b, 3)).requires_grad_()
        s, y, n = p(x); s.backward()
        outs += [arr(s), arr(y), n, arr(x.grad)]
    return outs, p

def view_arith(T, W, compiled):
    H = 2
    def f(x):
        B = x.size(0)
        a = x.view(B, -1, H).sum(1)
        b = x.view(x.size(0) // 2, -1).mean(-1)
        c = x.reshape(-1, H * (4 + W)).T
        return a, b, c.sum(0)
    p = Probe(f, compiled)
    rng = np.random.default_rng(10); outs = []
    for b in (4, 6, 8, 10, 12, 6, 14):
        outs += [arr(v) for v in p(_rng_in(T, rng, (b, 2 * (4 + W))))]
    return outs, p

def arange_tril(T, W, compiled):
    def f(x):
        B, Tn, C = x.shape
        pos = T.arange(Tn, dtype=T.float32)
        m = T.tril(T.ones(Tn, Tn))
        att = (x @ x.transpose(1, 2)).masked_fill(m == 0, float("-inf")).softmax(-1)
        return (att @ x)[:, 1:Tn - 1] + pos[1:Tn - 1, None], x[:, -2:].sum()
    p = Probe(f, compiled)
    rng = np.random.default_rng(11); outs = []
    for Tn in (4, 6, 5, 9, 7, 12, 3):
        x = _rng_in(T, rng, (2, Tn, 3 + W)).requires_grad_()
        a, b = p(x); (a.sum() + b).backward()
        outs += [arr(a), arr(b), arr(x.grad)]
    return outs, p

def item_flow(T, W, compiled):
    def f(x):
        n = (x > 0).sum().item()
        if n > x.shape[0] * 2:
            return x.relu() * n
        return x.tanh() - x.shape[0]
    p = Probe(f, compiled)
    rng = np.random.default_rng(12); outs = []
    for b in (4, 6, 5, 9, 7, 12, 3, 8):
        outs.append(arr(p(_rng_in(T, rng, (b, 4 + W)))))
    return outs, p

def beam(T, W, compiled):
    T.manual_seed(0)
    nn = T.nn
    H, V, K = 6 + W, 9, 3
    cell, emb, out = nn.GRUCell(4, H), nn.Embedding(V, 4), nn.Linear(H, V)
    def step(tok, h, score):
        h = cell(emb(tok), h)
        lp = out(h).log_softmax(-1) + score[:, None]
        top, idx = lp.flatten().topk(K)
        return idx // V, idx % V, top, h
    p = Probe(step, compiled)
    outs = []
    with T.no_grad():
        for B0 in (1, 2):
            tok = T.zeros(B0, dtype=T.long); h = T.zeros(B0, H); score = T.zeros(B0)
            for _ in range(4):
                beamidx, tok, score, h = p(tok, h, score)
                h = h[beamidx]
                outs += [arr(tok), arr(score)]
    return outs, p

def gpt_train_windows(T, W, compiled):
    # a training step over sequence windows of varying lengths with positional slice
    T.manual_seed(0)
    nn = T.nn
    C, V = 8 + W, 13
    emb, pos, head = nn.Embedding(V, C), nn.Embedding(16, C), nn.Linear(C, V)
    ps = list(emb.parameters()) + list(pos.parameters()) + list(head.parameters())
    opt = T.optim.SGD(ps, 0.1)
    def step(idx, tgt):
        opt.zero_grad()
        B, Tn = idx.shape
        x = emb(idx) + pos.weight[:Tn]
        att = (x @ x.transpose(-2, -1)).masked_fill(T.tril(T.ones(Tn, Tn)) == 0, float("-inf")).softmax(-1)
        loss = nn.functional.cross_entropy(head(att @ x).view(B * Tn, V), tgt.view(-1))
        loss.backward(); opt.step(); return loss
    p = Probe(step, compiled)
    rng = np.random.default_rng(13); outs = []
    for Tn in (8, 8, 6, 10, 12, 7, 16, 9):
        d = rng.integers(0, V, (3, Tn + 1))
        outs.append(arr(p(T.tensor(d[:, :-1]), T.tensor(d[:, 1:]))))
    outs += [arr(t) for t in ps]
    return outs, p

def ones_dim(T, W, compiled):
    """A gate whose last dimension is 1 (an expanded view, stride 0) at some calls."""
    def f(x, g):
        return (x * g).sum(-1) + g.sum()
    p = Probe(f, compiled)
    rng = np.random.default_rng(15); outs = []
    for c in (4, 6, 1, 5, 9, 1, 7):
        g = _rng_in(T, rng, (3, 1)).expand(3, c) if c == 1 else _rng_in(T, rng, (3, c))
        outs.append(arr(p(_rng_in(T, rng, (3, c)), g)))
    return outs, p
