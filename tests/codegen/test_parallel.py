"""Multi-threaded native loops (codegen/lowerings/parallel.py): compiled == interpreted with one and
two threads, below and above the threading threshold; the thread count changes without
recompiling; reductions are deterministic per thread count; concurrent callers."""
import ctypes
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from llvmlite import ir
from test_cluster import _check as check_against_interpreter

import llgrad
from llgrad.codegen.native import jit
from llgrad.codegen.lowerings import parallel
from llgrad.codegen.lowerings.loops import FuncGen, for_range
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings.scalar import F64, I64, PTR
from llgrad.ir import Builder, TensorType

BIG = 1_000_003                 # odd, and far above the threshold
SMALL = 1000


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(request.param)
    yield request.param
    llgrad.set_num_threads(old)


def _ew(bld, op, *xs, **attrs):
    return bld.add(op, list(xs), attrs)


def _sum(bld, x):
    return _ew(bld, "sum", x, dim=None, keepdim=False)


def _check(g, arrays, rtol=1e-5):
    return check_against_interpreter(g, arrays, rtol=rtol, outputs=True)


def _threaded(k):
    return "llgrad_parallel_run" in k.dump(optimized=False)


def _chain(shape, dt="float32", xtype=None):
    """tanh(x * w + 1) * sigmoid(x) - x: one elementwise group."""
    bld = Builder("chain")
    x = bld.input(xtype or TensorType(dt, shape))
    w = bld.input(TensorType(dt, shape))
    y = _ew(bld, "tanh", _ew(bld, "add", _ew(bld, "mul", x, w), 1.0, alpha=1))
    z = _ew(bld, "sub", _ew(bld, "mul", y, _ew(bld, "sigmoid", x)), x, alpha=1)
    return bld.ret(z)


@pytest.mark.parametrize("n", [SMALL, BIG])
def test_elementwise_chain(threads, n):
    rng = np.random.default_rng(0)
    k, _ = _check(_chain((n,)), [rng.standard_normal(n).astype("float32") for _ in range(2)])
    assert _threaded(k) == (n == BIG)


def test_tiny_loops_have_no_thread_code():
    """W5-sized loops read no thread count: the code is what it was before threads."""
    k, _ = _check(_chain((16,)), [np.linspace(-1, 1, 16, dtype="float32")] * 2)
    text = k.dump(optimized=False)
    assert "llgrad_num_threads" not in text and "pthread" not in text


@pytest.mark.parametrize("shape", [(3, 400_001), (4001, 257), (2, 3, 170_001)])
def test_small_outer_extent_or_many_rows(threads, shape):
    """A few long rows split the inner loop (in steps of 64); many rows split the rows."""
    rng = np.random.default_rng(1)
    k, _ = _check(_chain(shape), [rng.standard_normal(shape).astype("float32")
                                  for _ in range(2)])
    assert _threaded(k)


def test_transposed_and_stepped_inputs(threads):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((1031, 1000)).astype("float32")
    xt = base.T                                         # (1000, 1031), strides (1, 1000)
    g = _chain((1000, 1031), xtype=TensorType("float32", (1000, 1031), (1, 1000)))
    k, _ = _check(g, [xt, rng.standard_normal((1000, 1031)).astype("float32")])
    assert _threaded(k)
    wide = rng.standard_normal(2 * BIG).astype("float32")
    g = _chain((BIG,), xtype=TensorType("float32", (BIG,), (2,)))
    _check(g, [wide[::2], rng.standard_normal(BIG).astype("float32")])


def _cluster(shape, bshape, dt="float32"):
    """W3's shape of work: a loss (sum and mean) and gradients in one loop, with a
    broadcast operand."""
    bld = Builder("clu")
    x = bld.input(TensorType(dt, shape))
    w = bld.input(TensorType(dt, bshape))
    t = _ew(bld, "tanh", _ew(bld, "mul", x, w))
    s = _ew(bld, "sigmoid", x)
    loss = _sum(bld, _ew(bld, "mul", t, s))
    m = _ew(bld, "mean", _ew(bld, "mul", s, x), dim=None, keepdim=False)
    d = _ew(bld, "mul", s, _ew(bld, "rsub", _ew(bld, "mul", t, t), 1.0, alpha=1))
    return bld.ret(loss, m, _ew(bld, "mul", d, w), d)


@pytest.mark.parametrize("shape,bshape", [((SMALL,), (SMALL,)), ((BIG,), (BIG,)),
                                          ((977, 1031), (1031,)), ((3, 333_337), (3, 1))])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_cluster_with_full_sums(threads, shape, bshape, dt):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(shape).astype(dt), rng.standard_normal(bshape).astype(dt)]
    k, got = _check(_cluster(shape, bshape, dt), arrays, rtol=1e-5 if dt == "float32"
                    else 1e-10)
    assert k.plan.groups[0].loop == "cluster" and len(k.plan.groups) == 1
    again = k(arrays)
    for a, b in zip(got, again):            # the same thread count: the same bits
        assert np.array_equal(a, b)


