"""Sweep 60 (H1): a compiled function's changing int used as a tensor index (`betas[i]`) or
a fill value (`torch.full((n,), i)`), as a diffusion sampler's loop over its steps does: a
graph op of the number (runtime/symbolic_uses.py), not a trace per value and the recompile
limit's eager fallback; the numbers, gradients and errors PyTorch's."""
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


def _run(fn, calls, max_traces=2):
    """fn(T, *args) for each args of calls with torch and with llgrad.compile: equal
    results, no warning, at most max_traces traces. (Named parameters: numbers in *args stay
    guarded by value.)"""
    cf = llgrad.compile(_named(fn, len(calls[0])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for args in calls:
            want = fn(torch, *[torch.tensor(a) if isinstance(a, np.ndarray) else a
                               for a in args])
            got = cf(*[llgrad.tensor(a) if isinstance(a, np.ndarray) else a for a in args])
            want = want if isinstance(want, tuple) else (want,)
            got = got if isinstance(got, tuple) else (got,)
            for w, g in zip(want, got):
                assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
                assert g.shape == w.shape and g.stride() == w.stride(), (g.stride(), w)
                np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=str(args))
    assert cf.n_traces <= max_traces, cf.n_traces
    return cf


def _named(fn, n):
    if n == 1:
        return lambda a: fn(llgrad, a)
    if n == 2:
        return lambda a, b: fn(llgrad, a, b)
    return lambda a, b, c: fn(llgrad, a, b, c)


X = np.arange(60, dtype=np.float32).reshape(5, 3, 4) / 7


# (index, whether PyTorch's view is contiguous: else the number is read, a trace per value,
# so that the result's strides stay the view's)
INDICES = {
    "x[i]": (lambda x, i, j: x[i], True),
    "x[i,j]": (lambda x, i, j: x[i, j % 3], True),
    "x[i][j]": (lambda x, i, j: x[i][j % 3], True),
    "x[i,1:,None]": (lambda x, i, j: x[i, 1:, None], True),
    "x[i,None]": (lambda x, i, j: x[i, None], True),
    "x[2,i]": (lambda x, i, j: x[2, j % 3], True),
    "x[:,i]": (lambda x, i, j: x[:, i % 3], False),
    "x[...,i]": (lambda x, i, j: x[..., i], False),
    "x[i,:,j]": (lambda x, i, j: x[i, :, j], False),
}


@pytest.mark.parametrize("name", list(INDICES))
def test_index_by_changing_int(name):
    index, contiguous = INDICES[name]
    calls = [(X, i, j) for i, j in ((2, 1), (0, 3), (-1, -2), (1, 0), (-3, 2), (2, -4))]
    # (else: each stand-in's number read in turn, a trace more for the second)
    most = 2 if contiguous else len(calls) + 2
    _run(lambda T, x, i, j: index(x, i, j) + 0 * i, calls, max_traces=most)
    # returned as it is: eager's view of x (writes through it reach x), so its number is
    # read, a trace per value (test_a_returned_view_stays_a_view); the strides are the view's
    _run(lambda T, x, i, j: index(x, i, j), calls, max_traces=len(calls) + 2)


def test_index_of_one_dim_and_zero_dim():
    betas = np.linspace(0.1, 0.9, 7).astype(np.float32)
    _run(lambda T, b, i: b[i] * 2 + b[i - 1], [(betas, i) for i in (6, 5, 1, -2, 3)])
    cf = llgrad.compile(lambda b, i: b[i])
    for i in (0, 1):
        with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
            cf(llgrad.tensor(1.5), i)


def test_index_gradient():
    def fn(T, w, x, i):
        w = w.requires_grad_()
        loss = (w[i] * x).sum() + w[i - 1, 0].square()
        g, = T.autograd.grad(loss, w)
        return loss.detach(), g

    calls = [(X[:, :, 0], X[0, 0, :3], i) for i in (4, 1, 3, -2, 2)]
    _run(fn, calls)


def test_index_out_of_range_later_call():
    cf = _run(lambda T, x, i: x[i] + 1, [(X, 3), (X, 1)])
    with pytest.raises(IndexError, match="out of bounds"):
        cf(llgrad.tensor(X), 5)
    with pytest.raises(IndexError):
        cf(llgrad.tensor(X), -6)
    np.testing.assert_array_equal(cf(llgrad.tensor(X), -5).numpy(), X[0] + 1)


def test_writes_through_the_view():
    """x[i] is PyTorch's view: a write into it reaches x, one into x reaches it."""
    def into_view(T, x, i):
        x = x.clone()
        v = x[i]
        v.mul_(2)
        return x

    def into_base(T, x, i):
        x = x.clone()
        v = x[:, i]
        x.add_(1)
        return v * 1

    calls = [(X, i) for i in (1, 2, 0, -1)]
    _run(into_view, calls, max_traces=5)      # (the number read: a trace per value)
    _run(into_base, calls, max_traces=5)


@pytest.mark.parametrize("dtype", [None, "float32", "float64", "int64"])
def test_full_of_changing_number(dtype):
    def fn(T, x, i):
        d = None if dtype is None else getattr(T, dtype)
        return T.full((2, 3), i, dtype=d), T.full_like(x, i) + x

    calls = [(X[0], i) for i in (4, 1, -3, 0, 7)]
    _run(fn, calls)
    if dtype != "int64":
        _run(fn, [(X[0], v) for v in (0.5, -2.25, 3.0, 1e30)])


def test_full_exactness_and_errors():
    # (an int past 2**24 into float32: read as its number, rounded once as PyTorch's)
    _run(lambda T, i: T.full((2,), i, dtype=T.float32), [(3,), (2 ** 25 + 1,), (5,),
                                                         (2 ** 24 + 3,)], max_traces=5)
    cf = llgrad.compile(lambda v: llgrad.full((2,), v, dtype=llgrad.float32))
    cf(1.5)
    cf(2.5)
    with pytest.raises(RuntimeError, match="overflow"):
        cf(1e300)
    with pytest.raises(RuntimeError, match="overflow"):
        torch.full((2,), 1e300, dtype=torch.float32)
    assert cf(float("inf")).numpy()[0] == np.inf


def test_diffusion_sampling_loop():
    """A DDPM sampler as tutorials write it: the step's index read from the schedules."""
    def sampler(T, w, x, i):
        betas = T.linspace(1e-3, 0.2, 12)
        alphas = 1 - betas
        acp = T.cumprod(alphas, 0)
        t = T.full((x.size(0),), i, dtype=T.long)
        eps = T.tanh(x @ w + t[:, None].float() / 12)
        mean = (x - betas[i] / (1 - acp[i]).sqrt() * eps) / alphas[i].sqrt()
        if i == 0:
            return mean
        return mean + betas[i].sqrt() * 0.5

    w = (np.arange(4, dtype=np.float32).reshape(2, 2) - 1.5) / 3
    x_t, x_l = torch.tensor(X[0, :, :2]), llgrad.tensor(X[0, :, :2])
    cf = llgrad.compile(lambda x, i: sampler(llgrad, llgrad.tensor(w), x, i))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in reversed(range(12)):
            x_t = sampler(torch, torch.tensor(w), x_t, i)
            x_l = cf(x_l, i)
            np.testing.assert_allclose(x_l.numpy(), x_t.numpy(), rtol=1e-6, atol=1e-7)
    assert cf.n_traces <= 3, cf.n_traces


def test_other_indices_with_a_changing_int():
    """A stand-in beside an index tensor or a mask, or as a float: its number read (a trace
    per value), the numbers and errors eager's."""
    mask = np.array([True, False, True])
    calls = [(X, i) for i in (1, 2, -1, 0)]
    _run(lambda T, x, i: x[i, T.tensor([0, 2])] + x[i, T.tensor(mask)] * 2, calls,
         max_traces=len(calls) + 1)
    cf = llgrad.compile(lambda x, i: x[i])
    cf(llgrad.tensor(X), 1)
    for v in (1.5, 2.5):
        with pytest.raises(IndexError, match="only integers"):
            cf(llgrad.tensor(X), v)


def test_eager_unchanged():
    """Outside compile nothing stands in: x[i] is a view, as before; a stand-in left in
    Python state acts as its number."""
    x = llgrad.tensor(X)
    v = x[1]
    v.zero_()
    assert x[1].sum().item() == 0 and v._base is x
    from llgrad.runtime.symbolic_scalar import SymbolicScalar
    i = SymbolicScalar(llgrad.tensor(2), 2, "i")
    assert x[i]._base is x and x[i, 1:].shape == (2, 4) and x[:, i].shape == (5, 4)
    np.testing.assert_array_equal(llgrad.full((2,), i).numpy(), [2, 2])
    assert os.environ["LLGRAD_COMPILE"] == "sync"


def test_index_by_a_number_read_from_a_tensor():
    """`w[s.argmax().item()]` (greedy decoding's `emb[tok.item()]`): the read number's
    stand-in indexes too, one trace for every value; a write through the row reads it."""
    def read(T, w, s):
        k = s.argmax().item()
        return w[k] * 2, k

    def write(T, w, s):
        w = w.clone()
        w[s.argmax().item()] += 1
        return w

    rng = np.random.default_rng(0)
    calls = [(X[:, 0, :], rng.standard_normal(5).astype(np.float32)) for _ in range(6)]
    cf = llgrad.compile(lambda w, s: read(llgrad, w, s))
    for w, s in calls:
        want = read(torch, torch.tensor(w), torch.tensor(s))
        got = cf(llgrad.tensor(w), llgrad.tensor(s))
        assert got[1] == want[1]
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    assert cf.n_traces == 1
    _run(write, calls, max_traces=len(calls) + 1)


@pytest.mark.parametrize("form", ["x[i]", "x[i].view(3, 1)", "(x[i] * 2, x[i])"])
def test_a_returned_view_stays_a_view(form):
    """Returning x[i] (or a view of it) gives eager's view, whose writes after the call reach
    x: the copy standing for it must not be returned (symbolic_uses.check_returned)."""
    fn = eval(f"lambda x, i: {form}")

    def run(f):
        seen = []
        for i in [0, 1, 2, 3, -1, 2]:
            x = llgrad.arange(12.).reshape(4, 3)
            r = f(x, i)
            y = r[-1] if isinstance(r, tuple) else r
            y.add_(100)             # (through eager's view, into x)
            seen.append((x.tolist(), y.tolist()))
        return seen

    assert run(llgrad.compile(fn)) == run(fn)
