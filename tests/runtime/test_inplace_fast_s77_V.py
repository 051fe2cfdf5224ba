"""call_inplace's fast path (llgrad/runtime/inplace_fast.py): a dense tensor written by
operands of its dtype and shape or by numbers, with no autograd to record and nothing traced.
Its values equal the general path's bit for bit and torch's, its version counters torch's;
everything it declines (casts, leaves and views of leaves with grad on, overlap, inference
tensors, views with grad on, traces) keeps PyTorch's errors and results; an eager optimiser
step gives the same bits with and without it."""
import numpy as np
import pytest

import llgrad
from llgrad.runtime import inplace, inplace_fast

torch = pytest.importorskip("torch")


# (name, call on (lib, x, y), dtype): each writes x in place; y has x's dtype and shape
CASES = [
    ("zero_", lambda L, x, y: x.zero_(), "float32"),
    ("fill_", lambda L, x, y: x.fill_(0.1), "float32"),
    ("fill_int", lambda L, x, y: x.fill_(-7), "int64"),
    ("add_", lambda L, x, y: x.add_(y), "float32"),
    ("add_alpha", lambda L, x, y: x.add_(y, alpha=0.3), "float32"),
    ("sub_", lambda L, x, y: x.sub_(y, alpha=2), "float64"),
    ("mul_number", lambda L, x, y: x.mul_(0.999), "float32"),
    ("mul_", lambda L, x, y: x.mul_(y), "float64"),
    ("div_", lambda L, x, y: x.div_(y.abs() + 1), "float32"),
    ("copy_", lambda L, x, y: x.copy_(y), "float32"),
    ("clamp_", lambda L, x, y: x.clamp_(-0.5, 0.5), "float32"),
    ("addcmul_", lambda L, x, y: x.addcmul_(y, y, value=0.5), "float32"),
    ("lerp_", lambda L, x, y: x.lerp_(y, 0.25), "float32"),
    ("int_add_", lambda L, x, y: x.add_(y).add_(3), "int64"),
    ("int_mul_", lambda L, x, y: x.mul_(-2), "int32"),
    ("view_add_", lambda L, x, y: x[1].add_(y[2]).mul_(3), "float32"),
    ("setitem", lambda L, x, y: x.__setitem__(slice(1, 3), 0.5), "float32"),
    ("setitem_tensor", lambda L, x, y: x.__setitem__((slice(None), 0), y[:, 1]), "float64"),
]


def _pair(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, n, n)) * 3
    if "int" in dtype:
        a, b = np.round(a), np.round(b)
    return a.astype(dtype), b.astype(dtype)


def _run(lib, fn, a, b, no_grad):
    x, y = lib.tensor(a.copy()), lib.tensor(b.copy())
    if no_grad:
        with lib.no_grad():
            fn(lib, x, y)
    else:
        fn(lib, x, y)
    return x.numpy().copy(), x._version


@pytest.mark.parametrize("no_grad", [False, True])
@pytest.mark.parametrize("n", [4, 64])
@pytest.mark.parametrize("name,fn,dtype", CASES, ids=[c[0] for c in CASES])
def test_values_and_versions_as_torch_and_general_path(name, fn, dtype, n, no_grad, monkeypatch):
    a, b = _pair(n, dtype)
    got, version = _run(llgrad, fn, a, b, no_grad)
    want, want_version = _run(torch, fn, a, b, no_grad)
    assert version == want_version
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    monkeypatch.setattr(inplace, "fast_write", lambda *a: False)
    ref, ref_version = _run(llgrad, fn, a, b, no_grad)
    np.testing.assert_array_equal(got, ref)    # (the general path's bits)
    assert got.dtype == ref.dtype and version == ref_version


def _count(monkeypatch):
    hits = []
    real = inplace_fast.write

    def counted(*args):
        served = real(*args)
        hits.append(served)
        return served
    monkeypatch.setattr(inplace, "fast_write", counted)
    return hits


def test_the_common_cases_take_the_fast_path(monkeypatch):
    hits = _count(monkeypatch)
    x, y = llgrad.randn(4, 4), llgrad.randn(4, 4)
    x.add_(y)
    x.mul_(0.5)
    x.zero_()
    x.copy_(y)
    x.fill_(1.0)
    p = llgrad.randn(4, 4, requires_grad=True)
    with llgrad.no_grad():
        p.add_(y, alpha=-0.1)              # (an optimiser's update)
        p[1].mul_(2)                       # (a view, grad off)
    p.data.add_(y)
    x[1].add_(1)                           # (a view of a tensor with no history, grad on)
    x[1:3] = 0.5
    w = llgrad.nn.Parameter(llgrad.randn(4, 4))
    with llgrad.no_grad():
        w.mul_(0.9).add_(y)                # (a Parameter is served as a tensor)
    assert hits == [True] * 12


