"""llgrad.autograd.forward_ad against torch.autograd.forward_ad (PyTorch 2.13): tangents of
ops on dual tensors (elementwise, reductions, matmul, views, in-place, indexing, softmax,
conv2d, modules, the forward-mode AD tutorial), errors, levels, reverse mode through dual
tensors; and, without torch, tangents against float64 finite differences."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.autograd.forward_ad as fwAD
from llgrad.runtime import dispatch


def _np(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def _run(lib, fw, fn, arrays, tangents):
    """fn(lib, *duals) inside a dual level: (primal, tangent) of each output, as NumPy."""
    duals = []
    with fw.dual_level():
        for a, t in zip(arrays, tangents):
            x = lib.tensor(a)
            duals.append(fw.make_dual(x, lib.tensor(t)) if t is not None else x)
        out = fn(lib, *duals)
        res = []
        for o in (out if isinstance(out, tuple) else (out,)):
            p, t = fw.unpack_dual(o)
            res.append((p.detach().numpy().copy(),
                        None if t is None else t.detach().numpy().copy()))
    return res


def _compare(fn, shapes, dual=None, atol=1e-9):
    torch = pytest.importorskip("torch")
    arrays = [_np(i, *s) for i, s in enumerate(shapes)]
    tangents = [_np(10 + i, *s) if dual is None or i in dual else None
                for i, s in enumerate(shapes)]
    mine = _run(llgrad, fwAD, fn, arrays, tangents)
    theirs = _run(torch, torch.autograd.forward_ad, fn, arrays, tangents)
    assert len(mine) == len(theirs)
    for (p, t), (tp, tt) in zip(mine, theirs):
        np.testing.assert_allclose(p, tp, atol=atol, rtol=1e-7)
        assert (t is None) == (tt is None)
        if t is not None:
            np.testing.assert_allclose(t, tt, atol=atol, rtol=1e-7)


def _F(L):
    return L.nn.functional


CASES = {
    "sin_exp_mul": (lambda L, x, y: L.sin(x) * L.exp(y) + x / (y * y + 1), [(3, 4), (3, 4)]),
    "broadcast": (lambda L, x, y: (x * y).tanh() - x.sigmoid(), [(3, 4), (4,)]),
    "pow_sqrt": (lambda L, x, y: (x * x + 1).sqrt() ** 1.5 + x.abs().log1p(), [(5,), (5,)]),
    "where_clamp": (lambda L, x, y: L.where(x > 0, x, y).clamp(-0.5, 0.5), [(6,), (6,)]),
    "sum_mean": (lambda L, x, y: (x.sum(), x.mean(1), (x * y).sum(0, keepdim=True)),
                 [(3, 4), (3, 4)]),
    "max_var": (lambda L, x, y: (x.max(1)[0], x.amax(0), x.var(1), L.logsumexp(x, 1),
                                 x.norm()), [(3, 4), (1,)]),
    "max_indices": (lambda L, x, y: x.max(1), [(3, 4), (1,)]),
    "matmul": (lambda L, x, y: (x @ y, L.mm(x, y), (x @ y).t() @ x), [(3, 4), (4, 2)]),
    "bmm": (lambda L, x, y: L.bmm(x, y), [(2, 3, 4), (2, 4, 5)]),
    "views": (lambda L, x, y: (x.t(), x.reshape(4, 3), x.permute(1, 0)[1:, ::2],
                               x.unsqueeze(0).expand(2, 3, 4), x[1], x.diagonal(),
                               x.view(-1)), [(3, 4), (1,)]),
    "split_unbind": (lambda L, x, y: x.split(2, 1) + x.unbind(0), [(3, 4), (1,)]),
    "cat_stack": (lambda L, x, y: (L.cat([x, y], 0), L.stack([x, y], 1)), [(2, 3), (2, 3)]),
    "indexing": (lambda L, x, y: (x[L.tensor([2, 0, 2])], x[:, L.tensor([1, 3])],
                                  x.gather(1, L.tensor([[0, 1], [2, 3], [1, 1]])),
                                  x[x > 0], x.masked_fill(x < 0, 0.0)), [(3, 4), (1,)]),
    "softmax": (lambda L, x, y: (L.softmax(x, 1), _F(L).log_softmax(x, dim=0),
                                 _F(L).softmax(x * y, dim=-1)), [(3, 4), (4,)]),
    "activations": (lambda L, x, y: (_F(L).relu(x), _F(L).gelu(x), _F(L).silu(x),
                                     _F(L).leaky_relu(x, 0.1), _F(L).elu(x)), [(3, 4), (1,)]),
    "losses": (lambda L, x, y: (_F(L).mse_loss(x, y), _F(L).cross_entropy(
        x, L.tensor([0, 3, 1])), _F(L).binary_cross_entropy_with_logits(x, y.sigmoid())),
        [(3, 4), (3, 4)]),
    "conv2d": (lambda L, x, w: _F(L).conv2d(x, w, padding=1, stride=2), [(2, 3, 6, 6),
                                                                         (4, 3, 3, 3)]),
    "conv2d_weight_only": (lambda L, x, w: _F(L).conv2d(x, w), [(1, 2, 5, 5), (3, 2, 3, 3)]),
    "layer_norm": (lambda L, x, w: _F(L).layer_norm(x, (4,), w), [(3, 4), (4,)]),
    "linear": (lambda L, x, w: _F(L).linear(x, w), [(5, 3), (2, 3)]),
    "integer_outputs": (lambda L, x, y: (x.argmax(), x > y, x.sign()), [(4,), (4,)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_ops_match_torch(name):
    fn, shapes = CASES[name]
    _compare(fn, shapes)


def test_only_some_inputs_dual():
    _compare(CASES["conv2d_weight_only"][0], CASES["conv2d_weight_only"][1], dual={1})
    _compare(CASES["matmul"][0], CASES["matmul"][1], dual={0})
    _compare(lambda L, x, y: (x * 2, y * 2), [(3,), (3,)], dual={0})   # y * 2: plain


def _inplace(L, x, y):
    z = x.clone()
    z.mul_(y).add_(1.0)
    v = z[1:]                               # a view of a dual tensor is dual
    v.exp_()                                # ... and writing into it writes into z
    w = L.zeros(3, 4)
    w[0] = x[2]                             # into a plain tensor, through a view
    w[:, 1:3].add_(y[:, :2])
    u = L.zeros(4)
    u.copy_(x[0])
    s = x.clone()
    s[s > 0] = 0.0
    return z, v, w, u, s, x.clone().sin_().t()


def test_inplace_and_views_match_torch():
    _compare(_inplace, [(3, 4), (3, 4)])
    _compare(_inplace, [(3, 4), (3, 4)], dual={1})


def _mlp(L):
    L.manual_seed(0)
    return L.nn.Sequential(L.nn.Linear(4, 8), L.nn.Tanh(), L.nn.Linear(8, 3)).double()


def _copy_params(src, dst, torch):
    with torch.no_grad():
        for p, q in zip(src.parameters(), dst.parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))


def test_mlp_and_tutorial_examples_match_torch():
    torch = pytest.importorskip("torch")
    mine, theirs = _mlp(llgrad), _mlp(torch)
    _copy_params(mine, theirs, torch)
    x, t = _np(0, 5, 4), _np(1, 5, 4)
    a = _run(llgrad, fwAD, lambda L, d: mine(d), [x], [t])
    b = _run(torch, torch.autograd.forward_ad, lambda L, d: theirs(d), [x], [t])
    np.testing.assert_allclose(a[0][1], b[0][1], atol=1e-10)
    # the tutorial: the model's parameters made dual, through functional_call
    for lib, fw, model, call in ((llgrad, fwAD, mine, llgrad.func.functional_call),
                                 (torch, torch.autograd.forward_ad, theirs,
                                  torch.func.functional_call)):
        params = dict(model.named_parameters())
        tangents = {n: lib.tensor(_np(i + 5, *p.shape)) for i, (n, p) in
                    enumerate(params.items())}
        with fw.dual_level():
            dual = {n: fw.make_dual(p, tangents[n]) for n, p in params.items()}
            out = call(model, dual, (lib.tensor(x),))
            (a if lib is llgrad else b).append(fw.unpack_dual(out).tangent.detach().numpy())
    np.testing.assert_allclose(a[-1], b[-1], atol=1e-10)


def test_tutorial_first_example_and_custom_function():
    torch = pytest.importorskip("torch")

    def fn(x, y):
        return x ** 2 + y ** 2

    results = []
    for lib, fw in ((llgrad, fwAD), (torch, torch.autograd.forward_ad)):
        primal, tangent = lib.tensor(_np(0, 10, 10)), lib.tensor(_np(1, 10, 10))

        class Fn(lib.autograd.Function):
            @staticmethod
            def forward(ctx, foo):
                assert fw.unpack_dual(foo).tangent is None   # forward sees primals
                result = lib.exp(foo)
                ctx.result = result
                return result

            @staticmethod
            def jvp(ctx, gI):
                gO = gI * ctx.result
                del ctx.result
                return gO

        with fw.dual_level():
            dual_input = fw.make_dual(primal, tangent)
            dual_output = fn(dual_input, lib.tensor(_np(2, 10, 10)))
            jvp = fw.unpack_dual(dual_output).tangent
            assert fw.unpack_dual(dual_output).primal is not None
            custom = fw.unpack_dual(Fn.apply(dual_input)).tangent
        results.append((jvp.numpy(), custom.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, atol=1e-10)


def test_custom_function_without_jvp_raises():
    class Twice(llgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with fwAD.dual_level():
        d = fwAD.make_dual(llgrad.ones(2), llgrad.ones(2))
        with pytest.raises(NotImplementedError, match="You must implement the jvp function"):
            Twice.apply(d)
        assert fwAD.unpack_dual(Twice.apply(llgrad.ones(2))).tangent is None


def _messages(lib, fw):
    out = []

    def catch(f):
        try:
            f()
            out.append(None)
        except Exception as e:      # noqa: BLE001 (the messages are compared)
            out.append((type(e).__name__, str(e).replace("torch.", "llgrad.")))
    p, t = lib.ones(3), lib.ones(3)
    catch(lambda: fw.make_dual(p, t))
    catch(lambda: fw.exit_dual_level())
    with fw.dual_level():
        catch(lambda: fw.enter_dual_level())
        catch(lambda: fw.make_dual(p, lib.ones(4)))
        catch(lambda: fw.make_dual(p, lib.ones(3, dtype=lib.int64)))
        catch(lambda: fw.make_dual(lib.ones(3, dtype=lib.int64), t))
        catch(lambda: fw.make_dual(p, t, level=3))
        catch(lambda: fw.make_dual(fw.make_dual(p, t), t))
        catch(lambda: fw.exit_dual_level(level=5))
    return out


def test_errors_match_torch():
    torch = pytest.importorskip("torch")
    mine = _messages(llgrad, fwAD)
    assert mine == _messages(torch, torch.autograd.forward_ad)
    assert all(m is not None for m in mine)


def test_levels_and_lifetime():
    p, t = llgrad.ones(3), llgrad.full((3,), 2.0)
    assert fwAD.unpack_dual(p) == (p, None)         # outside a level: tangent None
    assert dispatch.forward_ad is None
    with fwAD.dual_level() as level:
        assert level == 0 and dispatch.forward_ad is not None
        d = fwAD.make_dual(p, t)
        assert d._base is p and fwAD.unpack_dual(p).tangent is None
        assert fwAD.unpack_dual(d).tangent is t     # kept as is (same layout)
        primal = fwAD.unpack_dual(d).primal
        assert fwAD.unpack_dual(primal).tangent is None and primal._base is p
        assert fwAD.unpack_dual(d.detach()).tangent is None
        e = d * 3
        with llgrad.inference_mode():               # no forward AD in inference mode
            assert fwAD.unpack_dual(d.exp()).tangent is None
        with llgrad.no_grad():                      # forward AD does not need grad mode
            np.testing.assert_allclose(fwAD.unpack_dual(d * 2).tangent.numpy(), 4.0)
        tt = llgrad.randn(4, 3).t()                 # a tangent of other strides: copied
        dd = fwAD.make_dual(llgrad.randn(3, 4), tt)
        assert fwAD.unpack_dual(dd).tangent.stride() == (4, 1)
        assert fwAD.unpack_dual(dd.view(12)).tangent is not None
    assert dispatch.forward_ad is None
    assert fwAD.unpack_dual(e).tangent is None and fwAD.unpack_dual(d).tangent is None
    assert fwAD.unpack_dual(e, level=0).tangent is None
    assert fwAD.enter_dual_level() == 0             # a new level after the exit
    assert fwAD.unpack_dual(d).tangent is None
    fwAD.exit_dual_level()

    @fwAD.dual_level()
    def decorated(x):
        return fwAD.unpack_dual(fwAD.make_dual(x, x) * x).tangent
    np.testing.assert_allclose(decorated(llgrad.full((2,), 3.0)).numpy(), 9.0)


def test_with_reverse_mode():
    torch = pytest.importorskip("torch")
    res = []
    for lib, fw in ((llgrad, fwAD), (torch, torch.autograd.forward_ad)):
        x = lib.tensor(_np(0, 3, 4), requires_grad=True)
        w = lib.tensor(_np(1, 4, 2), requires_grad=True)
        v = lib.tensor(_np(2, 3, 4))
        with fw.dual_level():
            d = fw.make_dual(x, v)
            out = (d @ w).tanh().sum()
            jvp = fw.unpack_dual(out).tangent
            out.backward(retain_graph=True)         # reverse mode through the primals
            gx, gw = x.grad.clone(), w.grad.clone()
            hvp = lib.autograd.grad(jvp, (x, w))    # reverse over forward
            assert type(d.grad_fn).__name__ == "ViewBackward0"
        res.append([a.detach().numpy() for a in (jvp, gx, gw) + tuple(hvp)])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, atol=1e-10)


def test_compile_runs_eagerly_with_dual_tensors():
    @llgrad.compile
    def f(x):
        return (x.sin() * 2).sum()

    @llgrad.compile
    def g(x, t):
        with fwAD.dual_level():
            return fwAD.unpack_dual(f.fn(fwAD.make_dual(x, t))).tangent

    x, t = llgrad.tensor(_np(0, 5)), llgrad.tensor(_np(1, 5))
    f(x), f(x)                                      # compiled
    want = (x.cos() * 2 * t).sum().item()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with fwAD.dual_level():
            got = fwAD.unpack_dual(f(fwAD.make_dual(x, t))).tangent.item()
        assert g(x, t).item() == pytest.approx(want) and g(x, t).item() == pytest.approx(want)
    assert got == pytest.approx(want)
    text = " ".join(str(m.message) for m in w)
    assert "running eagerly" in text and "forward AD" in text and "forward-mode AD" in text


FD_CASES = [
    lambda x: (x.sin() * x.exp()).sum(1),
    lambda x: llgrad.softmax(x, 0) * x,
    lambda x: (x @ x.t()).tanh(),
    lambda x: llgrad.nn.functional.log_softmax(x.reshape(2, 6), 1).t()[1:],
    lambda x: llgrad.cat([x[:, 1:] ** 2, x.cumsum(1)], 1),
    lambda x: x.norm(dim=1) + x.max(1)[0] + x.std(1),
    lambda x: llgrad.nn.functional.conv1d(x.unsqueeze(0), x[:, :2].unsqueeze(0)),
]


@pytest.mark.parametrize("k", range(len(FD_CASES)))
def test_tangents_against_finite_differences(k):
    f = FD_CASES[k]
    x, t = llgrad.tensor(_np(k, 3, 4)), llgrad.tensor(_np(k + 50, 3, 4))
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, t))).tangent.numpy()
    eps = 1e-6
    fd = (f(x + eps * t).numpy() - f(x - eps * t).numpy()) / (2 * eps)
    np.testing.assert_allclose(tangent, fd, atol=1e-6, rtol=1e-5)


def test_inplace_tangents_against_finite_differences():
    def f(x):
        z = llgrad.zeros(3, 4, dtype=llgrad.float64)
        z[1:].add_(x[:2] * x[1:])
        z.t()[0].mul_(x[0, :3].exp())
        return z
    x, t = llgrad.tensor(_np(3, 3, 4)), llgrad.tensor(_np(4, 3, 4))
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, t))).tangent.numpy()
    fd = (f(x + 1e-6 * t).numpy() - f(x - 1e-6 * t).numpy()) / 2e-6
    np.testing.assert_allclose(tangent, fd, atol=1e-6, rtol=1e-5)


def test_repr_and_gradcheck_forward_ad():
    with fwAD.dual_level():
        d = fwAD.make_dual(llgrad.ones(2, requires_grad=True), llgrad.ones(2))
        assert repr(d) == ("tensor([1., 1.], grad_fn=<ViewBackward0>, "
                           "tangent=tensor([1., 1.]))")

    class Exp(llgrad.autograd.Function):
        scale = 1.0

        @staticmethod
        def forward(ctx, x):
            ctx.result = x.exp()
            return ctx.result

        @staticmethod
        def jvp(ctx, g):
            return g * ctx.result * Exp.scale

    x = llgrad.tensor(_np(0, 2, 3), requires_grad=True)
    assert llgrad.autograd.gradcheck(Exp.apply, (x,), check_forward_ad=True,
                                     check_backward_ad=False)
    assert llgrad.autograd.gradcheck(lambda a: (a.sin() @ a.t(), a.sum(1)), (x,),
                                     check_forward_ad=True)
    Exp.scale = 2.0
    with pytest.raises(llgrad.autograd.GradcheckError,
                       match="Jacobian computed with forward mode mismatch for output 0"):
        llgrad.autograd.gradcheck(Exp.apply, (x,), check_forward_ad=True,
                                  check_backward_ad=False)


@pytest.mark.parametrize("n", [3, 64])     # (64: past the engine's NumPy shortcuts' threshold)
def test_forward_over_reverse_matches_torch(n):
    torch = pytest.importorskip("torch")
    res = []
    for lib, fw in ((llgrad, fwAD), (torch, torch.autograd.forward_ad)):
        x, t = lib.tensor(_np(0, n, n), requires_grad=True), lib.tensor(_np(1, n, n))
        out = []
        with fw.dual_level():
            d = fw.make_dual(x, t)
            for f in (lambda a: (a.sin() * a).sum(), lambda a: a.exp().sum(),
                      lambda a: (a.tanh() @ a.t()).sigmoid().sum()):
                for create in (False, True):    # a Hessian-vector product, forward over reverse
                    g, = lib.autograd.grad(f(d), x, create_graph=create)
                    out.append(fw.unpack_dual(g).tangent.detach().numpy())
        res.append(out)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, atol=1e-9)
