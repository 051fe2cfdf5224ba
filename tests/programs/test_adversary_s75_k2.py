"""Random streams against PyTorch (s75 k, part 2): explicit generators (manual_seed,
get_state / set_state, as generator= of draws, DataLoader, random_split, samplers), the
global state (get_rng_state / set_rng_state, fork_rng, seeds), PyTorch's errors, and
compiled functions called several times with the stream moved, reseeded or restored between
calls (adversarial_harness_s75_k: check and check_driver)."""
import pytest

pytest.importorskip("torch")
from adversarial_harness_s75_k import check, check_driver  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile or two a case)

CASES = []


def case(f):
    CASES.append(f)
    return f


@case
def generator_draws(lib, x):
    g = lib.Generator().manual_seed(42)
    return (lib.rand(37, generator=g), lib.randperm(300, generator=g),
            lib.multinomial(x[:8] + .1, 5, generator=g), lib.randn(3, 5, generator=g),
            lib.randint(0, 9, (7,), generator=g), lib.empty(9).exponential_(generator=g),
            lib.empty(9, dtype=lib.int64).random_(0, 50, generator=g),
            lib.bernoulli(x / 40, generator=g), lib.normal(x, 1.0, generator=g), lib.rand(2))


@case
def generator_state_round_trip(lib, x):
    g = lib.Generator()
    g.manual_seed(5)
    s = g.get_state()
    a = lib.randn(17, generator=g)
    g.set_state(s)
    return a, lib.randn(17, generator=g), lib.randn(1, generator=g), s, g.initial_seed()


@case
def default_generator_passed_explicitly(lib, x):
    g = lib.default_generator
    s = g.get_state()
    a = lib.rand(5, generator=g) + x[:5]
    g.set_state(s)
    return a, lib.randn(3, generator=g), lib.randperm(6, generator=g), g.initial_seed()


@case
def global_state_round_trip(lib, x):
    s = lib.get_rng_state()
    a = lib.randn(7)
    lib.set_rng_state(s)
    b = lib.randn(7)
    lib.random.set_rng_state(s)
    return a, b, lib.rand(3), s, lib.random.get_rng_state()


@case
def fork_rng_blocks(lib, x):
    with lib.random.fork_rng():
        lib.manual_seed(99)
        a = lib.randn(5)
    b = lib.randn(5)
    with lib.random.fork_rng(enabled=False):
        c = lib.randn(2)
    return a, b, c


@case
def seeds(lib, x):
    s0 = lib.initial_seed()
    lib.manual_seed(2 ** 40 + 7)
    a, s1 = lib.rand(3), lib.initial_seed()
    lib.manual_seed(2 ** 64 - 1)
    b = lib.rand(3)
    lib.manual_seed(-1)
    return s0, s1, a, b, lib.rand(3), lib.initial_seed(), lib.Generator().initial_seed()


@case
def pytorchs_state_bytes(lib, x):
    import torch
    torch.manual_seed(77)
    lib.set_rng_state(lib.tensor(torch.get_rng_state().numpy().copy()))
    return lib.randn(21), lib.rand(5)


@case
def data_loader_random_split_samplers(lib, x):
    U = lib.utils.data
    ds = U.TensorDataset(lib.arange(23))
    dl = U.DataLoader(ds, batch_size=5, shuffle=True, generator=lib.Generator().manual_seed(4))
    parts = U.random_split(ds, [10, 7, 6], generator=lib.Generator().manual_seed(8))
    return ([b[0] for b in dl] + [b[0] for b in dl] + [lib.tensor(list(p.indices)) for p in parts]
            + [lib.tensor(list(U.RandomSampler(range(7), replacement=True, num_samples=12))),
               lib.tensor(list(U.WeightedRandomSampler([.1, .5, .2, .9], 9))),
               lib.tensor(list(U.SubsetRandomSampler([3, 5, 9, 11])))])


