"""Adversarial comparisons with torch (sweep 59): in-place writes through views whose
elements share memory, order statistics at ties, gradients at the edges of their domain.
Each case runs the same snippet with `torch` bound to torch and to llgrad."""
import os
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _run(mod, code):
    ns = {"torch": mod}
    exec(code, ns)
    return ns["out"]


def _np(x):
    if x is None:
        return None
    if isinstance(x, (tuple, list)):
        return [_np(y) for y in x]
    return np.asarray(x.detach().float().numpy() if x.dtype in (torch.bfloat16, llgrad.bfloat16)
                      else x.detach().numpy())


def _same(code):
    want, got = _np(_run(torch, code)), _np(_run(llgrad, code))
    if not isinstance(want, list):
        want, got = [want], [got]
    assert len(want) == len(got)
    for w, g in zip(want, got):
        if w is None or g is None:
            assert w is None and g is None, code
            continue
        assert w.dtype == g.dtype and w.shape == g.shape, code
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=0, equal_nan=True, err_msg=code)


# ---- in-place ops on views whose elements share memory (no 0 stride) -----------------------
# PyTorch does not raise there (has_internal_overlap is "too hard"): its loop runs element by
# element, each reading what an earlier one wrote into the shared cell

OVERLAPPING = [
    "x = torch.arange(10.); x.as_strided((3, 3), (2, 1), 1).mul_(10); out = x",
    "x = torch.arange(10.); x.as_strided((3, 3), (1, 1)).add_(1); out = x",
    "x = torch.arange(10.); x.as_strided((3, 3), (1, 2), 1).add_(1); out = x",
    "x = torch.arange(10.); x.as_strided((3, 3), (2, 1), 1).copy_(torch.arange(9.).reshape(3, 3)); out = x",
    "x = torch.arange(10.); x.as_strided((3, 3), (1, 2)).copy_(torch.arange(9.).reshape(3, 3).t()); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).mul_(2); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).add_(torch.arange(4.)); out = x",
    "x = torch.arange(10.); v = x.unfold(0, 4, 2); v.mul_(v); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).neg_(); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).sigmoid_(); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).sub_(1, alpha=2); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).clamp_(2, 5); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).addcmul_(torch.ones(4), torch.ones(4)); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).t().add_(1); out = x",
    "x = torch.arange(10.); v = x.unfold(0, 4, 2); v.masked_fill_(v > 4, 0); out = x",
    "x = torch.arange(10.); v = x.unfold(0, 4, 2); v += 1; out = x",
    "x = torch.arange(10.); v = x.unfold(0, 4, 2); v[:, :2] += 1; out = x",
    "x = torch.arange(10.); x.as_strided((3, 3), (2, 1), 1)[:] = 5; out = x",
    "x = torch.arange(10).to(torch.bfloat16); x.unfold(0, 4, 2).mul_(1.1); out = x",
    "x = torch.arange(10, dtype=torch.int32); x.unfold(0, 4, 2).add_(3); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).scatter_(1, torch.tensor([[0], [1], [2], [3]]), 5.); out = x",
    "x = torch.arange(10.); x.unfold(0, 4, 2).index_fill_(1, torch.tensor([0]), -1); out = x",
    # (the gradient: CopySlices copies the view's gradient back into the shared cells)
    "x = torch.arange(10., requires_grad=True); y = x * 1; y.unfold(0, 4, 2).mul_(2); "
    "y.sum().backward(); out = (y, x.grad)",
    "w = torch.ones(4, 4, requires_grad=True); y = torch.arange(10.); y.unfold(0, 4, 2).mul_(w); "
    "y.sum().backward(); out = (y, w.grad)",
]


@pytest.mark.parametrize("code", OVERLAPPING)
def test_inplace_on_overlapping_view_matches_torch(code):
    _same(code)


