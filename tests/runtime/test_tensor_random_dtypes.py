"""Random fills and sampling (uniform_, normal_, bernoulli_, bernoulli, multinomial): their
distributions, PyTorch's dtypes and nodes, llgrad's generator (manual_seed, generator=),
and compiled code replaying eager's draws; llgrad.finfo / iinfo and set_default_dtype
against PyTorch."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

N = 20000


@pytest.fixture
def seeded():
    llgrad.manual_seed(7)
    yield
    llgrad.manual_seed(7)


def test_uniform_normal_fill_in_place(seeded):
    for dt in (llgrad.float32, llgrad.float64):
        x = llgrad.zeros(N, dtype=dt)
        assert x.uniform_(-2.0, 3.0) is x and x.dtype is dt and x._version == 1
        a = x.numpy()
        assert a.min() >= -2.0 and a.max() < 3.0 and abs(a.mean() - 0.5) < 0.05
        y = llgrad.empty(N, dtype=dt).normal_(1.5, 2.0)
        assert abs(y.numpy().mean() - 1.5) < 0.05 and abs(y.numpy().std() - 2.0) < 0.05
    w = llgrad.ones(3, 4, requires_grad=True)
    v = (w * 2).uniform_()
    assert type(v.grad_fn).__name__ == "UniformBackward0"
    v.sum().backward()
    assert not w.grad.numpy().any()                    # the overwritten values get no gradient
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.normal_()


def test_bernoulli(seeded):
    p = llgrad.full((N,), 0.3, dtype=llgrad.float64)
    d = llgrad.bernoulli(p)
    assert d.dtype is llgrad.float64 and set(np.unique(d.numpy())) <= {0.0, 1.0}
    assert abs(d.numpy().mean() - 0.3) < 0.02
    assert abs(llgrad.zeros(N).bernoulli_().numpy().mean() - 0.5) < 0.02
    probs = llgrad.tensor([0.0, 1.0, 0.25]).expand(N, 3)
    got = llgrad.zeros(N, 3, dtype=llgrad.int64).bernoulli_(probs).numpy()
    assert got.dtype == np.int64 and abs(got.mean(0) - [0.0, 1.0, 0.25]).max() < 0.02
    assert abs(p.bernoulli(0.8).numpy().mean() - 0.8) < 0.02
    q = llgrad.tensor([0.2, 0.9], requires_grad=True)
    out = llgrad.bernoulli(q)
    assert out.requires_grad and type(out.grad_fn).__name__ == "BernoulliBackward0"
    (out * 3).sum().backward()
    assert q.grad.numpy().tolist() == [0.0, 0.0]


def test_multinomial(seeded):
    p = llgrad.tensor([0.1, 0.0, 0.6, 0.3])
    s = llgrad.multinomial(p, N, replacement=True)
    assert s.dtype is llgrad.int64 and s.shape == (N,)
    freq = np.bincount(s.numpy(), minlength=4) / N
    assert freq[1] == 0 and abs(freq - [0.1, 0.0, 0.6, 0.3]).max() < 0.02
    batch = llgrad.tensor([[1.0, 1.0, 2.0, 0.0], [0.0, 5.0, 1.0, 1.0]])
    w = batch.multinomial(3)                       # without replacement: distinct, no zeros
    assert w.shape == (2, 3)
    for row, probs in zip(w.numpy(), batch.numpy()):
        assert len(set(row)) == 3 and all(probs[k] > 0 for k in row)
    firsts = np.bincount(llgrad.multinomial(p.expand(N, 4), 1).numpy()[:, 0], minlength=4) / N
    assert abs(firsts - [0.1, 0.0, 0.6, 0.3]).max() < 0.02
    assert llgrad.multinomial(llgrad.tensor([0.0, 1.0]), 2).tolist() == [1, 0]


def test_generator_argument():
    g = llgrad.Generator().manual_seed(3)
    a = llgrad.zeros(5).uniform_(generator=g).numpy()
    g.manual_seed(3)
    b = llgrad.zeros(5).uniform_(generator=g).numpy()
    np.testing.assert_array_equal(a, b)
    g.manual_seed(3)
    m1 = llgrad.multinomial(llgrad.ones(6), 6, generator=g)
    g.manual_seed(3)
    np.testing.assert_array_equal(m1.numpy(), llgrad.multinomial(llgrad.ones(6), 6,
                                                                 generator=g).numpy())


@pytest.mark.parametrize("backend", ["interpret", "llvm"])
def test_compiled_draws_replay_eager(backend):
    def step(x, p):
        y = (x * 1).uniform_(-1.0, 1.0) + (x * 1).normal_(0.0, 0.5)
        mask = llgrad.bernoulli(p)
        picks = llgrad.multinomial(p, 3) + llgrad.multinomial(p, 4, replacement=True).sum()
        return (y * mask).sum(), picks

    cf = llgrad.compile(step, backend=backend)
    for k in range(3):
        x = llgrad.ones(4, 5, dtype=llgrad.float64)
        p = llgrad.tensor(np.linspace(0.1, 0.9, 5), dtype=llgrad.float64)
        llgrad.manual_seed(k)
        with warnings.catch_warnings():
            warnings.simplefilter("error")        # traced and compiled: no eager fallback
            got = cf(x, p)
        after = llgrad.get_rng_state()
        llgrad.manual_seed(k)
        want = step(x, p)
        np.testing.assert_allclose(got[0].item(), want[0].item(), rtol=1e-12)
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        np.testing.assert_array_equal(after.numpy(), llgrad.get_rng_state().numpy())
    assert cf.n_traces == 1


# ---- finfo, iinfo, the default dtype ----------------------------------------------------------

@pytest.mark.parametrize("name", ["float32", "float64", "float16"])
def test_finfo(name):
    lf, tf = llgrad.finfo(getattr(llgrad, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(lf, attr) == getattr(tf, attr), attr
        assert type(getattr(lf, attr)) is type(getattr(tf, attr)), attr
    assert repr(lf) == repr(tf)
    assert repr(llgrad.finfo()) == repr(torch.finfo())


@pytest.mark.parametrize("name", ["int64", "int32", "int16", "int8", "uint8"])
def test_iinfo(name):
    li, ti = llgrad.iinfo(getattr(llgrad, name)), torch.iinfo(getattr(torch, name))
    assert (li.bits, li.max, li.min, li.dtype) == (ti.bits, ti.max, ti.min, ti.dtype)
    assert repr(li) == repr(ti)


@pytest.fixture
def default_float64():
    for lib in (llgrad, torch):
        lib.set_default_dtype(lib.float64)
    yield
    for lib in (llgrad, torch):
        lib.set_default_dtype(lib.float32)


def _programs(T):
    i = T.tensor([1, 2])
    return [T.tensor([1.5]), T.tensor(2.5), T.zeros(2), T.ones(1), T.empty(1), T.full((2,), 1.5),
            T.arange(0, 1, 0.5), T.linspace(0, 1, 3), T.eye(2), T.rand(2), T.randn(2),
            i * 1.5, i / 2, i.exp(), T.tensor([1.5], dtype=T.float32) * 2.5, i + 1,
            T.tensor([True]) * 0.5]


def test_set_default_dtype(default_float64):
    assert llgrad.get_default_dtype() is llgrad.float64
    for a, b in zip(_programs(llgrad), _programs(torch)):
        assert str(a.dtype)[7:] == str(b.dtype)[6:]
    assert repr(llgrad.tensor([1.5])) == "tensor([1.5000])"
    assert repr(llgrad.tensor([1.5], dtype=llgrad.float32)) == \
        repr(torch.tensor([1.5], dtype=torch.float32)).replace("torch.", "llgrad.")
    assert llgrad.finfo().dtype == "float64"
    assert llgrad.nn.Linear(2, 3).weight.dtype is llgrad.float64
    cf = llgrad.compile(lambda x: (x * 0.5).exp())
    x = llgrad.tensor([1, 2])
    assert cf(x).dtype is llgrad.float64 and cf(x).dtype is llgrad.float64


def test_default_dtype_is_restored_and_checked():
    assert llgrad.get_default_dtype() is llgrad.float32
    assert (llgrad.tensor([1, 2]) * 1.5).dtype is llgrad.float32
    with pytest.raises(TypeError, match="only floating-point types"):
        llgrad.set_default_dtype(llgrad.int32)
