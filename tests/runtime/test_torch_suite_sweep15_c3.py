"""Sweep 15 (C, part 3), compared with torch: as_strided's gradient when the input overlaps
itself (an expanded input: PyTorch shares each storage element's gradient among its copies),
eager and compiled; Tensor.untyped_storage() read and written as bytes; resize_ with a memory
format; and writes to inputs through views inside llgrad.compile equal to eager's."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

# (prepare the input, size, stride, offset, input numel)
AS_STRIDED = [
    ("view", lambda x: x.view(5, 5), [3, 3], [6, 2], 2, 25),
    ("crazy_stride_size1", None, [1, 2, 1, 5], [0, 5, 100, 1], 2, 12),
    ("expand_out", None, [3, 3, 3], [0, 1, 0], 2, 5),
    ("all_zero_strides", None, [3, 3, 3], [0, 0, 0], 4, 5),
    ("expanded_input", lambda x: x.expand(5, 5), [5, 5], [0, 1], 0, 5),
    ("overlapping_out", None, [6, 6], [5, 1], 2, 35),
    ("transpose", lambda x: x.view(3, 4), [4, 3], [1, 4], None, 12),
    ("select_of_expanded", lambda x: x.view(2, 3).expand(10, 2, 3), [2, 3], [3, 1], 0, 6),
    ("expanded_transposed", lambda x: x.view(1, 3).expand(4, 3).t(), [2, 3], [1, 0], 0, 3),
    ("expanded_sliced", lambda x: x.unsqueeze(1).expand(4, 3)[1:], [2, 2], [1, 0], 1, 4),
]


def _as_strided_loss(L, prep, size, stride, offset):
    def loss(x, w):
        return ((prep(x) if prep else x).as_strided(size, stride, offset) * w).sum()
    return loss


@pytest.mark.parametrize("case", AS_STRIDED, ids=[c[0] for c in AS_STRIDED])
def test_as_strided_grad_matches_torch(case):
    # (llgrad's gradient through an expanded input was the copies' count times too big)
    _, prep, size, stride, offset, n = case
    grads = []
    for L, comp in ((torch, False), (llgrad, False), (llgrad, True), (llgrad, True)):
        x = L.arange(float(n), dtype=L.float64, requires_grad=True)
        w = L.arange(float(np.prod(size)), dtype=L.float64).reshape(size) * 0.5 + 1
        f = _as_strided_loss(L, prep, size, stride, offset)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (a storage_offset makes compile run eagerly)
            (llgrad.compile(f) if comp else f)(x, w).backward()
        grads.append(x.grad.tolist())
    for g in grads[1:]:
        np.testing.assert_allclose(g, grads[0], rtol=1e-12)


@pytest.mark.parametrize("prep,size,stride,n", [
    (lambda x: x.expand(5, 5), (5, 5), (0, 1), 5),
    (lambda x: x.view(2, 3).expand(4, 2, 3), (3, 2), (1, 3), 6),
    (lambda x: x.view(1, 6).expand(3, 6).t(), (2, 3), (2, 1), 6),
])
def test_as_strided_of_expanded_compiled(prep, size, stride, n):
    grads = []
    for L, comp in ((torch, False), (llgrad, True), (llgrad, True)):
        x = L.arange(float(n), requires_grad=True)
        w = L.arange(float(np.prod(size))).reshape(size) + 1
        f = _as_strided_loss(L, prep, size, stride, None)
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # (compiled, not run eagerly)
            (llgrad.compile(f) if comp else f)(x, w).backward()
        grads.append(x.grad.tolist())
    assert grads[1] == grads[0] and grads[2] == grads[0]


def test_as_strided_expanded_gradcheck():
    x = llgrad.randn(3, dtype=llgrad.float64, requires_grad=True)
    assert llgrad.autograd.gradcheck(
        lambda t: t.expand(4, 3).as_strided((2, 2), (1, 1), 0), (x,))


# ---- untyped storage as bytes -------------------------------------------------------------

def _bytes_ops(L):
    a = L.arange(3, dtype=L.int16)
    s = a.untyped_storage()
    out = [s.nbytes(), s.size(), len(s), s.element_size(), s[1], s[-1], s.tolist(),
           s[0:2].data_ptr() == s.data_ptr(), list(s)[:2], s.is_shared(), str(s.device)]
    s[0] = 255
    s[2:4] = 7
    out.append(a.tolist())
    s[1] = 256 + 1                  # (bytes wrap modulo 256)
    out.append(a.tolist())
    out.append(s.fill_(1) is s)
    out.append(a.tolist())
    c = s.clone()
    c[0] = 0
    out += [a.tolist(), c.data_ptr() != s.data_ptr(), a._version]
    b = L.tensor([5., 6.])
    b.untyped_storage().copy_(L.tensor([1., 2.]).untyped_storage())
    out.append(b.tolist())
    out.append(_view_and_empty_nbytes(L))
    return out


def _view_and_empty_nbytes(L):
    t = L.arange(6.).reshape(3, 2)
    e = L.arange(3.)
    e.set_()
    return t[1:].untyped_storage().nbytes(), e.untyped_storage().nbytes()


def test_untyped_storage_bytes():
    # (llgrad's Storage had only data_ptr)
    assert _bytes_ops(llgrad) == _bytes_ops(torch)


@pytest.mark.parametrize("bad", [lambda s: s[6], lambda s: s[1.0],
                                 lambda s: s.copy_(s[0:2])])
def test_untyped_storage_errors(bad):
    errs = []
    for L in (torch, llgrad):
        with pytest.raises(Exception) as info:
            bad(L.arange(3, dtype=L.int16).untyped_storage())
        errs.append(type(info.value))
    assert errs[1].__name__ == errs[0].__name__


# ---- resize_ with a memory format ---------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda L: L.arange(120.).resize_(2, 3, 4, 5, memory_format=L.channels_last).stride(),
    lambda L: L.arange(720.).resize_(1, 2, 3, 4, 30, memory_format=L.channels_last_3d).stride(),
    lambda L: (lambda x: (x.resize_(2, 3, 4, 5, memory_format=L.channels_last).stride(),
                          x._version))(L.zeros(2, 3, 4, 5)),
    lambda L: (lambda y: (y.resize_(2, 3).stride(),
                          y.resize_(2, 3, memory_format=L.contiguous_format).stride()))(
        L.zeros(3, 2).t()),
    lambda L: (lambda z: (z.resize_(2, 3, 4, 5).stride(),
                          z.resize_(2, 3, 4, 5, memory_format=L.contiguous_format).stride()))(
        L.zeros(2, 3, 4, 5).contiguous(memory_format=L.channels_last)),
    lambda L: (lambda x: (x.resize_(6, memory_format=L.contiguous_format).tolist(), x._version))(
        L.arange(6.).reshape(2, 3).t().contiguous()),
    lambda L: L.arange(6.).resize_(2, 3, memory_format=L.preserve_format),
    lambda L: L.arange(6.).resize_(2, 3, memory_format=L.channels_last),
])
def test_resize_memory_format(call):
    # (llgrad raised for any memory_format)
    res = []
    for L in (torch, llgrad):
        try:
            res.append(call(L))
        except RuntimeError as e:
            res.append(("RuntimeError", str(e)))
    assert res[1] == res[0]


# ---- writes to inputs through views, compiled ---------------------------------------------

def _write_through_views(L, x, w):
    x[1] += 1
    x.t()[2].mul_(-1)
    x.diagonal().zero_()
    x.index_put_((L.tensor([0, 0]), L.tensor([3, 3])), L.tensor([1., 2.]), accumulate=True)
    x.view(-1)[::5].clamp_(max=0.5)
    x[x > 3] = 3.
    return (x @ w).sum()


def _masked_write(L, x, w):
    y = x * 1
    y.t()[1:].masked_fill_(y.t()[1:] > 0, 0.5)
    y[L.tensor([0, 0, 2])] = w[:1].expand(3, 4) * 2
    y.select(1, 0).mul_(3).add_(w[1, 1])
    return (y * y).sum()


@pytest.mark.parametrize("fn", [_write_through_views, _masked_write])
def test_compiled_writes_through_views_equal_eager(fn):
    rs = np.random.RandomState(3)
    x0, w0 = rs.randn(3, 4).astype(np.float32), rs.randn(4, 4).astype(np.float32)
    res = []
    for L, comp in ((torch, False), (llgrad, False), (llgrad, True), (llgrad, True)):
        x, w = L.tensor(x0), L.tensor(w0, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # (no fallback to eager)
            f = llgrad.compile(lambda a, b: fn(llgrad, a, b)) if comp else \
                (lambda a, b: fn(L, a, b))
            out = f(x, w)
        out.backward()
        res.append((out.item(), x.tolist(), w.grad.tolist()))
    for r in res[1:]:
        np.testing.assert_allclose(r[0], res[0][0], rtol=1e-5)
        np.testing.assert_allclose(r[1], res[0][1], rtol=1e-6)
        np.testing.assert_allclose(r[2], res[0][2], rtol=1e-5, atol=1e-6)
