"""torch.nn.init and torch.distributions against PyTorch. llgrad's generator is PyTorch's
(ir/torch_random.py: the MT19937 state and ATen's transformations), so every init function
seeded through a Generator or manual_seed gives torch's numbers to the bit (orthogonal_
through LAPACK's QR to rounding), and draws the generator the same number of times; the
distributions' samples, log_prob, entropy, rsample gradients and kl_divergence equal torch's."""
import math

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

INITS = [("uniform_", (-0.5, 2.0), {}), ("normal_", (0.3, 2.0), {}), ("uniform_", (), {}),
         ("trunc_normal_", (0.1, 1.0, -1.5, 1.0), {}), ("trunc_normal_", (), {}),
         ("constant_", (0.7,), {}), ("ones_", (), {}), ("zeros_", (), {}), ("eye_", (), {}),
         ("dirac_", (), {}), ("xavier_uniform_", (), {"gain": 1.3}), ("xavier_normal_", (), {}),
         ("kaiming_uniform_", (), {"a": math.sqrt(5)}),
         ("kaiming_uniform_", (), {"mode": "fan_out", "nonlinearity": "leaky_relu"}),
         ("kaiming_normal_", (), {"nonlinearity": "relu"}),
         ("kaiming_normal_", (), {"mode": "fan_out", "nonlinearity": "selu"}),
         ("sparse_", (0.5,), {"std": 0.02}), ("orthogonal_", (), {"gain": 2.0})]
DETERMINISTIC = ("constant_", "ones_", "zeros_", "eye_", "dirac_")   # (no generator argument)
SHAPES = [(7, 5), (4, 3, 2, 2), (3, 6, 2), (40, 60)]


def _init(L, name, args, kw, shape, dtype, seeded_by):
    t = L.empty(*shape, dtype=getattr(L, dtype))
    f = getattr(L.nn.init, name)
    if seeded_by == "generator":
        g = L.Generator().manual_seed(3)
        r = f(t, *args, generator=g, **kw)
        after = L.rand(2, generator=g).tolist()
    else:
        L.manual_seed(3)
        r = f(t, *args, **kw)
        after = L.rand(2).tolist()
    return np.asarray(t.tolist()), after, r is t


def _cases():
    for name, args, kw in INITS:
        for shape in SHAPES:
            if (name in ("eye_", "sparse_") and len(shape) != 2) or \
                    (name == "dirac_" and len(shape) == 2):
                continue
            for seeded_by in ("manual_seed",) + ("generator",) * (name not in DETERMINISTIC):
                yield pytest.param(name, args, kw, shape, seeded_by,
                                   id=f"{name}{kw or args}-{shape}-{seeded_by}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,args,kw,shape,seeded_by", list(_cases()))
def test_init_equals_torch(name, args, kw, shape, seeded_by, dtype):
    got = _init(llgrad, name, args, kw, shape, dtype, seeded_by)
    want = _init(torch, name, args, kw, shape, dtype, seeded_by)
    assert got[1:] == want[1:]          # the generator advanced alike, the tensor returned
    if name == "orthogonal_":           # LAPACK's QR: equal to rounding
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=2e-6)
    else:
        np.testing.assert_array_equal(got[0], want[0])


def test_module_default_inits_equal_torch():
    def params(L):
        n = L.nn
        L.manual_seed(0)
        mods = [n.Linear(5, 3), n.Conv2d(3, 4, 3), n.ConvTranspose1d(3, 4, 3),
                n.Embedding(7, 3, padding_idx=2), n.LSTM(3, 4, 2, bidirectional=True), n.GRU(3, 4),
                n.MultiheadAttention(8, 2), n.TransformerEncoderLayer(8, 2, 16),
                n.Bilinear(2, 3, 4), n.EmbeddingBag(5, 3), n.LSTM(3, 4, proj_size=2)]
        return [(k, p.tolist()) for m in mods for k, p in m.named_parameters()], L.rand(1).item()
    assert params(llgrad) == params(torch)


def test_calculate_gain_equals_torch():
    cases = [("linear", ()), ("conv2d", ()), ("sigmoid", ()), ("tanh", ()), ("relu", ()),
             ("leaky_relu", ()), ("leaky_relu", (0.2,)), ("selu", ())]
    assert [llgrad.nn.init.calculate_gain(n, *a) for n, a in cases] == \
        [torch.nn.init.calculate_gain(n, *a) for n, a in cases]


