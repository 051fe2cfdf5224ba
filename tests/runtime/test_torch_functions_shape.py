"""The shape functions, products, statistics and torch.* aliases of nn.functional that llgrad
writes as compositions (llgrad/runtime/functions_shape.py, functions_linalg.py,
functions_stats.py, llgrad/functions_nn.py, llgrad/nn/functional_shuffle.py) against
PyTorch: values, dtypes, shapes, gradients and errors."""
import numpy as np
import pytest

from torch_compare import compare, compare_error

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

rng = np.random.default_rng(3)


def r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


A, B, C3 = r(3, 4), r(3, 4), r(2, 3, 4)
V3, W3 = r(5, 3), r(5, 3)
INTS = np.arange(12).reshape(3, 4)


def test_movedim_family():
    for src, dst in ((0, 2), (-1, 0), ((0, 1), (2, 0)), ([-1, 0], [0, -1]), ((), ())):
        compare(lambda lib, t: lib.movedim(t, src, dst), C3)
        compare(lambda lib, t: t.moveaxis(src, dst), C3)
    compare(lambda lib, t: lib.swapdims(t, 0, -1), C3)
    compare(lambda lib, t: t.swapdims(1, 0), A)
    compare(lambda lib, t: lib.movedim(t, 0, 0), np.ones((), np.float32))
    compare_error(lambda lib, t: lib.movedim(t, (0, 0), (1, 2)), C3)
    compare_error(lambda lib, t: lib.movedim(t, (0, 1), (1, 1)), C3)
    compare_error(lambda lib, t: lib.movedim(t, (0, 1), (1,)), C3)
    compare_error(lambda lib, t: lib.movedim(t, 3, 0), C3)


def test_ravel_atleast_and_stacks():
    compare(lambda lib, t: lib.ravel(t.transpose(0, 2)), C3)
    compare(lambda lib, t: t.ravel(), A)
    for n in (1, 2, 3):
        fn = f"atleast_{n}d"
        for x in (np.ones((), np.float32), r(4), A, C3):
            compare(lambda lib, t: getattr(lib, fn)(t), x)
        compare(lambda lib, a, b: getattr(lib, fn)(a, b), r(4), np.ones((), np.float32))
        compare(lambda lib, a, b: getattr(lib, fn)([a, b]), r(4), A)
    for name in ("hstack", "vstack", "dstack", "column_stack", "row_stack"):
        for xs in ([r(3), r(3)], [A, B], [np.ones((), np.float32), np.ones((), np.float32)],
                   [C3, C3]):
            if name == "column_stack" and xs[0].ndim == 3:
                continue
            compare(lambda lib, ts: getattr(lib, name)(ts), xs)
        compare_error(lambda lib: getattr(lib, name)([]))
    compare(lambda lib, a, b: lib.hstack([a, b]), np.array([1, 2]), np.array([2.5], np.float32))
    compare(lambda lib, a, b: lib.column_stack([a, b]), r(3), r(3, 2))
    compare(lambda lib, ts: lib.concatenate(ts, axis=1), [A, B])


