"""Compile-contract s74, errors and bad input: each program runs with torch (the oracle),
llgrad eagerly and llgrad.compile (native backend), the failing call both the FIRST compiled
call (it traces) and a LATER one (after good calls: the native path and its guards), then a
good call again. Observed: the exception's type and first message line (torch's message
where `msg` is set), parameters, .grad, optimizer state, buffers, captured lists, RNG state,
and that the user's failing line is in the compiled call's traceback."""
import os
import traceback
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _seen(v):
    if isinstance(v, (llgrad.Tensor, torch.Tensor)):
        return ("tensor", v.detach().numpy().copy(), str(v.dtype).split(".")[-1],
                v.requires_grad, tuple(v.shape))
    if isinstance(v, BaseException):
        line = str(v).splitlines()[0] if str(v) else ""
        return ("raised", type(v).__name__, line.replace("llgrad.", "torch."))
    if isinstance(v, (list, tuple)):
        return [_seen(x) for x in v]
    if isinstance(v, dict):
        return {k: _seen(x) for k, x in v.items()}
    return v


def _same(a, b, where, msg):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[0] == "tensor", f"{where}: {a!r} vs {b!r}"
        assert a[4] == b[4] and a[2:4] == b[2:4], f"{where}: {a[2:]} vs {b[2:]}"
        np.testing.assert_allclose(b[1], a[1], rtol=1e-5, atol=1e-6, err_msg=where)
    elif isinstance(a, tuple) and a and a[0] == "raised":
        assert isinstance(b, tuple) and b[:2] == a[:2], f"{where}: {a!r} vs {b!r}"
        assert not msg or a[2] == b[2], f"{where}: {a!r} vs {b!r}"
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]", msg)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: {a!r} vs {b!r}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k}]", msg)
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def three(prog, msg=True, with_torch=True):
    """prog(T, C, see) with torch, llgrad eager, llgrad.compile; messages compared with
    torch's when msg, eager's and compiled's always (with_torch False: eager's and
    compiled's only, where torch's state after the error is its own quirk)."""
    logs = []
    for lib, wrap in [(torch, lambda f: f), (llgrad, lambda f: f), (llgrad, llgrad.compile)]:
        lib.manual_seed(0)
        log = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog(lib, wrap, lambda *vs: log.extend(_seen(v) for v in vs))
        logs.append(log)
    for name, log, m in [("eager vs torch", logs[1], msg), ("compiled vs eager", logs[2], True),
                         ("compiled vs torch", logs[2], msg)]:
        if not with_torch and "torch" in name:
            continue
        base = logs[0] if "torch" in name.split("vs")[1] else logs[1]
        assert len(log) == len(base), f"{name}: {len(log)} vs {len(base)} observations"
        for k, (a, b) in enumerate(zip(base, log)):
            _same(a, b, f"{name}: observation {k}", m)


def _try(see, fn, *a, **kw):
    """Calls fn; an exception (BaseException too) is seen as its type, first message line and
    the line of the deepest frame of these test files in its traceback (the user's failing
    line; a compiled call may add a frame of its own at that line, named `if_true_1` or
    `<lambda>`, for the branch of an `if` it made a function of)."""
    try:
        see(fn(*a, **kw))
    except BaseException as e:      # noqa: B036 (KeyboardInterrupt-like ones are observed)
        mine = [f.lineno for f in traceback.extract_tb(e.__traceback__)
                if os.path.basename(f.filename).startswith("test_contract_s74_errors")
                and f.name != "_try"]
        see(e, mine[-1] if mine else None)


def _f(T):
    return T.nn.functional


