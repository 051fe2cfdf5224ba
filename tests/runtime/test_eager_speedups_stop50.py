"""clip_grad_norm_'s path on the gradients' arrays (nn/utils/clip_grad.py: _plain_l2_norms,
_scale_plain): the same values, bit for bit, as the op-by-op path it replaces (forced by
turning the check off), the norm and the clipped gradients within rounding of torch's, the
version bumped as mul_ bumps it, and the op-by-op path kept where a gradient needs it."""
import numpy as np
import pytest

import llgrad
from llgrad.nn.utils import clip_grad

torch = pytest.importorskip("torch")


def _grads(lib, dtype, shapes, seed=0, special=False):
    rng = np.random.default_rng(seed)
    params = []
    for k, shape in enumerate(shapes):
        p = lib.zeros(shape, dtype=getattr(lib, dtype), requires_grad=True)
        g = (rng.standard_normal(shape) * (k + 1)).astype(dtype)
        if special and k == 0:
            g.reshape(-1)[:3] = (np.inf, -0.0, 3e-39) if g.size >= 3 else g.reshape(-1)[:3]
        p.grad = lib.tensor(g)
        params.append(p)
    return params


_SHAPES = [(64, 64), (192,), (3, 5, 7), (), (1,), (4096, 3)]


def _clip(params, max_norm, norm_type=2.0, plain=True, monkeypatch=None):
    if not plain:
        monkeypatch.setattr(clip_grad, "_plain", lambda tensors: False)
    n = llgrad.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    if not plain:
        monkeypatch.undo()
    return n


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("max_norm", [1e9, 0.5])
def test_same_bits_as_the_op_by_op_path(dtype, max_norm, monkeypatch):
    fast, slow = _grads(llgrad, dtype, _SHAPES), _grads(llgrad, dtype, _SHAPES)
    versions = [p.grad._version for p in fast]
    nf = _clip(fast, max_norm)
    ns = _clip(slow, max_norm, plain=False, monkeypatch=monkeypatch)
    assert nf.dtype == ns.dtype and nf.shape == ns.shape
    assert np.array_equal(nf.numpy(), ns.numpy())
    for a, b, v in zip(fast, slow, versions):
        assert a.grad.dtype == b.grad.dtype and a.grad.shape == b.grad.shape
        assert np.array_equal(a.grad.numpy(), b.grad.numpy())
        assert a.grad._version == b.grad._version == v + 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("max_norm", [1e9, 0.5, 3.0])
def test_matches_torch(dtype, max_norm):
    ours, theirs = _grads(llgrad, dtype, _SHAPES), _grads(torch, dtype, _SHAPES)
    n1 = _clip(ours, max_norm)
    n2 = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(n1.numpy(), n2.numpy(), rtol=tol)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=0)


def test_special_values_as_the_op_by_op_path(monkeypatch):
    # (an inf in a gradient: the norm is inf, every gradient scaled by 0 or nan alike)
    fast = _grads(llgrad, "float32", _SHAPES, special=True)
    slow = _grads(llgrad, "float32", _SHAPES, special=True)
    nf, ns = _clip(fast, 1.0), _clip(slow, 1.0, plain=False, monkeypatch=monkeypatch)
    assert np.array_equal(nf.numpy(), ns.numpy(), equal_nan=True)
    for a, b in zip(fast, slow):
        assert np.array_equal(a.grad.numpy(), b.grad.numpy(), equal_nan=True)


def test_other_norms_and_mixed_dtypes_take_the_op_by_op_path():
    for norm_type in (1.0, float("inf"), 3.0):
        ours, theirs = _grads(llgrad, "float32", _SHAPES), _grads(torch, "float32", _SHAPES)
        n1, n2 = _clip(ours, 0.5, norm_type), torch.nn.utils.clip_grad_norm_(theirs, 0.5,
                                                                              norm_type)
        np.testing.assert_allclose(n1.numpy(), n2.numpy(), rtol=1e-5)
    mixed = _grads(llgrad, "float32", _SHAPES[:2]) + _grads(llgrad, "float64", _SHAPES[2:])
    ref = _grads(torch, "float32", _SHAPES[:2]) + _grads(torch, "float64", _SHAPES[2:])
    n1, n2 = _clip(mixed, 0.5), torch.nn.utils.clip_grad_norm_(ref, 0.5)
    np.testing.assert_allclose(n1.numpy(), n2.numpy(), rtol=1e-5)
    for a, b in zip(mixed, ref):
        assert a.grad.dtype == getattr(llgrad, str(b.grad.dtype)[6:])
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5)


