"""Random programs for sweep 64 (t3)'s differential fuzz: a seed draws 2-3 inputs (shapes
that broadcast, float32 / float64 and sometimes integer or bool dtypes) and 3-9 steps, each a
unary op (reductions with dim / keepdim, scans, order statistics, views, casts), a binary op
(promotion, broadcasting, division, where, clamp with tensor bounds) or an in-place op on a
clone (masks, setitem, index_put_ with accumulate, in-place on a view). `check(seed)` runs
the program in torch, llgrad eager and llgrad.compile (second call) and returns the
differences: outputs (dtype, shape, values), the inputs' gradients of a weighted sum, and
the first error's type. torch's internal asserts (an integer tensor given a float value
that requires grad) are skipped by the caller's seed list."""
import random
import warnings

import numpy as np
import torch

import llgrad

FL = ['float32', 'float64']
ALL = FL + ['int64', 'int32', 'bool', 'uint8', 'int8']
def gen(seed):
    r = random.Random(seed)
    shape = [r.choice([1, 2, 3, 4]) for _ in range(r.choice([1, 2, 3]))]
    ins = []
    for k in range(r.choice([2, 3])):
        s = list(shape)
        if r.random() < 0.4: s = [1 if r.random() < 0.5 else d for d in s]
        if r.random() < 0.3: s = s[r.randrange(len(s) + 1):]
        dt = r.choice(FL) if k == 0 or r.random() < 0.6 else r.choice(ALL)
        ins.append((tuple(s), dt))
    steps = []
    for _ in range(r.randint(3, 9)):
        steps.append((r.random(), r.random(), r.random(), r.randrange(1000)))
    return ins, steps
def arr(shape, dt, seed):
    g = np.random.default_rng(seed)
    if dt in FL: a = np.round(g.standard_normal(shape) * 2, 1)
    elif dt == 'bool': a = g.random(shape) < 0.5
    elif dt == 'uint8': a = g.integers(0, 6, shape)
    else: a = g.integers(-4, 5, shape)
    return a