# name: (fn(T, x, w) with w a (2, 3) parameter, good input(s), bad input(s), torch's message)
OPS = {
    "matmul": (lambda T, x, w: x @ w, lambda T: T.ones(4, 2), lambda T: T.ones(4, 3), True),
    "linear in-features": (lambda T, x, w: _f(T).linear(x, w), lambda T: T.ones(4, 3),
                           lambda T: T.ones(4, 2), True),
    "linear long input": (lambda T, x, w: _f(T).linear(x, w), lambda T: T.ones(4, 3),
                          lambda T: T.ones(4, 3, dtype=T.long), True),
    "conv1d channels": (lambda T, x, w: _f(T).conv1d(x, w.reshape(2, 1, 3)),
                        lambda T: T.ones(1, 1, 5), lambda T: T.ones(1, 2, 5), True),
    "bmm": (lambda T, x, w: T.bmm(x, w.expand(2, 2, 3)), lambda T: T.ones(2, 4, 2),
            lambda T: T.ones(2, 4, 3), True),
    "cat": (lambda T, x, w: T.cat([x, w], 0), lambda T: T.ones(1, 3), lambda T: T.ones(1, 2),
            True),
    "stack": (lambda T, x, w: T.stack([x, w[0]]), lambda T: T.ones(3), lambda T: T.ones(2),
              True),
    "view non-contiguous": (lambda T, x, w: x.t().view(-1)[:3] * w, lambda T: T.ones(3, 1),
                            lambda T: T.ones(3, 2), True),
    "reshape numel": (lambda T, x, w: (x * 1).reshape(2, 3) * w, lambda T: T.ones(6),
                      lambda T: T.ones(5), True),
    "expand": (lambda T, x, w: x.expand(2, 3) * w, lambda T: T.ones(2, 1),
               lambda T: T.ones(2, 2), True),
    "iadd broadcast": (lambda T, x, w: _iadd(w * 1, x), lambda T: T.ones(3),
                       lambda T: T.ones(4, 2, 3), True),
    "cross_entropy class": (lambda T, x, w: _f(T).cross_entropy(w, x), lambda T: T.tensor([0, 2]),
                            lambda T: T.tensor([0, 3]), True),
    "cross_entropy shape": (lambda T, x, w: _f(T).cross_entropy(w, x), lambda T: T.tensor([0, 2]),
                            lambda T: T.tensor([0, 1, 2]), True),
    "cross_entropy float target": (lambda T, x, w: _f(T).cross_entropy(w, x),
                                   lambda T: T.tensor([0, 2]), lambda T: T.tensor([0.0, 2.0]),
                                   True),
    "nll_loss ignore_index": (lambda T, x, w: _f(T).nll_loss(w.log_softmax(1), x, ignore_index=-1),
                              lambda T: T.tensor([-1, 2]), lambda T: T.tensor([-2, 2]), True),
    "embedding": (lambda T, x, w: _f(T).embedding(x, w.t()), lambda T: T.tensor([0, 2]),
                  lambda T: T.tensor([0, 3]), True),
    "float index": (lambda T, x, w: w[:, x], lambda T: T.tensor([0, 2]),
                    lambda T: T.tensor([0.0, 2.0]), True),
    "gather ndim": (lambda T, x, w: T.gather(w, 1, x), lambda T: T.tensor([[0], [2]]),
                    lambda T: T.tensor([0, 2]), True),
    "one_hot classes": (lambda T, x, w: _f(T).one_hot(x, 3) * w, lambda T: T.tensor([0, 2]),
                        lambda T: T.tensor([0, 3]), True),
    "binary_cross_entropy size": (lambda T, x, w: _f(T).binary_cross_entropy(w.sigmoid(), x),
                                  lambda T: T.ones(2, 3), lambda T: T.ones(3, 2), True),
    "mean of long": (lambda T, x, w: x.mean() * w, lambda T: T.ones(2),
                     lambda T: T.ones(2, dtype=T.long), True),
    "item of two": (lambda T, x, w: w * (x * 2).item(), lambda T: T.ones(1), lambda T: T.ones(2),
                    True),
    "bool of two": (lambda T, x, w: w * 2 if x > 0 else w, lambda T: T.ones(1),
                    lambda T: T.ones(2), True),
    "multinomial negative": (lambda T, x, w: w * T.multinomial(x, 1),
                             lambda T: T.tensor([0.5, 0.5]), lambda T: T.tensor([-1.0, 2.0]),
                             True),
    "dim out of range": (lambda T, x, w: (w * x).sum(dim=2), lambda T: T.ones(3),
                         lambda T: T.ones(3), True),
}


def _iadd(y, x):
    y += x
    return y


@pytest.mark.parametrize("op", list(OPS))
def test_op_error_in_a_training_step(op):
    """The op raises in a step between writes, a captured append and a dropout draw: the
    state before it stays changed, the step after it does not happen; first call and later."""
    fn, good, bad, msg = OPS[op]

    def prog(T, C, see):
        w = T.nn.Parameter(T.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]]))
        opt = T.optim.Adam([w], lr=0.1)
        buf, log = T.zeros(3), []

        def step(x):
            opt.zero_grad()
            buf.add_(1)
            log.append(len(log))
            d = _f(T).dropout(T.ones(4), 0.5)
            y = fn(T, x, w)
            loss = y.float().pow(2).mean() + w.pow(2).sum()
            loss.backward()
            opt.step()
            buf.mul_(2)
            return loss, d
        s = C(step)
        for k, is_bad in enumerate([True, False, False, True, False, True]):
            x = (bad if is_bad else good)(T)
            if op == "dim out of range" and not is_bad:
                fn2 = fn
                _try(see, C(lambda x: fn2(T, x, w).sum()), x)
            else:
                _try(see, s, x)
            see(w, w.grad, buf, list(log), dict(opt.state[w]), T.get_rng_state())
    three(prog, msg)

# (the per-case comparisons take 14-20 s a file: the slow set; _3.py runs by default)
pytestmark = pytest.mark.slow
