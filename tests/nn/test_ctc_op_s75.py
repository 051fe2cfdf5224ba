"""ctc_loss as ops of its own (llgrad/ir/ops_ctc.py: ctc_loss = torch's _ctc_loss, giving the
per-sample negative log likelihood and the log-alpha table; ctc_loss_backward = torch's
_ctc_loss_backward) against torch: values and gradients (float32 rtol 1e-5, float64 1e-10)
over random shapes, lengths (zeros included), blanks, reductions, padded and concatenated
targets, lengths as tensors and as lists; the log-alpha table where PyTorch writes it;
gradcheck; the node's name and edges; a compiled step that calls the NumPy implementation
back from native code (no fallback to eager)."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.kernel import Kernel

torch = pytest.importorskip("torch")

TOL = {"float64": 1e-10, "float32": 1e-5}


def _case(seed):
    rng = np.random.default_rng(seed)
    T, N, C, S = (int(v) for v in (rng.integers(1, 12), rng.integers(1, 5),
                                   rng.integers(2, 6), rng.integers(0, 5)))
    blank = int(rng.integers(0, C))
    tl = rng.integers(0, S + 1, N)
    il = rng.integers(0, T + 1, N)
    tg = rng.integers(0, C, (N, max(S, 1)))
    tg[tg == blank] = (blank + 1) % C
    return dict(logits=rng.standard_normal((T, N, C)), targets=tg, il=il, tl=tl, blank=blank,
                flat=bool(rng.integers(0, 2)), lists=bool(rng.integers(0, 2)),
                zero_infinity=bool(rng.integers(0, 2)))


def _run(L, c, dtype, reduction):
    x = L.tensor(c["logits"], dtype=getattr(L, dtype), requires_grad=True)
    lp = x.log_softmax(2)
    lp.retain_grad()
    tg, il, tl = c["targets"], c["il"], c["tl"]
    if c["flat"]:
        tg = np.concatenate([tg[i, :n] for i, n in enumerate(tl)])
    lengths = (lambda v: [int(i) for i in v]) if c["lists"] else L.tensor
    loss = L.nn.functional.ctc_loss(lp, L.tensor(tg), lengths(il), lengths(tl), blank=c["blank"],
                                    reduction=reduction, zero_infinity=c["zero_infinity"])
    (loss.sum() if loss.dim() else loss).backward()
    return loss.detach().numpy(), lp.grad.numpy(), x.grad.numpy()


def _compare(seed, dtype, reduction):
    c = _case(seed)
    ours, theirs = _run(llgrad, c, dtype, reduction), _run(torch, c, dtype, reduction)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        bad = ~np.isfinite(b)       # (impossible samples: inf loss, NaN gradient, as torch)
        np.testing.assert_array_equal(a[bad], b[bad])
        np.testing.assert_allclose(a[~bad], b[~bad], rtol=TOL[dtype],
                                   atol=TOL[dtype] * (0.2 if dtype == "float32" else 1e-2))


@pytest.mark.parametrize("seed", range(6))
def test_matches_torch(seed):
    for dtype in ("float64", "float32"):
        for reduction in ("none", "mean", "sum"):
            _compare(seed, dtype, reduction)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6, 80))
def test_matches_torch_sweep(seed):
    for dtype in ("float64", "float32"):
        for reduction in ("none", "mean", "sum"):
            _compare(seed, dtype, reduction)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_log_alpha_is_torchs(dtype):
    """The op's two results against torch._ctc_loss's, where PyTorch writes log_alpha."""
    rng = np.random.default_rng(7)
    T, N, C = 7, 3, 5
    lp = np.log(rng.dirichlet(np.ones(C), (T, N)))
    tg, il, tl = np.array([[1, 1, 2], [3, 4, 0], [2, 0, 0]]), [7, 5, 0], [3, 2, 1]
    nll, la = llgrad.tensor(lp, dtype=getattr(llgrad, dtype))._op(
        "ctc_loss", llgrad.tensor(tg), llgrad.tensor(il), llgrad.tensor(tl), blank=0,
        zero_infinity=False)
    tnll, tla = torch._ctc_loss(torch.tensor(lp, dtype=getattr(torch, dtype)),
                                torch.tensor(tg), il, tl, 0, False)
    np.testing.assert_allclose(nll.numpy(), tnll.numpy(), rtol=TOL[dtype])
    assert tuple(la.shape) == tuple(tla.shape) == (N, T, 7)
    for n in range(N):
        a, b = la.numpy()[n, :il[n], :2 * tl[n] + 1], tla.numpy()[n, :il[n], :2 * tl[n] + 1]
        np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
        np.testing.assert_allclose(a[np.isfinite(b)], b[np.isfinite(b)], rtol=TOL[dtype])


def test_gradcheck_float64():
    rng = np.random.default_rng(11)
    x = llgrad.tensor(rng.standard_normal((6, 3, 4)), requires_grad=True)
    targets, il, tl = llgrad.tensor([1, 2, 2, 3, 1]), llgrad.tensor([6, 5, 4]), [2, 3, 0]

    def f(x):
        return llgrad.nn.functional.ctc_loss(x.log_softmax(2), targets, il, llgrad.tensor(tl),
                                             reduction="none")
    assert llgrad.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_node_and_edges():
    x = llgrad.tensor(np.zeros((4, 2, 3)), requires_grad=True)
    lp = x.log_softmax(2)
    loss = llgrad.nn.functional.ctc_loss(lp, llgrad.tensor([[1, 2], [2, 2]]), [4, 4], [2, 1],
                                         reduction="none")
    assert type(loss.grad_fn).__name__ == "CtcLossBackward0"
    assert [fn for fn, _ in loss.grad_fn.next_functions] == [lp.grad_fn]   # (as torch's)


def test_zero_infinity_gradient_is_zero():
    """An impossible sample (4 labels with a repeat in 2 steps): zero_infinity gives 0 and a
    zero gradient; without it inf and NaN at its steps t < input_length, as torch."""
    lp = np.log(np.full((5, 2, 4), 0.25))
    for zi in (True, False):
        grads = []
        for L in (llgrad, torch):
            x = L.tensor(lp, requires_grad=True)
            loss = L.nn.functional.ctc_loss(x, L.tensor([[1, 1, 2, 3], [1, 2, 0, 0]]),
                                            L.tensor([2, 5]), L.tensor([4, 2]),
                                            reduction="none", zero_infinity=zi)
            loss.sum().backward()
            grads.append((loss.detach().numpy(), x.grad.numpy()))
        (a, ga), (b, gb) = grads
        np.testing.assert_array_equal(np.isnan(ga), np.isnan(gb))
        np.testing.assert_allclose(a, b, rtol=1e-12)
        np.testing.assert_allclose(np.nan_to_num(ga), np.nan_to_num(gb), rtol=1e-10, atol=1e-12)


def test_compiled_step_calls_the_op_natively():
    """A compiled training step: torch's values and gradients, and no fallback to eager
    (the ops run through native code's host calls)."""
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((8, 3, 5)).astype(np.float32)
    tg, il, tl = np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]]), [8, 7, 8], [3, 2, 3]

    def step(L, x, targets, input_lengths, target_lengths):
        loss = L.nn.functional.ctc_loss(x.log_softmax(2), targets, input_lengths,
                                        target_lengths)
        loss.backward()
        return loss

    compiled = llgrad.compile(lambda *a: step(llgrad, *a))
    for _ in range(2):
        x = llgrad.tensor(logits, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss = compiled(x, llgrad.tensor(tg), llgrad.tensor(il), llgrad.tensor(tl))
        compiled.wait()         # (background builds: native code from the next call)
    tx = torch.tensor(logits, requires_grad=True)
    tloss = step(torch, tx, torch.tensor(tg), torch.tensor(il), torch.tensor(tl))
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    (entry,) = compiled.entries
    kernels = getattr(entry, "kernels", {})
    assert kernels and all(isinstance(k, Kernel) for k in kernels.values()), kernels


def test_double_backward_raises_as_torch():
    # (ctc_loss_backward is not differentiable in PyTorch: a second backward through it
    # raises rather than dropping that part of the gradient)
    x = llgrad.randn(5, 2, 4, requires_grad=True)
    lp = x.log_softmax(2)
    loss = F.ctc_loss(lp, llgrad.tensor([[1, 2], [3, 3]]), [5, 5], [2, 2])
    g, = llgrad.autograd.grad(loss, lp, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="derivative for aten::_ctc_loss_backward is not "
                                           "implemented"):
        g.sum().backward()


@pytest.mark.parametrize("dtype, name", [("float16", "Half"), ("bfloat16", "BFloat16")])
def test_low_precision_refused_as_torch(dtype, name):
    lp = llgrad.randn(5, 2, 4).log_softmax(2).to(getattr(llgrad, dtype))
    with pytest.raises(NotImplementedError,
                       match=f"\"ctc_loss_cpu\" not implemented for '{name}'"):
        F.ctc_loss(lp, llgrad.tensor([[1, 2], [3, 3]]), [5, 3], [2, 2])


def test_vmap_folds_the_batch_into_n():
    # (func/rules_ctc.py: one call on K * N samples, forward and backward, equal to a loop)
    B, T, N, C, S = 3, 6, 2, 5, 3
    x = llgrad.randn(B, T, N, C, dtype=llgrad.float64)
    il, tl = llgrad.tensor([6, 5]), llgrad.tensor([3, 2])
    targets = llgrad.randint(1, C, (B, N, S))

    def f(lp, t):
        return F.ctc_loss(lp.log_softmax(-1), t, il, tl, reduction="sum")
    got = llgrad.func.vmap(llgrad.func.grad_and_value(f))(x, targets)
    for i in range(B):
        xi = x[i].clone().requires_grad_()
        want = f(xi, targets[i])
        want.backward()
        assert llgrad.allclose(got[1][i], want) and llgrad.allclose(got[0][i], xi.grad)