UN = ['exp', 'tanh', 'sigmoid', 'abs', 'neg', 'relu', 'sin', 'square', 'clamp', 'floor', 'sign', 'cumsum', 'cumprod', 'softmax', 'logsumexp', 'sum', 'mean', 'amax', 'max', 'std', 'var', 'median', 'sort', 'topk', 't', 'flip', 'slice', 'index', 'mask_fill', 'nan_to_num', 'where0', 'double', 'float', 'long', 'bool', 'unsq', 'expand', 'rsub', 'rdiv', 'pow2', 'sqrt', 'log', 'frac', 'clamp_t', 'cummax', 'norm', 'prod', 'argmax', 'kthvalue', 'mode', 'logcumsumexp', 'trunc', 'remainder_s', 'fdiv_s']
BIN = ['add', 'sub', 'mul', 'div', 'maximum', 'minimum', 'where', 'atan2', 'pow', 'floor_divide', 'remainder', 'fmod', 'eq', 'lt', 'clamp_tt', 'lerp', 'hypot', 'fmax', 'copysign', 'xlogy']
INPL = ['add_', 'mul_', 'sub_', 'div_', 'clamp_', 'masked_fill_', 'copy_', 'setitem', 'index_put_acc', 'relu_', 'view_mul_', 'fill_', 'zero_slice']
def apply(m, vals, step):
    a, b, c, k = step
    x = vals[int(a * len(vals))]
    nd = x.dim()
    d = (k % nd) if nd else 0
    if b < 0.55:
        op = UN[k % len(UN)]
        f = {
         'exp': lambda: x.exp(), 'tanh': lambda: x.tanh(), 'sigmoid': lambda: x.sigmoid(), 'abs': lambda: x.abs(), 'neg': lambda: -x,
         'relu': lambda: x.relu(), 'sin': lambda: x.sin(), 'square': lambda: x * x, 'clamp': lambda: x.clamp(-1, 1.5), 'floor': lambda: x.floor(),
         'sign': lambda: x.sign(), 'cumsum': lambda: x.cumsum(d), 'cumprod': lambda: x.cumprod(d), 'softmax': lambda: x.softmax(d),
         'logsumexp': lambda: x.logsumexp(d, keepdim=c < 0.5), 'sum': lambda: x.sum(d, keepdim=c < 0.5), 'mean': lambda: x.mean(d, keepdim=c < 0.5),
         'amax': lambda: x.amax(d, keepdim=c < 0.5), 'max': lambda: x.max(d, keepdim=c < 0.5)[0], 'std': lambda: x.std(d, correction=int(c * 3)),
         'var': lambda: x.var(), 'median': lambda: x.median(d)[0] if c < 0.5 else x.median(), 'sort': lambda: x.sort(d, descending=c < 0.5)[0],
         'topk': lambda: x.topk(1, d)[0], 't': lambda: x.transpose(0, -1), 'flip': lambda: x.flip(d), 'slice': lambda: x[..., 1:] if c < 0.5 else x[::2],
         'index': lambda: x[..., m.tensor([0, 0])] if x.shape[-1:] and x.shape[-1] >= 1 else x, 'mask_fill': lambda: x.masked_fill(x > 0, c),
         'nan_to_num': lambda: x.nan_to_num(), 'where0': lambda: m.where(x > 0, x, 0.), 'double': lambda: x.double(), 'float': lambda: x.float(),
         'long': lambda: x.long(), 'bool': lambda: x.bool(), 'unsq': lambda: x.unsqueeze(0), 'expand': lambda: x.expand(2, *x.shape),
         'rsub': lambda: 1 - x, 'rdiv': lambda: 1 / (x.abs() + 1), 'pow2': lambda: x ** 2, 'sqrt': lambda: x.abs().sqrt(), 'log': lambda: (x.abs() + 0.5).log(),
         'frac': lambda: x.frac(), 'clamp_t': lambda: x.clamp(min=x.mean() if x.is_floating_point() else 0), 'cummax': lambda: x.cummax(d)[0],
         'norm': lambda: x.norm(dim=d), 'prod': lambda: x.prod(d), 'argmax': lambda: x.argmax(d), 'kthvalue': lambda: x.kthvalue(1, d)[0],
         'mode': lambda: x.mode(d)[0], 'logcumsumexp': lambda: x.logcumsumexp(d), 'trunc': lambda: x.trunc(), 'remainder_s': lambda: x % 3, 'fdiv_s': lambda: x // -2,
        }[op]
        return f()
    y = vals[int(c * len(vals))]
    if b < 0.85:
        op = BIN[k % len(BIN)]
        f = {
         'add': lambda: x + y, 'sub': lambda: x - y, 'mul': lambda: x * y, 'div': lambda: x / y, 'maximum': lambda: m.maximum(x, y), 'minimum': lambda: m.minimum(x, y),
         'where': lambda: m.where(y > 0, x, y), 'atan2': lambda: m.atan2(x, y), 'pow': lambda: x.abs() ** y, 'floor_divide': lambda: m.floor_divide(x, y),
         'remainder': lambda: x % y, 'fmod': lambda: m.fmod(x, y), 'eq': lambda: x == y, 'lt': lambda: x < y, 'clamp_tt': lambda: m.clamp(x, min=y),
         'lerp': lambda: m.lerp(x, y, 0.3), 'hypot': lambda: m.hypot(x, y), 'fmax': lambda: m.fmax(x, y), 'copysign': lambda: m.copysign(x, y), 'xlogy': lambda: m.xlogy(x, y.abs()),
        }[op]
        return f()
    op = INPL[k % len(INPL)]
    z = x.clone()
    if op == 'add_': z.add_(y)
    elif op == 'mul_': z.mul_(y)
    elif op == 'sub_': z.sub_(y, alpha=2)
    elif op == 'div_': z.div_(y)
    elif op == 'clamp_': z.clamp_(min=y)
    elif op == 'masked_fill_': z.masked_fill_(y > 0, 1.5)
    elif op == 'copy_': z.copy_(y)
    elif op == 'setitem': z[z > 0] = y.sum() if c < 0.5 else 2
    elif op == 'index_put_acc': z.index_put_((m.tensor([0, 0]),), y.sum(), accumulate=True) if z.dim() else z.add_(1)
    elif op == 'relu_': z.relu_()
    elif op == 'view_mul_': z.view(-1)[::2].mul_(y.sum() if y.dim() else y)
    elif op == 'fill_': z[..., :1].fill_(c)
    elif op == 'zero_slice': z.transpose(0, -1)[:1].zero_() if z.dim() else z.zero_()
    return z
