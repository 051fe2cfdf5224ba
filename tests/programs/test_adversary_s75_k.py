"""Random streams against PyTorch, eager and compiled (s75 k): every sampling function in
float32/float64/float16/bfloat16 at odd and vectorised sizes, after the same manual_seed,
three calls with other inputs each (adversarial_harness_s75_k.check: the values and the
stream's position after each call). The first tests are the findings' regressions."""
from contextlib import nullcontext

import pytest

pytest.importorskip("torch")
import llgrad  # noqa: E402
from adversarial_harness_s75_k import check  # noqa: E402


# -- findings -------------------------------------------------------------------------------

def bf16_draws(lib, x):
    return lib.rand(17, dtype=lib.bfloat16), x + 1, lib.randn(5, dtype=lib.bfloat16)


def test_a_compiled_bfloat16_draw_stays_bfloat16():
    """Traced, rand(dtype=bfloat16) was an rng_uniform op whose interpreter gives float32:
    the compiled calls after the tracing one returned float32 tensors."""
    check(bf16_draws)


def _inside(name):
    def fn(lib, x):
        g = lib.Generator().manual_seed(4)
        if name == "binomial":
            return lib.binomial(x * 10, x / x.sum(), generator=g)
        return getattr(lib, name)(x * 5, generator=g)
    fn.__name__ = f"inside_generator_{name}"
    return fn


@pytest.mark.parametrize("name", ["poisson", "binomial", "_standard_gamma", "_sample_dirichlet"])
def test_a_value_dependent_draw_of_a_generator_made_inside_a_compiled_function(name):
    """A generator made in the function is no input (the call's snapshot only sees the ones
    it reaches), so the trace kept the draws, which depend on x's values, as constants."""
    check(_inside(name))


def test_generator_seed_inside_a_compiled_function_is_a_fresh_seed_at_each_call():
    def fn(x):
        g = llgrad.Generator()
        g.seed()
        return x + llgrad.rand(4, generator=g)
    cf = llgrad.compile(fn)
    with pytest.warns(UserWarning, match="Generator.seed"):
        outs = [cf(llgrad.zeros(4)).tolist() for _ in range(3)]
    assert outs[0] != outs[1] and outs[1] != outs[2]


def bernoulli_bf16(lib, x):
    p = lib.full((2000,), 0.59375, dtype=lib.bfloat16)
    return (lib.bernoulli(p), lib.empty(2000).bernoulli_(p),
            lib.bernoulli((x / x.max()).bfloat16()))


def test_bernoulli_of_bfloat16_probabilities_draws_float_uniforms():
    """ATen's bernoulli_distribution<float> (24 bits) for bfloat16 p, not a bfloat16
    uniform (8 bits): some draws near p differed."""
    check(bernoulli_bf16, compiled=False)


@pytest.mark.parametrize("n,dtype", [(300, "int8"), (257, "uint8"), (32769, "int16"),
                                     (3, "bool"), (5, "complex64"), (2050, "float16")])
def test_randperm_refuses_what_its_dtype_cannot_hold(n, dtype):
    def fn(lib, x):
        return lib.randperm(n, dtype=getattr(lib, dtype))
    fn.__name__ = f"randperm_{n}_{dtype}"
    check(fn, compiled=False)


@pytest.mark.parametrize("n,dtype", [(256, "uint8"), (2049, "float16"), (2050, "bfloat16"),
                                     (128, "int8")])
def test_randperm_at_its_dtypes_limits(n, dtype):
    def fn(lib, x):
        return lib.randperm(n, dtype=getattr(lib, dtype)), lib.rand(2)
    fn.__name__ = f"randperm_{n}_{dtype}"
    check(fn, compiled=False)


def test_a_generator_argument_that_is_no_generator_is_a_type_error():
    def fn(lib, x):
        return lib.rand(3, generator=5)
    check(fn, compiled=False)
    with pytest.raises(TypeError):
        llgrad.randn(2, generator="x")


@pytest.mark.parametrize("low,high,dtype", [(0, 5000, "float16"), (0, 1000, "bfloat16"),
                                             (0, 2 ** 25, "float32"), (-3, 2 ** 54, "float64"),
                                             (-5000, 3, "float16"), (3, 2 ** 30, "bfloat16"),
                                             (0, 70000, "float16"), (0, 3, "bool"),
                                             (0, 300, "int8"), (-1, 5, "uint8")])
