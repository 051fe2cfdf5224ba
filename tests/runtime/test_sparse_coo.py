"""Sparse COO tensors against torch's: construction and its checks, printing, coalesce,
products with dense matrices both ways and their gradients (also float64 finite
differences), the sparse forms of scaling / adding / transposing, the dense reading other ops
get, save / load both ways, and compile's eager run for a sparse input."""
import io
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.autograd import gradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks")

I = [[0, 1, 1, 0], [2, 0, 2, 2]]          # (one duplicate entry: (0, 2) twice)
V = [3., 4., 5., 1.]


def _both(fn):
    """fn(lib) for llgrad and torch, each result as NumPy (dense) or text."""
    out = []
    for lib in (llgrad, torch):
        lib.manual_seed(0)
        r = fn(lib)
        if isinstance(r, (llgrad.Tensor, torch.Tensor)):
            r = (r.to_dense() if r.is_sparse else r).detach().numpy()
        elif isinstance(r, str):
            r = r.replace("torch.", "llgrad.")
        out.append(r)
    return out


CASES = {
    "repr": lambda L: repr(L.sparse_coo_tensor(I, V, (2, 3))),
    "repr coalesced": lambda L: repr(L.sparse_coo_tensor(I, V, (2, 3)).coalesce()),
    "repr int64": lambda L: repr(L.sparse_coo_tensor(I, L.ones(4), (2, 3), dtype=L.int64)),
    "repr float64": lambda L: repr(L.sparse_coo_tensor(I, V, (2, 3)).double()),
    "repr empty": lambda L: repr(L.zeros(2, 2).to_sparse()),
    "repr hybrid": lambda L: repr(L.sparse_coo_tensor([[0, 1]], L.ones(2, 3))),
    "repr requires grad": lambda L: repr(L.sparse_coo_tensor(I, V, requires_grad=True)),
    "to_sparse": lambda L: repr(L.tensor([[0., 1.5], [2., 0.], [0., 0.]]).to_sparse()),
    "to_sparse(1)": lambda L: repr(L.tensor([[0., 1.5], [0., 0.], [2., 0.]]).to_sparse(1)),
    "inferred size": lambda L: tuple(L.sparse_coo_tensor(I, V).shape),
    "queries": lambda L: (lambda s: (s._nnz(), s.sparse_dim(), s.dense_dim(), s.is_coalesced(),
                                     s.coalesce().is_coalesced(), s.is_sparse, len(s),
                                     str(s.layout).split(".")[1], s.dim()))(
        L.sparse_coo_tensor(I, V, (2, 3))),
    "to_dense": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).to_dense(),
    "coalesce values": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).coalesce().values(),
    "coalesce indices": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).coalesce().indices(),
    "mm": lambda L: L.mm(L.sparse_coo_tensor(I, V, (2, 3)), L.randn(3, 4)),
    "spmm": lambda L: L.spmm(L.sparse_coo_tensor(I, V, (2, 3)), L.randn(3, 4)),
    "sparse.mm": lambda L: L.sparse.mm(L.sparse_coo_tensor(I, V, (2, 3)), L.randn(3, 4)),
    "@ vector": lambda L: L.sparse_coo_tensor(I, V, (2, 3)) @ L.arange(3.),
    "dense @ sparse": lambda L: L.randn(5, 2) @ L.sparse_coo_tensor(I, V, (2, 3)),
    "dense @ sparse strides": lambda L: (L.randn(5, 2) @ L.sparse_coo_tensor(I, V, (2, 3))
                                         ).stride(),
    "mm(dense, sparse)": lambda L: L.mm(L.randn(5, 2), L.sparse_coo_tensor(I, V, (2, 3))),
    "sparse @ sparse": lambda L: L.sparse_coo_tensor(I, V, (2, 3)) @ L.eye(3).to_sparse(),
    "sparse.addmm": lambda L: L.sparse.addmm(L.ones(2, 4), L.sparse_coo_tensor(I, V, (2, 3)),
                                             L.randn(3, 4), beta=0.5, alpha=2.0),
    "dense + sparse": lambda L: L.eye(2, 3) + L.sparse_coo_tensor(I, V, (2, 3)),
    "add(dense, sparse)": lambda L: L.add(L.eye(2, 3), L.sparse_coo_tensor(I, V, (2, 3))),
    "sparse * 2": lambda L: L.sparse_coo_tensor(I, V, (2, 3)) * 2,
    "2 * sparse": lambda L: 2 * L.sparse_coo_tensor(I, V, (2, 3)),
    "sparse / 0": lambda L: L.sparse_coo_tensor(I, V, (2, 3)) / 0,
    "int sparse / 2": lambda L: L.sparse_coo_tensor(I, [1, 2, 3, 4], (2, 3)) / 2,
    "sparse * dense": lambda L: L.sparse_coo_tensor(I, V, (2, 3)) * L.arange(6.).view(2, 3),
    "dense * sparse": lambda L: L.arange(6.).view(2, 3) * L.sparse_coo_tensor(I, V, (2, 3)),
    "sparse + sparse": lambda L: L.sparse_coo_tensor(I, V, (2, 3)) + L.eye(2, 3).to_sparse(),
    "sparse - sparse": lambda L: L.sparse_coo_tensor(I, V, (2, 3)) - L.eye(2, 3).to_sparse(),
    "-sparse": lambda L: -L.sparse_coo_tensor(I, V, (2, 3)),
    "t": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).t(),
    "transpose": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).transpose(0, 1),
    "sum": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).sum(),
    "sparse.sum": lambda L: L.sparse.sum(L.sparse_coo_tensor(I, V, (2, 3))),
    "sum(dim)": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).sum(1),
    "mul_": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).mul_(3),
    "to float64": lambda L: str(L.sparse_coo_tensor(I, V, (2, 3)).to(L.float64).dtype),
    "long": lambda L: L.sparse_coo_tensor(I, V, (2, 3)).long(),
    "select": lambda L: L.sparse_coo_tensor(I, V, (2, 3))[1],
    "sparse_mask": lambda L: L.arange(6.).view(2, 3).sparse_mask(L.sparse_coo_tensor(I, V, (2, 3))),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_torch(name):
    a, b = _both(CASES[name])
    if isinstance(b, np.ndarray):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    else:
        assert a == b


