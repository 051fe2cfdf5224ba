"""avg_pool2d as an op of the table with its backward as an op of its own
(llgrad/ir/ops_nn_more.py): F.avg_pool2d and nn.AvgPool2d against PyTorch for every
combination of the arguments (values, gradients, double backward, backward node names), and
native code (llgrad.compile, llgrad/codegen/lowerings/ops_avgpool.py) against eager: a small
CNN trained a few steps, odd layouts, big kernels, two threads."""
import itertools

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(11)

# every combination of: kernel_size, stride, padding, ceil_mode, count_include_pad,
# divisor_override (pads at most half the kernel, as PyTorch requires); 4-D and 3-D inputs
COMBOS = list(itertools.product([2, (3, 2)], [None, 1, (2, 1)], [0, 1], [False, True],
                                [True, False], [None, 3]))
SHAPES = [(2, 3, 5, 6), (2, 7, 5)]


def _pool(T, t, args):
    k, s, p, ceil, count, div = args
    return T.nn.functional.avg_pool2d(t, k, s, p, ceil, count, div)


@pytest.mark.parametrize("shape", SHAPES, ids=["4d", "3d"])
@pytest.mark.parametrize("args", COMBOS, ids=[str(i) for i in range(len(COMBOS))])
def test_every_argument_combination_matches_torch(args, shape):
    x = RNG.standard_normal(shape)
    cot = RNG.standard_normal(1)[0]
    res = []
    for T in (llgrad, torch):
        t = T.tensor(x, requires_grad=True)
        y = _pool(T, t, args)
        c = T.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape)) + cot,
                     requires_grad=True)
        (g,) = T.autograd.grad(y, t, c, create_graph=True)
        # double backward: into the cotangent (avg_pool2d of 2g) and the input (zeros)
        gg = T.autograd.grad((g * g).sum(), [c, t])
        res.append((y, g, [a.numpy() for a in gg]))
    (ly, lg, lgg), (ty, tg, tgg) = res
    np.testing.assert_allclose(ly.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(lg.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-15)
    for a, b in zip(lgg, tgg):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    assert type(ly.grad_fn).__name__ == type(ty.grad_fn).__name__ == "AvgPool2DBackward0"
    assert type(lg.grad_fn).__name__ == type(tg.grad_fn).__name__ \
        == "AvgPool2DBackwardBackward0"


def test_backward_of_a_constant_cotangent_still_has_torchs_node():
    """The backward takes the input (for its shape, as PyTorch's): its result requires grad
    even where the cotangent does not, and the input's gradient through it is zeros."""
    x = RNG.standard_normal((1, 2, 4, 4))
    res = []
    for T in (llgrad, torch):
        t = T.tensor(x, requires_grad=True)
        (g,) = T.autograd.grad(T.nn.functional.avg_pool2d(t, 3, 1, 1).sum(), t,
                               create_graph=True)
        assert type(g.grad_fn).__name__ == "AvgPool2DBackwardBackward0"
        res.append(T.autograd.grad(g.sum(), t)[0].numpy())
    np.testing.assert_array_equal(res[0], res[1])
    assert not res[0].any()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float32_and_float64_match_torch(dtype):
    x = RNG.standard_normal((2, 3, 9, 8)).astype(dtype)
    for args in [(3, 2, 1, True, False, None), ((2, 3), 1, (1, 1), False, True, 5)]:
        out = []
        for T in (llgrad, torch):
            t = T.tensor(x, requires_grad=True)
            y = _pool(T, t, args)
            y.backward(T.tensor(np.ones(tuple(y.shape), dtype)))
            out.append((y.detach().numpy(), t.grad.numpy()))
        for a, b in zip(*out):
            assert a.dtype == b.dtype == np.dtype(dtype)
            np.testing.assert_allclose(a, b, rtol=1e-6 if dtype == "float32" else 1e-13)


@pytest.mark.parametrize("args", [(2, None, 0, False, True, None), (3, 1, 1, True, False, None),
                                  ((3, 2), (2, 1), (1, 0), True, True, 2)])
def test_gradcheck_and_gradgradcheck(args):
    x = llgrad.tensor(RNG.standard_normal((2, 2, 5, 4)), requires_grad=True)
    f = lambda t: _pool(llgrad, t, args)                              # noqa: E731
    assert llgrad.autograd.gradcheck(f, (x,))
    assert llgrad.autograd.gradgradcheck(f, (x,))


def test_module_unbatched_and_non_contiguous_input():
    x = RNG.standard_normal((3, 6, 7))
    out = []
    for T in (llgrad, torch):
        t = T.tensor(x, requires_grad=True)
        y = T.nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)(t.transpose(1, 2))
        y.backward(T.ones_like(y))
        out.append((y.detach().numpy(), t.grad.numpy(), type(y.grad_fn).__name__))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12)
    assert out[0][2] == out[1][2] == "AvgPool2DBackward0"


