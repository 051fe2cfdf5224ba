"""Adversarial checks of eager products on llgrad's threads (compile/eager_gemm.py) and of
eager pooling on shaped kernels (compile/eager_shaped.py), against NumPy, torch and eager
at one thread: unaligned operands (np.frombuffer at an odd offset), Python threads sharing
the pool, a fork while another thread is inside the shim, odd layouts and `out`s, stacks
with broadcast or reversed batches, the interpreter and compiled code against eager, and
pooling over channels-last, 3-D, half-precision and double-backward inputs."""
import multiprocessing
import threading

import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_gemm, eager_shaped
from llgrad.ir.np_matmul import matmul

from gemm_checks import each_product  # noqa: E402

F = llgrad.nn.functional


@pytest.fixture
def threads():
    old = llgrad.get_num_threads()
    yield llgrad.set_num_threads
    llgrad.set_num_threads(old)


def _unaligned(a):
    """A copy of a whose data starts one byte past an aligned address."""
    buf = np.zeros(a.nbytes + 8, np.uint8)
    u = np.ndarray(a.shape, a.dtype, buffer=buf, offset=1)
    u[...] = a
    assert not u.flags.aligned and u.flags.c_contiguous
    return u


def _twice(fn):
    """fn() after a first call that starts (and here waits for) its kernel's build."""
    fn()
    eager_builds.wait()
    return fn()


def _close(got, want, dtype=np.float32):
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=16 * eps,
                               atol=16 * eps * max(1.0, float(np.nanmax(np.abs(want)))))


# ---- shaped kernels on an unaligned input: copied first, as a strided one is -----------------

def _shaped_ops():
    w = np.random.default_rng(5).standard_normal((8, 8, 3, 3)).astype(np.float32)
    return {
        "max_pool2d": lambda x: F.max_pool2d(x, 3, 2, 1),
        "avg_pool2d": lambda x: F.avg_pool2d(x, 3, 2, 1),
        "conv2d": lambda x: F.conv2d(x, llgrad.tensor(w), padding=1),
        "layer_norm": lambda x: F.layer_norm(x, (32,)),
        "index_add": lambda x: x.index_add(0, llgrad.tensor([3, 1, 3, 0]),
                                           llgrad.ones(4, 8, 32, 32)),
    }


@pytest.mark.parametrize("name", list(_shaped_ops()))
def test_unaligned_input_runs_like_aligned(threads, name):
    """An eager op on a shaped kernel given an unaligned input (a tensor over np.frombuffer's
    odd offset) raised the kernel launcher's "not aligned" error: NumPy's implementation
    took such arrays before the op ran natively."""
    threads(2)
    op = _shaped_ops()[name]
    a = np.random.default_rng(6).standard_normal((16, 8, 32, 32)).astype(np.float32)
    g = np.random.default_rng(7).standard_normal(tuple(op(llgrad.tensor(a)).shape))
    g = g.astype(np.float32)

    def run(arr):
        x = llgrad.from_numpy(arr).requires_grad_()
        y = op(x)
        y.backward(llgrad.tensor(g))
        return y.detach().numpy(), x.grad.numpy()

    want = _twice(lambda: run(a))
    before = eager_shaped.stats["calls"]
    got = _twice(lambda: run(_unaligned(a)))
    assert eager_shaped.stats["calls"] > before, "the shaped kernel did not run"
    for p, q in zip(got, want):
        np.testing.assert_array_equal(p, q)


# ---- products: layouts the shim refuses, NumPy's answers and errors -----------------------

def _calls(fn):
    """(fn()'s result after the shim is ready, how many shim calls that run made)."""
    fn()
    eager_builds.wait()
    before = eager_gemm.stats["calls"]
    got = fn()
    return got, eager_gemm.stats["calls"] - before


