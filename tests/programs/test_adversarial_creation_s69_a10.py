"""Creation and shape ops at their edges against torch: arange with float steps (its
length), linspace/logspace with 0 and 1 steps, full/tensor's inferred dtypes, searchsorted/
bucketize/histc/bincount over NaN, ties and empty input, repeat_interleave, clamp of ints by
floats, tril/triu with offsets past the edge, reshape/view errors; torch, llgrad eager and
llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

nan = float("nan")
X = np.array([[0.5, -1.0, 2.0, nan], [3.0, 3.0, -0.0, 1.0], [7.0, 0.25, -2.5, 1.0]], np.float32)


def arange_float_steps(torch, x):
    return (torch.arange(0, 1, 0.1), torch.arange(1, 2.2, 0.3), torch.arange(-1, -3.5, -0.5),
            torch.arange(0.0, 0.3, 0.1), torch.arange(10, dtype=torch.float32) * x[0, 0],
            torch.arange(5, 1, -2), torch.arange(0, 1e-7, 1e-8).numel())


def linspace_logspace(torch, x):
    return (torch.linspace(0, 1, 1), torch.linspace(0, 1, 0), torch.linspace(-1, 1, 7) + x[1, 3],
            torch.logspace(0, 2, 3), torch.logspace(0, 1, 4, base=2.0), torch.linspace(3, 3, 5),
            torch.linspace(0, 10, 5, dtype=torch.int64))


def inferred_dtypes(torch, x):
    return (torch.full((2,), 3), torch.full((2,), 3.0), torch.full((2,), True), torch.tensor([1, 2.5]),
            torch.tensor([True, 1]), torch.zeros(2, dtype=torch.int32) + x[0, 0], torch.ones_like(x, dtype=torch.int64),
            torch.zeros_like(x).dtype == torch.float32, torch.empty(0, 3).shape)


def searchsorted_edges(torch, x):
    s = torch.tensor([-1.0, 0.5, 0.5, 3.0, nan])
    v = x.flatten()
    return (torch.searchsorted(s, v), torch.searchsorted(s, v, right=True), torch.bucketize(v, s[:4]),
            torch.bucketize(v, s[:4], right=True), torch.searchsorted(s, torch.tensor([0.5]), side="right"))


def histc_bincount(torch, x):
    v = x.flatten().nan_to_num(0.0)
    i = torch.tensor([0, 3, 3, 1, 0])
    return (torch.histc(v, 4, -3, 8), torch.histc(v, 3), i.bincount(), i.bincount(minlength=7),
            i.bincount(torch.tensor([0.5, 1, 1, 2, 0.25])), torch.tensor([], dtype=torch.long).bincount())


def repeat_interleave_edges(torch, x):
    return (x.repeat_interleave(2, 0), x.repeat_interleave(torch.tensor([0, 2, 1]), 0),
            torch.repeat_interleave(torch.tensor([2, 0, 3])), x.repeat(2, 1, 1).shape, x.tile((2,)))


def clamp_int_by_float(torch, x):
    i = torch.tensor([-3, 0, 2, 7])
    return i.clamp(0.5, 2.5), i.clamp(min=1), i.clamp(max=torch.tensor(3)), torch.clamp(i, -1.5)


def tril_triu_offsets(torch, x):
    return x.tril(5), x.triu(-5), x.tril(-3), x.triu(4), x.tril(-1), torch.tril_indices(3, 4, 1), torch.triu_indices(4, 3, -1)


def view_errors(torch, x):
    return x.t().view(12)


def reshape_errors(torch, x):
    return x.reshape(5, -1)


def view_minus_one_zero(torch, x):
    return x[:0].reshape(-1, 4).shape, x[:0].reshape(0, 2, 2).shape, x.reshape(-1).shape


def flip_roll_edges(torch, x):
    return x.roll(5, 1), x.roll(-1), x.roll((1, -2), (0, 1)), x.flip((0, 1)), x.rot90(3), x[:, :0].roll(1, 1)


def diag_edges(torch, x):
    return x.diagonal(5), x.diagonal(-2), torch.diag(x[0], -1), torch.diag_embed(x[:2], 1), x.diagonal(1, 1, 0)


def chunk_split_edges(torch, x):
    return x.chunk(5, 1), x.split([1, 0, 3], 1), x.tensor_split(5, 1), x.split(3, 0), x.unbind(1)


CASES = [arange_float_steps, linspace_logspace, inferred_dtypes, searchsorted_edges,
         histc_bincount, repeat_interleave_edges, clamp_int_by_float, tril_triu_offsets,
         view_errors, reshape_errors, view_minus_one_zero, flip_roll_edges, diag_edges,
         chunk_split_edges]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_creation_and_shapes(fn):
    # (histc over the data's own range: a data-dependent constant, run eagerly with a warning)
    check(fn, X, compiled_warns="histc" if fn is histc_bincount else None)


@pytest.mark.parametrize("fn", [repeat_interleave_edges, tril_triu_offsets, flip_roll_edges,
                                diag_edges, chunk_split_edges, arange_float_steps],
                         ids=lambda f: f.__name__)
def test_shape_op_gradients(fn):
    check(fn, ("grad", np.nan_to_num(X, nan=1.5)))