def test_splits():
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    for ios in (1, 2, 3, 5, [1, 3], [3, 1], [-1], (0, 10)):
        compare(lambda lib, t: lib.tensor_split(t, ios, dim=-1), x)
        compare(lambda lib, t: t.tensor_split(ios, 1), x)
    compare(lambda lib, t, i: lib.tensor_split(t, i, 2), x, np.array([1, 3]))
    compare(lambda lib, t, i: lib.tensor_split(t, i, 2), x, np.array(3))
    compare_error(lambda lib, t: lib.tensor_split(t, 0), x)
    compare_error(lambda lib, t: lib.tensor_split(t, 2), np.ones((), np.float32))
    compare_error(lambda lib, t, i: lib.tensor_split(t, i), x, np.array([1.0]))
    for name, sections in (("hsplit", 3), ("vsplit", 2), ("dsplit", 2)):
        compare(lambda lib, t: getattr(lib, name)(t, sections), x)
        compare(lambda lib, t: getattr(t, name)([1, 2]), x)
    compare(lambda lib, t: lib.hsplit(t, 2), np.arange(4.0, dtype=np.float32))
    compare_error(lambda lib, t: lib.hsplit(t, 2), np.ones((3, 3), np.float32))
    compare_error(lambda lib, t: lib.vsplit(t, 2), np.ones(4, np.float32))
    compare_error(lambda lib, t: lib.dsplit(t, 2), np.ones((2, 2), np.float32))
    compare_error(lambda lib, t: lib.hsplit(t, 1), np.ones((), np.float32))
    compare(lambda lib, t: lib.split_with_sizes(t, [1, 3], dim=-1), x)
    compare(lambda lib, t: t.split_with_sizes([2, 1], 1), x)
    compare_error(lambda lib, t: lib.split_with_sizes(t, [2, 3]), np.ones(7, np.float32))


def test_diff():
    compare(lambda lib, t: lib.diff(t), A)
    compare(lambda lib, t: t.diff(n=2, dim=0), A)
    compare(lambda lib, t, p, a: lib.diff(t, 1, 0, prepend=p, append=a), A, r(1, 4), r(2, 4))
    compare(lambda lib, t, p: lib.diff(t, prepend=p), r(4), np.array([1]))
    compare(lambda lib, t: lib.diff(t, n=5), r(3))
    compare(lambda lib, t: lib.diff(t, n=0), r(3))
    compare(lambda lib, t: lib.diff(t), np.array([True, False, False, True]))
    compare(lambda lib, t: lib.diff(t, n=2), INTS)
    compare_error(lambda lib, t: lib.diff(t), np.ones((), np.float32))
    compare_error(lambda lib, t: lib.diff(t, n=-1), A)
    compare_error(lambda lib, t, p: lib.diff(t, prepend=p), A, r(4))


def test_rot90_kron_block_diag_cartesian_combinations():
    for k in (-3, -1, 0, 1, 2, 3, 6):
        compare(lambda lib, t: lib.rot90(t, k), A)
        compare(lambda lib, t: t.rot90(k, [2, 0]), C3)
    compare_error(lambda lib, t: lib.rot90(t), r(4))
    compare_error(lambda lib, t: lib.rot90(t, 1, [0, 0]), A)
    compare_error(lambda lib, t: lib.rot90(t, 1, [0, -2]), A)
    compare_error(lambda lib, t: lib.rot90(t, 1, [0, 1, 2]), C3)
    compare_error(lambda lib, t: lib.rot90(t, 1, [0, 2]), A)
    for a, b in ((A, B), (r(2), r(3, 2)), (C3, r(2, 2)), (np.ones((), np.float32), r(3))):
        compare(lambda lib, x, y: lib.kron(x, y), a, b)
    compare(lambda lib, x, y: x.kron(y), INTS, np.array([[1.5]], np.float32))
    compare(lambda lib, a, b, c: lib.block_diag(a, b, c), A, np.ones((), np.float32), r(2))
    compare(lambda lib, a, b: lib.block_diag(a, b), INTS, np.array(2.5, np.float32))
    compare(lambda lib: lib.block_diag())
    compare(lambda lib, a: lib.block_diag(a), np.zeros(0, np.float32))
    compare_error(lambda lib, a: lib.block_diag(a), C3)
    compare(lambda lib, a, b: lib.cartesian_prod(a, b), r(3), r(2))
    compare(lambda lib, a, b, c: lib.cartesian_prod(a, b, c), np.arange(2), np.arange(3),
            np.arange(2))
    compare(lambda lib, a: lib.cartesian_prod(a), r(3))
    compare_error(lambda lib, a, b: lib.cartesian_prod(a, b), np.arange(2), r(2))
    compare_error(lambda lib, a: lib.cartesian_prod(a), A)
    for k in (0, 1, 2, 3, 5):
        compare(lambda lib, t: lib.combinations(t, k), r(4))
        compare(lambda lib, t: lib.combinations(t, k, with_replacement=True), np.arange(3))
    compare_error(lambda lib, t: lib.combinations(t), A)
    compare_error(lambda lib, t: lib.combinations(t, -1), r(3))