def _numpy_layouts(a):
    """Views of a (a float matrix) that NumPy takes and the shim must leave to NumPy."""
    yield "reversed rows", np.ascontiguousarray(a[::-1])[::-1]
    yield "reversed columns", np.ascontiguousarray(a[:, ::-1])[:, ::-1]
    yield "unaligned", _unaligned(a)
    yield "byte-swapped", a.astype(a.dtype.newbyteorder())
    yield "column stride 2", np.repeat(a, 2, axis=1)[:, ::2]
    yield "complex", a.astype(np.complex64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layouts_left_to_numpy(threads, dtype):
    threads(2)
    rng = np.random.default_rng(10)
    a = rng.standard_normal((300, 128)).astype(dtype)
    b = rng.standard_normal((128, 256)).astype(dtype)
    for name, x in _numpy_layouts(a):
        y = b.astype(x.dtype) if x.dtype.kind == "c" else b.astype(x.dtype.newbyteorder()) \
            if x.dtype.byteorder == ">" else b
        got, calls = _calls(lambda: matmul(x, y))
        assert calls == 0, name
        np.testing.assert_array_equal(got, np.matmul(x, y), err_msg=name)


def test_nan_and_inf_land_where_numpy_puts_them(threads):
    threads(2)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((256, 192)).astype(np.float32)
    b = rng.standard_normal((192, 320)).astype(np.float32)
    a[3, 5], a[100, :] = np.nan, 0.0
    b[7, 9], b[:, 200] = np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        want = np.matmul(a, b)
        got, calls = _calls(lambda: matmul(a, b))
    assert calls == 1
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(got), test(want))
    _close(np.nan_to_num(got, posinf=0, neginf=0), np.nan_to_num(want, posinf=0, neginf=0))


class _Sub(np.ndarray):
    pass


def test_outs_the_shim_refuses_behave_as_numpy(threads):
    """An `out` overlapping an operand (another view of its buffer), transposed, of another
    dtype, a subclass, or read-only: NumPy's matmul, its result or its error."""
    threads(2)
    rng = np.random.default_rng(12)
    buf = rng.standard_normal((256, 512)).astype(np.float32)
    a, b = buf[:, :256], rng.standard_normal((256, 256)).astype(np.float32)
    want = np.matmul(a, b)
    outs = {"overlaps a": buf[:, 256:].base[:, 128:384], "transposed": np.empty((256, 256),
            np.float32).T, "float64": np.empty((256, 256)), "subclass":
            np.empty((256, 256), np.float32).view(_Sub)}
    before = eager_gemm.stats["calls"]
    for name, out in outs.items():
        expect = want if name != "overlaps a" else np.matmul(a.copy(), b)
        assert matmul(a, b, out=out) is out, name
        _close(np.asarray(out, np.float32), expect)
        buf = rng.standard_normal((256, 512)).astype(np.float32)
        a = buf[:, :256]
        want = np.matmul(a, b)
    assert eager_gemm.stats["calls"] == before
    frozen = np.empty((256, 256), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError) as ours:
        matmul(a, b, out=frozen)
    with pytest.raises(ValueError) as numpys:
        np.matmul(a, b, out=frozen)
    assert str(ours.value) == str(numpys.value)


def test_stacks_numpy_and_errors(threads):
    threads(2)
    rng = np.random.default_rng(13)

    def r(*s):
        return rng.standard_normal(s).astype(np.float32)
    cases = {"0-stride batch": (np.broadcast_to(r(1, 256, 64), (5, 256, 64)), r(5, 64, 256)),
             "reversed batch": (r(6, 256, 64)[::-2], r(3, 64, 256)),
             "batch outermost in memory": (r(256, 4, 64).transpose(1, 0, 2), r(64, 256)),
             "matrix times 4-D": (r(256, 64), r(2, 3, 64, 256))}
    for name, (a, b) in cases.items():
        got, calls = _calls(lambda: matmul(a, b))
        assert calls == 1, name
        each_product(got, a, b)
    empty, calls = _calls(lambda: matmul(r(0, 1, 256, 64), r(3, 64, 256)))
    assert empty.shape == (0, 3, 256, 256) and empty.dtype == np.float32
    for a, b in ((r(2, 256, 64), r(3, 64, 256)), (r(4, 256, 64), r(4, 63, 256))):
        with pytest.raises(ValueError) as ours:
            matmul(a, b)
        with pytest.raises(ValueError) as numpys:
            np.matmul(a, b)
        assert str(ours.value) == str(numpys.value)