def test_thread_count_changes_without_recompiling():
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(BIG).astype("float64") for _ in range(2)]
    g = _cluster((BIG,), (BIG,), "float64")
    old = llgrad.get_num_threads()
    try:
        llgrad.set_num_threads(1)
        k = lower(g)
        before = dict(jit.stats)
        sums = {}
        for n in (1, 2, 3, 2, 1):
            llgrad.set_num_threads(n)
            out = k(arrays)
            sums.setdefault(n, out[0])
            assert out[0] == sums[n]                        # deterministic per count
        assert dict(jit.stats) == before                    # nothing compiled or loaded
        assert lower(g).cache_key == k.cache_key            # the key has no thread count
        np.testing.assert_allclose(sums[2], sums[1], rtol=1e-12)
    finally:
        llgrad.set_num_threads(old)


def test_gradients_match_eager(threads):
    rng = np.random.default_rng(5)
    data = [rng.standard_normal(BIG).astype("float32") for _ in range(3)]

    def f(x, w, b):
        return (llgrad.tanh(x * w + b) * llgrad.sigmoid(x) + 0.5 * x * x).sum()

    cf = llgrad.compile(f, backend="llvm")
    results = []
    for fn in (f, cf, cf):
        args = [llgrad.tensor(a, requires_grad=True) for a in data]
        loss = fn(*args)
        results.append((loss.item(), [g.numpy() for g in llgrad.autograd.grad(loss, args)]))
    (want, wgrads), *got = results
    for loss, grads in got:
        assert loss == pytest.approx(want, rel=1e-5)
        for a, b in zip(grads, wgrads):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert cf.n_traces == 1


def test_bad_thread_counts_raise():
    old = llgrad.get_num_threads()
    for bad in (0, -1, 1.5, "2", None, True):
        with pytest.raises(ValueError, match="set_num_threads"):
            llgrad.set_num_threads(bad)
    assert llgrad.get_num_threads() == old
    llgrad.set_num_threads(np.int64(old))               # any integer type
    assert llgrad.get_num_threads() == old