def _t(L, a, dtype="float64", grad=True):
    return L.tensor(np.asarray(a, dtype=dtype)).requires_grad_(grad)


def _dist(L, name):
    D = L.distributions
    mk = {
        "Normal": lambda: ([_t(L, [0.3, -1.0, 2.0]), _t(L, [1.5, 0.2, 3.0])], D.Normal,
                           _t(L, [0.1, -0.9, 5.0], grad=False)),
        "Categorical": lambda: ([_t(L, [[0.1, 2.0, -1.0], [0.0, 0.0, 3.0]])],
                                lambda p: D.Categorical(logits=p), L.tensor([1, 2])),
        "Categorical_probs": lambda: ([_t(L, [[0.1, 0.5, 0.4], [0.2, 0.2, 1.6]])],
                                      lambda p: D.Categorical(probs=p), L.tensor([0, 2])),
        "Bernoulli": lambda: ([_t(L, [0.3, -2.0, 4.0])], lambda p: D.Bernoulli(logits=p),
                              _t(L, [1.0, 0.0, 1.0], grad=False)),
        "Bernoulli_probs": lambda: ([_t(L, [0.3, 0.01, 0.9])], lambda p: D.Bernoulli(probs=p),
                                    _t(L, [1.0, 0.0, 0.0], grad=False)),
        "MultivariateNormal": lambda: (
            [_t(L, [0.1, 0.2, -0.3]), _t(L, [[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])],
            D.MultivariateNormal, _t(L, [[0.5, 0.0, 1.0], [0.0, 0.0, 0.0]], grad=False)),
        "MultivariateNormal_tril": lambda: (
            [_t(L, [0.1, 0.2]), _t(L, [[1.3, 0.0], [0.4, 0.7]])],
            lambda m, s: D.MultivariateNormal(m, scale_tril=s), _t(L, [0.5, 1.0], grad=False)),
        "Beta": lambda: ([_t(L, [0.5, 2.0, 3.0]), _t(L, [1.5, 2.0, 0.7])], D.Beta,
                         _t(L, [0.2, 0.5, 0.9], grad=False)),
        "Gamma": lambda: ([_t(L, [0.5, 2.0, 3.0]), _t(L, [1.5, 2.0, 0.7])], D.Gamma,
                          _t(L, [0.2, 0.5, 3.9], grad=False)),
        "Dirichlet": lambda: ([_t(L, [[0.5, 2.0, 3.0], [1.0, 1.0, 1.0]])], D.Dirichlet,
                              _t(L, [[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]], grad=False)),
    }[name]
    params, cls, x = mk()
    return params, (lambda: cls(*params)), x


def _dist_values(L, name):
    params, make, x = _dist(L, name)
    d = make()
    out = {"log_prob": d.log_prob(x), "entropy": d.entropy(), "mean": d.mean,
           "variance": d.variance}
    out["grads"] = L.autograd.grad(out["log_prob"].sum() + out["entropy"].sum(), params)
    d = make()
    L.manual_seed(5)
    s = d.sample((4,))
    out["sample"], out["sample_dtype"] = s, str(s.dtype).split(".")[-1]
    if d.has_rsample:
        L.manual_seed(6)
        r = d.rsample((2,))
        out["rsample"] = r
        out["rsample_grads"] = L.autograd.grad((r ** 2).sum(), params)
    out["after"] = L.rand(1).item()
    out["shapes"] = (tuple(d.batch_shape), tuple(d.event_shape))
    return out


@pytest.mark.parametrize("name", ["Normal", "Categorical", "Categorical_probs", "Bernoulli",
                                  "Bernoulli_probs", "MultivariateNormal",
                                  "MultivariateNormal_tril", "Beta", "Gamma", "Dirichlet"])
def test_distribution_equals_torch(name):
    got, want = _dist_values(llgrad, name), _dist_values(torch, name)
    assert list(got) == list(want)
    for k, w in want.items():
        g = got[k]
        if isinstance(w, (str, float)) or k == "shapes":
            assert g == w, k
            continue
        for a, b in zip(g if isinstance(g, tuple) else [g], w if isinstance(w, tuple) else [w]):
            # the samples exactly (same generator draws); values through digamma / lgamma to
            # 1e-9 (torch's float64 trigamma is good to ~1e-9 only)
            # (MultivariateNormal's through the Cholesky factor and a product: to rounding)
            tol = (1e-14 if "Multivariate" in name else 0) if k in ("sample", "rsample") \
                else 2e-9
            np.testing.assert_allclose(np.asarray(a.tolist()), np.asarray(b.tolist()), rtol=tol,
                                       atol=tol, err_msg=k)


def _kl(L):
    D = L.distributions
    made = []

    def t(a):
        made.append(_t(L, a, "float32"))
        return made[-1]
    pairs = lambda: [   # noqa: E731  (built afresh per pair: `made` holds that pair's leaves)
        (D.Normal(t([0.1, 1.]), t([1., 2.])), D.Normal(t([0.5, -1.]), t([0.4, 3.]))),
        (D.Categorical(logits=t([0.1, 1., 3.])), D.Categorical(probs=t([0.2, 0.3, 0.5]))),
        (D.Bernoulli(probs=t([0.1, 0.9])), D.Bernoulli(logits=t([0.5, -2.]))),
        (D.MultivariateNormal(t([0.1, 1.]), t([[1., 0.2], [0.2, 2.]])),
         D.MultivariateNormal(t([0.5, -1.]), scale_tril=t([[1., 0.], [0.3, 0.5]]))),
        (D.Beta(t([0.5, 2.]), t([1., 3.])), D.Beta(t([1.5, 0.2]), t([0.4, 3.]))),
        (D.Gamma(t([0.5, 2.]), t([1., 3.])), D.Gamma(t([1.5, 0.2]), t([0.4, 3.]))),
        (D.Dirichlet(t([0.5, 2., 1.])), D.Dirichlet(t([1.5, 0.2, 1.]))),
        (D.Independent(D.Normal(t([0.1, 1.]), t([1., 2.])), 1),
         D.Independent(D.Normal(t([0.5, -1.]), t([0.4, 3.])), 1)),
        (D.Uniform(t([0., 0.]), t([1., 2.])), D.Normal(t([0.5, -1.]), t([0.4, 3.]))),
        (D.Exponential(t([0.5, 2.])), D.Gamma(t([1.5, 0.2]), t([0.4, 3.]))),
        (D.Laplace(t([0.1, 1.]), t([1., 2.])), D.Laplace(t([0.5, -1.]), t([0.4, 3.]))),
        (D.Poisson(t([0.5, 2.])), D.Poisson(t([1.5, 0.2]))),
    ]
    out = []
    for i in range(len(pairs())):
        made.clear()
        p, q = pairs()[i]
        k = D.kl_divergence(p, q)
        grads = L.autograd.grad(k.sum(), made, allow_unused=True)
        out.append([np.asarray(k.tolist())] + [np.asarray(g.tolist()) for g in grads
                                               if g is not None])
    return out


def test_kl_divergence_and_grads_equal_torch():
    for got, want in zip(_kl(llgrad), _kl(torch), strict=True):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("view", ["transposed", "columns_transposed", "rows", "strided"])
@pytest.mark.parametrize("bounds", [(0.0, 1.0, -2.0, 2.0), (0.0, 1.0, 1.5, 3.0),
                                    (0.0, 1.0, -0.1, 0.1)], ids=["wide", "tail", "narrow"])
def test_trunc_normal_on_a_view_equals_torch(view, bounds):
    """Regression: trunc_normal_'s redraw buffers were contiguous where PyTorch's are
    empty_like the tensor, so on a transposed view (an LSTM gate block's weight.t()) the
    redraws landed on other elements: other values, and other draws from the generator."""
    def run(L):
        L.manual_seed(0)
        base = L.zeros(12, 8)
        v = {"transposed": base.t(), "columns_transposed": base[:, 1:5].t(),
             "rows": base[4:8], "strided": base[::2]}[view]
        L.nn.init.trunc_normal_(v, *bounds)
        return base.tolist(), L.rand(1).item()
    assert run(llgrad) == run(torch)