def test_what_needs_the_general_path_declines_it(monkeypatch):
    hits = _count(monkeypatch)
    x, y = llgrad.randn(4, 4), llgrad.randn(4, 4)
    p = llgrad.randn(4, 4, requires_grad=True)
    x.add_(p)                              # (recorded: grad flows into x)
    assert x.requires_grad and x.grad_fn is not None
    x = llgrad.randn(4, 4)
    x.t().add_(y)                          # (not C-contiguous)
    x.add_(llgrad.randn(4))                # (broadcast operand)
    x.add_(y.double())                     # (another dtype)
    x.add_(x)                              # (shares t's memory)
    q = p * 1
    q[1].add_(1)                           # (a view of a tensor with history: CopySlices)
    assert type(q.grad_fn).__name__ == "CopySlices"
    with llgrad.no_grad():
        v = x[1]
    v.add_(1)                              # (a view made under no_grad, written with grad on)
    assert hits == [False] * 7


def test_errors_and_views_as_torch():
    for lib in (llgrad, torch):
        x = lib.arange(6).reshape(2, 3)
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            x.add_(0.5)
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            x.exp_()
        p = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            p.mul_(2)
        with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
            p[:2].mul_(2)
        z = lib.zeros(5)
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            z[1:].add_(z[:-1])
        with lib.inference_mode():
            inf = lib.ones(3)
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
            inf.add_(1)
    for lib in (llgrad, torch):     # a view written under no_grad: the base sees it
        base = lib.zeros(3, 4)
        with lib.no_grad():
            base[1].add_(lib.ones(4))
            base.mul_(3)
        assert base[1, 0].item() == 3 and base[0, 0].item() == 0
        assert base._version == 2          # (the view's write bumps the shared counter)


def test_under_a_trace_the_general_path_records_the_write(monkeypatch):
    hits = _count(monkeypatch)

    def f(x, y):
        z = x * 2
        z.add_(y)
        z.mul_(0.5)
        return z.sum()

    fn = llgrad.compile(f)
    x, y = llgrad.randn(4, 4), llgrad.randn(4, 4)
    fn(x, y)
    fn.wait()
    hits.clear()
    got = fn(x, y)
    traced_hits = list(hits)
    eager = f(x, y)
    assert got.item() == pytest.approx(eager.item(), rel=1e-6)
    assert fn.n_traces == 1
    assert True not in traced_hits      # (the compiled call made no eager writes)


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw"])
@pytest.mark.parametrize("foreach", [False, True])
def test_an_eager_optimiser_step_has_the_same_bits(kind, foreach, monkeypatch):
    def steps():
        llgrad.manual_seed(0)
        nn = llgrad.nn
        m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
        make = {"sgd": lambda ps: llgrad.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=foreach),
                "adam": lambda ps: llgrad.optim.Adam(ps, lr=1e-2, foreach=foreach),
                "adamw": lambda ps: llgrad.optim.AdamW(ps, lr=1e-2, foreach=foreach)}[kind]
        opt = make(m.parameters())
        xs = llgrad.randn(5, 6)
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            m(xs).square().sum().backward()
            opt.step()
        return [p.detach().numpy().copy() for p in m.parameters()], \
            [p._version for p in m.parameters()]

    fast, fast_v = steps()
    monkeypatch.setattr(inplace, "fast_write", lambda *a: False)
    ref, ref_v = steps()
    assert fast_v == ref_v
    for a, b in zip(fast, ref):
        np.testing.assert_array_equal(a, b)


def test_a_meta_tensor_in_the_process_leaves_cpu_writes_on_the_fast_path(monkeypatch):
    """The meta device's hook stays in the dispatcher once a meta tensor exists: CPU
    tensors' writes still take the fast path, a meta tensor's the general one (which
    computes nothing)."""
    m = llgrad.empty(4, 4, device="meta")
    hits = _count(monkeypatch)
    x, y = llgrad.randn(4, 4), llgrad.randn(4, 4)
    x.add_(y)
    m.add_(1)
    assert hits == [True, False] and m.device.type == "meta" and x._version == 1