def test_a_view_gradient_is_scaled_through_its_base():
    base = llgrad.ones(8)
    p = llgrad.zeros(4, requires_grad=True)
    p.grad = base[::2]
    q = llgrad.zeros(3, requires_grad=True)
    q.grad = llgrad.full((3,), 4.0)
    llgrad.nn.utils.clip_grad_norm_([p, q], 1.0)
    t = torch.ones(8)
    tp, tq = torch.zeros(4, requires_grad=True), torch.zeros(3, requires_grad=True)
    tp.grad, tq.grad = t[::2], torch.full((3,), 4.0)
    torch.nn.utils.clip_grad_norm_([tp, tq], 1.0)
    np.testing.assert_allclose(base.numpy(), t.numpy(), rtol=1e-6)
    np.testing.assert_allclose(q.grad.numpy(), tq.grad.numpy(), rtol=1e-6)


def test_compiled_step_that_clips_matches_eager():
    def run(compiled):
        llgrad.manual_seed(0)
        m = llgrad.nn.Linear(8, 4)
        opt = llgrad.optim.SGD(m.parameters(), lr=0.1)
        x = llgrad.randn(16, 8)

        def step():
            opt.zero_grad()
            loss = (m(x) ** 2).sum()
            loss.backward()
            n = llgrad.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
            return n
        step = llgrad.compile(step) if compiled else step
        return [step().item() for _ in range(3)], m.weight.detach().numpy().copy()
    (ne, we), (nc, wc) = run(False), run(True)
    np.testing.assert_allclose(ne, nc, rtol=1e-5)
    np.testing.assert_allclose(we, wc, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_each_norm_same_bits_as_vector_norm(dtype):
    rng = np.random.default_rng(1)
    grads = [llgrad.tensor((rng.standard_normal(n) * 10 ** rng.uniform(-3, 3)).astype(dtype))
             for n in (1, 7, 100, 1000, 5000, 20000, 70000) for _ in range(4)]
    strided = llgrad.tensor(rng.standard_normal((300, 200)).astype(dtype)).t()
    assert clip_grad._plain_l2_norms(grads + [strided]) is None     # (op by op there)
    fast = clip_grad._plain_l2_norms(grads)
    for f, g in zip(fast, grads):
        s = clip_grad._vector_norm(g, 2.0)
        assert f.dtype == s.dtype and f.shape == s.shape == ()
        assert f.numpy().tobytes() == s.numpy().tobytes()


# ---- nll_loss, log_softmax and softmax backward on NumPy (runtime/fast_vjp_small.py) -------

_SMALL = ("nll_loss", "log_softmax", "softmax")


def _counting(monkeypatch):
    """Count the calls of the NumPy VJPs that return a result (the path really taken)."""
    from llgrad.compile import eager_shaped_vjp
    from llgrad.ir import OPS
    ran = {}
    for name in _SMALL:
        op = OPS[name]
        fn = eager_shaped_vjp._below[op]

        def counted(node, g, fn=fn, name=name):
            res = fn(node, g)
            ran[name] = ran.get(name, 0) + (res is not None)
            return res
        monkeypatch.setitem(eager_shaped_vjp._below, op, counted)
    return ran


def _rules_only(monkeypatch):
    from llgrad.compile import eager_shaped_vjp
    from llgrad.ir import OPS
    for name in _SMALL:
        monkeypatch.delitem(eager_shaped_vjp._below, OPS[name])


def _ce_grads(lib, n, c, dtype, weighted, reduction, ignore, seed=0):
    rng = np.random.default_rng(seed)
    x = lib.tensor(rng.standard_normal((n, c)).astype(dtype), requires_grad=True)
    t = rng.integers(0, c, n)
    if ignore == "some":
        t[::3] = -100
    elif ignore == "all":
        t[:] = -100
    w = lib.tensor(rng.uniform(0.1, 2.0, c).astype(dtype)) if weighted else None
    loss = lib.nn.functional.cross_entropy(x, lib.tensor(t), weight=w, reduction=reduction)
    if reduction == "none":
        loss.backward(lib.tensor(rng.standard_normal(n).astype(dtype)))
    else:
        loss.backward()
    return x.grad.numpy()


_CE_CASES = [(16, 10, "float32", False, "mean", "none"), (64, 4, "float32", True, "mean", "some"),
             (7, 3, "float64", False, "sum", "some"), (16, 10, "float64", True, "none", "none"),
             (5, 6, "float32", False, "mean", "all"), (9, 4, "float32", True, "sum", "all"),
             (1, 2, "float32", False, "none", "some")]


@pytest.mark.parametrize("n,c,dtype,weighted,reduction,ignore", _CE_CASES)
def test_cross_entropy_backward_same_bits_as_the_rules(n, c, dtype, weighted, reduction,
                                                       ignore, monkeypatch):
    ran = _counting(monkeypatch)
    fast = _ce_grads(llgrad, n, c, dtype, weighted, reduction, ignore)
    assert ran.get("nll_loss") == 1 and ran.get("log_softmax") == 1
    _rules_only(monkeypatch)
    rule = _ce_grads(llgrad, n, c, dtype, weighted, reduction, ignore)
    assert fast.dtype == rule.dtype and fast.tobytes() == rule.tobytes()
    ref = _ce_grads(torch, n, c, dtype, weighted, reduction, ignore)
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(fast, ref, rtol=tol * 10, atol=tol)


def _softmax_grads(lib, name, shape, dim, dtype, strided, seed=0):
    rng = np.random.default_rng(seed)
    x = lib.tensor((rng.standard_normal(shape) * 3).astype(dtype), requires_grad=True)
    g = lib.tensor(rng.standard_normal(shape).astype(dtype))
    if strided:
        g = g.transpose(0, -1).contiguous().transpose(0, -1)
    getattr(x, name)(dim).backward(g)
    return x.grad.numpy()


@pytest.mark.parametrize("name", ["log_softmax", "softmax"])
@pytest.mark.parametrize("shape,dim,dtype,strided", [
    ((16, 10), -1, "float32", False), ((4, 5, 6), 1, "float64", False),
    ((4, 5, 6), 0, "float32", False), ((3, 7), -1, "float32", True), ((33,), 0, "float64", False)])
def test_softmax_backward_same_bits_as_the_rules(name, shape, dim, dtype, strided, monkeypatch):
    ran = _counting(monkeypatch)
    fast = _softmax_grads(llgrad, name, shape, dim, dtype, strided)
    assert ran.get(name, 0) == (0 if strided else 1)    # (a strided gradient: the rule)
    _rules_only(monkeypatch)
    rule = _softmax_grads(llgrad, name, shape, dim, dtype, strided)
    assert fast.dtype == rule.dtype and fast.tobytes() == rule.tobytes()
    ref = _softmax_grads(torch, name, shape, dim, dtype, strided)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(fast, ref, rtol=tol, atol=tol)


def test_double_backward_keeps_the_rules(monkeypatch):
    ran = _counting(monkeypatch)
    out = []
    for lib in (llgrad, torch):
        x = lib.tensor(np.linspace(-2, 2, 12).reshape(4, 3), requires_grad=True)
        loss = lib.nn.functional.cross_entropy(x * x, lib.tensor([0, 2, 1, 2]))
        (gx,) = lib.autograd.grad(loss, x, create_graph=True)
        if lib is llgrad:
            assert not any(ran.values())    # (a graph is built: the rules ran)
        (ggx,) = lib.autograd.grad(gx.sum(), x)
        out.append((gx.detach().numpy(), ggx.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# ---- the causal mask of scaled_dot_product_attention (nn/functional_attention.py) ----------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("L,S", [(64, 64), (5, 9), (9, 5), (1, 1), (0, 3)])
def test_causal_bias_same_as_the_ops(L, S, dtype):
    from llgrad.nn import functional_attention as fa
    q = llgrad.zeros(2, L, 4, dtype=getattr(llgrad, dtype))
    fast = fa._causal_bias(L, S, q)
    ops = fa._bias_from_mask(llgrad.arange(L).unsqueeze(1) >= llgrad.arange(S), q.dtype)
    assert fast.dtype == ops.dtype and fast.shape == ops.shape and not fast.requires_grad
    assert fast.numpy().tobytes() == ops.numpy().tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_causal_attention_matches_torch(dtype):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((2, 3, 7, 8)).astype(dtype) for _ in range(4)]
    out = []
    for lib in (llgrad, torch):
        q, k, v = (lib.tensor(a, requires_grad=True) for a in arrays[:3])
        y = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.backward(lib.tensor(arrays[3]))
        out.append([t.detach().numpy() for t in (y, q.grad, k.grad, v.grad)])
    tol = 1e-5 if dtype == "float32" else 1e-12
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_causal_attention_compiled_matches_eager():
    rng = np.random.default_rng(4)
    q, k, v = (llgrad.tensor(rng.standard_normal((2, 2, 6, 4)).astype("float32"))
               for _ in range(3))
    f = lambda q, k, v: llgrad.nn.functional.scaled_dot_product_attention(  # noqa: E731
        q, k, v, is_causal=True) * 2
    eager = f(q, k, v).numpy()
    compiled = llgrad.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(compiled(q, k, v).numpy(), eager, rtol=1e-5, atol=1e-6)


# ---- the reshaping views' backward (runtime/fast_vjp_small.py: view_vjp) -------------------

def _view_program(lib, fast_off=False):
    x = lib.tensor(np.arange(24, dtype=np.float32).reshape(4, 6) / 7, requires_grad=True)
    w = lib.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 12))
    y = x.view(2, 12)
    z = (y * w).reshape(3, 8) * 2 + x.t().reshape(8, 3).t()     # (a strided reshape too)
    u = z.flatten() * 3
    g = lib.tensor(np.linspace(2, -2, 24, dtype=np.float32))
    u.backward(g)
    grad = x.grad.numpy().copy()
    g.mul_(0)                               # (the gradient was the engine's, not g's memory)
    return grad, x.grad.numpy()


