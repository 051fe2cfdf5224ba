"""Multi-output loop fusion (codegen/schedule/cluster.py): what joins a cluster, what is stored, and
that every clustered kernel computes what the interpreter computes."""
import numpy as np
import pytest

from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings.parallel import cost
from llgrad.codegen.schedule.plan import MAX_LOOP_COST
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

N = 1000


def _ew(bld, op, *xs, **attrs):
    return bld.add(op, list(xs), attrs)


def _check(g, arrays, rtol=1e-6, outputs=False):
    """The kernel of g, its outputs checked against the interpreter's; (kernel, outputs)
    with outputs=True."""
    k = lower(g)
    got = k(arrays)
    want, _ = evaluate(g, arrays)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
    return (k, got) if outputs else k


def _inputs(rng, *shapes, dt="float32"):
    return [rng.standard_normal(s).astype(dt) for s in shapes]


def test_loss_and_gradients_share_one_loop():
    """W3's value_and_grad: the activation feeds the loss and three gradients."""
    bld = Builder("w3")
    x, w, b = (bld.input(TensorType("float32", (N,))) for _ in range(3))
    t = _ew(bld, "tanh", _ew(bld, "add", _ew(bld, "mul", x, w), b, alpha=1))
    s = _ew(bld, "sigmoid", x)
    loss = _ew(bld, "sum", _ew(bld, "mul", t, s), dim=None, keepdim=False)
    dt = _ew(bld, "mul", s, _ew(bld, "rsub", _ew(bld, "mul", t, t), 1.0, alpha=1))
    g = bld.ret(loss, _ew(bld, "mul", dt, w), _ew(bld, "mul", dt, x), dt)
    k = _check(g, _inputs(np.random.default_rng(0), N, N, N))
    assert len(k.plan.groups) == 1 and k.plan.groups[0].loop == "cluster"
    assert k.plan.arena_bytes == 0              # t, s and dt never touch memory


def test_values_read_outside_are_stored_and_views_split_clusters():
    bld = Builder("views")
    x = bld.input(TensorType("float64", (8, 8)))
    a = _ew(bld, "exp", x)
    b = _ew(bld, "mul", a, 2.0)
    at = bld.add("t", [a], {}, view_of=a)      # a view of a cluster value
    c = _ew(bld, "add", at, b, alpha=1)     # reads a through a view: cannot join
    g = bld.ret(_ew(bld, "mul", c, a), b)
    k = _check(g, _inputs(np.random.default_rng(1), (8, 8), dt="float64"), rtol=1e-12)
    stored = {v for grp in k.plan.groups for v in grp.results}
    assert a in stored                          # read again by a later loop


def test_a_dependency_through_another_group_seals_the_cluster():
    """e = exp(x); m = e @ e; y = e + m: y depends on the cluster through the matmul, so it
    must not join e's loop (it would read m before the matmul ran)."""
    bld = Builder("sealed")
    x = bld.input(TensorType("float64", (6, 6)))
    e = _ew(bld, "exp", x)
    f = _ew(bld, "mul", e, 3.0)
    m = bld.add("mm", [e, f])
    y = _ew(bld, "add", e, m, alpha=1)
    g = bld.ret(y, _ew(bld, "sum", f, dim=None, keepdim=False))
    k = _check(g, _inputs(np.random.default_rng(2), (6, 6), dt="float64"), rtol=1e-12)
    order = [grp.loop for grp in k.plan.groups]
    assert order.index("kernel") < len(order) - 1      # the add runs after the matmul


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_sums_and_means_accumulate_in_the_loop(dt):
    bld = Builder("red")
    x = bld.input(TensorType(dt, (37, 29)))
    y = _ew(bld, "sigmoid", x)
    g = bld.ret(_ew(bld, "sum", y, dim=None, keepdim=False),
                _ew(bld, "mean", _ew(bld, "mul", y, x), dim=(0, 1), keepdim=True),
                _ew(bld, "neg", y))
    k = _check(g, _inputs(np.random.default_rng(3), (37, 29), dt=dt),
               rtol=1e-6 if dt == "float32" else 1e-13)
    assert len(k.plan.groups) == 1


