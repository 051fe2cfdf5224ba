"""llgrad/runtime/functions_misc.py against PyTorch: searchsorted / bucketize, index_fill /
index_copy / put / fill_diagonal_, renorm, vander, logspace, unravel_index, the dtype
queries, and Tensor's aliases and attributes."""
import numpy as np
import pytest

from torch_compare import compare, compare_error

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402

rng = np.random.default_rng(9)


def r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


A = r(3, 4)
SEQ = np.array([1.0, 3.0, 3.0, 5.0], np.float32)
VALS = np.array([[0.0, 3.0, 4.0], [9.0, np.nan, 5.0]], np.float32)


def test_searchsorted_and_bucketize():
    for kw in ({}, {"right": True}, {"side": "right"}, {"out_int32": True}):
        compare(lambda lib, s, v: lib.searchsorted(s, v, **kw), SEQ, VALS)
        compare(lambda lib, v, b: lib.bucketize(v, b, **kw), VALS, SEQ) if "side" not in kw \
            else None
    batched = np.sort(r(2, 5), -1)
    compare(lambda lib, s, v: lib.searchsorted(s, v), batched, r(2, 3))
    compare(lambda lib, s: lib.searchsorted(s, 2), np.array([1, 3]))
    compare(lambda lib, b: lib.bucketize(3, b), np.array([1, 3]))
    compare(lambda lib, s, v, o: lib.searchsorted(s, v, sorter=o), np.array([5.0, 1.0, 3.0]),
            np.array([2.0, 4.0]), np.array([1, 2, 0]))
    compare_error(lambda lib, s, v: lib.searchsorted(s, v), batched, r(3))
    compare_error(lambda lib, v, b: lib.bucketize(v, b), r(3), np.sort(r(2, 2)))
    compare_error(lambda lib, s, v: lib.searchsorted(s, v, side="middle"), SEQ, VALS)