def test_view_backward_same_bits_as_the_rule(monkeypatch):
    from llgrad.ir import OPS
    from llgrad.runtime import fast_vjp_small, node as node_mod
    calls = []
    real = fast_vjp_small.view_vjp

    def counted(node, g):
        res = real(node, g)
        calls.append(res is not None)
        return res
    for name in ("view", "_reshape_alias", "_unsafe_view"):
        monkeypatch.setitem(node_mod.fast_vjps, OPS[name], counted)
    fast, after = _view_program(llgrad)
    assert any(calls) and np.array_equal(fast, after)
    for name in ("view", "_reshape_alias", "_unsafe_view"):
        monkeypatch.delitem(node_mod.fast_vjps, OPS[name])
    rule, _ = _view_program(llgrad)
    assert fast.tobytes() == rule.tobytes()
    ref, _ = _view_program(torch)
    np.testing.assert_allclose(fast, ref, rtol=1e-6)


def test_view_backward_gives_a_view_of_the_gradient():
    x = llgrad.zeros(2, 3, requires_grad=True)
    seen = []
    y = x.view(6)
    x.register_hook(lambda g: seen.append(g))
    g = llgrad.ones(6)
    y.backward(g)
    assert seen[0].shape == (2, 3) and seen[0]._base is g
    g.mul_(5)
    assert np.array_equal(x.grad.numpy(), np.ones((2, 3), np.float32))