def test_index_helpers_and_take():
    for row, col, off in ((3, 3, 0), (3, 4, 1), (4, 2, -1), (0, 0, 0), (2, 5, 9)):
        compare(lambda lib: lib.tril_indices(row, col, off))
        compare(lambda lib: lib.triu_indices(row, col, off, dtype=lib.int32))
    compare_error(lambda lib: lib.tril_indices(-1, 3))
    compare_error(lambda lib: lib.triu_indices(3, -2))
    for x in (A, r(3), np.ones((), np.float32)):
        compare(lambda lib, t: lib.diagflat(t), x)
        compare(lambda lib, t: t.diagflat(-1), x)
    compare(lambda lib, t, i: lib.take(t, i), A, np.array([[0, -1], [5, 11]]))
    compare(lambda lib, t, i: t.take(i), A, np.zeros(0, np.int64))
    compare_error(lambda lib, t, i: lib.take(t, i), A, np.array([0], np.int32))
    compare(lambda lib, t, i: lib.take_along_dim(t, i, 1), A, np.array([[0], [3], [1]]))
    compare(lambda lib, t, i: lib.take_along_dim(t, i, 0), A, np.array([[2, 0, 1, 1]]))
    compare(lambda lib, t, i: t.take_along_dim(i), A, np.array([3, 0]))
    compare(lambda lib, t, i: lib.take_along_dim(t, i, -1), C3, np.argsort(C3, -1)[:1])
    compare_error(lambda lib, t, i: lib.take_along_dim(t, i, 1), A, np.array([0, 1]))
    for dims in ((2,), (2, 1), (1, 2, 3), [3]):
        compare(lambda lib, t: lib.tile(t, dims), A)
        compare(lambda lib, t: t.tile(dims), np.ones((), np.float32))


def test_products():
    compare(lambda lib, a, b: lib.cross(a, b, dim=1), V3, W3)
    compare(lambda lib, a, b: lib.linalg.cross(a, b), V3, W3[:1])
    compare(lambda lib, a, b: a.cross(b, -1), V3, W3)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        compare(lambda lib, a, b: lib.cross(a, b), V3.T.copy(), W3.T.copy())
    compare_error(lambda lib, a, b: lib.cross(a, b, dim=0), V3, W3)
    compare_error(lambda lib, a, b: lib.linalg.cross(a, b), r(3), r(1, 3))
    compare_error(lambda lib, a, b: lib.linalg.cross(a, b), r(3), np.arange(3))
    compare(lambda lib, a, b: lib.inner(a, b), A, B)
    compare(lambda lib, a, b: a.inner(b), r(4), C3)
    compare(lambda lib, a, b: lib.inner(a, b), np.ones((), np.float32), A)
    compare(lambda lib, a, b: lib.inner(a, b), INTS, INTS)
    compare_error(lambda lib, a, b: lib.inner(a, b), r(2), r(3))
    compare_error(lambda lib, a, b: lib.inner(a, b), np.arange(2), r(2))
    for dims, b in ((0, r(2, 5)), (1, r(2, 5)), (2, r(3, 2, 5)), (([1, 0], [0, 2]), r(3, 2, 4)),
                    ([[-1], [1]], r(3, 2, 5))):
        compare(lambda lib, x, y: lib.tensordot(x, y, dims), r(4, 3, 2), b, rtol=1e-4)
    compare_error(lambda lib, a, b: lib.tensordot(a, b, -1), A, B)
    compare_error(lambda lib, a, b: lib.tensordot(a, b, ([1], [0])), A, B)
    compare(lambda lib, a, b: lib.vdot(a, b), r(4), r(4))
    compare(lambda lib, t: lib.trace(t), A)
    compare(lambda lib, t: t.trace(), INTS)
    compare_error(lambda lib, t: lib.trace(t), r(3))
    assert isinstance(llgrad.trace(lambda x: x * 2, llgrad.ones(2)), llgrad.ir.Graph)


