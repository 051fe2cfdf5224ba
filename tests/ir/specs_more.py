# Samples of the ops of llgrad/ir/ops_tensor.py, ops_linalg.py, ops_sort.py, ops_fill.py,
# ops_activations.py, ops_losses.py and ops_nn_more.py, exec'd in test_ir_core.py's namespace
# (S, T, X, P, B, I, SPECS, llgrad, F, np, ...): each adds to SPECS.
from llgrad.ir import torch_random
from llgrad.nn.functional_activation import _SELU_ALPHA, _SELU_SCALE


class _Wide(T):
    """randn * 4: values beyond the kinks of the clamping activations (hardtanh, hardswish's
    +-3, ...) and with a fractional part for the rounding family."""

    def make(self, shape, rng):
        return np.asarray(4 * rng.standard_normal(shape)).astype(self.dtype)


def W(*shape):
    return _Wide(shape)


def U(*shape):
    """Probabilities in [0, 1) (and uniform draws)."""
    return T(shape, gen="unit")


class _Replay:
    """Stands in for the generator's draw functions (torch_random.uniform / normal): its one
    draw is `draws` (the op's draw operand, in its logical order), so eager's public fill
    (uniform_, normal_, bernoulli) maps the very numbers the op's operand holds."""

    def __init__(self, draws):
        self.draws = np.array(draws.numpy(), dtype=np.float64)
        self.used = False

    def draw(self, state, n, dtype, *args, **kwargs):
        assert not self.used and n == self.draws.size, (n, self.draws.shape)
        self.used = True
        return self.draws.reshape(-1).astype(dtype)


def _dense(a):
    """A contiguous copy: a fill draws in memory order (ATen's serial kernels), the op's
    draw operand is in logical order."""
    return a.clone(memory_format=llgrad.contiguous_format)


def _eager_replay(draws, fill):
    """fill() run with the default generator's next draw replaced by `draws` (as
    _eager_draw runs randn/rand from an explicit state)."""
    replay = _Replay(draws)
    saved = torch_random.uniform, torch_random.normal
    torch_random.uniform = torch_random.normal = replay.draw
    try:
        out = fill()
    finally:
        torch_random.uniform, torch_random.normal = saved
    assert replay.used
    return out