def test_random_from_to_bounds_a_float_rounds_past_and_randints_bound_checks(low, high, dtype):
    """ATen's update_to: a float `to - 1` the dtype rounds up to `to` or past moves `to` back
    by the dtype's step there (float16 to=5000: the range is 4996); randint had none of
    random_'s bound checks (randint(0, 3, dtype=bool) drew)."""
    def fn(lib, x):
        d = getattr(lib, dtype)
        out = [lib.randint(low, high, (7,), dtype=d)]
        return out if d == lib.bool or not d.is_floating_point else \
            out + [lib.empty(9, dtype=d).random_(low, high), lib.empty(3, dtype=d).random_(high)]
    fn.__name__ = f"random_{low}_{high}_{dtype}"
    with pytest.warns(UserWarning) if "float" in dtype and high != 70000 else nullcontext():
        check(fn, compiled=False)


@pytest.mark.xfail(strict=True, reason="normal(mean, std) with a bfloat16 tensor std: ATen "
                   "rounds normal_(0, 1) * std to bfloat16 before adding mean (output.mul_(std)"
                   ".add_(mean)); llgrad's normal_tensor op (ir/ops_fill_more.py) computes "
                   "mean + std * noise in float32 and rounds once, so values differ by an ulp")
def test_normal_of_bfloat16_tensor_mean_and_std():
    def fn(lib, x):
        return lib.normal(x[:18].bfloat16(), x[:18].bfloat16())
    check(fn, compiled=False)


# -- the sweep ------------------------------------------------------------------------------

CASES = []


def case(f):
    CASES.append(f)
    return f


@case
def rand_dtypes(lib, x):
    return [lib.rand(37, dtype=d) for d in (lib.float32, lib.float64, lib.float16, lib.bfloat16)]


@case
def randn_dtypes(lib, x):
    return [lib.randn(17, 3, dtype=d) for d in (lib.float32, lib.float64, lib.float16,
                                                lib.bfloat16)]


@case
def rand_sizes_around_the_vectorised_paths(lib, x):
    return [lib.randn(n) for n in (1, 15, 16, 17, 31, 32, 33, 1000)] + \
        [lib.rand(n, dtype=lib.float64) for n in (15, 16, 17)]


@case
def randint_bounds_and_dtypes(lib, x):
    return (lib.randint(10, (37,)), lib.randint(-5, 5, (3, 7)), lib.randint(0, 2 ** 40, (9,)),
            lib.randint(3, 250, (17,), dtype=lib.uint8),
            lib.randint(-128, 128, (37,), dtype=lib.int8),
            lib.randint(0, 7, (11,), dtype=lib.float32), lib.randint(0, 2, (4,), dtype=lib.bool),
            lib.randint(-2 ** 62, 2 ** 62, (7,)),
            lib.randint(-2 ** 31, 2 ** 31, (9,), dtype=lib.int32))


@case
def randperm_below_and_above_thresholds(lib, x):
    return [lib.randperm(n) for n in (0, 1, 2, 7, 15, 16, 17, 255, 256, 257, 20000)] + \
        [lib.randperm(50, dtype=lib.int32), lib.randperm(30, dtype=lib.float64)]


@case
def normal_with_tensor_mean_and_std(lib, x):
    return (lib.normal(x, x + 1), lib.normal(x, 2.0), lib.normal(0.5, x.abs() + .1),
            lib.normal(1.0, 3.0, (5, 7)), lib.normal(x.double(), 1.0), lib.normal(x.half(), 1.),
            lib.normal(lib.zeros(2, 1), lib.ones(1, 3)))


@case
def bernoulli_tensor_and_float_p(lib, x):
    p = x / x.max()
    return (lib.bernoulli(p), lib.bernoulli(p.double()), lib.bernoulli(p.half()), x.bernoulli(0.25),
            lib.empty(19).bernoulli_(0.7), lib.zeros(37, dtype=lib.float64).bernoulli_(p),
            p.half().bernoulli_(0.3), lib.bernoulli(lib.tensor([0., 1., 0.5, 1., 0.])))


@case
def multinomial_with_and_without_replacement(lib, x):
    w = x[:10] + 0.1
    return (lib.multinomial(w, 20, replacement=True), lib.multinomial(w.reshape(2, 5), 7, True),
            lib.multinomial(w, 4), lib.multinomial(w.reshape(2, 5), 3), lib.multinomial(w, 10),
            lib.multinomial(w.double(), 1), lib.multinomial(lib.tensor([0., 1., 0., 2., 0.]), 2))