def test_concurrent_callers(threads):
    """Two Python threads calling one threaded kernel (each call forks its own threads)."""
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal(BIG).astype("float64") for _ in range(2)]
    g = _cluster((BIG,), (BIG,), "float64")
    k = lower(g)
    want = k(arrays)
    bad = []

    def run():
        for _ in range(15):
            got = k(arrays)
            if not all(np.array_equal(a, b) for a, b in zip(got, want)):
                bad.append(got)

    ts = [threading.Thread(target=run) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


class _Buf:
    def __init__(self, slot):
        self.slot = slot


@pytest.mark.parametrize("rows,cols", [(5, 3), (40_001, 7)])
def test_partials_combine_column_sums_in_tid_order(threads, rows, cols):
    """The API rows.py uses: an outer loop over rows, float64 column sums per thread."""
    src, dst = _Buf(0), _Buf(1)
    mod = jit.new_module("colsum")
    fg = FuncGen(mod, "colsum.body", [src, dst])
    b = fg.b
    acc = fg.alloca(F64, name="acc", count=cols)
    with for_range(b, 0, cols) as j:
        b.store(ir.Constant(F64, 1.0), b.gep(acc, [j], source_etype=F64))   # dest += ...
    part = parallel.Partial(acc, cols)

    def body(g, lo, hi, tid):
        with for_range(g.b, lo, hi, name="r") as r, for_range(g.b, 0, cols, name="c") as c:
            x = g.b.load(g.b.gep(g.ptrs[src], [g.b.add(g.b.mul(r, ir.Constant(I64, cols)), c)],
                                 source_etype=F64), typ=F64)
            p = g.b.gep(g.ptrs[part], [c], source_etype=F64)
            g.b.store(g.b.fadd(g.b.load(p, typ=F64), x), p)

    parallel.parallel_range(fg, rows, body, work_per_iter=cols * 100, partials=[part])
    with for_range(b, 0, cols) as j:
        v = b.load(b.gep(acc, [j], source_etype=F64))
        b.store(v, b.gep(fg.ptrs[dst], [j], source_etype=F64))
    fn = fg.finish()
    entry = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR]), name="colsum")
    eb = ir.IRBuilder(entry.append_basic_block())
    eb.call(fn, list(entry.args))
    eb.ret_void()
    compiled = jit.compile_module(mod, ["colsum"])
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(compiled.address("colsum"))
    x = np.random.default_rng(7).standard_normal((rows, cols))
    out = np.empty(cols)
    call(x.ctypes.data, out.ctypes.data)
    np.testing.assert_allclose(out, 1.0 + x.sum(axis=0), rtol=1e-12)
    # the exact order: each chunk's rows summed from zero, then added to dest in tid
    # order; one thread (or a loop too small for two) adds into dest itself; a loop on
    # more threads is cut into parallel.OVERSPLIT chunks per thread
    t = parallel.chunk_count(threads, rows, 1, [part]) if rows > 5 and threads > 1 else 1
    bounds = [min(rows, i * rows // t) for i in range(t + 1)]
    want = np.ones(cols)
    for i in range(t):
        p = np.zeros(cols) if t > 1 else want
        for r in range(bounds[i], bounds[i + 1]):
            p = p + x[r]
        want = want + p if t > 1 else p
    assert np.array_equal(out, want)


def _python(code, **env):
    e = dict(os.environ, **env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, check=False,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.slow
def test_default_from_the_environment():
    out = _python("import llgrad; print(llgrad.get_num_threads())", LLGRAD_NUM_THREADS="3")
    assert out.split() == ["3"]
    out = _python("""
        import warnings, llgrad
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            n = llgrad.get_num_threads()
        print(n >= 1, any("LLGRAD_NUM_THREADS" in str(x.message) for x in w))""",
                  LLGRAD_NUM_THREADS="lots")
    assert out.split() == ["True", "True"]


@pytest.mark.parametrize("pool", ["0", "1"])
def test_a_thread_that_cannot_start_runs_on_the_caller(pool):
    """pthread_create failing (as when a process is out of threads) loses no chunk: with
    plain threads (LLGRAD_POOL=0) the kernel's own call fails; with the pool, the call
    that starts a worker does."""
    symbol = "llgrad_pthread_create" if pool == "0" else "llgrad_real_pthread_create"
    _python("""
        import ctypes, numpy as np, llgrad
        from llgrad.codegen.native import jit
        from llgrad.codegen.lowerings import parallel
        from llgrad.codegen.lower import lower
        from llgrad.ir import Builder, TensorType
        from llgrad.ir.interpret import evaluate
        calls = []
        @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)
        def failing(handle, attr, start, arg):
            calls.append(1)
            return 11                                   # EAGAIN
        jit.add_symbol(SYMBOL, ctypes.cast(failing, ctypes.c_void_p).value)
        llgrad.set_num_threads(4)
        n = 1_000_003
        bld = Builder("fail")
        x = bld.input(TensorType("float64", (n,)))
        e = bld.add("exp", [x], {})
        g = bld.ret(bld.add("sum", [e], {"dim": None, "keepdim": False}),
                    bld.add("mul", [e, 2.0], {}))
        a = np.random.default_rng(0).standard_normal(n)
        got = lower(g)([a])
        want, _ = evaluate(g, [a])
        for u, v in zip(got, want):
            np.testing.assert_allclose(u, v, rtol=1e-12)
        assert len(calls) == 3, calls
        """.replace("SYMBOL", repr(symbol)), LLGRAD_CACHE_DIR="0", LLGRAD_POOL=pool)


@pytest.mark.slow
def test_cached_object_code_finds_the_thread_symbols(tmp_path):
    """A second process loads the threaded kernel from the disk cache (no codegen) and its
    references to the thread count and pthreads resolve there too."""
    code = """
        import numpy as np, llgrad
        from llgrad.codegen.native import jit
        from llgrad.codegen.lower import lower
        from llgrad.ir import Builder, TensorType
        llgrad.set_num_threads(2)
        n = 1_000_003
        bld = Builder("cached")
        x = bld.input(TensorType("float64", (n,)))
        e = bld.add("exp", [x], {})
        g = bld.ret(bld.add("sum", [e], {"dim": None, "keepdim": False}),
                    bld.add("mul", [e, 2.0], {}))
        a = np.linspace(-1, 1, n)
        s, y = lower(g)([a])
        assert abs(s - np.exp(a).sum()) < 1e-8 * n and np.allclose(y, 2 * np.exp(a))
        from llgrad.codegen.lowerings import pool
        print(jit.stats["codegen"], jit.stats["loaded"], int(pool._state["lib"] is not None))
        """
    first = _python(code, LLGRAD_CACHE_DIR=str(tmp_path))
    second = _python(code, LLGRAD_CACHE_DIR=str(tmp_path))
    # (the thread pool's module is llgrad's plumbing, outside the stats, like the trampoline)
    assert first.split()[:2] == ["1", "0"] and second.split()[:2] == ["0", "1"]


def _loop(x, w):
    n = x.sum() * 0
    while n < 4:                        # a region run several times: threads each trip
        x = llgrad.tanh(x * w) + 0.5 * x
        n = n + 1
    if x.sum() > 0:
        y = x * w
    else:
        y = llgrad.sigmoid(x)
    return y.sum(), y


def test_threaded_loops_inside_control_flow_regions(threads):
    rng = np.random.default_rng(8)
    data = [rng.standard_normal(BIG), rng.standard_normal(BIG)]
    cf = llgrad.compile(_loop, backend="llvm")
    for _ in range(2):
        got = cf(*[llgrad.tensor(a) for a in data])
        want = _loop(*[llgrad.tensor(a) for a in data])
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    assert all(not isinstance(k, str) for k in cf.entries[0].kernels.values())
