"""Sweep 25: torch.func transforms, higher-order autograd, forward-mode AD and custom
autograd.Functions, each against torch and, inside llgrad.compile, compiled == eager over
calls with changing values (few traces, no eager fallback)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _flat(o):
    if isinstance(o, dict):
        return [x for k in sorted(o) for x in _flat(o[k])]
    if isinstance(o, (tuple, list)):
        return [x for v in o for x in _flat(v)]
    return [o]


def _same(got, want, atol=1e-5, rtol=1e-5):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), atol=atol, rtol=rtol)


def _rnd(T, seed, *shape, rg=False):
    t = T.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return t.requires_grad_(True) if rg else t


def _check(case, make, atol=1e-5, max_traces=1, rtol=1e-5):
    """case(T, *make(T, seed)) in torch == llgrad eager; llgrad compiled == eager for three
    seeds, with no fallback warning and at most max_traces traces."""
    _same(case(llgrad, *make(llgrad, 0)), case(torch, *make(torch, 0)), atol, rtol)
    fn = llgrad.compile(lambda *a: case(llgrad, *a))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for s in range(3):
            _same(fn(*make(llgrad, s)), case(llgrad, *make(llgrad, s)), atol, rtol)
    assert fn.n_traces <= max_traces


def _mlp(T, seed=0):
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Tanh(), T.nn.Linear(4, 2))
    rng = np.random.default_rng(seed + 100)
    with T.no_grad():
        for p in m.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return m


MLP = {"torch": _mlp(torch), "llgrad": _mlp(llgrad)}


def test_grad_vjp_jvp_hessian_compiled():
    def case(T, x, y):
        f = lambda a, b: (T.sin(a) * b).sum() + (a ** 2).mean()      # noqa: E731
        g = T.func.grad(f, argnums=(0, 1))(x, y)
        out, pull = T.func.vjp(lambda a, b: (a * b).tanh(), x, y)
        jv = T.func.jvp(lambda a: T.nn.functional.softmax(a, -1) * a.exp(), (x,), (y,))
        h = T.func.hessian(lambda a: (a.sin() * a.cos().sum()).sum())(x[0])
        jr = T.func.jacrev(lambda a: T.nn.functional.layer_norm(a, (4,)).sin())(x[:2])
        return g, out, pull(T.ones_like(out) * 0.5), jv, h, jr
    _check(case, lambda T, s: (_rnd(T, s, 3, 4), _rnd(T, s + 10, 3, 4)))


def test_vmap_dims_chunks_pytrees_compiled():
    def case(T, x, y):
        a = T.func.vmap(lambda u, v: u * v.sum(), in_dims=(1, None), out_dims=1)(x, y[0])
        b = T.func.vmap(lambda u, v: (u @ v).relu(), in_dims=(0, None), chunk_size=2)(x, y.T)
        c = T.func.vmap(lambda d, t: {"a": d["p"] * t[0], "b": (d["q"].sum(), t[1])},
                        in_dims=({"p": 0, "q": 1}, (0, None)),
                        out_dims={"a": 1, "b": (0, None)})({"p": x, "q": x.T}, (x, y))
        return a, b, c
    _check(case, lambda T, s: (_rnd(T, s, 3, 3), _rnd(T, s + 1, 3, 3)))


def test_per_sample_grads_and_ntk_compiled():
    def case(T, x, y):
        m = MLP[T.__name__]
        params = {k: v.detach() for k, v in m.named_parameters()}

        def loss(p, xx, yy):
            out = T.func.functional_call(m, p, (xx.unsqueeze(0),))
            return T.nn.functional.mse_loss(out, yy.unsqueeze(0))
        ps = T.func.vmap(T.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)

        def f(p, xx):
            return T.func.functional_call(m, p, (xx.unsqueeze(0),)).squeeze(0)
        j = T.func.vmap(T.func.jacrev(f), (None, 0))(params, x)
        j = [v.flatten(2) for v in j.values()]
        ntk = T.stack([T.einsum("Naf,Mbf->NMab", a, a) for a in j]).sum(0)
        return ps, ntk
    _check(case, lambda T, s: (_rnd(T, s, 5, 3), _rnd(T, s + 1, 5, 2)), atol=1e-4)


def test_ensemble_stack_module_state():
    def run(T, x):
        models = [_mlp(T, i) for i in range(3)]
        params, bufs = T.func.stack_module_state(models)
        base = _mlp(T).to("meta")
        return T.func.vmap(lambda p, b, xx: T.func.functional_call(base, (p, b), (xx,)),
                           in_dims=(0, 0, None))(params, bufs, x)
    _same(run(llgrad, _rnd(llgrad, 0, 5, 3)), run(torch, _rnd(torch, 0, 5, 3)))


def test_gradient_penalty_and_maml_compiled():
    def case(T, real, fake, w1, w2):
        eps = T.tensor(np.linspace(0.1, 0.9, 4, dtype=np.float32)).view(-1, 1)
        xi = (eps * real + (1 - eps) * fake).requires_grad_(True)
        d = (xi @ w1).tanh() @ w2
        g, = T.autograd.grad(d.sum(), xi, create_graph=True)
        loss = d.mean() + 10 * ((g.norm(2, dim=1) - 1) ** 2).mean()
        fw = w1
        for _ in range(2):                                      # MAML's inner loop
            inner = ((real @ fw).tanh() - fake @ w1.detach()).pow(2).mean()
            fw = fw - 0.1 * T.autograd.grad(inner, fw, create_graph=True)[0]
        meta = (fake @ fw).pow(2).mean()
        return loss, T.autograd.grad(loss + meta, (w1, w2))
    _check(case, lambda T, s: (_rnd(T, s, 4, 3), _rnd(T, s + 1, 4, 3),
                               _rnd(T, s + 2, 3, 3, rg=True), _rnd(T, s + 3, 3, 1, rg=True)))


W_CONV = np.random.default_rng(5).standard_normal((2, 2, 3, 3)).astype(np.float32)


@pytest.mark.parametrize("which", ["softmax", "layer_norm", "conv2d", "lstm"])
def test_double_backward_compiled(which):
    lstms = {}
    for T in (torch, llgrad):
        lstms[T.__name__] = m = T.nn.LSTM(2, 3, batch_first=True)
        with T.no_grad():
            for i, p in enumerate(m.parameters()):
                rng = np.random.default_rng(i)
                p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) / 2))

    def f(T, x):
        if which == "softmax":
            return T.softmax(x * 2, -1)
        if which == "layer_norm":
            return T.nn.functional.layer_norm(x, (5,))
        if which == "conv2d":
            return T.nn.functional.conv2d(x, T.tensor(W_CONV), padding=1).tanh()
        return lstms[T.__name__](x)[0]

    def case(T, x, v):
        y = f(T, x)
        g, = T.autograd.grad(y, x, v[..., :y.shape[-1]], create_graph=True)
        return g, T.autograd.grad((g * g).sum(), x)
    shape = (1, 2, 5, 5) if which == "conv2d" else (2, 4, 2) if which == "lstm" else (3, 5)
    _check(case, lambda T, s: (_rnd(T, s, *shape, rg=True), _rnd(T, s + 1, *shape[:-1], 5)),
           atol=1e-4)


def test_autograd_functional_compiled():
    def case(T, x, v):
        AF = T.autograd.functional
        return (AF.jacobian(lambda a, b: (a * b.exp()).cumsum(0), (x, v)),
                AF.jacobian(lambda a: a.sin() * a.sum(), x, vectorize=True,
                            strategy="forward-mode"),
                AF.hessian(lambda a: (a.tanh() ** 3).sum(), x),
                AF.hvp(lambda a: (a.sin() * a).sum(), x, v),
                AF.vhp(lambda a: (a.exp() * a.flip(0)).sum(), x, v),
                AF.jvp(lambda a: a.softmax(0), x, v))
    _check(case, lambda T, s: (_rnd(T, s, 4), _rnd(T, s + 1, 4)))


def test_forward_ad_tangent_is_differentiable_in_non_dual_inputs():
    # The tangent of d*w (w requires grad, not dual) is t*w: reverse mode through the
    # tangent must reach w (it dropped mul's dependence on w, a silent wrong gradient).
    def run(T):
        fw = T.autograd.forward_ad
        x, t = T.tensor([0.5, 1.0, -2.0]), T.tensor([1.0, 2.0, 0.5])
        w = T.tensor([0.3, -0.7, 1.1], requires_grad=True)
        with fw.dual_level():
            p, tt = fw.unpack_dual((fw.make_dual(x, t) * w).sin())
            lse = fw.unpack_dual((fw.make_dual(x, t) @ w).tanh()).tangent
        return p, tt, T.autograd.grad(tt.sum() + lse + p.sum(), w)
    _same(run(llgrad), run(torch))


def _functions(T):
    class Exp(T.autograd.Function):
        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)
            ctx.save_for_forward(output)

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0]

        @staticmethod
        def jvp(ctx, t):
            return t * ctx.saved_tensors[0]

        @staticmethod
        def vmap(info, in_dims, x):
            return Exp.apply(x), in_dims[0]

    class Cube(T.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x ** 3, 3 * x ** 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output[1])
            ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, g, g2):
            return g * ctx.saved_tensors[1]

    class Once(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x.sin() * k

        @staticmethod
        @T.autograd.function.once_differentiable
        def backward(ctx, g):
            return g * ctx.saved_tensors[0].cos() * ctx.k, None
    return Exp, Cube, Once


FNS = {"torch": _functions(torch), "llgrad": _functions(llgrad)}


def test_custom_functions_compiled_and_transformed():
    def case(T, x, w):
        Exp, Cube, Once = FNS[T.__name__]
        b, d = Cube.apply(Exp.apply(x * w * 0.3))
        loss = Once.apply(b, 0.5).sum() + d.sum()
        g = T.autograd.grad(loss, (x, w))
        vm = T.func.vmap(Exp.apply)(x), T.func.vmap(lambda a: Cube.apply(a)[0])(x)
        pg = T.func.vmap(T.func.grad(lambda a: Cube.apply(Exp.apply(a))[0].sum()))(x.detach())
        return loss, g, vm, pg, T.func.jvp(Exp.apply, (x.detach(),), (w.detach().expand(3, 4),))
    # (rtol: float32 sin/cos/exp of arguments near 4, vectorised vs NumPy's)
    _check(case, lambda T, s: (_rnd(T, s, 3, 4, rg=True), _rnd(T, s + 1, 4, rg=True)), rtol=1e-4)
    for T in (torch, llgrad):
        Exp, Cube, Once = FNS[T.__name__]
        x = T.ones(3, requires_grad=True)
        assert type(Once.apply(x, 1.0).grad_fn).__name__ == "OnceBackward"
        assert not Cube.apply(x)[1].requires_grad
        g, = T.autograd.grad(Once.apply(x, 2.0).sum(), x, create_graph=True)
        with pytest.raises(RuntimeError):
            g.sum().backward()


def test_transforms_around_a_compiled_function():
    def body(T):
        return lambda a, b: (a.sin() * b).sum() + (a.unsqueeze(-1) @ b.unsqueeze(-2)).tanh().sum()
    cb = llgrad.compile(body(llgrad))
    rng = np.random.default_rng(0)
    for i in range(2):
        a, b = rng.standard_normal((2, 3, 4)).astype(np.float32)
        for tf in (lambda T, f: T.func.grad(f, argnums=(0, 1)), lambda T, f: T.func.vmap(f),
                   lambda T, f: T.func.jacrev(f), lambda T, f: T.func.vmap(T.func.grad(f))):
            _same(tf(llgrad, cb)(llgrad.tensor(a), llgrad.tensor(b)),
                  tf(torch, body(torch))(torch.tensor(a), torch.tensor(b)))
    assert cb.n_traces <= 2