def test_chains_and_scaled_products():
    mats = [r(2, 3), r(3, 4), r(4, 5), r(5, 2), r(2, 6)]
    for n in (2, 3, 4, 5):
        compare(lambda lib, ms: lib.linalg.multi_dot(ms), mats[:n], rtol=1e-4)
    compare(lambda lib, ms: lib.linalg.multi_dot(ms), [r(3), r(3, 4), r(4)], rtol=1e-4)
    compare(lambda lib, ms: lib.linalg.multi_dot(ms), [r(3), r(3, 4)], rtol=1e-4)
    compare_error(lambda lib, ms: lib.linalg.multi_dot(ms), [r(3)])
    compare_error(lambda lib, ms: lib.linalg.multi_dot(ms), [r(3), r(3, 3, 3)])
    with pytest.warns(UserWarning, match="deprecated"):
        llgrad.runtime.functions_linalg._warned_chain_matmul = False
        compare(lambda lib, a, b, c: lib.chain_matmul(a, b, c), *mats[:3], rtol=1e-4)
    compare(lambda lib, a: lib.chain_matmul(a), mats[0])
    compare_error(lambda lib: lib.chain_matmul())
    compare_error(lambda lib, a, b: lib.chain_matmul(a, b), r(3), r(3, 2))
    for beta, alpha in ((1, 1), (0.5, 2.0), (0, 1)):
        compare(lambda lib, i, m, v: lib.addmv(i, m, v, beta=beta, alpha=alpha), r(2), r(2, 3),
                r(3))
        compare(lambda lib, i, a, b: lib.addr(i, a, b, beta=beta, alpha=alpha), r(2, 3), r(2),
                r(3))
        compare(lambda lib, i, a, b: lib.addbmm(i, a, b, beta=beta, alpha=alpha), r(2, 4),
                r(3, 2, 5), r(3, 5, 4), rtol=1e-4)
    nan_input = np.full(2, np.nan, np.float32)
    compare(lambda lib, i, m, v: i.addmv(m, v, beta=0), nan_input, r(2, 3), r(3))
    compare(lambda lib, i, a, b: lib.addr(i, a, b), np.zeros((2, 3), bool),
            np.array([True, False]), np.array([True, False, True]))
    compare(lambda lib, i, a, b: lib.addr(i, a, b, alpha=2), INTS[:2, :3], np.arange(2),
            np.arange(3))
    compare_error(lambda lib, i, a, b: lib.addr(i, a, b, alpha=2.5), INTS[:2, :3],
                  np.arange(2), np.arange(3))
    compare_error(lambda lib, i, m, v: lib.addmv(i, m, v), r(2), r(2, 3), r(2))
    compare_error(lambda lib, i, m, v: lib.addmv(i, m, v), np.arange(2), r(2, 3), r(3))
    compare_error(lambda lib, i, m, v: lib.addmv(i, m, v), r(2), r(2, 3, 4), r(3))
    compare_error(lambda lib, i, a, b: lib.addr(i, a, b), r(2), r(2, 2), r(2))
    compare_error(lambda lib, i, a, b: lib.addbmm(i, a, b), r(2, 2), r(2, 2, 2), r(3, 2, 2))
    for name, args in (("addmv_", (r(2, 3), r(3))), ("addr_", (r(2), r(3))),
                       ("addbmm_", (r(3, 2, 5), r(3, 5, 3))), ("addmm_", (r(2, 5), r(5, 3)))):
        i = r(2) if name == "addmv_" else r(2, 3)

        def fn(lib, t, *ops):
            u = t * 1
            assert getattr(u, name)(*ops, beta=0.5, alpha=2) is u
            return u
        compare(fn, i, *args, rtol=1e-4)


