"""Sweep 15 (g3): pooling and convolution edge cases (ceil_mode windows that start in the
padding, dilation, return_indices, max_unpool, odd adaptive sizes, lp_pool, avg_pool's
count_include_pad / divisor_override; padding='same' with even kernels, groups, dilation,
transposed output_padding / output_size), checked side by side with torch
(tests/nn/oracle_sweep15_g.py) after the topics of PyTorch's test/nn/test_pooling.py and
test_convolution.py. Each scenario returns outputs and the gradient of a weighted sum."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle_sweep15_g import check  # noqa: E402


def _x(lib, *shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lib.tensor(a, requires_grad=True)


def _fwd_bwd(lib, x, y, *extra):
    w = lib.tensor(np.random.default_rng(9).standard_normal(tuple(y.shape)).astype(np.float32))
    (y * w).sum().backward()
    return (y, x.grad) + extra


@pytest.mark.parametrize("args", [
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, dilation=2, padding=2, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(3, 1), padding=(1, 0), dilation=(1, 2)),
])
def test_max_pool2d_ceil_padding_dilation_with_indices(args):
    def s(lib):
        x = _x(lib, 2, 3, 7, 6)
        y, idx = lib.nn.functional.max_pool2d(x, return_indices=True, **args)
        return _fwd_bwd(lib, x, y, idx)
    check(s)


def test_max_pool1d_ceil_mode_drops_window_starting_in_right_padding():
    def s(lib):
        x = _x(lib, 1, 2, 5)
        out = [lib.nn.MaxPool1d(2, 2, padding=1, ceil_mode=True)(x),
               lib.nn.MaxPool1d(3, 3, ceil_mode=True)(x),
               lib.nn.functional.max_pool1d(x, 4, 1, 2, ceil_mode=True)]
        return _fwd_bwd(lib, x, sum(o.sum() for o in out), *out)
    check(s)


def test_max_pool_ties_route_gradient_to_first_max():
    def s(lib):
        x = lib.tensor([[[[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 2.0, 2.0]]]], requires_grad=True)
        y, idx = lib.nn.functional.max_pool2d(x, 2, 1, return_indices=True)
        return _fwd_bwd(lib, x, y, idx)
    check(s)


def test_max_unpool_with_and_without_output_size():
    def s(lib):
        x = _x(lib, 1, 2, 5, 5)
        y, idx = lib.nn.functional.max_pool2d(x, 2, 2, return_indices=True)
        try:    # the default output (4, 4) cannot hold index 18 of the 5 x 5 input
            u1 = lib.nn.MaxUnpool2d(2, 2)(y, idx)
        except RuntimeError as e:   # (which bad index torch names depends on its threads)
            u1 = str(e).split(":")[0]
        u2 = lib.nn.MaxUnpool2d(2, 2)(y, idx, output_size=[5, 5])
        x1 = _x(lib, 1, 1, 7)
        y1, i1 = lib.nn.functional.max_pool1d(x1, 3, 2, return_indices=True)
        u3 = lib.nn.functional.max_unpool1d(y1, i1, 3, 2, output_size=(1, 1, 8))
        return _fwd_bwd(lib, x, u2, u1, u3)
    check(s)


def test_max_unpool_bad_output_size_raises():
    def s(lib):
        y, idx = lib.nn.functional.max_pool2d(lib.ones(1, 1, 4, 4), 2, return_indices=True)
        return lib.nn.functional.max_unpool2d(y, idx, 2, output_size=(9, 9))
    check(s)


@pytest.mark.parametrize("out", [(3, 5), (1, 4), (7, 2), (None, 3)])
def test_adaptive_avg_and_max_pool_odd_sizes(out):
    def s(lib):
        x = _x(lib, 2, 3, 7, 5)
        a = lib.nn.AdaptiveAvgPool2d(out)(x)
        m, i = lib.nn.AdaptiveMaxPool2d(out, return_indices=True)(x)
        return _fwd_bwd(lib, x, a + m, i)
    check(s)


def test_adaptive_pools_1d_and_3d():
    def s(lib):
        x = _x(lib, 2, 9)
        y = _x(lib, 1, 2, 5, 4, 3)
        outs = [lib.nn.functional.adaptive_avg_pool1d(x[None], 4),
                lib.nn.functional.adaptive_max_pool1d(x[None], 5),
                lib.nn.functional.adaptive_avg_pool3d(y, (2, 3, 2)),
                lib.nn.functional.adaptive_max_pool3d(y, (3, None, 1))]
        return _fwd_bwd(lib, x, outs[0].sum() + outs[1].sum(), *outs)
    check(s)


@pytest.mark.parametrize("norm", [1, 2, 3.5])
def test_lp_pool_1d_and_2d(norm):
    def s(lib):
        x = lib.tensor(np.random.default_rng(1).uniform(0.1, 2, (2, 3, 6, 5)).astype(np.float32),
                       requires_grad=True)
        a = lib.nn.functional.lp_pool2d(x, norm, (2, 3), stride=(2, 1))
        b = lib.nn.LPPool1d(norm, 3, stride=2, ceil_mode=True)(x.flatten(2))
        return _fwd_bwd(lib, x, a.sum() + b.sum(), a, b)
    check(s, rtol=1e-4)


@pytest.mark.parametrize("args", [
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=True, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
    dict(kernel_size=2, stride=1, padding=1, divisor_override=3),
    dict(kernel_size=(3, 2), stride=(2, 3), ceil_mode=True, divisor_override=1),
])
def test_avg_pool2d_divisors(args):
    def s(lib):
        x = _x(lib, 1, 2, 6, 7)
        return _fwd_bwd(lib, x, lib.nn.functional.avg_pool2d(x, **args))
    check(s)


def test_avg_pool1d_and_3d_ceil_and_pad():
    def s(lib):
        x = _x(lib, 2, 2, 7)
        y = _x(lib, 1, 1, 5, 4, 5)
        a = lib.nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False)(x)
        b = lib.nn.AvgPool3d(2, 2, 1, ceil_mode=True, divisor_override=5)(y)
        return _fwd_bwd(lib, x, a, b)
    check(s)


def test_pool_argument_errors():
    def s(lib):
        F = lib.nn.functional
        out = []
        for f in (lambda: F.max_pool2d(lib.ones(1, 1, 4, 4), 2, padding=2),
                  lambda: F.avg_pool2d(lib.ones(1, 1, 4, 4), 3, padding=2),
                  lambda: F.max_pool2d(lib.ones(1, 1, 2, 2), 3),
                  lambda: F.max_pool1d(lib.ones(1, 1, 4), 2, stride=0),
                  lambda: F.adaptive_avg_pool2d(lib.ones(1, 1, 0, 3), 2),
                  lambda: F.max_pool2d(lib.ones(1, 4, 4), 2, dilation=0)):
            try:
                out.append(f().shape)
            except Exception as e:      # noqa: BLE001
                out.append(type(e).__name__)
        return out
    check(s)


# ---- convolutions ----

@pytest.mark.parametrize("k,d", [(2, 1), (4, 1), (2, 3), ((2, 3), (2, 1))])
def test_conv2d_padding_same_with_even_kernels(k, d):
    def s(lib):
        x = _x(lib, 1, 2, 6, 5)
        lib.manual_seed(0)
        c = lib.nn.Conv2d(2, 3, k, padding="same", dilation=d)
        return _fwd_bwd(lib, x, c(x), c.weight.grad) + (c.weight.grad,)
    check(s, rtol=1e-4, atol=1e-5)


def test_conv1d_and_3d_padding_same_and_valid():
    def s(lib):
        x = _x(lib, 2, 2, 9)
        y = _x(lib, 1, 1, 4, 5, 4)
        a = lib.nn.functional.conv1d(x, lib.ones(3, 2, 4) / 8, padding="same", dilation=2)
        b = lib.nn.functional.conv3d(y, lib.ones(2, 1, 2, 3, 2) / 12, padding="same")
        c = lib.nn.functional.conv1d(x, lib.ones(3, 2, 4) / 8, padding="valid")
        return _fwd_bwd(lib, x, a.sum() + c.sum(), a, b, c)
    check(s)


def test_padding_same_errors():
    def s(lib):
        out = []
        for f in (lambda: lib.nn.Conv2d(1, 1, 3, stride=2, padding="same"),
                  lambda: lib.nn.Conv2d(1, 1, 3, padding="full"),
                  lambda: lib.nn.functional.conv2d(lib.ones(1, 1, 3, 3), lib.ones(1, 1, 2, 2),
                                                   stride=2, padding="same"),
                  lambda: lib.nn.ConvTranspose2d(1, 1, 3, padding="same")):
            try:
                f()
                out.append("ok")
            except Exception as e:      # noqa: BLE001
                out.append(type(e).__name__)
        return out
    check(s)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv2d_padding_modes_with_same_even_kernel(mode):
    def s(lib):
        x = _x(lib, 1, 2, 5, 6)
        c = lib.nn.Conv2d(2, 2, (2, 4), padding="same", padding_mode=mode, bias=False)
        return _fwd_bwd(lib, x, c(x), c.weight.grad)
    check(s, rtol=1e-4, atol=1e-5)


def test_grouped_dilated_strided_conv_gradients():
    def s(lib):
        x = _x(lib, 2, 6, 9, 8)
        c = lib.nn.Conv2d(6, 4, 3, stride=(2, 1), padding=(1, 2), dilation=(2, 3), groups=2)
        y = c(x)
        _fwd_bwd(lib, x, y)
        return y, x.grad, c.weight.grad, c.bias.grad
    check(s, rtol=1e-4, atol=1e-5)


def test_depthwise_conv1d_channel_multiplier():
    def s(lib):
        x = _x(lib, 2, 3, 10)
        c = lib.nn.Conv1d(3, 6, 3, groups=3, padding=2, dilation=2, bias=False)
        return _fwd_bwd(lib, x, c(x)) + (c.weight.grad,)
    check(s, rtol=1e-4, atol=1e-5)


def test_conv_transpose2d_output_padding_groups_dilation():
    def s(lib):
        x = _x(lib, 1, 4, 4, 3)
        c = lib.nn.ConvTranspose2d(4, 6, 3, stride=(2, 3), padding=1, output_padding=(1, 2),
                                   groups=2, dilation=(1, 2))
        return _fwd_bwd(lib, x, c(x)) + (c.weight.grad, c.bias.grad)
    check(s, rtol=1e-4, atol=1e-5)


def test_conv_transpose_output_size_argument():
    def s(lib):
        x = _x(lib, 1, 2, 4, 4)
        c = lib.nn.ConvTranspose2d(2, 1, 3, stride=2, padding=1)
        out = [c(x).shape, c(x, output_size=(8, 8)).shape, c(x, output_size=[1, 1, 8, 7]).shape]
        for bad in ((10, 10), (6, 6)):
            try:
                c(x, output_size=bad)
            except Exception as e:      # noqa: BLE001
                out.append(type(e).__name__)
        c1 = lib.nn.ConvTranspose1d(2, 2, 2, stride=3)
        y = c1(x[:, :, 0], output_size=(13,))
        return out + [_fwd_bwd(lib, x, y)]
    check(s, rtol=1e-4, atol=1e-5)


def test_conv_transpose_output_padding_must_be_smaller_than_stride_or_dilation():
    def s(lib):
        out = []
        for op, d in ((2, 1), (1, 1), (2, 3)):
            try:
                y = lib.nn.functional.conv_transpose1d(lib.ones(1, 1, 3), lib.ones(1, 1, 2),
                                                       stride=2, output_padding=op, dilation=d)
                out.append(y)
            except Exception as e:      # noqa: BLE001
                out.append(type(e).__name__)
        return out
    check(s)


def test_conv_shape_errors():
    def s(lib):
        F = lib.nn.functional
        out = []
        for f in (lambda: F.conv2d(lib.ones(1, 3, 5, 5), lib.ones(2, 2, 3, 3)),
                  lambda: F.conv2d(lib.ones(1, 4, 5, 5), lib.ones(3, 2, 3, 3), groups=2),
                  lambda: F.conv2d(lib.ones(1, 1, 2, 2), lib.ones(1, 1, 3, 3)),
                  lambda: F.conv1d(lib.ones(1, 1, 5), lib.ones(1, 1, 3), bias=lib.ones(2)),
                  lambda: lib.nn.Conv2d(4, 4, 3, groups=3),
                  lambda: F.conv2d(lib.ones(2, 5, 5), lib.ones(1, 2, 3, 3))):
            try:
                out.append(f().shape if not isinstance(f(), lib.nn.Module) else "module")
            except Exception as e:      # noqa: BLE001
                out.append(type(e).__name__)
        return out
    check(s)


def test_unbatched_conv_and_pool_inputs():
    def s(lib):
        x = _x(lib, 2, 6, 6)
        c = lib.nn.Conv2d(2, 3, 3)
        ct = lib.nn.ConvTranspose2d(3, 2, 2, stride=2)
        y = lib.nn.functional.max_pool2d(ct(c(x)), 3, 2, ceil_mode=True)
        return _fwd_bwd(lib, x, y) + (c.weight.grad,)
    check(s, rtol=1e-4, atol=1e-5)


def test_adaptive_pools_refuse_empty_pooled_dims():
    def s(lib):
        F = lib.nn.functional
        out = []
        for f, shapes in ((F.adaptive_avg_pool1d, [(0, 3), (2, 0), (2, 0, 3), (2, 3, 0)]),
                          (F.adaptive_max_pool1d, [(0, 3), (2, 0), (2, 0, 3), (2, 3, 0)]),
                          (F.adaptive_avg_pool2d, [(2, 0, 3), (0, 1, 2, 3), (1, 0, 2, 3),
                                                   (1, 1, 0, 3)]),
                          (F.adaptive_max_pool2d, [(2, 0, 3), (0, 1, 2, 3), (1, 0, 2, 3),
                                                   (1, 1, 2, 0)]),
                          (F.adaptive_avg_pool3d, [(0, 1, 2, 2, 2), (1, 0, 2, 2, 2)]),
                          (F.adaptive_max_pool3d, [(2, 2, 2, 0), (1, 0, 2, 2, 2)])):
            for shape in shapes:
                try:
                    out.append(f(lib.ones(shape), 2).shape)
                except RuntimeError as e:
                    out.append(str(e))
        return out
    check(s)


def test_channels_last_input_gives_channels_last_outputs():
    def s(lib):
        x = _x(lib, 2, 3, 6, 6).detach().to(memory_format=lib.channels_last)
        F = lib.nn.functional
        outs = [lib.nn.Conv2d(3, 4, 3, padding=1)(x), F.max_pool2d(x, 2), F.avg_pool2d(x, 3, 1, 1),
                F.adaptive_avg_pool2d(x, 3), lib.nn.BatchNorm2d(3)(x), F.pad(x, (1, 1, 1, 1)),
                F.interpolate(x, scale_factor=2)]
        return [o.stride() for o in outs]
    check(s)
