"""Fixes found by the sweep-12 tutorial programs, each checked against torch: the matrix
products' backward reads (and version-checks) an operand only where the other operand's
gradient needs it, as PyTorch saves it (an actor-critic step whose critic optimiser
changed the shared body's weights before the actor's backward raised an in-place error
PyTorch does not); NumPy's floating-point warnings on example values inside a traced
backward (log(0) of a fully masked logsumexp) no longer send the call to eager; an
integer tensor to a small Python-int power is lowered to native code; a batch norm with
momentum=None (the cumulative average) no longer traces again at each step."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch

_PRODUCTS = {
    "mm": lambda lib, x, w: x.mm(w),
    "matmul_3d": lambda lib, x, w: x[None] @ w,
    "matmul_vec": lambda lib, x, w: x[0] @ w,
    "linear_bias": lambda lib, x, w: lib.nn.functional.linear(x, w.t(), w[0, :3] * 0 + 1),
    "addmm": lambda lib, x, w: lib.addmm(w[0], x, w),
    "bmm": lambda lib, x, w: lib.bmm(x[None], w[None]),
    "einsum": lambda lib, x, w: lib.einsum("ij,jk->ik", x, w),
    "tensordot": lambda lib, x, w: lib.tensordot(x, w, 1),
}


def _modified_before_backward(lib, product, x_grad, w_grad, modify, compiled):
    x = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
                   requires_grad=x_grad)
    w = lib.tensor(np.linspace(0.5, -0.5, 9, dtype=np.float32).reshape(3, 3),
                   requires_grad=w_grad)

    def f(x, w):
        return (_PRODUCTS[product](lib, x, w).tanh() * 2).sum()

    y = (llgrad.compile(f) if compiled else f)(x, w)
    with lib.no_grad():
        (w if modify == "w" else x).add_(1.0)
    try:
        y.backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return "error"
    return [None if t.grad is None else t.grad.numpy().copy() for t in (x, w)]


@pytest.mark.parametrize("product", sorted(_PRODUCTS))
@pytest.mark.parametrize("x_grad, w_grad, modify", [
    (False, True, "w"), (True, False, "x"), (True, True, "w"), (True, False, "w")])
def test_product_operand_modified_before_backward(product, x_grad, w_grad, modify):
    """x @ W, W changed in place between forward and backward: an error only where W's
    saved value is needed (x wants a gradient), as PyTorch; the gradient otherwise."""
    ref = _modified_before_backward(torch, product, x_grad, w_grad, modify, False)
    for compiled in (False, True):
        got = _modified_before_backward(llgrad, product, x_grad, w_grad, modify, compiled)
        if ref == "error":
            assert got == "error", (compiled, got)
            continue
        assert got != "error", compiled
        for a, b in zip(got, ref):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_actor_critic_two_optimizers_shared_body():
    """The critic's optimiser steps the shared body between the critic's backward
    (retain_graph=True) and the actor's: the actor's backward still reaches the body, whose
    weights PyTorch saved for nothing it needs (the input wants no gradient)."""
    res = []
    for lib in (torch, llgrad):
        lib.manual_seed(0)
        body, actor, critic = lib.nn.Linear(4, 8), lib.nn.Linear(8, 2), lib.nn.Linear(8, 1)
        s = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
        h = lib.tanh(body(s))
        critic(h).pow(2).mean().backward(retain_graph=True)
        with lib.no_grad():             # (the critic optimiser's SGD step)
            for p in list(body.parameters()) + list(critic.parameters()):
                p.sub_(0.1 * p.grad)
                p.grad = None
        actor(h).logsumexp(-1).mean().backward()
        res.append([p.grad.numpy().copy() for p in body.parameters()])
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_masked_logsumexp_backward_keeps_compiled_code():
    """A bag pooling by logsumexp where one bag is all padding (-inf: the result -inf, the
    gradient 0): the traced backward's log(0) on the example value made NumPy warn, which
    sent the call to eager with a warning under the default filters."""
    x0 = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    mask = np.array([[True] * 4, [False] * 4, [True, True, False, False]])
    res = []
    for lib in (torch, llgrad, llgrad):
        x = lib.tensor(x0, requires_grad=True)

        def pool(x, m):
            return lib.logsumexp(x.masked_fill(~m, float("-inf")), 1)

        f = llgrad.compile(pool) if len(res) == 2 else pool
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            for _ in range(2):
                x.grad = None
                out = f(x, lib.tensor(mask))
                (out[[0, 2]] * lib.tensor([1.0, 2.0])).sum().backward()
        if len(res) == 2:
            assert not [w for w in caught if "llgrad.compile" in str(w.message)]
            assert f.entries
        res.append((out.detach().numpy(), x.grad.numpy()))
    for got in res[1:]:
        np.testing.assert_allclose(got[0], res[0][0], rtol=1e-6)
        np.testing.assert_allclose(got[1], res[0][1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_integer_small_power_is_native(dtype):
    """idx ** 2 on an integer tensor (a triangular-number offset, a squared distance on a
    grid) ran the whole graph on the interpreter; multiplies wrap as PyTorch's do."""
    a = np.array([[-7, 3, 0, 100], [5, -1, 2, 200]]).astype(dtype)
    for e in (0, 1, 2, 3):
        ref = torch.tensor(a) ** e + 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cf = llgrad.compile(lambda x: x ** e + 1)
            got = cf(llgrad.tensor(a))
        assert str(got.dtype) == str(ref.dtype).replace("torch", "llgrad")
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


def _cumulative_bn_run(lib, compiled):
    lib.manual_seed(0)
    bn = lib.nn.BatchNorm2d(3, momentum=None)
    x = lib.tensor(np.random.default_rng(1).standard_normal((4, 3, 5, 5)).astype(np.float32))

    def step(x):
        return bn(x * 1.5 + 0.3).pow(2).mean()

    f = llgrad.compile(step) if compiled else step
    outs = [f(x).item() for _ in range(10)]
    return f, outs, [b.numpy().copy() for b in bn.buffers()]


@pytest.mark.slow
def test_batchnorm_cumulative_average_keeps_one_trace():
    """BatchNorm(momentum=None) (the cumulative moving average, factor 1 / num_batches_tracked)
    in a compiled step: float() of the count was a value guard, so each step traced again
    and the function went eager at the recompile limit (warning); the factor is now read
    from the buffer in the graph, with eager's bits."""
    _, ref_out, ref_bufs = _cumulative_bn_run(torch, False)
    _, eager_out, eager_bufs = _cumulative_bn_run(llgrad, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf, out, bufs = _cumulative_bn_run(llgrad, True)
    assert cf.n_traces == 1
    np.testing.assert_allclose(out, ref_out, rtol=1e-5)
    for a, b, r in zip(bufs, eager_bufs, ref_bufs):
        # (the batch mean as the traced momentum=0.1 path takes it: x.mean, within an ulp
        # of eager's float64 statistics)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(1, 3, 3), (3, 3), (2, 2), (5, 1, 3), (1, 2, 4)])
def test_baddbmm_broadcast_error_names_the_dimension(shape):
    """baddbmm's input that does not broadcast to the product: PyTorch's expand error names
    the first mismatching dimension from the right and its sizes (it said dimension 2 and
    the last sizes, "(3) must match the existing size (3)", whatever the mismatch)."""
    msgs = []
    for lib in (torch, llgrad):
        try:
            lib.baddbmm(lib.ones(*shape), lib.ones(1, 2, 3), lib.ones(1, 3, 3))
            msgs.append(None)
        except RuntimeError as e:
            msgs.append(str(e))
    assert msgs[1] == msgs[0]