def test_matrix_power():
    m = (r(3, 3) / 2).astype(np.float32)
    for n in range(0, 8):
        compare(lambda lib, t: lib.matrix_power(t, n), m, rtol=1e-4, atol=1e-5)
        compare(lambda lib, t: lib.linalg.matrix_power(t, n), r(2, 3, 3) / 2, rtol=1e-4)
    compare(lambda lib, t: t.matrix_power(3), INTS[:3, :3])
    compare(lambda lib, t: lib.matrix_power(t, 0), INTS[:3, :3])
    compare_error(lambda lib, t: lib.matrix_power(t, 2), A)
    compare_error(lambda lib, t: lib.matrix_power(t, 0), r(3))
    compare(lambda lib, t: lib.matrix_power(t, -2), m + 2 * np.eye(3, dtype=np.float32),
            rtol=1e-4, atol=1e-5)


def test_statistics_and_distances():
    x = r(3, 6)
    compare(lambda lib, t: lib.cov(t), x)
    compare(lambda lib, t: t.cov(correction=0), x)
    compare(lambda lib, t: lib.cov(t), np.array([1, 2, 4]))
    compare(lambda lib, t, f, a: lib.cov(t, fweights=f, aweights=a), x,
            np.array([1, 2, 1, 3, 1, 1]), np.abs(r(6)) + 0.1)
    compare(lambda lib, t, a: lib.cov(t, correction=2, aweights=a), x, np.abs(r(6)) + 0.1)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        compare(lambda lib, t: lib.cov(t), r(2, 1))
    compare_error(lambda lib, t: lib.cov(t), C3)
    compare_error(lambda lib, t, f: lib.cov(t, fweights=f), x, np.ones(6, np.float32))
    compare_error(lambda lib, t, f: lib.cov(t, fweights=f), x, -np.ones(6, np.int64))
    compare(lambda lib, t: lib.corrcoef(t), x)
    compare(lambda lib, t: t.corrcoef(), r(5))
    compare(lambda lib, y: lib.trapezoid(y), A)
    compare(lambda lib, y, t: lib.trapezoid(y, t), A, np.cumsum(np.abs(r(4))))
    compare(lambda lib, y, t: lib.trapezoid(y, t, dim=0), A, np.abs(r(3, 4)))
    compare(lambda lib, y: lib.trapezoid(y, dx=0.5, dim=0), A)
    compare(lambda lib, y: lib.trapz(y), INTS)
    compare(lambda lib, y: lib.trapezoid(y), np.zeros((2, 0), np.float32))
    compare(lambda lib, y: lib.cumulative_trapezoid(y), A)
    compare(lambda lib, y, t: lib.cumulative_trapezoid(y, t), A, np.cumsum(np.abs(r(4))))
    compare(lambda lib, y: lib.cumulative_trapezoid(y, dx=2, dim=0), A)
    compare_error(lambda lib, y: lib.trapezoid(y), np.array([True, False]))
    compare_error(lambda lib, y, t: lib.trapezoid(y, t), A, r(3))
    for p in (2.0, 1.0, 0.0, 3.0, float("inf")):
        compare(lambda lib, a, b: lib.cdist(a, b, p=p), r(4, 3), r(5, 3), rtol=1e-4)
    compare(lambda lib, a, b: lib.cdist(a, b), r(2, 4, 3), r(5, 3), rtol=1e-4)
    same = r(3, 2)
    compare(lambda lib, a, b: lib.cdist(a, b), same, same.copy(), atol=1e-3)
    compare_error(lambda lib, a, b: lib.cdist(a, b), r(2, 3), r(4, 2))
    compare_error(lambda lib, a, b: lib.cdist(a, b), r(3), r(4, 3))
    compare_error(lambda lib, a, b: lib.cdist(a, b, p=-1), r(2, 3), r(4, 3))
    compare_error(lambda lib, a, b: lib.cdist(a, b), INTS, INTS)
    for p in (2, 1, 0, float("inf"), 3):
        # (PyTorch's backward of p = 0 fails: "Expected a proper Tensor but got None")
        compare(lambda lib, a, b: lib.dist(a, b, p), A, B, rtol=1e-4, grad=p != 0)
    compare(lambda lib, a, b: a.dist(b), A, B[0])
    compare_error(lambda lib, a, b: lib.dist(a, b), INTS, INTS)