def test_index_fill_copy_put():
    i = np.array([2, 0])
    compare(lambda lib, t, k: lib.index_fill(t, 1, k, -1.5), A, i)
    compare(lambda lib, t, k, v: t.index_fill(0, k, v), A, np.array([1]), np.array(2.5,
                                                                                   np.float32))
    compare(lambda lib, t, k, s: lib.index_copy(t, 1, k, s), A, i, r(3, 2))
    compare(lambda lib, t, k, s: t.index_copy(-2, k, s), A, i, r(2, 4))
    compare(lambda lib, t, k, s: lib.put(t, k, s), A, np.array([0, -1, 5]), r(3))
    compare(lambda lib, t, k, s: t.put(k, s, accumulate=True), A, np.array([0, 0, 5]), r(3))
    for name, args in (("index_fill_", (1, np.array([3]), 0.5)),
                       ("index_copy_", (0, np.array([1]), r(1, 4))),
                       ("put_", (np.array([1, 2]), r(2)))):
        def fn(lib, t, *rest):
            u = t * 1
            ops = [lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
            assert getattr(u, name)(*ops) is u
            return u
        compare(fn, A)
    compare_error(lambda lib, t, k: lib.index_fill(t, 1, k, 0.0), A, np.array([0], np.int32))
    compare_error(lambda lib, t, k: lib.index_fill(t, 1, k, 0.0), A, np.array([[0]]))
    compare_error(lambda lib, t, k, s: lib.index_copy(t, 0, k, s), A, np.array([0], np.int32),
                  r(1, 4))
    compare_error(lambda lib, t, k, s: lib.index_copy(t, 0, k, s), A, np.array([[0]]), r(1, 4))


def test_fill_diagonal():
    for shape, wrap in (((3, 3), False), ((4, 3), True), ((7, 3), True), ((7, 3), False),
                        ((3, 5), False), ((2, 2, 2), False)):
        compare(lambda lib, t: (t * 1).fill_diagonal_(2.5, wrap=wrap), r(*shape))
    compare(lambda lib, t: t.fill_diagonal_(7), np.zeros((3, 3), np.int64))
    compare_error(lambda lib, t: t.fill_diagonal_(1.0), r(3))
    compare_error(lambda lib, t: t.fill_diagonal_(1.0), r(2, 3, 2))


def test_renorm_vander_logspace_unravel():
    for p, dim, maxnorm in ((2, 0, 1.0), (1, 1, 0.5), (3.0, -1, 10.0)):
        compare(lambda lib, t: lib.renorm(t, p, dim, maxnorm), A, rtol=1e-5)
        # (PyTorch's own backward of renorm_ fails: "modified by an inplace operation")
        compare(lambda lib, t: (t * 1).renorm_(p, dim, maxnorm), A, rtol=1e-5, grad=False)
    compare_error(lambda lib, t: lib.renorm(t, 2, 0, 1.0), r(3))
    for n in (None, 0, 1, 4):
        for inc in (False, True):
            # (PyTorch's own backward of vander fails: "modified by an inplace operation")
            compare(lambda lib, t: lib.vander(t, n, inc), r(3), grad=False)
            compare(lambda lib, t: lib.vander(t, N=n, increasing=inc), np.array([1, 2, 3]))
    compare(lambda lib, t: lib.vander(t), np.array([1, 2], np.int32))
    compare_error(lambda lib, t: lib.vander(t), A)
    for args in ((0, 2, 3), (-1, 1, 5, 2), (2, 0, 4, 3.0), (0, 1, 0)):
        compare(lambda lib: lib.logspace(*args))
    compare(lambda lib: lib.logspace(0, 1, 3, dtype=lib.float64))
    compare(lambda lib, i: lib.unravel_index(i, (2, 3)), np.array([5, 3, 0]))
    compare(lambda lib, i: lib.unravel_index(i, (4, 1, 3)), np.array([[11, 4]]))
    compare(lambda lib, i: lib.unravel_index(i, 6), np.array(5))


def test_dtype_queries_and_tensor_attributes():
    f, i = llgrad, torch
    for a, b in (("int32", "float32"), ("uint8", "int8"), ("bool", "int64"),
                 ("float16", "float64")):
        assert str(f.promote_types(getattr(f, a), getattr(f, b))).split(".")[-1] == \
            str(i.promote_types(getattr(i, a), getattr(i, b))).split(".")[-1]
        assert f.can_cast(getattr(f, a), getattr(f, b)) == \
            i.can_cast(getattr(i, a), getattr(i, b))
        assert f.can_cast(getattr(f, b), getattr(f, a)) == \
            i.can_cast(getattr(i, b), getattr(i, a))
    compare(lambda lib, t: str(lib.result_type(t, 1.0)).split(".")[-1], np.array([1]))
    compare(lambda lib, a, b: str(lib.result_type(a, b)).split(".")[-1], np.array([1]),
            np.array(2.0))
    compare(lambda lib: lib.scalar_tensor(3))
    compare(lambda lib: lib.scalar_tensor(3, dtype=lib.int64))
    x = np.array([[1.5, -2.0]], np.float32)
    compare(lambda lib, t: (t.ndimension(), t.nbytes, t.itemsize, t.is_cpu, t.get_device()), x)
    compare(lambda lib, t: (t.byte(), t.char(), t.short()), np.abs(x))
    compare(lambda lib, a, b: (a.equal(b), a.equal(a)), x, x * 2)
    for name, other in (("divide_", 2.0), ("true_divide_", 2.0), ("multiply_", 3.0),
                        ("subtract_", 1.0)):
        compare(lambda lib, t: getattr(t * 1, name)(other), x)
    for name in ("logical_and_", "logical_or_", "logical_xor_"):
        compare(lambda lib, a, b: getattr(a * 1, name)(b), np.array([0.0, 1.0, 2.0], np.float32),
                np.array([1.0, 0.0, 3.0], np.float32), grad=False)
    compare(lambda lib, t: (t * 1).cumsum_(1), x)
    compare(lambda lib, t, i, v: lib.index_put(t, (i,), v), x[0], np.array([1]), np.array([5.0],
                                                                                         np.float32))


def test_vander_gradient():
    x = llgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    llgrad.vander(x, 4).sum().backward()         # d/dx (1 + x + x^2 + x^3)
    assert x.grad.tolist() == [6.0, 17.0, 34.0]