@case
def distributions_sample(lib, x):
    D = lib.distributions
    return (D.Normal(x, 1.0).sample(), D.Bernoulli(x / 40).sample(),
            D.Categorical(x[:6]).sample((9,)), D.Gamma(x + .5, 1.).sample(),
            D.Dirichlet(x[:5] + .5).sample(), D.Binomial(10, x / 40).sample(),
            D.MultivariateNormal(lib.zeros(3), lib.eye(3)).sample((4,)),
            D.StudentT(3.).sample((5,)),
            D.OneHotCategorical(x[:4]).sample((3,)), D.Multinomial(5, x[:4]).sample())


@case
def gumbel_softmax_and_rrelu(lib, x):
    F = lib.nn.functional
    return (F.gumbel_softmax(x.reshape(1, 37), tau=0.5),
            F.gumbel_softmax(x[:36].reshape(6, 6), hard=True),
            F.rrelu(x - 0.5, training=True))


def _raises(name, body):
    def fn(lib, x):
        return body(lib, x)
    fn.__name__ = name
    CASES.append(fn)


_raises("random_uint8_negative", lambda lib, x: lib.empty(5, dtype=lib.uint8).random_(-5, 5))
_raises("exponential_int", lambda lib, x: lib.empty(5, dtype=lib.int64).exponential_())
_raises("multinomial_too_many", lambda lib, x: lib.multinomial(lib.ones(3), 4))
_raises("multinomial_negative", lambda lib, x: lib.multinomial(lib.tensor([1., -1.]), 1))
_raises("multinomial_zero_sum", lambda lib, x: lib.multinomial(lib.zeros(3), 1))
_raises("bernoulli_int", lambda lib, x: lib.bernoulli(lib.ones(3, dtype=lib.int64)))
_raises("bernoulli_p_above_1", lambda lib, x: lib.bernoulli(lib.tensor([0.5, 1.5])))
_raises("normal_negative_std", lambda lib, x: lib.normal(x, -x))
_raises("randint_empty_range", lambda lib, x: lib.randint(5, 5, (3,)))
_raises("uniform_from_above_to", lambda lib, x: lib.empty(3).uniform_(2, 1))
_raises("geometric_p_above_1", lambda lib, x: lib.empty(3).geometric_(1.5))
_raises("rand_int_dtype", lambda lib, x: lib.rand(3, dtype=lib.int64))
_raises("poisson_negative", lambda lib, x: lib.poisson(-x))
_raises("seed_above_uint64", lambda lib, x: lib.manual_seed(2 ** 64))
_raises("rng_state_of_10_bytes", lambda lib, x: lib.set_rng_state(lib.zeros(10, dtype=lib.uint8)))


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_generators_states_and_errors(fn):
    check(fn, compiled=fn.__name__ != "distributions_sample")      # (a long compile)


# -- compiled functions called several times ------------------------------------------------

DRIVERS = []


def driver(f):
    DRIVERS.append(f)
    return f


@driver
def reseeded_between_calls(lib, comp):
    s = comp(lambda x: (x + lib.randn(5), lib.rand(3)))
    out = []
    for i in range(4):
        lib.manual_seed(i % 2)
        out += list(s(lib.ones(5)))
    return out + [lib.rand(2)]


@driver
def state_restored_between_calls(lib, comp):
    s = comp(lambda x: (lib.nn.functional.dropout(x, 0.5), lib.randint(0, 10, (4,))))
    lib.manual_seed(0)
    st, out = lib.get_rng_state(), []
    for i in range(4):
        if i == 2:
            lib.set_rng_state(st)
        out += list(s(lib.ones(40)))
    return out + [lib.rand(2)]


@driver
def fork_rng_around_calls(lib, comp):
    s = comp(lambda x: x * lib.rand(x.shape))
    out = []
    for i in range(3):
        with lib.random.fork_rng():
            out.append(s(lib.ones(7)))
        out.append(s(lib.ones(7)))
    return out + [lib.rand(2)]


@driver
def draw_count_from_a_python_branch(lib, comp):
    def step(x, flag, n):
        y = x + lib.randn(x.shape)
        if flag:
            y = y + lib.rand(3).sum()
        for _ in range(n):
            y = y * lib.rand(1)
        return y
    s = comp(step)
    calls = ((1, 0), (0, 2), (1, 0), (0, 0), (1, 2))
    return [s(lib.ones(6), f, n) for f, n in calls] + [lib.rand(2)]