@case
def multinomial_many_categories_and_noncontiguous(lib, x):
    w = lib.arange(1, 2001).float()
    t = x[:36].reshape(6, 6).t()
    return (lib.multinomial(w, 30), lib.multinomial(w, 30, True),
            lib.multinomial(w.reshape(4, 500), 100), lib.multinomial(t, 3),
            lib.multinomial(t[:, ::2], 2, True), lib.multinomial(x[:10].half(), 3))


@case
def exponential_geometric_cauchy_log_normal(lib, x):
    return (lib.empty(37).exponential_(), lib.empty(17, dtype=lib.float64).exponential_(2.5),
            lib.empty(37).geometric_(0.3), lib.empty(9, dtype=lib.int64).geometric_(0.6),
            lib.empty(37).cauchy_(), lib.empty(17, dtype=lib.float64).cauchy_(1., 2.),
            lib.empty(37).log_normal_(), lib.empty(19, dtype=lib.float64).log_normal_(0.5, 0.25))


@case
def uniform_and_random_from_to(lib, x):
    return (lib.empty(37).uniform_(-2, 3), lib.empty(17, dtype=lib.float64).uniform_(),
            lib.empty(37, dtype=lib.int64).random_(),
            lib.empty(17, dtype=lib.int64).random_(5, 100),
            lib.empty(9, dtype=lib.int32).random_(7), lib.empty(9).random_(0, 10),
            lib.empty(9, dtype=lib.uint8).random_(), lib.empty(9, dtype=lib.int64).random_(-5),
            lib.empty(5, dtype=lib.float64).random_(-3, 2 ** 53),
            lib.empty(5, dtype=lib.bool).random_())


@case
def half_precision_fills(lib, x):
    return (lib.empty(37, dtype=lib.float16).uniform_(),
            lib.empty(37, dtype=lib.bfloat16).normal_(),
            lib.empty(20, dtype=lib.float16).exponential_(),
            lib.empty(20, dtype=lib.bfloat16).cauchy_(),
            lib.empty(9, dtype=lib.float16).random_(), lib.empty(9, dtype=lib.bfloat16).random_())


@case
def poisson_rates(lib, x):
    return (lib.poisson(x * 10), lib.poisson(x.double() * 3), lib.poisson(x * 0),
            lib.poisson(x.half() * 5))


@case
def like_draws_of_noncontiguous_tensors(lib, x):
    a = x[:36].reshape(6, 6).t()
    b, c = lib.zeros(6, 7).t(), lib.zeros(8, 5)[:, ::2]
    return (lib.rand_like(a), lib.randn_like(a), lib.randint_like(a, 10), lib.randn_like(x[::2]),
            b.normal_(), c.uniform_())


@case
def dropout_masks(lib, x):
    F = lib.nn.functional
    a = x[:36].reshape(2, 3, 6)
    return (F.dropout(x, 0.3), F.dropout(x.reshape(1, 37).double(), 0.5), F.dropout(x, 1.0),
            F.dropout2d(a.reshape(1, 2, 3, 6), 0.5), F.dropout3d(a.reshape(1, 2, 3, 6, 1), 0.4),
            F.dropout1d(a, 0.5), F.alpha_dropout(x, 0.3, True),
            F.feature_alpha_dropout(a.reshape(2, 3, 6, 1), 0.5, True))


@case
def nn_init_functions(lib, x):
    I = lib.nn.init
    fs = (I.uniform_, I.normal_, I.xavier_uniform_, I.xavier_normal_, I.kaiming_uniform_,
          I.kaiming_normal_, I.orthogonal_, I.trunc_normal_)
    return [f(lib.empty(7, 9)).clone() for f in fs] + [I.sparse_(lib.empty(7, 9), 0.3).clone()]


@case
def module_initialisation(lib, x):
    m = lib.nn.Sequential(lib.nn.Linear(5, 7), lib.nn.Conv2d(2, 3, 3), lib.nn.Embedding(11, 4),
                          lib.nn.LSTM(3, 4))
    return list(m.parameters())


@case
def complex_draws(lib, x):
    return (lib.randn(7, dtype=lib.complex64), lib.rand(5, dtype=lib.complex128),
            lib.empty(6, dtype=lib.complex64).normal_())


@case
def scalars_and_empties(lib, x):
    return (lib.rand(()), lib.randn(0), lib.randn(()), lib.randint(3, ()), lib.empty(0).normal_(),
            lib.randperm(1))


@pytest.mark.slow
@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_sampling_matches_pytorch(fn):
    check(fn)