def test_repeated_element_still_raises():
    # (a 0 stride is PyTorch's "yes": the error stays)
    for mod in (torch, llgrad):
        x = mod.arange(4.)
        with pytest.raises(RuntimeError, match="single memory location"):
            x.expand(3, 4)[:] = 5
        with pytest.raises(RuntimeError, match="single memory location"):
            x.as_strided((3, 4), (0, 1)).add_(1)


def test_overlapping_inplace_compiled_runs_eagerly():
    os.environ.setdefault("LLGRAD_COMPILE", "sync")

    def f(x):
        v = x.unfold(0, 4, 2)
        v += 1
        return x * 2

    cf = llgrad.compile(f)
    for _ in range(3):
        want = f(llgrad.arange(10.))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = cf(llgrad.arange(10.))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert any("share memory" in str(w.message) for w in seen) or not seen


# ---- order statistics among equal values ---------------------------------------------------
# topk (nth_element / partial_sort), kthvalue (ATen's quickselect) and mode (std::sort, then
# the first longest run) pick among equal values by their algorithms' steps

TIES = [
    "out = torch.tensor([3., 1., 3., 3.]).topk(2)",
    "out = torch.tensor([2., 1., 2., 1., 2.]).topk(3, largest=False)",
    "out = torch.tensor([[5., 1., 5., 4.], [2., 7., 2., 0.]]).topk(3, 1, sorted=False)",
    "out = torch.tensor([1., 2., 2., 3., 3.]).kthvalue(3)",
    "out = torch.tensor([[1., 2., 2., 3., 3.], [5., 1., 5., 1., 0.]]).kthvalue(2, 1, keepdim=True)",
    "out = torch.tensor([[3., 3., 1.], [2., 2., 2.]]).kthvalue(2)",
    "out = torch.tensor([1., float('nan'), 2., float('nan')]).kthvalue(4)",
    "out = torch.tensor([1.0, float('nan'), 1.0]).mode()",
    "out = torch.tensor([[3., 1., 3., 3.] * 5, [1., 2.] * 10]).mode(1)",
    "out = torch.tensor([3, 1, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4]).mode()",
    "x = torch.tensor([3., 1., 3., 3.], requires_grad=True); x.topk(2)[0].sum().backward(); "
    "out = x.grad",
    "x = torch.tensor([[1., 1., 1.]], requires_grad=True); x.kthvalue(2, 1)[0].sum().backward(); "
    "out = x.grad",
    "x = torch.tensor([2., 2.] * 10, requires_grad=True); x.mode()[0].backward(); out = x.grad",
]


@pytest.mark.parametrize("code", TIES)
def test_ties_pick_torchs_index(code):
    _same(code)


def test_ties_random_slices():
    rng = np.random.default_rng(0)
    for _ in range(40):
        n = int(rng.integers(2, 120))
        a = rng.integers(0, 4, size=(3, n)).astype(np.float32)
        a[rng.random(a.shape) < 0.1] = np.nan
        k = int(rng.integers(1, n + 1))
        for f in (lambda m: m.tensor(a).topk(k, 1), lambda m: m.tensor(a).topk(k, 1, False, False),
                  lambda m: m.tensor(a).kthvalue(k, 1), lambda m: m.tensor(a).mode(1),
                  lambda m: m.tensor(a).t().mode(0)):
            for w, g in zip(f(torch), f(llgrad)):
                np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_ties_compiled_equal_eager():
    os.environ.setdefault("LLGRAD_COMPILE", "sync")

    def f(x):
        return x.topk(2, 1)[0].sum() + x.kthvalue(2, 1)[0].sum() + x.mode(1)[0].sum()

    cf = llgrad.compile(f)
    for _ in range(3):
        grads = []
        for g in (f, cf):
            x = llgrad.tensor([[3., 1., 3., 3.], [2., 2., 2., 0.]], requires_grad=True)
            g(x).backward()
            grads.append(x.grad.numpy())
        np.testing.assert_array_equal(grads[1], grads[0])
    t = torch.tensor([[3., 1., 3., 3.], [2., 2., 2., 0.]], requires_grad=True)
    f(t).backward()
    np.testing.assert_array_equal(grads[0], t.grad.numpy())


