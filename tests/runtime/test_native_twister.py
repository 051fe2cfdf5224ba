"""The native twister loops (codegen/twister.py) against ir/torch_random.py's NumPy twister:
every distribution, from every kind of position in the 624-word block, across the size where
draws go native, gives the same values and leaves the same state; and against PyTorch's
own numbers where torch is installed."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_twister
from llgrad.ir import torch_random as tr

N = tr.NATIVE_MIN
SIZES = (N - 1, N, N + 1, 3 * N + 311, 20000)

DRAWS = {
    "u32": lambda st, n: tr.Stream(st).u32(n),
    "u64": lambda st, n: tr.Stream(st).u64(n),
    "uniform32": lambda st, n: tr.uniform(st, n, "float32"),
    "uniform64": lambda st, n: tr.uniform(st, n, "float64", -2.0, 3.0),
    "uniform16": lambda st, n: tr.uniform(st, n, "float16"),
    "normal32": lambda st, n: tr.normal(st, n, "float32"),
    "normal64": lambda st, n: tr.normal(st, n, "float64", 1.0, 2.0),
    "normal_strided": lambda st, n: tr.normal(st, n, "float32", contiguous=False),
    "randint": lambda st, n: tr.randint(st, n, -3, 1000),
    "randint_wide": lambda st, n: tr.randint(st, n, 0, 2 ** 40),
    "random_full64": lambda st, n: tr.random_full(st, n, "int64"),
    "random_full32": lambda st, n: tr.random_full(st, n, "float32"),
    "randperm": lambda st, n: tr.randperm(st, n),
    "bernoulli": lambda st, n: tr.bernoulli(st, n, 0.3, "float32"),
    "bernoulli_tensor": lambda st, n: tr.bernoulli_tensor(st, np.linspace(0, 1, n, dtype=np.float32)),
    "exponential": lambda st, n: tr.exponential(st, n, 1.5, "float64"),
}


@pytest.fixture(scope="module")
def native():
    eager_twister.install(True)
    eager_twister._loops["mt"] = eager_twister._build()    # (built now, not in background)
    yield
    eager_twister.install()


def _state(seed, pos):
    st = tr.seeded(seed)
    if pos:                     # advance to a position inside (or at the end of) a block
        s = tr.Stream(st)
        s.u32(pos)
        s.close()
    return st


@pytest.mark.parametrize("name", sorted(DRAWS))
@pytest.mark.parametrize("pos", [0, 1, 311, 622, 623, 624])
def test_native_equals_numpy(native, name, pos):
    for n in SIZES:
        a, b = _state(7, pos), _state(7, pos)
        before = eager_twister.stats["native_draws"]
        got = DRAWS[name](a, n)
        used = eager_twister.stats["native_draws"] > before
        prev = tr.set_native(None)
        try:
            want = DRAWS[name](b, n)
        finally:
            tr.set_native(prev)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), (name, n)
        assert np.array_equal(a, b), (name, n, "state")
        # the native loops ran, so the test compares two methods (else it could not fail)
        assert used or n < N or name in ("randperm",) and n - 1 < N


def test_draws_after_native_continue_in_numpy(native):
    """A large native draw, then small NumPy draws: the stream continues where it was."""
    a, b = tr.seeded(3), tr.seeded(3)
    got = np.concatenate([tr.uniform(a, N + 5, "float64"), tr.uniform(a, 7, "float64")])
    prev = tr.set_native(None)
    try:
        want = np.concatenate([tr.uniform(b, N + 5, "float64"), tr.uniform(b, 7, "float64")])
    finally:
        tr.set_native(prev)
    assert np.array_equal(got, want) and np.array_equal(a, b)


def test_against_torch(native):
    torch = pytest.importorskip("torch")
    torch.manual_seed(5)
    llgrad.manual_seed(5)
    for make in (lambda L: L.rand(97, 100), lambda L: L.rand(50, 99, dtype=L.float64),
                 lambda L: L.randint(0, 7, (6000,)),
                 lambda L: L.nn.functional.dropout(L.ones(80, 90), 0.25),
                 lambda L: L.bernoulli(L.full((70, 80), 0.4))):
        x, y = make(llgrad).numpy(), make(torch).numpy()
        assert np.array_equal(x, y)