# ---- native code ---------------------------------------------------------------------------

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 2 * 2 + 4 * 3 * 2, 3)

    def forward(self, x):
        h = F.avg_pool2d(F.relu(self.bn(self.c1(x))), 2)                       # 8 -> 4
        a = F.avg_pool2d(F.relu(self.c2(h)), 2)                                  # 4 -> 2
        b = F.avg_pool2d(h, 3, 1, 1, ceil_mode=True, count_include_pad=False)   # overlapping
        b = nn.AvgPool2d((2, 3), (1, 2), (1, 1), divisor_override=4)(b[..., ::2, :])  # 2x4->3x2
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


def _compiled_equals_eager(fn, base, layouts=(lambda a: a,), grad_rng=None):
    """fn compiled (the second call: the first traces) gives eager's values and input
    gradient exactly (the same sums in the same order), for each layout of base."""
    cf = llgrad.compile(fn, backend="llvm")
    for layout in layouts:
        res = []
        for f in (fn, cf, cf):
            x = llgrad.from_numpy(layout(base.copy())).requires_grad_()
            y = f(x)
            g = np.arange(y.numel(), dtype=base.dtype).reshape(tuple(y.shape)) / 7
            y.backward(llgrad.tensor(g))
            res.append((y.detach().numpy(), x.grad.numpy()))
        for got, want in zip(res[2], res[0]):
            np.testing.assert_array_equal(got, want)
    assert all(not isinstance(k, str) for k in cf.entries[0].kernels.values())


def test_compiled_pool_matches_eager_on_odd_layouts():
    """A transposed and a stepped input, NaN and infinities included."""
    base = RNG.standard_normal((2, 3, 9, 11))
    base[0, 1, 2, 3], base[1, 2, 5, 5], base[1, 0, 0, 0] = np.nan, np.inf, -np.inf
    layouts = (lambda a: a,
               lambda a: np.ascontiguousarray(a.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2),
               lambda a: np.repeat(a, 2, -1)[..., ::2])
    for args in [(3, (2, 1), 1, True, False, None), (2, None, 1, True, True, 3)]:
        _compiled_equals_eager(lambda x: _pool(llgrad, x, args), base, layouts)


@pytest.mark.parametrize("args", [
    ((9, 8), (3, 2), (4, 3), True, False, None),         # looped windows (> 64 positions)
    ((2, 70), 1, 0, False, True, None),                  # a wide kernel: looped columns
    (1, 1, 0, False, True, None),
    ((3, 2), (2, 3), (1, 1), True, True, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_big_and_small_kernels_match_eager(args, dtype):
    base = RNG.standard_normal((2, 3, 12, 72)).astype(dtype)
    _compiled_equals_eager(lambda x: _pool(llgrad, x, args), base)


@pytest.mark.parametrize("args", [(2, None, 0, False, True, None), (3, 1, 1, False, False, None)])
def test_compiled_on_two_threads_matches_eager(args):
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(2)
    try:
        base = RNG.standard_normal((4, 16, 33, 35)).astype(np.float32)
        _compiled_equals_eager(lambda x: _pool(llgrad, x, args), base)
    finally:
        llgrad.set_num_threads(old)
