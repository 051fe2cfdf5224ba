"""Mutated inputs written in place by the kernel (codegen/plan.in_place_results): the final
value of an input a compiled function writes in place is computed in the input's own
buffer when nothing reads the old value afterwards. Every program runs eagerly, compiled
(llvm) and interpreted on copies of the same inputs; the results, the inputs' final
contents and their version counters must agree, and `in_place` says how many of the
program's mutated inputs the plan wrote in place (so the test fails both when a safe
write is copied and when an unsafe one is made in place)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen.lower import blas_available, plan_graph, simplify, small_gemm_bound


def sgd(p, g):
    p.sub_(0.1 * g)
    return (p * p).sum()


def read_after(p):
    p.add_(1.0)
    return p * 2.0


def reduce_before(p):
    s = p.sum(dim=1)
    p.mul_(2.0)
    return s


def old_and_new_in_one_loop(p):
    y = p * 3.0
    p.add_(1.0)
    return y + p


def late_reader(p, q):
    a = p.reshape(4, 1) * q         # read where the loop over (4, 3) runs: after the write
    p.add_(1.0)
    return a * p.reshape(4, 1)


def overwrite_then_read_old(p, q):
    y = p * 3.0                     # computed in the loop that stores the new p
    p.copy_(q * 2.0)                # (does not read the old p itself)
    return y + q


def total_then_overwrite(p, q):
    s = (p * p).sum()               # summed in the loop that stores the new p
    p.copy_(q * 2.0)
    return s


def total_of_old(p):
    s = (p * p).sum()
    p.mul_(0.5)
    return s


def view_of_old_returned(p):
    v = p[1:]
    p.add_(1.0)
    return v


def transposed_source(p, q):
    p.copy_(q.t() * 2.0)
    return p.sum()


def matmul_reads_old(p, w):
    y = p @ w
    p.mul_(0.0)
    return y


def written_twice(p, q):
    p.add_(q)
    p.mul_(q)
    return q * 1.0


def into_transposed(base):
    base.t().add_(1.0)          # the input itself is dense: its transpose is written
    return base * 1.0


def moments(m, v, g):
    m.mul_(0.9).add_(g, alpha=0.1)
    v.mul_(0.99).add_(g * g * 0.01)
    return (m / (v.sqrt() + 1e-8)).sum()


def returns_the_new_value(p):
    q = p.add_(1.0)
    return q * 1.0, p.mul(1.0)


def returns_the_input(p):
    return p.add_(1.0)


rng = np.random.default_rng(0)


def _a(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# (fn, input arrays, how many of its mutated inputs go in place)
PROGRAMS = [
    (sgd, lambda: [_a(4, 5), _a(4, 5)], 1),
    (read_after, lambda: [_a(3, 4)], 1),
    (reduce_before, lambda: [_a(3, 4)], 0),        # one row loop reads and writes p
    (old_and_new_in_one_loop, lambda: [_a(6, 7)], 1),
    (total_of_old, lambda: [_a(5, 6)], 1),
    (late_reader, lambda: [_a(4), _a(4, 3)], 0),
    (overwrite_then_read_old, lambda: [_a(64, 33), _a(64, 33)], 1),
    (total_then_overwrite, lambda: [_a(64, 33), _a(64, 33)], 1),
    (view_of_old_returned, lambda: [_a(4, 3)], 1),     # (the view is read from the new p)
    (transposed_source, lambda: [_a(3, 4), _a(4, 3)], 1),
    (matmul_reads_old, lambda: [_a(8, 4), _a(4, 3)], 1),
    (written_twice, lambda: [_a(5), _a(5)], 1),
    (into_transposed, lambda: [_a(3, 4)], None),
    (moments, lambda: [_a(16, 8), np.abs(_a(16, 8)), _a(16, 8)], 2),
    (returns_the_new_value, lambda: [_a(4)], 1),
    (returns_the_input, lambda: [_a(4)], 0),
]


def _run(fn, arrays, backend):
    ts = [llgrad.tensor(a.copy()) for a in arrays]
    f = fn if backend == "eager" else llgrad.compile(fn, backend=backend)
    if backend != "eager":
        f(*[llgrad.tensor(a.copy()) for a in arrays])      # the trace; then the compiled run
        f.wait()
    out = f(*ts)
    outs = out if isinstance(out, tuple) else (out,)
    return [o.numpy().copy() for o in outs], [t.numpy() for t in ts], \
        [t._version for t in ts], f


@pytest.mark.parametrize("fn, make, n_in_place", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_compiled_in_place_writes_agree_with_eager(fn, make, n_in_place):
    arrays = make()
    want, want_in, want_ver = _run(fn, arrays, "eager")[:3]
    for backend in ("llvm", "interpret"):
        got, got_in, got_ver, f = _run(fn, arrays, backend)
        for g, w in zip(got + got_in, want + want_in):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=backend)
        assert [v > 0 for v in got_ver] == [v > 0 for v in want_ver], backend
    graph = simplify(f.entries[-1].forward)
    plan = plan_graph(graph, {"blas": blas_available(), "small_gemm": small_gemm_bound()})
    if n_in_place is not None:
        assert len(plan.in_place) == n_in_place, plan.describe()


def test_an_optimiser_step_updates_parameters_and_state_in_place():
    llgrad.manual_seed(0)
    nets = [nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    opts = [llgrad.optim.Adam(n.parameters(), lr=0.05) for n in nets]
    x, y = llgrad.randn(16, 3), llgrad.randint(0, 2, (16,))

    def step(model, opt):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    cstep = llgrad.compile(step)
    ids = [id(p._data) for p in nets[1].parameters()]
    before = [[p._version for p in n.parameters()] for n in nets]
    for _ in range(4):
        want, got = step(nets[0], opts[0]), cstep(nets[1], opts[1])
        cstep.wait()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for p, q, b0, b1 in zip(nets[0].parameters(), nets[1].parameters(), *before):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert q._version - b1 == p._version - b0 == 4
    assert [id(p._data) for p in nets[1].parameters()] == ids     # the same arrays, updated
    entry = cstep.entries[-1]
    plan = plan_graph(simplify(entry.forward), {"blas": blas_available(),
                                                "small_gemm": small_gemm_bound()})
    # 4 parameters, each with its two moments and its step count
    assert len(plan.in_place) == len(entry.forward.mutated) == 16


def test_inputs_sharing_memory_run_eagerly_where_one_is_written_in_place():
    """The kernel of a function that writes an input assumes its inputs do not share
    memory: aliasing inputs run the call eagerly (with a warning), giving eager's values."""
    def f(p, q):
        p.mul_(2.0)
        return q * 1.0

    cf = llgrad.compile(f)
    for _ in range(2):
        cf(llgrad.tensor(_a(6)), llgrad.tensor(_a(2, 3)))
        cf.wait()       # (while it builds, every call runs eagerly, without the warning)
    data = _a(6)
    p, p_eager = llgrad.tensor(data), llgrad.tensor(data)
    with pytest.warns(UserWarning, match="running eagerly: inputs share memory"):
        got = cf(p, p.view(2, 3))
    want = f(p_eager, p_eager.view(2, 3))
    np.testing.assert_allclose(got.numpy(), want.numpy())
    np.testing.assert_allclose(p.numpy(), p_eager.numpy())
    g = llgrad.compile(lambda p, q: p * 2.0 + q.sum())     # nothing written: compiled
    for _ in range(2):
        g(llgrad.tensor(_a(6)), llgrad.tensor(_a(2, 3)))
        g.wait()
    # (a sum's order is LLVM's, reassociated: code shared with another size of the graph's
    # family, as an earlier test's `p * 3.0 + q.sum()`, may differ from eager's in an ulp)
    np.testing.assert_allclose(g(p, p.view(2, 3)).numpy(), (p * 2.0 + p.sum()).numpy(),
                               rtol=1e-6)


def test_in_place_updates_split_over_threads_agree_with_eager():
    # big enough for the loops to split over 2 threads: each thread writes its own chunk of
    # the parameter and moments it reads
    n = 1 << 17
    arrays = [_a(n), np.abs(_a(n)), _a(n), _a(n)]

    def adam_like(p, v, m, g):
        m.lerp_(g, 0.1)
        v.mul_(0.99).addcmul_(g, g, value=0.01)
        p.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)
        return p.sum()

    before = llgrad.get_num_threads()
    llgrad.set_num_threads(2)
    try:
        want, want_in, _, _ = _run(adam_like, arrays, "eager")
        got, got_in, _, f = _run(adam_like, arrays, "llvm")
    finally:
        llgrad.set_num_threads(before)
    for g, w in zip(got + got_in, want + want_in):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    plan = plan_graph(simplify(f.entries[-1].forward), {"blas": blas_available(),
                                                         "small_gemm": small_gemm_bound()})
    assert len(plan.in_place) == 3
    from llgrad.codegen.lower import THREAD_CALL
    assert THREAD_CALL in f.entries[-1].kernels["forward"].ir_before      # (it does split)