@driver
def draw_count_from_a_tensor_branch(lib, comp):
    def step(x):
        if x.sum() > 3:
            return x + lib.rand(x.shape)
        return x - lib.randn(2).sum()
    s = comp(step)
    return [s(lib.ones(6) * k) for k in (1., 0., 1., 0.)] + [lib.rand(2)]


@driver
def eager_draws_interleaved(lib, comp):
    s = comp(lambda x: (x + lib.randn(x.shape), lib.randperm(x.shape[0])))
    out = []
    for i, n in enumerate((9, 9, 17, 9)):
        out += list(s(lib.zeros(n)))
        out.append(lib.randn(i + 1))
        lib.randperm(i + 3)
    return out + [lib.rand(2)]


@driver
def draw_inside_a_hook_and_a_backward(lib, comp):
    class Noisy(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * lib.rand(g.shape)
    w = lib.ones(8, requires_grad=True)
    w.register_hook(lambda g: g * lib.rand(8))

    def step(x):
        loss = Noisy.apply(w * x).sum()
        loss.backward()
        return loss
    s, out = comp(step), []
    for i in range(3):
        w.grad = None
        out += [s(lib.ones(8) * (i + 1)), w.grad.clone()]
    return out + [lib.rand(2)]


@driver
def dropout_modules_toggled_train_eval(lib, comp):
    m = lib.nn.Sequential(lib.nn.Linear(4, 16), lib.nn.Dropout(0.4), lib.nn.AlphaDropout(0.2),
                          lib.nn.Linear(16, 2))
    s, out = comp(lambda x: m(x)), []
    for i in range(5):
        m.train(i != 2)
        out.append(s(lib.ones(3, 4)))
    return out + [lib.rand(2)]


@driver
def generator_of_the_caller(lib, comp):
    g = lib.Generator().manual_seed(10)
    s, out = comp(lambda x: (x + lib.randn(4, generator=g), lib.rand(2))), []
    for i in range(3):
        out += list(s(lib.zeros(4)))
    return out + [lib.rand(2), lib.rand(2, generator=g)]


@driver
def fills_and_value_dependent_draws(lib, comp):
    def step(w):
        return (lib.empty(33).exponential_(2.), lib.empty(17, dtype=lib.float64).geometric_(0.3),
                lib.empty(19).log_normal_(), lib.empty(21, dtype=lib.int64).random_(3, 40),
                w.t().clone().normal_(), lib.multinomial(w[0], 3), lib.poisson(w * 3),
                lib.nn.functional.rrelu(w - 3, training=True), lib.normal(w, w))
    s, out = comp(step), []
    for i in range(3):
        out += list(s(lib.arange(1., 11.).reshape(2, 5) * (i + 1)))
        lib.rand(i)
    return out + [lib.rand(2)]


@driver
def state_read_and_restored_inside(lib, comp):
    def step(x):
        st = lib.get_rng_state()
        a = lib.rand(3)
        lib.set_rng_state(st)
        return x + a + lib.rand(3) + lib.initial_seed() % 7
    s = comp(step)
    return [s(lib.zeros(3)) for _ in range(3)] + [lib.rand(2)]


@driver
def training_step_with_noise(lib, comp):
    lib.manual_seed(35)
    m = lib.nn.Linear(4, 3)

    def step(x):        # (an SGD step by hand: torch.optim's first import takes seconds)
        m.zero_grad()
        loss = lib.nn.functional.dropout(m(x + 0.1 * lib.randn_like(x)), 0.2).pow(2).mean()
        loss.backward()
        with lib.no_grad():
            for p in m.parameters():
                p -= 0.1 * p.grad
        return loss
    s = comp(step)
    return [s(lib.ones(6, 4) * i) for i in range(4)] + [m.weight, lib.rand(2)]


@pytest.mark.parametrize("drv", DRIVERS, ids=[f.__name__ for f in DRIVERS])
def test_compiled_calls_with_the_stream_changed_between(drv):
    check_driver(drv)
