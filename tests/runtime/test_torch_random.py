"""A seed gives PyTorch's random numbers (llgrad/ir/torch_random.py): the draws, the
distributions built on them, module initialisation, dropout masks, data loader orders, and
compiled calls, each against torch itself. Float32 normal fills of 16+ values go through
log/sin/cos, which PyTorch approximates (avx_mathfun): those agree to a few ulp."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

ULP = dict(rtol=4e-7, atol=4e-7)


def _np(t):
    return t.detach().numpy()


def _both(seed, fn, exact=True):
    """fn(lib) under manual_seed(seed) in each library, then one rand(3) each: the values,
    and that both streams end in the same place."""
    llgrad.manual_seed(seed)
    torch.manual_seed(seed)
    a, b = fn(llgrad), fn(torch)
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        if exact:
            np.testing.assert_array_equal(_np(x), _np(y))
        else:
            np.testing.assert_allclose(_np(x), _np(y), **ULP)
    np.testing.assert_array_equal(_np(llgrad.rand(3)), _np(torch.rand(3)))


@pytest.mark.parametrize("seed", [0, 1, 42, 2 ** 40 + 7])
@pytest.mark.parametrize("n", [0, 1, 5, 15, 16, 17, 33, 1000])
def test_rand_and_randn(seed, n):
    _both(seed, lambda T: T.rand(n))
    _both(seed, lambda T: T.rand(n, dtype=T.float64))
    _both(seed, lambda T: T.randn(n, dtype=T.float64), exact=n < 16)
    _both(seed, lambda T: T.randn(n), exact=n < 16)


def test_the_cached_normal_value_carries_between_calls():
    _both(3, lambda T: tuple(T.randn(k) for k in (1, 3, 2, 5, 1)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fills(dtype):
    def fills(T):
        d = getattr(T, dtype)
        return (T.empty(7, 5, dtype=d).uniform_(-0.3, 0.7), T.empty(40, dtype=d).normal_(0.5, 2),
                T.empty(9, dtype=d).normal_(), T.empty(33, dtype=d).bernoulli_(0.3),
                T.empty(12, dtype=d).exponential_(1.5), T.bernoulli(T.full((20,), 0.4, dtype=d)),
                T.rand(4, 5, dtype=d).bernoulli())
    _both(5, fills, exact=False)


def test_integers_and_permutations():
    _both(7, lambda T: (T.randint(0, 7, (10,)), T.randint(-5, 2 ** 40, (4,)),
                        T.randint(3, (2, 3)), T.randperm(10), T.randperm(1000), T.randperm(1),
                        T.empty(3, dtype=T.int64).random_()))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_masks(p):
    F = "nn.functional"

    def drops(T):
        f = T.nn.functional
        x = T.ones(6, 50)
        return (f.dropout(x, p), f.dropout2d(T.ones(2, 3, 4, 4), p), T.nn.Dropout(p)(x),
                f.dropout1d(T.ones(2, 3, 5), p), f.alpha_dropout(x, p, True))
    assert F
    _both(11, drops, exact=False)


def test_module_initialisation():
    def modules(T):
        n = T.nn
        mods = [n.Linear(20, 30), n.Conv2d(3, 8, 3), n.Embedding(10, 4), n.LSTM(5, 7, 2),
                n.GRU(5, 7, bidirectional=True), n.ConvTranspose2d(4, 3, 3),
                n.TransformerEncoderLayer(16, 4, 32), n.MultiheadAttention(16, 2),
                n.Bilinear(3, 4, 5), n.RNN(3, 4)]
        return tuple(v for m in mods for v in m.state_dict().values())
    _both(2, modules, exact=False)


@pytest.mark.parametrize("name,args", [("uniform_", (-0.3, 0.7)), ("normal_", (0.5, 0.1)),
                                       ("xavier_uniform_", ()), ("xavier_normal_", ()),
                                       ("kaiming_uniform_", ()), ("kaiming_normal_", ()),
                                       ("trunc_normal_", (0.0, 0.02)),
                                       ("trunc_normal_", (0.0, 1.0, -0.2, 0.1)),
                                       ("orthogonal_", ()), ("sparse_", (0.3,))])
def test_init_functions(name, args):
    _both(4, lambda T: getattr(T.nn.init, name)(T.empty(30, 40), *args), exact=False)


def test_generators_and_states():
    def draws(T):
        g = T.Generator().manual_seed(123)
        a = T.randn(5, generator=g)
        state = T.get_rng_state()
        b = T.rand(4)
        T.set_rng_state(state)
        c = T.rand(4)
        return a, b, c, T.randperm(6, generator=g)
    _both(9, draws)
    assert llgrad.manual_seed(-1).initial_seed() == torch.manual_seed(-1).initial_seed()


def test_data_loader_orders():
    def orders(T):
        data = T.utils.data
        ds = data.TensorDataset(T.arange(20))
        loader = data.DataLoader(ds, batch_size=6, shuffle=True)
        epochs = [T.cat([b[0] for b in loader]) for _ in range(2)]
        parts = data.random_split(range(10), [7, 3], generator=T.Generator().manual_seed(1))
        idx = T.tensor(list(data.RandomSampler(range(9), replacement=True, num_samples=40)))
        return tuple(epochs) + (T.tensor(list(parts[0])), idx)
    _both(13, orders)


def test_a_new_generator_starts_at_pytorchs_default_seed():
    draws = [_np(T.rand(3, generator=T.Generator())) for T in (llgrad, torch)]
    np.testing.assert_array_equal(*draws)
    assert llgrad.Generator().initial_seed() == torch.Generator().initial_seed()


def test_a_compiled_training_step_with_dropout_draws_pytorchs_masks():
    def run(T, compiled):
        T.manual_seed(0)
        model = T.nn.Sequential(T.nn.Linear(8, 16), T.nn.ReLU(), T.nn.Dropout(0.3),
                                T.nn.Linear(16, 1))
        opt = T.optim.SGD(model.parameters(), lr=0.1)
        x, y = T.randn(32, 8), T.randn(32, 1)

        def step():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        step = llgrad.compile(step) if compiled else step
        return [float(step()) for _ in range(4)] + [float(T.rand(()))]
    want = run(torch, False)
    np.testing.assert_allclose(run(llgrad, False), want, rtol=2e-6)
    np.testing.assert_allclose(run(llgrad, True), want, rtol=2e-6)


@pytest.mark.parametrize("backend", ["interpret", "llvm"])
def test_a_compiled_mixup_step_draws_pytorchs_permutations(backend):
    """randperm inside a compiled step (mixup's shuffle) is a traced draw, not a graph
    break: every call gives torch's permutation and leaves the generator where torch does."""
    def run(T, compiled):
        T.manual_seed(0)
        model = T.nn.Linear(4, 3)
        opt = T.optim.SGD(model.parameters(), lr=0.1)
        x, y = T.randn(8, 4), T.randint(0, 3, (8,))

        def step():
            opt.zero_grad()
            idx = T.randperm(x.shape[0])
            out = model(0.6 * x + 0.4 * x[idx])
            loss = 0.6 * T.nn.functional.cross_entropy(out, y) + \
                0.4 * T.nn.functional.cross_entropy(out, y[idx])
            loss.backward()
            opt.step()
            return loss, idx, T.randperm(5, dtype=T.float32)
        f = llgrad.compile(step, backend=backend) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # (no graph break)
            res = [[_np(v.detach()) for v in f()] for _ in range(4)]
        return res + [[_np(T.rand(3))]]
    want = run(torch, False)
    for got in (run(llgrad, False), run(llgrad, True)):
        for a, b in zip(want, got):
            np.testing.assert_allclose(b[0], a[0], rtol=2e-6)
            for u, v in zip(a[1:], b[1:]):
                np.testing.assert_array_equal(v, u)


@pytest.mark.parametrize("what", ["rand_like", "randn_like", "randint_like", "exponential_",
                                  "geometric_", "cauchy_", "log_normal_", "dropout"])
def test_draws_like_a_permuted_tensor_follow_its_memory_order(what):
    """rand_like & co. of a transposed or permuted tensor come in its layout (empty_like's)
    and are drawn in memory order, as PyTorch draws them; in-place fills likewise."""
    def draws(T):
        T.manual_seed(0)
        out = []
        for x in (T.zeros(4, 6).t(), T.zeros(2, 3, 4).permute(2, 0, 1), T.zeros(40, 3).t()):
            if what == "randint_like":
                r = T.randint_like(x, 3, 9)
            elif what == "dropout":
                r = T.nn.functional.dropout(x + 1, 0.5)
            elif what.endswith("_like"):
                r = getattr(T, what)(x)
            else:
                r = getattr(x.clone(memory_format=T.preserve_format), what)(
                    *((0.3,) if what == "geometric_" else ()))
            out.append((_np(r), r.stride()))
        return out + [(_np(T.rand(3)), None)]
    for (a, sa), (b, sb) in zip(draws(torch), draws(llgrad)):
        np.testing.assert_allclose(b, a, rtol=1e-6)
        assert sa == sb
