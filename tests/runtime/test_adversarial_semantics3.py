"""Differential checks against PyTorch, third sweep: small programs run in torch and in
llgrad (and, where they are pure tensor programs, under llgrad.compile) whose values,
dtypes, shapes, requires_grad, grad_fn names, gradients, or exception types and first lines
must agree. Every case here failed before its fix: bool sign/abs, where's condition dtype,
argmax of bool, all/any of uint8, logsumexp of integers, arange/linspace/eye/full argument
errors and overflow checks, torch.tensor's dtype from NumPy float scalars, the dimension in
broadcast errors, x[i] = value with leading size-1 dims, index_add/index_put/gather/
masked_fill checks, index_select with a 0-d index, masked_scatter, embedding's padding_idx
check, normalize over several dims, float16 softmax."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _tensors(v):
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _tensors(e)]
    return [v]


def _observe(lib, fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", fn(lib)
    except Exception as e:      # noqa: BLE001 (the exception is what is compared)
        return "raise", (type(e).__name__, (str(e).splitlines() or [""])[0])


def _name(d):
    return str(d).split(".")[-1]


def _check_same(tv, lv, rtol=1e-5):
    for t, x in zip(_tensors(tv), _tensors(lv), strict=True):
        if isinstance(t, torch.Tensor):
            assert isinstance(x, llgrad.Tensor), type(x)
            assert tuple(x.shape) == tuple(t.shape), (x.shape, t.shape)
            assert _name(x.dtype) == _name(t.dtype), (x.dtype, t.dtype)
            assert x.requires_grad == t.requires_grad
            assert type(x.grad_fn).__name__ == type(t.grad_fn).__name__, (x.grad_fn, t.grad_fn)
            np.testing.assert_allclose(x.detach().numpy(), t.detach().numpy(), rtol=rtol,
                                       atol=1e-6, equal_nan=True)
        elif isinstance(t, torch.dtype):
            assert _name(x) == _name(t)
        else:
            assert x == t, (x, t)


def same(fn, message=True, rtol=1e-5):
    """fn(lib) in torch and in llgrad: the same tensors (values, shapes, dtypes,
    requires_grad, grad_fn names), or the same exception (type and, with message=True,
    first line)."""
    (tk, tv), (lk, lv) = _observe(torch, fn), _observe(llgrad, fn)
    assert tk == lk, (tv, lv)
    if tk == "raise":
        assert tv[0] == lv[0] and (not message or tv[1] == lv[1]), (tv, lv)
    else:
        _check_same(tv, lv, rtol)


def _grad(fn, *shape):
    """fn applied to a float leaf of the given shape: (result, the leaf's gradient of a
    weighted sum of the result)."""
    def program(L):
        n = int(np.prod(shape))
        x = L.tensor((np.arange(n) * 0.5 - 1.0).reshape(shape), dtype=L.float32)
        x.requires_grad_()
        y = fn(L, x)
        w = L.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), dtype=y.dtype)
        (y * w).sum().backward()
        return y, x.grad
    return program


# ---- elementwise dtypes and argument checks ------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([True, False]).sign(),
    lambda L: L.sgn(L.tensor([True, False])),
    lambda L: L.tensor([True, False]).abs(),
    lambda L: L.where(L.tensor([1, 0]), 1.0, 2.0),
    lambda L: L.tensor([1.0, 2.0]).where(L.tensor([1.0, 0.0]), 2.0),
    lambda L: L.where(L.tensor([1, 0], dtype=L.uint8), 1.0, 2.0),
    lambda L: L.ones(2, 3) + L.ones(2),                 # (the dim counts from the left)
    lambda L: L.ones(2, 1, 4) * L.ones(3, 5),
    lambda L: L.zeros(2, 3).copy_(L.ones(2)),
    lambda L: L.zeros(2, 3).copy_(L.ones(1, 2, 3)),
    lambda L: L.tensor([1, 2], dtype=L.uint8) > -1,      # (the number wraps into uint8)
    lambda L: L.tensor([1, 2], dtype=L.uint8) == 257,
    lambda L: -1 < L.tensor([1, 2], dtype=L.uint8),
    lambda L: L.tensor([1, 2], dtype=L.int8).ne(300),
])
def test_elementwise(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.ones(2, 3).flatten(1, 0),
    lambda L: L.ones(2, 3).flatten(-1, 0),
    lambda L: L.ones(2, 3).split(0),
    lambda L: L.ones(2, 3).split(-1),
    lambda L: L.ones(0, 3).split(0),
    lambda L: L.ones(2, 3).chunk(0),
    lambda L: L.ones(2, 3).chunk(-2, 1),
    lambda L: L.ones(3).mT,
    lambda L: L.ones(()).mT,
    lambda L: L.ones(2).type("torch.LongTensor"),     # (the same string in both programs)
    lambda L: L.ones(2).type("torch.Foo"),
])
def test_view_argument_checks(fn):
    same(fn)


@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin", "logical_and",
                                  "logical_or", "logical_xor", "hypot", "logaddexp",
                                  "logaddexp2", "ldexp", "dist", "isclose", "allclose", "equal",
                                  "heaviside", "outer", "dot", "kron", "cross", "cdist"])
def test_functions_that_take_only_tensors(name):
    """torch.maximum(x, 0) raises TypeError naming the argument (llgrad broadcast the
    number, or failed inside with an AttributeError)."""
    x = [1.0, 2.0, 3.0]
    same(lambda L: getattr(L, name)(L.tensor(x), 2))
    same(lambda L: getattr(L, name)(2.5, L.tensor(x)))
    if name not in ("cdist",):
        same(lambda L: getattr(L.tensor(x), name)(True))


# ---- reductions -----------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([1, 2]).logsumexp(0),
    lambda L: L.tensor([[True, False]]).logsumexp(1),
    lambda L: L.tensor([[True, False]]).argmax(1),
    lambda L: L.tensor([True, False]).argmin(),
    lambda L: L.tensor([1, 2], dtype=L.uint8).all(),
    lambda L: L.all(L.tensor([[1, 0]], dtype=L.uint8), 1, keepdim=True),
    lambda L: L.tensor([[1, 0]], dtype=L.uint8).any(0),
    lambda L: L.ones(2, 3).prod((0, 1)),
    lambda L: L.ones(2, 3).sum((0, -2)),
    lambda L: L.ones(2, 3).amax((1, 1)),
    lambda L: L.linalg.vector_norm(L.ones(2, 3), dim=(1, -1)),
    _grad(lambda L, x: (x * (x > 0)).prod(1), 2, 3),
    _grad(lambda L, x: x.prod(0, keepdim=True), 2, 3),
])
def test_reductions(fn):
    same(fn)


# ---- creation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda L: L.arange(5, 1),
    lambda L: L.arange(0, 10, -1),
    lambda L: L.arange(0, 1, 0),
    lambda L: L.arange(float("inf")),
    lambda L: L.arange(3, dtype=L.bool),
    lambda L: L.arange(L.tensor(3.5)),
    lambda L: L.arange(L.tensor(1), L.tensor(7), L.tensor(2)),
    lambda L: L.linspace(0, 1, -1),
    lambda L: L.eye(-1),
    lambda L: L.eye(2, -1),
    lambda L: L.full((2,), float("inf"), dtype=L.int32),
    lambda L: L.full((2,), 300, dtype=L.uint8),
    lambda L: L.full((2,), -1, dtype=L.uint8),
    lambda L: L.full((2,), 200, dtype=L.int8),
    lambda L: L.full((2,), 1e40),
    lambda L: L.tensor([300], dtype=L.uint8),
    lambda L: L.tensor([-1.5, 2.7], dtype=L.uint8),
    lambda L: L.tensor([[1, 2], [3, 2 ** 31]], dtype=L.int32),
    lambda L: L.tensor([float("nan")], dtype=L.int64),
    lambda L: L.tensor([-1, 5], dtype=L.uint8),
    lambda L: L.tensor([np.float64(1.5), 2]),
    lambda L: L.tensor([[1, np.float64(0.1)], [2, 3]]),
    lambda L: L.tensor([np.float32(1.5), 2.0]),
    lambda L: L.zeros(L.tensor(2)),
])
def test_creation(fn):
    same(fn)


# ---- indexing, gather/scatter, index_* -----------------------------------------------------
def _x(L):
    return L.arange(6.0).reshape(2, 3) - 2


def _written(write):
    def program(L):
        x = _x(L)
        write(L, x)
        return x
    return program


@pytest.mark.parametrize("fn", [
    _written(lambda L, x: x.__setitem__(0, L.tensor([[1.0, 2, 3]]))),
    _written(lambda L, x: x.__setitem__(0, L.tensor([[[1.0, 2, 3]]]))),
    _written(lambda L, x: x.__setitem__(slice(None), L.tensor([7.0, 8]))),
    _written(lambda L, x: x.__setitem__((slice(None), 1), L.tensor([[7.0, 8]]))),
    _written(lambda L, x: x.__setitem__(x > 0, L.tensor([[5.0]]))),
    _written(lambda L, x: x.__setitem__(0, 1e40)),
    _written(lambda L, x: x.index_put_((L.tensor([1]),), L.tensor(1.0, dtype=L.float64))),
    lambda L: _x(L).index_put((L.tensor([1]),), L.tensor([1, 2, 3])),
    lambda L: _x(L).gather(0, L.tensor([[0, 1, 0, 0]])),
    lambda L: _x(L).gather(-1, L.tensor([[1]]), sparse_grad=False),
    lambda L: L.zeros(2, 3).scatter_add(0, L.tensor([[0, 1, 0, 0]]), L.ones(2, 4)),
    lambda L: _x(L).index_select(0, L.tensor(1)),
    lambda L: _x(L).index_add(0, L.tensor([0, 2]), _x(L)),
    lambda L: _x(L).index_add(0, L.tensor([0, -1]), _x(L)),
    lambda L: _x(L).index_add(0, L.tensor([0.0, 1]), _x(L)),
    lambda L: _x(L).index_add(0, L.tensor([0, 1]), _x(L).double()),
    lambda L: _x(L).index_add(0, L.tensor([0]), _x(L)),
    lambda L: _x(L).index_add(0, L.tensor([[0, 1]]), _x(L)),
    lambda L: _x(L).index_add(0, L.tensor([1]), L.ones(1, 2)),
    lambda L: _x(L).index_add(0, L.tensor([1, 1], dtype=L.int32), _x(L), alpha=2),
    lambda L: L.tensor([1, 2]).index_add(0, L.tensor([0, 1]), L.tensor([1, 2]), alpha=2.5),
    lambda L: _x(L).masked_fill(L.tensor([True, False, True]), L.tensor([1.0])),
    lambda L: _x(L).masked_fill(L.tensor([True, False, True]), L.tensor(1)),
])
def test_indexing(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    _grad(lambda L, x: x.masked_scatter(x > 0, L.arange(6.0).reshape(2, 3) * 10), 2, 3),
    _grad(lambda L, x: L.zeros(2, 3).masked_scatter(L.tensor([True, False, True]), x), 2, 4),
    _grad(lambda L, x: L.masked_scatter(x, L.tensor([[True], [False]]), x * 2), 2, 3),
    _grad(lambda L, x: x.index_select(1, L.tensor(2)), 2, 3),
    _grad(lambda L, x: L.nn.functional.normalize(x, dim=(0, 1)), 2, 3),
    _grad(lambda L, x: L.nn.functional.normalize(x, p=1, dim=[-1]), 2, 3),
    lambda L: L.zeros(3).masked_scatter(L.ones(2, 3, dtype=L.bool), L.arange(6.0)),
    lambda L: _x(L).masked_scatter_(_x(L) > -5, L.arange(8.0)),
    lambda L: _x(L).masked_scatter(L.tensor([True, False, True]), L.ones(3)),
    lambda L: _x(L).masked_scatter(L.tensor([True, False, True]), L.ones(4).double()),
    lambda L: _x(L).masked_scatter(L.tensor([1, 0, 1]), L.ones(6)),
    lambda L: _x(L).masked_scatter(L.tensor([True, False]), L.ones(6)),
    lambda L: _x(L).masked_scatter(L.tensor(True), 1.0),
])
def test_masked_scatter_and_composites(fn):
    same(fn)


def test_masked_scatter_inplace_mask_must_broadcast_to_self():
    same(lambda L: L.zeros(3).masked_scatter_(L.ones(2, 3, dtype=L.bool), L.arange(6.0)),
         message=False)     # (PyTorch names the type CPUBoolType, llgrad llgrad.BoolTensor)


@pytest.mark.parametrize("fn", [
    lambda L: L.ones(2, 3, 4)[L.tensor([2])],
    lambda L: L.ones(2, 3, 4)[L.tensor([0]), L.tensor([5])],      # (dims count index tensors)
    lambda L: L.ones(2, 3, 4)[:, :, L.tensor([-7])],
    lambda L: L.ones(2, 3, 4)[0, L.tensor([7])],
    lambda L: L.ones(2, 3, 4)[L.ones(2, 3, dtype=L.bool), L.tensor([4])],
    lambda L: L.ones(2, 3).index_put_((L.tensor([3]),), L.tensor(1.0)),
    lambda L: L.ones(5)[::0],
    lambda L: L.cat([]),
    lambda L: L.stack([]),
    lambda L: L.cat([L.ones(2, 2), L.ones(2)], 1),
    lambda L: L.cat([L.ones(2, 3, 4), L.ones(2, 3, 5)], 0),
    lambda L: L.cat([L.ones(2, 2), L.tensor(1.0)], 1),
    lambda L: L.tensor([1, 2], requires_grad=True),
    lambda L: L.arange(3, requires_grad=True),
    lambda L: L.full((2,), 1, requires_grad=True),
    lambda L: L.tensor([1, 2]).requires_grad_(),
    lambda L: L.ones(2, 3).masked_fill(L.tensor([1, 0, 1]), 1.0),
])
def test_error_messages(fn):
    same(fn)


# ---- nn.functional ----------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda L: L.nn.functional.embedding(L.tensor([0, 2]), L.ones(4, 3), padding_idx=4),
    lambda L: L.nn.functional.embedding(L.tensor([0, 2]), L.ones(4, 3), padding_idx=-5),
    lambda L: L.nn.functional.embedding(L.tensor([5]), L.ones(4, 3), padding_idx=9),
    _grad(lambda L, x: L.nn.functional.embedding(L.tensor([[0, 3]]), x, padding_idx=-1), 4, 3),
    lambda L: L.nn.functional.binary_cross_entropy_with_logits(
        L.zeros(2, 3), L.zeros(2, 3), pos_weight=L.tensor([2.0, 3.0])),
])
def test_functional(fn):
    same(fn)


def test_float16_softmax_rounds_once():
    """PyTorch's float16 softmax accumulates in float32 and rounds once (NumPy's float16
    chain rounded each step: 0.3337 for 0.334)."""
    x = np.sin(np.arange(6) * 0.37 + 0.3).reshape(2, 3)
    for f in ("softmax",):
        t = getattr(torch.tensor(x).half(), f)(1)
        v = getattr(llgrad.tensor(x).half(), f)(1)
        assert v.dtype == llgrad.float16
        np.testing.assert_array_equal(v.numpy(), t.numpy())
        v = getattr(llgrad.nn.functional, f)(llgrad.tensor(x, dtype=llgrad.float32), 1,
                                            dtype=llgrad.float16)
        np.testing.assert_array_equal(v.numpy(), t.numpy())


# ---- the same programs compiled ------------------------------------------------------------
def _pure(L, a):
    return (a.long().logsumexp(1), a.to(L.uint8).all(0), a.sign().bool().sign(),
            a.to(L.uint8) > -1, a.to(L.uint8) == 257,
            a.index_select(1, L.tensor(0)), L.nn.functional.normalize(a, dim=(0, 1)),
            L.tensor([np.float64(0.5)]) * a[0, 0])


def _writes(L, a):
    b = a.clone()
    b[0] = a[1:, :] * 2
    b[:, 1] = L.tensor([[5.0, 6.0]])
    return b, b.index_add(0, L.tensor([1, 1]), a, alpha=0.5)


@pytest.mark.parametrize("program", [_pure, _writes])
def test_compiled_matches_eager_and_torch(program):
    x = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.5]], dtype=np.float32)

    def run(lib, wrap):
        a = lib.tensor(x).requires_grad_()
        out = wrap(lambda t: program(lib, t))(a)
        loss = sum((o.float() * 1.5).sum() for o in out if o.requires_grad)
        loss.backward()
        return list(out) + [a.grad]

    expect = run(torch, lambda f: f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for wrap in (lambda f: f, llgrad.compile):
            _check_same(expect, run(llgrad, wrap))