# ---- Python threads and processes --------------------------------------------------------

def _products(rng):
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 400)).astype(np.float32)
    s = rng.standard_normal((4, 128, 64)).astype(np.float32)
    t = rng.standard_normal((4, 64, 256)).astype(np.float32)
    return [(a, b, np.matmul(a, b)), (s, t, np.matmul(s, t))]


def test_python_threads_share_the_pool(threads):
    """Python threads' products (2-D, into an `out`, stacks) at once, one of them switching
    the thread count between 1 and 2: every result right, every thread done."""
    threads(2)
    work = _products(np.random.default_rng(14))
    _calls(lambda: [matmul(x, y) for x, y, _ in work])
    wrong = []

    def run(k):
        out = np.empty((300, 400), np.float32)
        for j in range(40):
            if k == 0 and j % 5 == 0:
                llgrad.set_num_threads(1 + j // 5 % 2)
            for x, y, want in work:
                got = matmul(x, y, out=out if x.ndim == 2 else None)
                if not np.allclose(got, want, rtol=1e-5, atol=1e-4):
                    wrong.append((k, j))
    pool = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(3)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    assert not any(t.is_alive() for t in pool), "a thread hangs"
    assert not wrong


def _child(queue):
    work = _products(np.random.default_rng(14))
    before = eager_gemm.stats["calls"]
    ok = all(np.allclose(matmul(x, y), want, rtol=1e-5, atol=1e-4) for x, y, want in work)
    queue.put((ok, eager_gemm.stats["calls"] - before))


_NO_FORK = pytest.mark.skipif(not hasattr(multiprocessing, "get_context") or
                              "fork" not in multiprocessing.get_all_start_methods(),
                              reason="no fork")


def _forks_while_busy(forks, timeout):
    """Fork `forks` children, one after the other, while a parent's thread runs products on
    the pool; each runs its own there and must finish within timeout seconds."""
    work = _products(np.random.default_rng(14))
    _calls(lambda: [matmul(x, y) for x, y, _ in work])
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            matmul(*work[0][:2])
    t = threading.Thread(target=busy, daemon=True)
    t.start()
    ctx = multiprocessing.get_context("fork")
    try:
        for _ in range(forks):
            queue = ctx.Queue()
            p = ctx.Process(target=_child, args=(queue,))
            p.start()
            p.join(timeout)
            if p.exitcode is None:
                p.kill()
            assert p.exitcode == 0
            assert queue.get(timeout=5) == (True, 2)
    finally:
        stop.set()
        t.join(30)


@_NO_FORK
def test_fork_while_another_thread_is_in_the_shim(threads):
    """A child forked while a parent's thread runs products on the pool runs its own there
    (fresh workers, the shim's mutex and OpenBLAS's count reset)."""
    threads(2)
    _forks_while_busy(3, 60)


@pytest.mark.slow
@_NO_FORK
def test_forty_forks_while_another_thread_is_in_the_shim(threads):
    """The fork above, 40 times (1 in ~10 hung before the shim's mutex was held across
    the fork: a thread leaving the shim restarted OpenBLAS's threads between OpenBLAS's fork
    handler and the fork, and the child's OpenBLAS waited for threads it did not have)."""
    threads(2)
    _forks_while_busy(40, 30)


# ---- compiled code, the interpreter and autograd against eager at 2 threads --------------

def test_compiled_and_interpreted_equal_eager(threads):
    threads(2)
    rng = np.random.default_rng(15)
    x, w, v = (llgrad.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
               for s in ((384, 256), (256, 512), (128, 512)))

    def f(x, w, v):
        return ((x @ w).relu() @ v.T).square().mean(), (x.reshape(4, 96, 256) @ w).mean()

    def run(fn):
        for p in (x, w, v):
            p.grad = None
        a, b = fn(x, w, v)
        (a + b).backward()
        return [a.detach().numpy(), b.detach().numpy()] + [p.grad.numpy() for p in (x, w, v)]

    want, calls = _calls(lambda: run(f))
    assert calls >= 6
    for fn in (llgrad.compile(f, backend="interpret"), llgrad.compile(f)):
        for _ in range(2):
            got = run(fn)
        for p, q in zip(got[2:], want[2:]):
            np.testing.assert_array_equal(p, q)
        for p, q in zip(got[:2], want[:2]):
            _close(p, q)
    threads(1)
    for p, q in zip(run(f), want):
        _close(p, q)


# ---- pooling on shaped kernels --------------------------------------------------------------

@pytest.mark.parametrize("avg", [False, True], ids=["max", "avg"])
def test_pool_layouts_against_torch(threads, avg):
    """Channels-last (copied first) and (C, H, W) inputs, at 2 threads, against torch."""
    torch = pytest.importorskip("torch")
    threads(2)
    rng = np.random.default_rng(16)
    base = np.round(rng.standard_normal((4, 8, 33, 35)) * 2).astype(np.float32) / 2
    inputs = {"channels last": np.ascontiguousarray(base.transpose(0, 2, 3, 1))
              .transpose(0, 3, 1, 2), "C, H, W": base.reshape(32, 33, 35)}
    kw = dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)
    for name, a in inputs.items():
        g = rng.standard_normal(tuple(F.avg_pool2d(llgrad.tensor(a), **kw).shape))
        g = g.astype(np.float32)

        def ours():
            x = llgrad.tensor(a, requires_grad=True)
            y = F.avg_pool2d(x, **kw) if avg else F.max_pool2d(x, return_indices=True, **kw)
            (y if avg else y[0]).backward(llgrad.tensor(g))
            return (y if avg else y[0]).detach().numpy(), x.grad.numpy(), \
                None if avg else y[1].numpy()
        before = eager_shaped.stats["calls"]
        got = _twice(ours)
        assert eager_shaped.stats["calls"] >= before + 2, name
        tx = torch.tensor(a, requires_grad=True)
        ty = torch.nn.functional.avg_pool2d(tx, **kw) if avg else \
            torch.nn.functional.max_pool2d(tx, return_indices=True, **kw)
        (ty if avg else ty[0]).backward(torch.tensor(g))
        _close(got[0], (ty if avg else ty[0]).detach().numpy())
        _close(got[1], tx.grad.numpy())
        if not avg:
            np.testing.assert_array_equal(got[2], ty[1].numpy())


def test_half_pools_keep_numpy_and_double_backward_matches_one_thread(threads):
    threads(2)
    a = np.random.default_rng(17).standard_normal((8, 16, 32, 32)).astype(np.float32)
    before = eager_shaped.stats["calls"]
    y = _twice(lambda: F.max_pool2d(llgrad.tensor(a).half(), 3, 2, 1))
    assert y.dtype == llgrad.float16 and eager_shaped.stats["calls"] == before
    np.testing.assert_array_equal(y.float().numpy(),
                                  F.max_pool2d(llgrad.tensor(a), 3, 2, 1).half().float().numpy())

    def double(t):
        threads(t)
        x = llgrad.tensor(a.astype(np.float64), requires_grad=True)
        y = F.max_pool2d(F.avg_pool2d(x, 2, 1), 3, 2, 1)
        g = llgrad.ones_like(y).requires_grad_()
        gx, = llgrad.autograd.grad(y, x, g, create_graph=True)
        (gx ** 2).sum().backward()
        return gx.detach().numpy(), g.grad.numpy(), x.grad.numpy()
    for p, q in zip(_twice(lambda: double(2)), double(1)):
        np.testing.assert_array_equal(p, q)