def test_torch_names_of_nn_functions():
    x = r(2, 4, 6, 6)
    w = r(3, 4, 3, 3)
    compare(lambda lib, t, k, b: lib.conv2d(t, k, b, 1, 1), x, w, r(3), rtol=1e-4)
    compare(lambda lib, t, k: lib.conv1d(t, k, None, 2), r(2, 4, 9), r(3, 4, 3), rtol=1e-4)
    compare(lambda lib, t, k: lib.conv_transpose2d(t, k, stride=2), x, r(4, 2, 3, 3),
            rtol=1e-4)
    compare(lambda lib, t, k: lib.conv_transpose1d(t, k, padding=1), r(2, 4, 5), r(4, 3, 3),
            rtol=1e-4)
    compare(lambda lib, t, g, b: lib.layer_norm(t, [6], g, b, 1e-5, True), x, r(6), r(6),
            rtol=1e-4)
    compare(lambda lib, t, g, b: lib.group_norm(t, 2, g, b), x, r(4), r(4), rtol=1e-4)
    compare(lambda lib, t, g: lib.rms_norm(t, [6, 6], g), x, r(6, 6), rtol=1e-4)
    rm, rv = np.zeros(4, np.float32), np.ones(4, np.float32)
    compare(lambda lib, t, g, b, m, v: lib.batch_norm(t, g, b, m, v, False, 0.1, 1e-5, False),
            x, r(4), r(4), rm, rv, rtol=1e-4, grad=False)
    compare(lambda lib, t, g, b: lib.batch_norm(t, g, b, None, None, True, 0.1, 1e-5, False),
            x, r(4), r(4), rtol=1e-4)
    compare(lambda lib, t: lib.instance_norm(t, None, None, None, None, True, 0.1, 1e-5,
                                             False), x, rtol=1e-4)
    compare(lambda lib, t: lib.dropout(t, 0.0, True), A)
    compare(lambda lib, t: lib.dropout(t, 0.7, False), A)
    compare(lambda lib, wt, i: lib.embedding(wt, i), r(5, 3), np.array([[0, 4], [2, 2]]))
    compare(lambda lib, wt, i: lib.embedding(wt, i, 2), r(5, 3), np.array([[0, 4], [2, 2]]))
    compare(lambda lib, t, wt: lib.prelu(t, wt), x, r(4))
    compare(lambda lib, t, wt: t.prelu(wt), x, r(1))
    compare(lambda lib, a, b: lib.cosine_similarity(a, b), A, B)
    compare(lambda lib, a, b: lib.pairwise_distance(a, b, 1.0), A, B)
    compare(lambda lib, t: lib.hardshrink(t, 0.3), A)
    compare(lambda lib, t: t.hardshrink(), A)
    compare(lambda lib, t: lib.threshold(t, 0.1, 2.0), A)
    compare(lambda lib, t: lib.threshold_(t * 1, 0.1, 2.0), A)       # (masked by the input)
    compare(lambda lib, t: (lib.celu(t, 0.5), lib.selu(t), lib.celu_(t * 1), lib.selu_(t * 1)),
            A)
    compare(lambda lib, t: lib.max_pool2d(t, 2), x)
    compare(lambda lib, t: lib.avg_pool1d(t, 2), r(2, 3, 8))
    compare(lambda lib, t: lib.adaptive_avg_pool1d(t, 3), r(2, 3, 8))
    compare(lambda lib, t: lib.adaptive_max_pool1d(t, 3), r(2, 3, 8))
    compare(lambda lib, t: lib.constant_pad_nd(t, [1, 2], 1.5), A)
    compare(lambda lib, a, b: lib.binary_cross_entropy_with_logits(a, b, None, None, 2), A,
            np.abs(B) / 3)
    compare(lambda lib, t: lib.relu_(t * 1), A)
    compare(lambda lib, t: lib.sigmoid_(t * 1), A)