def program(m, xs, steps):
    vals = list(xs)
    for s in steps:
        try:
            vals.append(apply(m, vals, s))
        except Exception as e:
            vals.append(('E', type(e).__name__))
            return vals
    return vals
def _inputs(L, ins, seed):
    xs = []
    for j, (shape, dt) in enumerate(ins):
        a = arr(shape, dt, seed + j)
        t = L.tensor(a.tolist() if shape else a.item(), dtype=getattr(L, dt))
        xs.append(t.requires_grad_() if dt in FL else t)
    return xs


def run(L, ins, steps, seed, compiled):
    """The program's record: (first error type or None, [(dtype, shape, values) of each
    output], [each input's grad]), or ("E", type) for an error of the compiled call or of
    backward."""
    xs = _inputs(L, ins, seed)
    err = None
    if compiled:
        def f(*a):
            return tuple(t for t in program(llgrad, a, steps)[len(a):] if not isinstance(t, tuple))
        cf = llgrad.compile(f)
        try:
            cf(*_inputs(L, ins, seed))      # (the trace; the next call runs native code)
            outs = cf(*xs)
        except Exception as e:      # noqa: BLE001
            return ("E", type(e).__name__)
    else:
        vals = program(L, xs, steps)
        err = vals[-1] if isinstance(vals[-1], tuple) else None
        outs = tuple(t for t in vals[len(xs):] if not isinstance(t, tuple))
    loss = None
    for o in outs:
        if o.requires_grad:
            w = L.arange(1., o.numel() + 1, dtype=L.float64).reshape(o.shape).sin()
            t = (o.double() * w).nan_to_num(0., 0., 0.).sum()
            loss = t if loss is None else loss + t
    if loss is not None:
        try:
            loss.backward()
        except Exception as e:      # noqa: BLE001
            return ("E", "backward " + type(e).__name__)
    return (err, [(str(o.dtype).split(".")[-1], tuple(o.shape), o.detach().numpy().copy())
                  for o in outs],
            [None if x.grad is None else x.grad.numpy().copy() for x in xs])


def differ(a, b):
    """None when two records agree, else why."""
    if a[0] == "E" or b[0] == "E":
        return None if a == b else f"{a[:2]} vs {b[:2]}"
    if a[0] != b[0]:
        return f"error {a[0]} vs {b[0]}"
    if len(a[1]) != len(b[1]):
        return f"{len(a[1])} vs {len(b[1])} outputs"
    for k, ((d1, s1, v1), (d2, s2, v2)) in enumerate(zip(a[1], b[1])):
        if (d1, s1) != (d2, s2):
            return f"output {k}: {d1}{s1} vs {d2}{s2}"
        ok = np.allclose(v1, v2, rtol=2e-5, atol=1e-6, equal_nan=True) if v1.dtype.kind == "f" \
            else np.array_equal(v1, v2)
        if not ok:
            return f"output {k}: {v1} vs {v2}"
    for k, (g1, g2) in enumerate(zip(a[2], b[2])):
        if (g1 is None) != (g2 is None) or g1 is not None and not np.allclose(
                g1, g2, rtol=2e-5, atol=1e-5, equal_nan=True):
            return f"grad {k}: {g1} vs {g2}"
    return None


def check(seed, compiled=True):
    """The differences of program `seed`: llgrad eager against torch and, where torch runs
    it without an error, llgrad compiled against eager."""
    ins, steps = gen(seed)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = run(torch, ins, steps, seed, False)
        eager = run(llgrad, ins, steps, seed, False)
        why = differ(want, eager)
        if why:
            out.append(f"seed {seed} eager: {why}")
        if compiled and want[0] is None:
            why = differ(eager, run(llgrad, ins, steps, seed, True))
            if why:
                out.append(f"seed {seed} compiled: {why}")
    return out
