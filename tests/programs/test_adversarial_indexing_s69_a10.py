"""Advanced indexing against torch: bool masks that broadcast, negative indices, repeated
indices in index_put_ with and without accumulate, a 0-d tensor as index, setitem through
a chain of views into a non-contiguous base, out-of-range indices (the error type), with
gradients: torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

X = (np.arange(24, dtype=np.float32).reshape(4, 6) - 10) / 3


def bool_mask_rows(torch, x):
    m = torch.tensor([True, False, True, True])
    return x[m], x[:, m.repeat(2)[:6]], x[m, 1:4]


def bool_mask_2d(torch, x):
    return x[x > 0], x[(x > 0) & (x < 3)] * 2, x[x.abs() > 100]


def bool_mask_3d_partial(torch, x):
    y = x.reshape(2, 2, 6)
    m = torch.tensor([[True, False], [False, True]])
    return y[m], y[m][:, ::2], y[:, torch.tensor([False, True])]


def bool_scalar_index(torch, x):
    return x[True], x[False], x[None, True, ..., None]


def negative_indices(torch, x):
    i = torch.tensor([-1, 0, -4, 2])
    return x[i], x[:, i], x[i, i], x[-1, -2], x[i.reshape(2, 2)]


def zero_dim_index(torch, x):
    i = torch.tensor(2)
    return x[i], x[:, i], x[i, i], x[torch.tensor(-1)], x[i][i]


def mixed_adv_basic(torch, x):
    i = torch.tensor([[0, 3], [1, 1]])
    j = torch.tensor([5, -6])
    return x[i, j], x[i, 1:3], x[1:, j], x[..., j], x[None, i, j]


def separated_adv(torch, x):
    y = x.reshape(2, 2, 6)
    return y[torch.tensor([1, 0]), :, torch.tensor([2, 3])], y[0, :, torch.tensor([[1], [2]])]


def out_of_range(torch, x):
    return x[torch.tensor([4])]


def out_of_range_negative(torch, x):
    return x[:, torch.tensor([-7])]


def float_index_raises(torch, x):
    return x[torch.tensor([1.0])]


def mask_shape_mismatch(torch, x):
    return x[torch.tensor([True, False, True])]


def index_put_repeated(torch, x):
    y = x * 1
    i = torch.tensor([1, 1, 3, -3])
    y.index_put_((i,), torch.ones(4, 6) * torch.arange(4.).reshape(4, 1), accumulate=True)
    z = x * 1
    z.index_put_((i, torch.tensor([0, 0, 5, -1])), torch.tensor([1., 2., 3., 4.]), accumulate=True)
    return y, z


def index_put_repeated_no_accumulate(torch, x):
    # (repeated indices without accumulate: the last write wins on CPU, in torch's order)
    y = x * 1
    y.index_put_((torch.tensor([1, 2]),), torch.tensor(9.0))
    y[torch.tensor([0, 0]), torch.tensor([1, 1])] = torch.tensor([5.0, 5.0])
    return y


def setitem_mask(torch, x):
    y = x * 1
    y[y > 0] = 0
    y[y < -2] = torch.tensor(7.0)
    z = x * 1
    z[z > 1] = z[z > 1] * 3
    return y, z


def setitem_broadcast_mask(torch, x):
    y = x * 1
    y[torch.tensor([True, False, False, True])] = torch.arange(6.)
    y[:, torch.tensor([False, True, False, True, False, False])] += 1
    return y


def setitem_view_chain_non_contiguous(torch, x):
    base = (x * 1).t()                  # (6, 4), strides (1, 6)
    v = base[1:5:2].narrow(1, 1, 2).transpose(0, 1)
    v[0] = 100.0
    v[:, 1] *= -1
    v[1, torch.tensor([0])] = torch.tensor([5.0])
    return base, v


def setitem_view_chain_diagonal(torch, x):
    base = x * 1
    d = base[:, 1:5].diagonal()
    d += 10
    d[torch.tensor([0, -1])] = torch.tensor([-1.0, -2.0])
    base.select(1, 0).unsqueeze(1).expand(4, 1).squeeze(1)[1] = 42.0
    return base, d


def index_add_copy_fill(torch, x):
    i = torch.tensor([0, 0, 3])
    s = torch.ones(3, 6)
    return (x.index_add(0, i, s, alpha=2), x.index_copy(0, torch.tensor([3, 1, 0]), s),
            x.index_fill(1, torch.tensor([-1, 0]), -5.0), x.index_select(1, torch.tensor([5, 5, 0])))


def scatter_gather_repeated(torch, x):
    idx = torch.tensor([[0, 0, 1], [3, 3, 3]])
    return (x.gather(0, idx), x.scatter_add(0, idx, torch.ones(2, 3)),
            x.scatter(1, idx, 2.0), x.scatter_reduce(0, idx, torch.ones(2, 3) * 5, "amax"),
            x.scatter_reduce(0, idx, torch.ones(2, 3) * 5, "mean", include_self=False))


def take_put(torch, x):
    i = torch.tensor([[0, -1], [23, 5]])
    return x.take(i), torch.take_along_dim(x, torch.tensor([[0], [5], [2], [1]]), 1), x.put(torch.tensor([1, 1]), torch.tensor([3.0, 4.0]), accumulate=True)


def masked_ops(torch, x):
    m = torch.tensor([True, False, True, False, False, True])
    return x.masked_fill(m, -1.0), x.masked_select(m), x.masked_scatter(m.expand(4, 6), torch.arange(24.))


def empty_index(torch, x):
    e = torch.tensor([], dtype=torch.long)
    return x[e], x[:, e], x[e, e], x[x > 1e9]


CASES = [bool_mask_rows, bool_mask_2d, bool_mask_3d_partial, bool_scalar_index, negative_indices,
         zero_dim_index, mixed_adv_basic, separated_adv, out_of_range, out_of_range_negative,
         float_index_raises, mask_shape_mismatch, index_put_repeated,
         index_put_repeated_no_accumulate, setitem_mask, setitem_broadcast_mask,
         setitem_view_chain_non_contiguous, setitem_view_chain_diagonal, index_add_copy_fill,
         scatter_gather_repeated, take_put, masked_ops, empty_index]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("grad", [False, True])
def test_indexing(fn, grad):
    # (two returned views of an intermediate the function writes: run eagerly, with a warning)
    warns = "overlapping views" if fn is setitem_view_chain_non_contiguous else None
    check(fn, ("grad", X) if grad else X, compiled_warns=warns)


def setitem_view_chain_returning_base(torch, x):
    y = x * 1
    base = y.t()
    v = base[1:5:2].narrow(1, 1, 2).transpose(0, 1)
    v[0] = 100.0
    v[:, 1] *= -1
    v[1, torch.tensor([0])] = torch.tensor([5.0])
    return y, v.sum(0)


@pytest.mark.parametrize("grad", [False, True])
def test_setitem_view_chain_returning_base(grad):
    check(setitem_view_chain_returning_base, ("grad", X) if grad else X)
