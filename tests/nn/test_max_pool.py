"""max_pool2d as one op of the table (llgrad/ir/ops_pool.py): F.max_pool2d and nn.MaxPool2d
against PyTorch (values, indices, gradients, double backward, backward node names, NaN and
integer inputs, every argument), and native code (llgrad.compile) against eager for a small
CNN trained a few steps."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(7)

ARGS = [  # (kernel_size, stride, padding, dilation, ceil_mode), input shape
    ((2, None, 0, 1, False), (2, 3, 6, 6)),
    ((3, 2, 1, 1, False), (2, 2, 7, 6)),
    ((3, 2, 1, 1, True), (1, 2, 8, 7)),
    (((2, 3), (1, 2), (1, 1), (2, 1), False), (2, 1, 6, 7)),
    ((3, 1, 1, 2, True), (1, 2, 7, 7)),
    ((2, 2, 1, 1, True), (2, 1, 5, 6)),
    ((3, 1, 1, 1, False), (3, 5, 4)),                                 # unbatched, overlapping
]


def _both(fn, x, grad=True):
    """fn's outputs and input gradient (from fixed random cotangents) in llgrad and torch."""
    out = []
    for T in (llgrad, torch):
        t = T.tensor(x, requires_grad=grad and x.dtype.kind == "f")
        res = fn(T, t)
        res = res if isinstance(res, tuple) else (res,)
        g = None
        if grad and x.dtype.kind == "f":
            cot = np.random.default_rng(1).standard_normal(tuple(res[0].shape))
            (g,) = T.autograd.grad(res[0], t, T.tensor(cot, dtype=t.dtype), create_graph=True)
        out.append((res, g, t))
    return out


@pytest.mark.parametrize("args,shape", ARGS)
def test_values_indices_gradients_and_nodes_match_torch(args, shape):
    k, s, p, d, ceil = args
    x = RNG.standard_normal(shape)
    (lo, lg, _), (to, tg, _) = _both(lambda T, t: T.nn.functional.max_pool2d(
        t, k, s, p, d, ceil, return_indices=True), x)
    np.testing.assert_array_equal(lo[0].detach().numpy(), to[0].detach().numpy())
    assert lo[1].dtype == llgrad.int64
    np.testing.assert_array_equal(lo[1].numpy(), to[1].numpy())
    assert type(lo[0].grad_fn).__name__ == type(to[0].grad_fn).__name__ \
        == "MaxPool2DWithIndicesBackward0"
    np.testing.assert_allclose(lg.detach().numpy(), tg.detach().numpy(), rtol=1e-12)
    assert type(lg.grad_fn).__name__ == type(tg.grad_fn).__name__ \
        == "MaxPool2DWithIndicesBackwardBackward0"


@pytest.mark.parametrize("args,shape", ARGS[1:5])
def test_double_backward_matches_torch(args, shape):
    k, s, p, d, ceil = args
    x = RNG.standard_normal(shape)
    scale = RNG.standard_normal(1)
    res = []
    for T in (llgrad, torch):
        t = T.tensor(x, requires_grad=True)
        c = T.tensor(scale, requires_grad=True)
        y = T.nn.functional.max_pool2d(t * c, k, s, p, d, ceil)
        (g,) = T.autograd.grad((y * y).sum(), t, create_graph=True)
        gg = T.autograd.grad((g * g).sum(), [t, c])
        res.append([a.detach().numpy() for a in gg])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10)


@pytest.mark.parametrize("args,shape", ARGS[:4])
def test_gradcheck_and_gradgradcheck(args, shape):
    k, s, p, d, ceil = args
    x = llgrad.tensor(RNG.permutation(int(np.prod(shape))).reshape(shape) / 7.0,
                      requires_grad=True)                             # distinct: no ties
    f = lambda t: F.max_pool2d(t, k, s, p, d, ceil)                  # noqa: E731
    assert llgrad.autograd.gradcheck(f, (x,))
    assert llgrad.autograd.gradgradcheck(f, (x,))