def test_pixel_and_channel_shuffles_and_bilinear():
    F = "nn.functional"
    for name, arg, x in (("pixel_shuffle", 2, r(2, 8, 3, 3)), ("pixel_shuffle", 3, r(9, 2, 1)),
                         ("pixel_unshuffle", 2, r(2, 2, 4, 6)),
                         ("pixel_unshuffle", 1, r(3, 2, 2)),
                         ("channel_shuffle", 2, r(2, 4, 3)),
                         ("channel_shuffle", 3, r(1, 6, 2, 2))):
        compare(lambda lib, t: getattr(lib, name)(t, arg), x)
        compare(lambda lib, t: getattr(lib.nn.functional, name)(t, arg), x)
    assert F
    for cls, arg, x in (("PixelShuffle", 2, r(2, 8, 3, 3)), ("PixelUnshuffle", 2,
                                                              r(2, 2, 4, 6)),
                        ("ChannelShuffle", 2, r(2, 4, 3))):
        compare(lambda lib, t: getattr(lib.nn, cls)(arg)(t), x)
        assert repr(getattr(llgrad.nn, cls)(arg)) == repr(getattr(torch.nn, cls)(arg))
    compare_error(lambda lib, t: lib.pixel_shuffle(t, 2), r(1, 6, 1, 1))
    compare_error(lambda lib, t: lib.pixel_shuffle(t, 2), r(8, 1))
    compare_error(lambda lib, t: lib.pixel_shuffle(t, 0), r(1, 8, 1, 1))
    compare_error(lambda lib, t: lib.pixel_unshuffle(t, 2), r(1, 1, 3, 2))
    compare_error(lambda lib, t: lib.channel_shuffle(t, 3), r(1, 4, 2))
    compare_error(lambda lib, t: lib.channel_shuffle(t, 2), r(8))
    for a, b in ((r(5, 2), r(5, 3)), (r(2), r(3)), (r(5, 7, 2), r(5, 7, 3))):
        compare(lambda lib, x1, x2, wt, bb: lib.bilinear(x1, x2, wt, bb), a, b, r(4, 2, 3),
                r(4), rtol=1e-4)
        compare(lambda lib, x1, x2, wt: lib.nn.functional.bilinear(x1, x2, wt), a, b,
                r(4, 2, 3), rtol=1e-4)
    compare_error(lambda lib, a, b, w: lib.bilinear(a, b, w), r(5, 2), r(5, 3), r(4, 2, 2))
    compare_error(lambda lib, a, b, w: lib.bilinear(a, b, w), r(5, 2), r(6, 3), r(4, 2, 3))
    m = llgrad.nn.Bilinear(2, 3, 4)
    assert repr(m) == repr(torch.nn.Bilinear(2, 3, 4))
    assert tuple(m.weight.shape) == (4, 2, 3) and tuple(m.bias.shape) == (4,)
    assert float(m.weight.abs().max()) <= 2 ** -0.5
    assert tuple(m(llgrad.ones(5, 2), llgrad.ones(5, 3)).shape) == (5, 4)
    assert llgrad.nn.Bilinear(2, 3, 4, bias=False).bias is None