# ---- gradients at the edges of their domain, results' strides ------------------------------

EDGES = [
    # (xlogy: +0 where x is 0, other's gradient x / y: nan at (0, 0); entr's -(1 + log x))
    "out = torch.xlogy(torch.tensor([0., -0., 0., 0., 2.]), torch.tensor([0.5, 0.5, float('nan'), "
    "float('inf'), 0.]))",
    "x = torch.tensor([0., 2., 0., 1., 0.], requires_grad=True); "
    "y = torch.tensor([0., 0., 3., float('inf'), float('inf')], requires_grad=True); "
    "torch.xlogy(x, y).sum().backward(); out = (x.grad, y.grad)",
    "x = torch.tensor([0., 2., 0., 0.], requires_grad=True); "
    "y = torch.tensor([-1., -1., float('inf'), -2.], requires_grad=True); "
    "torch.special.xlog1py(x, y).sum().backward(); out = (x.grad, y.grad)",
    "x = torch.tensor([0., 2., -1., float('nan')], requires_grad=True); "
    "torch.special.entr(x).sum().backward(); out = (torch.special.entr(x), x.grad)",
    "x = torch.tensor([0., 0.5], requires_grad=True); torch.nn.functional.kl_div("
    "torch.tensor([-1., -2.]), x, reduction='sum').backward(); out = x.grad",
    "x = torch.tensor([0, 2, 1], dtype=torch.float16); out = (torch.special.entr(x), "
    "torch.xlogy(x, x), torch.special.xlog1py(x, 2.5))",
    # (ord 0: PyTorch's gradient is undefined, so .grad stays None)
    "x = torch.tensor([0., 0., 1.], requires_grad=True); torch.linalg.vector_norm(x, 0)"
    ".backward(); out = x.grad",
    "x = torch.tensor([[0., 0., 1.]], requires_grad=True); (torch.linalg.vector_norm(x, 0, dim=1)"
    " + x.sum(1)).sum().backward(); out = x.grad",
]


@pytest.mark.parametrize("code", EDGES)
def test_edges_match_torch(code):
    _same(code)


def test_edges_compiled_equal_eager():
    os.environ.setdefault("LLGRAD_COMPILE", "sync")

    def f(x, y):
        return llgrad.xlogy(x, y) + llgrad.special.entr(y) + llgrad.special.xlog1py(x, y)

    cf = llgrad.compile(f)
    for _ in range(3):
        grads = []
        for g in (f, cf):
            x = llgrad.tensor([0., 2., 0.], requires_grad=True)
            y = llgrad.tensor([0., 3., 0.5], requires_grad=True)
            out = g(x, y)
            out.sum().backward()
            grads.append([out.detach().numpy(), x.grad.numpy(), y.grad.numpy()])
        for a, b in zip(*grads):    # (native log against NumPy's: an ulp apart)
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)


STRIDES = [
    # (a reduction's result is allocated row-major, size-1 dims included)
    "x = torch.ones(2, 3, 4).permute(2, 0, 1); out = [x.sum(d, keepdim=True).stride() "
    "for d in range(3)] + [x.mean((0, 2), keepdim=True).stride(), x.amax(0, keepdim=True).stride()]",
    "x = torch.ones(3, 4).t(); out = [x.sum(0, keepdim=True).stride(), "
    "x.sum(1, keepdim=True).stride(), x.all(0, keepdim=True).stride()]",
    "x = torch.arange(24.).reshape(2, 3, 4).sin(); out = [x.kthvalue(2, 1, keepdim=True)[0].stride(),"
    " x.mode(2, keepdim=True)[1].stride(), x.topk(1, 0)[1].stride()]",
]


@pytest.mark.parametrize("code", STRIDES)
def test_strides_match_torch(code):
    assert _run(llgrad, code) == _run(torch, code)