def _grads(lib, sparse_mm):
    lib.manual_seed(0)
    v = lib.tensor(V, requires_grad=True)
    d = lib.randn(3, 4, requires_grad=True)
    w = lib.randn(5, 2, requires_grad=True)
    s = lib.sparse_coo_tensor(I, v, (2, 3))
    y = (lib.sparse.mm(s, d) if sparse_mm else lib.mm(s.detach(), d))
    ((w @ s.detach()).pow(2).sum() + (y * y).sum()).backward()
    return [t.grad.numpy() if t.grad is not None else None for t in (v, d, w)]


@pytest.mark.parametrize("sparse_mm", [False, True])
def test_gradients_match_torch(sparse_mm):
    for a, b in zip(_grads(llgrad, sparse_mm), _grads(torch, sparse_mm)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_leaf_gradient_is_sparse_like_torchs():
    def run(lib):
        lib.manual_seed(0)
        s = lib.sparse_coo_tensor(I, V, (2, 3), requires_grad=True)
        lib.sparse.mm(s, lib.randn(3, 2)).pow(2).sum().backward()
        return s.grad
    a, b = run(llgrad), run(torch)
    assert a.is_sparse and b.is_sparse
    np.testing.assert_allclose(a.to_dense().numpy(), b.to_dense().numpy(), rtol=1e-5)


def test_gradcheck_products_and_to_dense():
    idx = llgrad.tensor(I)

    fixed = llgrad.sparse_coo_tensor(idx, V, (2, 3), dtype=llgrad.float64)

    def f(v, d, w):
        s = llgrad.sparse_coo_tensor(idx, v, (2, 3))
        return (llgrad.sparse.mm(s, d), w @ fixed, llgrad.mm(fixed, d), s.to_dense(),
                s.coalesce().to_dense())
    v = llgrad.tensor(V, dtype=llgrad.float64, requires_grad=True)
    d = llgrad.randn(3, 4, dtype=llgrad.float64, requires_grad=True)
    w = llgrad.randn(5, 2, dtype=llgrad.float64, requires_grad=True)
    assert gradcheck(f, (v, d, w))


@pytest.mark.parametrize("make, message", [
    (lambda L: L.sparse_coo_tensor(I, V, (1, 3)), "size is inconsistent with indices"),
    (lambda L: L.sparse_coo_tensor(I, V[:2], (2, 3)), "indices and values must have same nnz"),
    (lambda L: L.sparse_coo_tensor([[0, -1]], [1., 2.], (2,)), "found negative index"),
    (lambda L: L.sparse_coo_tensor(I, V, (2, 3)) + L.ones(2, 3), "add(sparse, dense)"),
    (lambda L: L.mm(L.sparse_coo_tensor(I, V, (2, 3)), L.ones(4, 4)), "Expected dim 0 size 3"),
    (lambda L: L.sparse_coo_tensor(I, V, (2, 3)).values(), "uncoalesced"),
])
def test_errors_as_torchs(make, message):
    for lib in (llgrad, torch):
        if lib is torch and message in ("size is inconsistent with indices",
                                        "found negative index"):
            continue        # (torch checks these only with its invariant checks on)
        with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            make(lib)


def test_no_silent_loss_of_the_values_gradient():
    v = llgrad.tensor(V, requires_grad=True)
    s = llgrad.sparse_coo_tensor(I, v, (2, 3))
    with pytest.raises(NotImplementedError, match="to_dense"):
        s.exp()
    with pytest.raises(NotImplementedError, match="sparse.mm"):
        llgrad.mm(llgrad.sparse_coo_tensor(I, V, requires_grad=True), llgrad.ones(3, 2))
    with pytest.raises(TypeError, match="to_dense"):
        s.detach().numpy()


def test_dense_reading_follows_writes_to_the_values():
    s = llgrad.sparse_coo_tensor(I, V, (2, 3))
    before = s.exp().numpy().copy()
    s._values().mul_(0)
    np.testing.assert_array_equal(s.exp().numpy(), np.ones((2, 3), np.float32))
    assert not np.array_equal(before, np.ones((2, 3)))
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        s.add_(1)       # (torch's error; sparse += sparse: tests/test_api_s63_a6_sparse_grad)
    with pytest.raises(RuntimeError, match="read-only"):     # (its dense reading)
        s[0] = 1.0


def test_save_and_load_both_ways():
    s = llgrad.sparse_coo_tensor(I, V, (2, 3))
    buf = io.BytesIO()
    llgrad.save({"adj": s}, buf)
    buf.seek(0)
    back = torch.load(buf)["adj"]
    assert back.is_sparse
    np.testing.assert_array_equal(back.to_dense().numpy(), s.to_dense().numpy())
    buf = io.BytesIO()
    torch.save({"adj": torch.sparse_coo_tensor(I, V, (2, 3))}, buf)
    buf.seek(0)
    mine = llgrad.load(buf)["adj"]
    assert mine.is_sparse and not mine.is_coalesced()
    np.testing.assert_array_equal(mine.to_dense().numpy(), s.to_dense().numpy())


def test_compile_takes_a_captured_sparse_tensor_guarded_by_its_entries():
    # (a GCN's normalised adjacency captured by its step: compiled, not run eagerly; the
    # sparse ops read its indices and values in NumPy, so new entries trace again)
    s = llgrad.sparse_coo_tensor(I, V, (2, 3))
    w = llgrad.ones(3, 2, requires_grad=True)

    def step():
        return (llgrad.sparse.mm(s, w) + llgrad.mm(s, w)).sum() + s.to_dense().sum()
    f = llgrad.compile(step)
    expected = llgrad.ones(3, 2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(5):
            if k == 2:
                s.mul_(2)
            if k == 3:
                s = llgrad.sparse_coo_tensor(llgrad.tensor([[0, 1, 0, 1], [2, 0, 1, 1]]), V, (2, 3))
            got = f()
            got.backward()
            want = (llgrad.sparse.mm(s, expected) + llgrad.mm(s, expected)).sum() + \
                s.to_dense().sum()
            want.backward()
            assert got.item() == want.item()
            np.testing.assert_array_equal(w.grad.numpy(), expected.grad.numpy())
    assert f.entries and len(f.entries) == 3


def test_compile_runs_a_sparse_tensor_requiring_grad_eagerly_with_its_reason():
    s = llgrad.sparse_coo_tensor(I, V, (2, 3)).requires_grad_()
    w = llgrad.ones(3, 2)

    def step():
        return llgrad.sparse.mm(s, w).sum()
    f = llgrad.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            f().backward()
    assert any("s is a sparse tensor that requires grad" in str(c.message) for c in caught), \
        [str(c.message) for c in caught]
    e = llgrad.sparse_coo_tensor(I, V, (2, 3)).requires_grad_()
    for _ in range(3):
        llgrad.sparse.mm(e, w).sum().backward()
    np.testing.assert_array_equal(s.grad.to_dense().numpy(), e.grad.to_dense().numpy())


def test_compile_of_a_sparse_tensor_made_inside_runs_eagerly():
    w = llgrad.randn(2, 2)
    f = llgrad.compile(lambda x: llgrad.sparse.mm(x.to_sparse(), w).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for scale in (1.0, 2.0, 3.0):
            x = scale * llgrad.eye(2)
            assert f(x).item() == pytest.approx((x @ w).sum().item(), rel=1e-6)


def test_compile_of_an_in_place_write_to_a_captured_sparse_tensor_runs_eagerly():
    # (compiled code takes the entries as inputs and cannot give back new ones: the write
    # breaks the trace, and each call scales the tensor as eager does)
    w = llgrad.ones(3, 2)
    got, want = [], []
    for compiled in (False, True):
        s = llgrad.sparse_coo_tensor(I, V, (2, 3))

        def step():
            s.mul_(0.5)
            return llgrad.sparse.mm(s, w).sum()
        f = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (got if compiled else want).extend(f().item() for _ in range(3))
        if compiled:
            assert any("writes a sparse tensor in place" in str(c.message) for c in caught)
    assert got == want == [13.0, 6.5, 3.25]