def test_broadcast_operands_and_independent_groups_in_between():
    bld = Builder("bcast")
    x = bld.input(TensorType("float32", (16, 32)))
    r = bld.input(TensorType("float32", (32,)))
    p = _ew(bld, "mul", x, r)                       # broadcast read of r
    q = _ew(bld, "amax", x, dim=1, keepdim=True)    # another kind of group in between
    z = _ew(bld, "tanh", p)
    g = bld.ret(_ew(bld, "sub", z, p, alpha=1), _ew(bld, "add", p, q, alpha=1), z)
    _check(g, _inputs(np.random.default_rng(4), (16, 32), (32,)))


def test_clusters_can_be_turned_off():
    bld = Builder("off")
    x = bld.input(TensorType("float32", (N,)))
    a = _ew(bld, "exp", x)
    g = bld.ret(_ew(bld, "mul", a, a), _ew(bld, "add", a, 1.0, alpha=1))
    arrays = _inputs(np.random.default_rng(5), N)
    assert len(lower(g, clusters=False).plan.groups) == 3
    assert len(lower(g).plan.groups) == 1
    _check(g, arrays)


def test_a_group_that_reads_the_cluster_pins_it_before_later_joiners():
    """e = exp(x); m = e @ e; h = x * 5: h reads nothing of the cluster, but joining it
    would move e's loop after the matmul that reads e."""
    bld = Builder("pinned")
    x = bld.input(TensorType("float64", (6, 6)))
    e = _ew(bld, "exp", x)
    m = bld.add("mm", [e, e])
    h = _ew(bld, "mul", x, 5.0)
    g = bld.ret(m, h, _ew(bld, "neg", e))
    _check(g, _inputs(np.random.default_rng(6), (6, 6), dt="float64"), rtol=1e-12)


def test_a_long_fused_chain_needs_no_recursion():
    """Planning and emitting a 3,000-op fused chain walks it without recursion; its loop
    bodies stop at the cost budget (LLVM's time on one body grows faster than its size)."""
    bld = Builder("chain")
    x = bld.input(TensorType("float32", (4,)))
    v = x
    for k in range(3001):
        v = _ew(bld, "neg", v) if k % 2 else _ew(bld, "mul", v, 0.999)
    k = _check(bld.ret(_ew(bld, "sum", v, dim=None, keepdim=False)),
               [np.linspace(-1, 1, 4, dtype=np.float32)])
    groups = k.plan.groups
    assert all(cost(g.members) <= MAX_LOOP_COST for g in groups)
    assert len(groups) == -(-3002 // MAX_LOOP_COST)     # (3,001 ops and the sum)


def test_fused_clusters_keep_to_the_budget():
    """Values stored for later (every tanh of a chain kept for its backward) make one group
    each; merged into clusters over one shape, a cluster too stops at the budget."""
    bld = Builder("kept")
    x = bld.input(TensorType("float32", (64,)))
    v, kept = x, []
    for k in range(200):
        v = _ew(bld, "tanh", _ew(bld, "mul", v, 1.001))
        kept.append(v)
    k = _check(bld.ret(_ew(bld, "sum", v, dim=None, keepdim=False), *kept[::50]),
               [np.linspace(-1, 1, 64, dtype=np.float32)], rtol=1e-5)
    assert len(k.plan.groups) > 1
    assert all(cost(g.members) <= MAX_LOOP_COST for g in k.plan.groups)


def test_a_lone_big_total_is_a_cluster_so_it_can_use_the_threads():
    """ops_reduce's loops are serial: a full sum big enough for threads goes through the
    cluster emitter (per-thread float64 partials); a small one stays a plain reduction."""
    for n, kind in ((1 << 20, "cluster"), (1000, "reduce")):
        bld = Builder("total")
        x = bld.input(TensorType("float32", (n,)))
        g = bld.ret(_ew(bld, "sum", _ew(bld, "tanh", x), dim=None, keepdim=False))
        k = _check(g, _inputs(np.random.default_rng(5), n), rtol=1e-5)
        assert [grp.loop for grp in k.plan.groups] == [kind]
