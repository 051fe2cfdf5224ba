"""The scatter-style ops' ufunc.at on flat indices into the raveled output (ir/np_at.py):
bitwise NumPy's own ufunc.at on the index tuples index_add and scatter / scatter_reduce
build (duplicate indices, values of very different magnitudes so that the order of the
updates shows, NaN and -0), and the ops against torch on a GAT-sized edge list."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import np_at

RNG = np.random.default_rng(11)
UFUNCS = [np.add, np.maximum, np.minimum, np.multiply]


def _values(shape, dtype):
    v = RNG.standard_normal(shape) * np.exp(RNG.uniform(-12, 12, shape))
    v = v.astype(dtype)
    if v.dtype.kind == "f":
        v.reshape(-1)[::53], v.reshape(-1)[::71] = np.nan, -0.0
    return v


def _same(ufunc, x, idx, vals):
    with np.errstate(all="ignore"):
        want = x.copy()
        ufunc.at(want, idx, vals)
        got = x.copy()
        np_at.at(ufunc, got, idx, vals)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("ufunc", UFUNCS, ids=lambda u: u.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape,dim,k", [((50, 16), 0, 300), ((8, 40, 6), 1, 100),
                                         ((30, 20), 1, 64), ((5, 6, 70), 2, 200)])
def test_index_add_tuple_bitwise(ufunc, dtype, shape, dim, k):
    vshape = list(shape)
    vshape[dim] = k
    idx = [slice(None)] * len(shape)
    idx[dim] = RNG.integers(0, shape[dim], k)
    _same(ufunc, _values(shape, dtype), tuple(idx), _values(vshape, dtype))


@pytest.mark.parametrize("ufunc", UFUNCS, ids=lambda u: u.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,ishape,dim", [((50, 16), (400, 16), 0), ((20, 30), (20, 200), 1),
                                              ((6, 7, 30), (6, 7, 90), 2), ((50, 16), (400, 10), 0)])
def test_scatter_tuple_bitwise(ufunc, dtype, shape, ishape, dim):
    idx = list(np.indices(ishape, sparse=True))
    idx[dim] = RNG.integers(0, shape[dim], ishape)
    _same(ufunc, _values(shape, dtype), tuple(idx), _values(ishape, dtype))


@pytest.mark.parametrize("reduce", ["sum", "amax", "amin", "prod", "mean"])
def test_edge_scatter_matches_torch(reduce):
    torch = pytest.importorskip("torch")
    nodes, edges, feats = 60, 900, 8
    dst = RNG.integers(0, nodes, edges)
    index = np.repeat(dst[:, None], feats, 1)
    src = RNG.standard_normal((edges, feats)).astype(np.float32)
    x = RNG.standard_normal((nodes, feats)).astype(np.float32)
    g = RNG.standard_normal((nodes, feats)).astype(np.float32)
    outs = []
    for lib in (torch, llgrad):
        s = lib.tensor(src, requires_grad=True)
        y = lib.tensor(x).scatter_reduce(0, lib.tensor(index), s, reduce, include_self=False)
        y2 = lib.zeros(nodes, feats).index_add(0, lib.tensor(dst), s)
        ((y + y2) * lib.tensor(g)).sum().backward()
        outs.append((y.detach().numpy(), y2.detach().numpy(), s.grad.numpy()))
    for ours, theirs in zip(outs[1], outs[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