SPECS.update({
    # positional ops (ops_tensor.py)
    "tril": S([X(2, 3, 4)], {"diagonal": 1}, lambda a: a.tril(1)),
    "triu": S([X(2, 3, 4)], {"diagonal": -1}, lambda a: a.triu(-1)),
    "flip": S([X(2, 3, 4)], {"dims": (0, 2)}, lambda a: a.flip(0, 2)),
    "roll": S([X(2, 3, 4)], {"shifts": (1, -3), "dims": (0, 2)},
              lambda a: a.roll((1, -3), (0, 2))),
    "repeat": S([X(3, 4)], {"repeats": (2, 1, 3)}, lambda a: a.repeat(2, 1, 3)),
    "diag_embed": S([X(2, 3)], {"offset": 1, "dim1": 0, "dim2": 2},
                    lambda a: a.diag_embed(1, 0, 2)),
    "diagonal_copy": S([X(3, 4)], {"offset": 1, "dim1": 0, "dim2": 1}, lambda a: a.diag(1)),
    "unfold": S([X(3, 7)], {"dimension": 1, "size": 3, "step": 2}, lambda a: a.unfold(1, 3, 2)),
    "cumprod": S([X(2, 3, 4)], {"dim": 1}, lambda a: a.cumprod(1)),
    "baddbmm": S([X(3, 5), X(2, 3, 4), X(2, 4, 5)], {"beta": 0.5, "alpha": 2.0},
                 lambda c, a, b: c.baddbmm(a, b, beta=0.5, alpha=2.0)),
    "ceil": S([W(3, 4)], {}, lambda a: a.ceil()),
    "trunc": S([W(3, 4)], {}, lambda a: a.trunc()),
    "frac": S([W(3, 4)], {}, lambda a: a.frac()),
    "round_decimals": S([W(3, 4)], {"decimals": 2}, lambda a: a.round(decimals=2)),
    # linalg.vector_norm (ops_linalg.py): a p that is none of the special cases
    "linalg_vector_norm": S([X(2, 3, 4)], {"ord": 3.0, "dim": (0, 2), "keepdim": True},
                            lambda a: llgrad.linalg.vector_norm(a, 3, (0, 2), keepdim=True)),
    # sorting and scattering (ops_sort.py): small ints, so that ties test the stable order
    "sort": S([I(4, 3, 6)], {"dim": 1, "descending": True, "stable": None},
              lambda a: a.sort(1, descending=True)),
    "topk": S([I(4, 3, 6)], {"k": 3, "dim": 1, "largest": False, "sorted": True},
              lambda a: a.topk(3, 1, largest=False)),
    "kthvalue": S([I(4, 3, 6)], {"k": 3, "dim": 1}, lambda a: a.kthvalue(3, 1, keepdim=True)),
    "mode": S([I(3, 3, 20)], {"dim": 1}, lambda a: a.mode(1, keepdim=True)),
    "scatter": S([X(3, 4), I(4, 3, 2), X(3, 2)], {"dim": 1},
                 lambda a, i, s: a.scatter(1, i, s)),
    "scatter_reduce": S([X(3, 4), I(4, 3, 5), X(3, 5)],
                        {"dim": 1, "reduce": "mean", "include_self": False},
                        lambda a, i, s: a.scatter_reduce(1, i, s, "mean", include_self=False)),
    # random fills (ops_fill.py): the op maps its draw operand; eager's public fill draws
    # the same numbers (replayed) and must map them alike
    "uniform": S([X(3, 4), U(3, 4)], {"low": -2.0, "high": 3.0},
                 lambda a, u: _eager_replay(u, lambda: _dense(a).uniform_(-2.0, 3.0))),
    "normal": S([X(3, 4), X(3, 4)], {"mean": 0.5, "std": 2.0},
                lambda a, n: _eager_replay(n, lambda: _dense(a).normal_(0.5, 2.0))),
    "bernoulli_p": S([X(3, 4), U(4), U(3, 4)], {},
                     lambda a, p, u: _eager_replay(u, lambda: _dense(a).bernoulli_(p))),
    "bernoulli": S([U(3, 4), U(3, 4)], {},
                   lambda p, u: _eager_replay(u, lambda: llgrad.bernoulli(p))),
    # activations (ops_activations.py); the in-place ones on a clone, as leaky_relu_
    "elu": S([W(3, 4)], {"alpha": 0.7, "scale": 1.0, "input_scale": 1.0},
             lambda a: F.elu(a, 0.7)),
    "elu_": S([W(3, 4)], {"alpha": _SELU_ALPHA, "scale": _SELU_SCALE, "input_scale": 1.0},
              lambda a: F.selu(a.clone(), inplace=True)),
    "celu": S([W(3, 4)], {"alpha": 2.0, "scale": 1.0, "input_scale": 0.5},
              lambda a: F.celu(a, 2.0)),
    "celu_": S([W(3, 4)], {"alpha": 0.5, "scale": 1.0, "input_scale": 2.0},
               lambda a: F.celu(a.clone(), 0.5, inplace=True)),
    "hardtanh": S([W(3, 4)], {"min_val": -0.5, "max_val": 2.0},
                  lambda a: F.hardtanh(a, -0.5, 2.0)),
    "hardsigmoid": S([W(3, 4)], {}, lambda a: F.hardsigmoid(a)),
    "hardswish": S([W(3, 4)], {}, lambda a: F.hardswish(a)),
    "threshold": S([W(3, 4)], {"threshold": 0.5, "value": -2.0},
                   lambda a: F.threshold(a, 0.5, -2.0)),
    "threshold_": S([W(3, 4)], {"threshold": -0.5, "value": 3.0},
                    lambda a: F.threshold(a.clone(), -0.5, 3.0, inplace=True)),
    "logsigmoid": S([W(3, 4)], {}, lambda a: F.logsigmoid(a)),
    "mish": S([W(3, 4)], {}, lambda a: F.mish(a)),
    "glu": S([X(2, 6, 3)], {"dim": 1}, lambda a: F.glu(a, 1)),
    # losses (ops_losses.py)
    "smooth_l1_loss": S([W(3, 4), W(3, 4)], {"reduction": "sum", "beta": 0.5},
                        lambda a, b: F.smooth_l1_loss(a, b, reduction="sum", beta=0.5)),
    "huber_loss": S([W(3, 4), W(3, 4)], {"reduction": "none", "delta": 2.0},
                    lambda a, b: F.huber_loss(a, b, reduction="none", delta=2.0)),
    "binary_cross_entropy": S([U(3, 4), U(3, 4), P(3, 4)], {"reduction": "mean"},
                              lambda x, t, w: F.binary_cross_entropy(x, t, w)),
    # padding, pooling, group norm (ops_nn_more.py)
    "constant_pad_nd": S([X(2, 3, 4)], {"pad": (1, 2, -1, 0), "value": 0.5},
                         lambda a: F.pad(a, (1, 2, -1, 0), value=0.5)),
    "reflection_pad": S([X(2, 3, 4)], {"pad": (2, 1, 1, 2)},
                        lambda a: F.pad(a, (2, 1, 1, 2), mode="reflect")),
    "replication_pad": S([X(2, 3, 4)], {"pad": (1, 3)},
                         lambda a: F.pad(a, (1, 3), mode="replicate")),
    "avg_pool2d": S([X(2, 3, 5, 6)],
                    {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1),
                     "ceil_mode": True, "count_include_pad": False, "divisor_override": None},
                    lambda a: F.avg_pool2d(a, (3, 2), 2, 1, ceil_mode=True,
                                           count_include_pad=False)),
    "group_norm": S([X(2, 4, 3), X(4), X(4)], {"num_groups": 2, "eps": 1e-5},
                    lambda x, w, b: F.group_norm(x, 2, w, b, eps=1e-5)),
})
