"""Matrix products over an inner dimension of 1 (nn.Linear(1, n), nn.Linear(n, 1)'s input
gradient, x[:, None] @ y[None, :], a convolution to one channel's input gradient) take a
broadcast multiply in the NumPy implementations (ir/np_matmul.py): the values must be
NumPy's matmul's, PyTorch's and the compiled code's."""
import numpy as np
import pytest

import llgrad
from llgrad.ir.np_matmul import matmul

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("shapes", [((7, 1), (1, 5)), ((3, 7, 1), (1, 5)), ((3, 7, 1), (3, 1, 5)),
                                    ((2, 1, 7, 1), (3, 1, 4)), ((7, 2), (2, 5))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_equals_numpy_matmul(shapes, dtype):
    a = RNG.standard_normal(shapes[0]).astype(dtype)
    b = RNG.standard_normal(shapes[1]).astype(dtype)
    want = np.matmul(a, b)
    got = matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    out = np.empty((2,) + want.shape, dtype)[1]         # (a view: out= into a strided array)
    assert matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_integer_operands_keep_numpy_matmul():
    a, b = np.arange(6).reshape(6, 1), np.arange(4).reshape(1, 4)
    np.testing.assert_array_equal(matmul(a, b), np.matmul(a, b))
    assert matmul(a, b).dtype == np.matmul(a, b).dtype


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("case", ["mm", "matmul3d", "bmm", "addmm", "baddbmm", "linear_in1",
                                  "linear_out1"])
def test_values_and_gradients_match_torch(case):
    torch = _torch()
    shapes = {"mm": [(9, 1), (1, 6)], "matmul3d": [(2, 9, 1), (1, 6)],
              "bmm": [(2, 9, 1), (2, 1, 6)], "addmm": [(6,), (9, 1), (1, 6)],
              "baddbmm": [(2, 9, 6), (2, 9, 1), (2, 1, 6)],
              "linear_in1": [(9, 1), (6, 1), (6,)], "linear_out1": [(9, 6), (1, 6), (1,)]}[case]
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]

    def run(lib):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        f = {"mm": lambda a, b: lib.mm(a, b), "matmul3d": lambda a, b: a @ b,
             "bmm": lambda a, b: lib.bmm(a, b), "addmm": lambda c, a, b: lib.addmm(c, a, b),
             "baddbmm": lambda c, a, b: lib.baddbmm(c, a, b, alpha=0.5),
             "linear_in1": lambda x, w, b: lib.nn.functional.linear(x, w, b),
             "linear_out1": lambda x, w, b: lib.nn.functional.linear(x, w, b)}[case]
        y = f(*xs)
        (y.tanh() * lib.tensor(np.linspace(-1, 1, y.numel(), dtype=np.float32)
                               .reshape(tuple(y.shape)))).sum().backward()
        return [y.detach().numpy()] + [x.grad.numpy() for x in xs]

    for got, want in zip(run(llgrad), run(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_conv_to_one_channel_gradients_match_torch():
    """Conv2d(C, 1) (a discriminator's last layer): its input gradient is a product over
    the one output channel, and its weight gradient over a 1x1 output."""
    torch = _torch()
    x0 = RNG.standard_normal((4, 8, 4, 4)).astype(np.float32)
    w0 = RNG.standard_normal((1, 8, 4, 4)).astype(np.float32)
    out = []
    for lib in (llgrad, torch):
        x, w = lib.tensor(x0, requires_grad=True), lib.tensor(w0, requires_grad=True)
        lib.nn.functional.conv2d(x, w).sigmoid().sum().backward()
        out.append((x.grad.numpy(), w.grad.numpy()))
    for got, want in zip(*out):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_compiled_linear_in1_step_equals_eager():
    """A regression tutorial's model, nn.Linear(1, n) first: compiled == eager."""
    x = llgrad.tensor(np.linspace(-2, 2, 64, dtype=np.float32)[:, None])
    y = x.sin()
    results = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        m = llgrad.nn.Sequential(llgrad.nn.Linear(1, 16), llgrad.nn.Tanh(), llgrad.nn.Linear(16, 1))
        opt = llgrad.optim.SGD(m.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            loss = llgrad.nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss
        f = llgrad.compile(step) if compiled else step
        results.append([f().item() for _ in range(5)] + [m[0].weight.detach().numpy().copy()])
    np.testing.assert_allclose(results[0][:5], results[1][:5], rtol=1e-6)
    np.testing.assert_allclose(results[0][5], results[1][5], rtol=1e-6, atol=1e-7)