def test_ties_nan_and_all_inf_windows_match_torch():
    nan, inf = float("nan"), float("inf")
    x = np.array([[[[nan, 1.0, 2.0, 2.0, -inf], [nan, 3.0, 2.0, 1.0, -inf],
                    [0.0, -0.0, 5.0, nan, -inf], [-0.0, 0.0, 5.0, 4.0, -inf]]]])
    for args in ((2,), (2, 1), (3, 1, 1), (2, 2, 1, 1, True), (2, 1, 1, 2)):
        (lo, lg, _), (to, tg, _) = _both(lambda T, t: T.nn.functional.max_pool2d(
            t, *args, return_indices=True), x)
        np.testing.assert_array_equal(lo[0].detach().numpy(), to[0].detach().numpy())
        np.testing.assert_array_equal(lo[1].numpy(), to[1].numpy())
        np.testing.assert_array_equal(np.signbit(lo[0].detach().numpy()),
                                      np.signbit(to[0].detach().numpy()))
        np.testing.assert_allclose(lg.detach().numpy(), tg.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float32"])
def test_other_dtypes_match_torch(dtype):
    x = RNG.integers(0, 4, (2, 3, 5, 6)).astype(dtype)                # ties everywhere
    (lo, _, _), (to, _, _) = _both(lambda T, t: T.nn.functional.max_pool2d(
        t, 3, 2, 1, return_indices=True), x, grad=False)
    assert str(lo[0].dtype) == str(to[0].dtype).replace("torch", "llgrad")
    np.testing.assert_array_equal(lo[0].numpy(), to[0].numpy())
    np.testing.assert_array_equal(lo[1].numpy(), to[1].numpy())


def test_bool_input_is_refused_as_in_torch():
    for T in (llgrad, torch):
        with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
            T.nn.functional.max_pool2d(T.zeros(1, 1, 4, 4, dtype=T.bool), 2)


def test_module_and_unbatched_node():
    x = llgrad.randn(3, 6, 6, requires_grad=True)
    y = nn.MaxPool2d(2, return_indices=True)(x)
    assert type(y[0].grad_fn).__name__ == "MaxPool2DWithIndicesBackward0"
    assert tuple(y[0].shape) == tuple(y[1].shape) == (3, 3, 3)


# ---- native code ---------------------------------------------------------------------------

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 2 * 2 + 4 * 3 * 3, 3)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.c1(x)), 2)                            # 8 -> 4
        a = F.max_pool2d(F.relu(self.c2(h)), 2)                            # 4 -> 2
        b = F.max_pool2d(h, 3, 1, 1, dilation=1, ceil_mode=True)[..., ::2, ::2]
        b = nn.MaxPool2d((2, 2), 1, 0, 2)(F.pad(b, (1, 2, 1, 2)))          # 2 -> 3 (dilated)
        return self.fc(llgrad.cat([a.flatten(1), b.flatten(1)], 1))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_compiled_cnn_steps_equal_eager(dtype):
    llgrad.manual_seed(0)
    ref = SmallCNN().to(getattr(llgrad, dtype))
    models = {}
    for which in ("eager", "compiled"):
        m = SmallCNN().to(getattr(llgrad, dtype))
        m.load_state_dict(ref.state_dict())
        models[which] = m
    step = {"eager": lambda m, x, y: F.cross_entropy(m(x), y),
            "compiled": llgrad.compile(lambda m, x, y: F.cross_entropy(m(x), y),
                                       backend="llvm")}
    opts = {k: llgrad.optim.SGD(m.parameters(), lr=0.1) for k, m in models.items()}
    tol = dict(rtol=1e-9, atol=1e-11) if dtype == "float64" else dict(rtol=2e-4, atol=2e-5)
    for i in range(3):
        x = RNG.standard_normal((4, 2, 8, 8)).astype(dtype)
        y = RNG.integers(0, 3, 4)
        losses, grads = {}, {}
        for which, m in models.items():
            opts[which].zero_grad()
            loss = step[which](m, llgrad.tensor(x), llgrad.tensor(y))
            loss.backward()
            losses[which] = loss.item()
            grads[which] = [p.grad.numpy().copy() for p in m.parameters()]
            opts[which].step()
        np.testing.assert_allclose(losses["compiled"], losses["eager"], **tol)
        for a, b in zip(grads["compiled"], grads["eager"]):
            np.testing.assert_allclose(a, b, **tol)
    kernels = step["compiled"].entries[0].kernels
    assert all(not isinstance(k, str) for k in kernels.values()), kernels


def test_compiled_pool_matches_eager_on_odd_layouts():
    """Native forward and backward over a transposed, stepped input, NaN and ties included."""
    base = RNG.integers(-2, 3, (2, 3, 9, 11)).astype(np.float64)
    base[0, 1, 2, 3] = base[1, 2, 5, 5] = np.nan
    f = lambda x: F.max_pool2d(x, 3, (2, 1), 1, (1, 2), True, True)     # noqa: E731
    cf = llgrad.compile(f, backend="llvm")
    for layout in (lambda a: a, lambda a: np.ascontiguousarray(a.transpose(0, 1, 3, 2))
                   .transpose(0, 1, 3, 2), lambda a: np.repeat(a, 2, -1)[..., ::2]):
        res = []
        for fn in (f, cf, cf):                        # (the first compiled call traces)
            x = llgrad.from_numpy(layout(base.copy())).requires_grad_()
            v, i = fn(x)
            v.backward(llgrad.tensor(np.arange(v.numel(), dtype=np.float64).reshape(v.shape)))
            res.append((v.detach().numpy(), i.numpy(), x.grad.numpy()))
        for got, want in zip(res[2], res[0]):
            np.testing.assert_array_equal(got, want)
    assert all(not isinstance(k, str) for k in cf.entries[0].kernels.values())


@pytest.mark.parametrize("fn", [
    lambda x: F.max_pool2d(x, (9, 8), (3, 2), (4, 3), (1, 2), True, True),   # looped kernel
    lambda x: F.adaptive_max_pool2d(x, (1, 2), True),                         # 12x6 windows
    lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)])                # unrolled
def test_compiled_big_and_small_kernels_match_eager(fn):
    base = RNG.standard_normal((2, 3, 12, 12)).astype(np.float32)
    base[1, 1, 4, 4] = np.nan
    cf = llgrad.compile(fn, backend="llvm")
    res = []
    for f in (fn, cf, cf):
        x = llgrad.tensor(base.copy(), requires_grad=True)
        v, i = f(x)
        v.backward(llgrad.tensor(np.ones(tuple(v.shape), np.float32)))
        res.append((v.detach().numpy(), i.numpy(), x.grad.numpy()))
    for got, want in zip(res[2], res[0]):
        np.testing.assert_array_equal(got, want)
    assert all(not isinstance(k, str) for k in cf.entries[0].kernels.values())
