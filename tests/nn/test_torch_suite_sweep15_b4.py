"""Sweep 15 (b), continued: losses, padding, fold / unfold, normalisation layers, softmax,
grid_sample / affine_grid, interpolate and transformer layers after PyTorch's
test/test_nn.py, side by side with torch (tests/nn/oracle_sweep15_b.py)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from oracle_sweep15_b import check, compiled_like_eager, raised, randn  # noqa: E402


def test_bce_losses_weights_pos_weight_and_errors():
    def s(T):
        nn = T.nn
        tg, out = T.tensor(np.random.rand(16, 4).astype(np.float32)), randn(T, 16, 4)
        w, w2 = T.tensor([0.2, 1., 3., 0.5]), T.tensor(np.random.rand(16, 1).astype(np.float32))
        o = T.zeros(3, 1, requires_grad=True)
        nn.BCEWithLogitsLoss(pos_weight=T.ones(3, 1), reduction="sum")(o, T.zeros(3, 1)).backward()
        return [nn.BCEWithLogitsLoss(w)(out, tg), nn.BCELoss(w2)(T.sigmoid(out), tg),
                nn.BCEWithLogitsLoss(pos_weight=w.expand(16, 4))(out, tg), o.grad,
                nn.BCELoss()(T.zeros(5), T.zeros(5)), nn.BCELoss()(T.ones(5), T.ones(5)),
                nn.BCEWithLogitsLoss()(T.tensor([0., -120.]), T.tensor([0., 1.])),
                raised(lambda: nn.BCEWithLogitsLoss()(T.ones(5, 1), T.ones(5))),
                raised(lambda: nn.BCELoss()(tg - 1.5, tg)),
                raised(lambda: nn.BCELoss()(T.rand(25), T.rand(25, 1)))]
    check(s)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_ignore_index_weight_smoothing(label_smoothing, reduction):
    def s(T):
        F = T.nn.functional
        x = randn(T, 6, 4, requires_grad=True)
        w = T.tensor([1., 2., 0.5, 3.])
        out = []
        for target, ignore in ((T.tensor([0, 3, -100, 2, 1, -100]), -100),
                               (T.tensor([0, 3, 2, 2, 1, 2]), 2)):
            for weight in (None, w):
                o = F.cross_entropy(x, target, weight=weight, ignore_index=ignore,
                                    reduction=reduction, label_smoothing=label_smoothing)
                out += [o, T.autograd.grad(o.sum(), x)[0]]
        probs = T.softmax(randn(T, 6, 4), 1)
        o = F.cross_entropy(x, probs, weight=w, reduction=reduction,
                            label_smoothing=label_smoothing)
        return out + [o, T.autograd.grad(o.sum(), x)[0],
                      F.cross_entropy(x, T.full((6,), -100), reduction=reduction)]
    check(s)


def test_cross_entropy_target_errors_and_spatial_targets():
    def s(T):
        F = T.nn.functional
        x = randn(T, 6, 4)
        t = T.tensor([0, 3, 1, 2, 1, 1])
        x4 = randn(T, 2, 3, 2, 2, requires_grad=True)
        t4 = T.tensor(np.random.randint(0, 3, (2, 2, 2)))
        t4[0, 0, 0] = -100
        o = F.cross_entropy(x4, t4, weight=T.tensor([1., 2., 3.]), label_smoothing=0.1)
        return [raised(lambda: F.cross_entropy(x, T.tensor([0, 4, 1, 1, 1, 1]))),
                raised(lambda: F.nll_loss(x, T.tensor([0, -1, 1, 1, 1, 1]))),
                raised(lambda: F.cross_entropy(x, t, label_smoothing=1.5)),
                raised(lambda: F.cross_entropy(x, t, weight=T.ones(3))), o,
                T.autograd.grad(o, x4)[0],
                F.cross_entropy(randn(T, 4), T.tensor(2), label_smoothing=0.1)]
    check(s)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_of_an_empty_batch(reduction):
    def s(T):
        F = T.nn.functional
        x = T.zeros(0, 3, requires_grad=True)
        z, zl = T.zeros(0, 3), T.zeros(0, dtype=T.long)
        out = []
        for f in (lambda: F.cross_entropy(x, zl, reduction=reduction),
                  lambda: F.nll_loss(x, zl, reduction=reduction),
                  lambda: F.cross_entropy(x, z, reduction=reduction),
                  lambda: F.cross_entropy(x, zl, reduction=reduction, label_smoothing=0.1),
                  lambda: F.mse_loss(x, z, reduction=reduction),
                  lambda: F.l1_loss(x, z, reduction=reduction),
                  lambda: F.smooth_l1_loss(x, z, reduction=reduction),
                  lambda: F.huber_loss(x, z, reduction=reduction),
                  lambda: F.binary_cross_entropy_with_logits(x, z, reduction=reduction),
                  lambda: F.kl_div(x, z, reduction=reduction),
                  lambda: F.soft_margin_loss(x, z, reduction=reduction)):
            o = f()
            out += [o, T.autograd.grad(o.sum(), x, allow_unused=True)[0]]
        return out
    check(s)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes_values_grads_and_errors(mode):
    def s(T):
        F = T.nn.functional
        out = []
        for nd in (1, 2, 3):
            x = randn(T, *((2, 3) + (4,) * nd), dtype=np.float64, requires_grad=True)
            for pad in ((1, 2) * nd, (2, 0) * nd, (-1, 1) * nd):
                try:
                    o = F.pad(x, pad, mode=mode, value=1.5 if mode == "constant" else None)
                    out += [o, T.autograd.grad((o * o).sum(), x)[0]]
                except Exception as e:
                    out.append(type(e).__name__)
        for shape, pad in (((1, 2, 3), (3, 0)), ((1, 2, 3), (4, 0)), ((1, 2, 3), (1,)),
                           ((2, 3), (1, 1)), ((2, 0, 3), (1, 1)), ((1, 2, 3), (1, 1, 1, 1))):
            out.append(raised(lambda: F.pad(T.ones(*shape), pad, mode=mode)))
        return out
    check(s)


def test_fold_unfold_round_trips_and_errors():
    def s(T):
        F = T.nn.functional
        x = randn(T, 2, 3, 5, 6, dtype=np.float64, requires_grad=True)
        out = []
        for k, d, p, st in ((2, 1, 0, 1), ((2, 3), (1, 2), (1, 0), (2, 1)), (3, 1, 1, 2)):
            u = F.unfold(x, k, dilation=d, padding=p, stride=st)
            f = F.fold(u, (5, 6), k, dilation=d, padding=p, stride=st)
            out += [u, f, T.autograd.grad(f.sum() + (u * u).sum(), x)[0]]
        return out + [F.unfold(randn(T, 3, 5, 6), 2).shape, F.fold(T.ones(12, 12), (4, 5), 2),
                      raised(lambda: F.unfold(T.ones(2, 3, 4), 5)),
                      raised(lambda: F.fold(T.ones(2, 13, 12), (4, 5), 2)),
                      raised(lambda: F.unfold(T.ones(1, 1, 3, 3), 2, stride=0)),
                      repr(T.nn.Fold((4, 5), 2)), repr(T.nn.Unfold(2, stride=2))]
    check(s)


_NORMS = [
    lambda T: T.nn.BatchNorm1d(3, momentum=None),
    lambda T: T.nn.BatchNorm1d(3, track_running_stats=False),
    lambda T: T.nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
    lambda T: T.nn.InstanceNorm1d(3),
    lambda T: T.nn.GroupNorm(3, 3),
    lambda T: T.nn.GroupNorm(1, 3, affine=False),
    lambda T: T.nn.LayerNorm([3, 5]),
    lambda T: T.nn.LayerNorm(5, elementwise_affine=False, bias=False),
    lambda T: T.nn.RMSNorm([5]),
    lambda T: T.nn.LocalResponseNorm(2),
]


@pytest.mark.parametrize("i", range(len(_NORMS)))
def test_normalisation_layers_train_eval_train(i):
    def s(T):
        m = _NORMS[i](T).double()
        x = randn(T, 4, 3, 5, dtype=np.float64, requires_grad=True)
        out = []
        for train in (True, False, True):
            o = m.train(train)(x)
            out += [o, T.autograd.grad((o * o).sum(), x)[0]]
        return out + list(m.buffers())
    check(s, tol=1e-9)


def test_batch_norm_buffers_and_errors():
    def s(T):
        F = T.nn.functional
        bn = T.nn.BatchNorm1d(4)
        bn.track_running_stats = False
        before = [b.clone() for b in bn.buffers()]
        y = bn(T.tensor(np.random.rand(8, 4).astype(np.float32)))
        bn2 = T.nn.BatchNorm2d(3)
        bn2.num_batches_tracked = T.tensor(10)
        bn2.load_state_dict({}, strict=False)
        x = T.rand(2, 10)
        return [y, [bool(T.equal(a, b)) for a, b in zip(before, bn.buffers())],
                bn2.state_dict()["num_batches_tracked"],
                raised(lambda: T.nn.BatchNorm1d(10)(T.rand(1, 10))),
                raised(lambda: F.batch_norm(x, T.rand(9), T.rand(10))),
                raised(lambda: F.batch_norm(x, T.rand(10), T.rand(10), weight=T.rand(11))),
                raised(lambda: T.nn.GroupNorm(2, 3)), raised(lambda: T.nn.LayerNorm(4)(x)),
                raised(lambda: T.nn.InstanceNorm1d(3)(T.ones(2, 4, 5)))]
    check(s)


def test_softmax_family_on_empty_and_zero_dim_inputs():
    def s(T):
        F = T.nn.functional
        out = []
        for f in (F.softmax, F.log_softmax, F.softmin):
            for x in (T.zeros(0, 3), T.zeros(3, 0), T.tensor(2.0), T.zeros(2, 0, 4)):
                out += [f(x, 0), f(x, -1)]
            x = T.tensor(1.5, requires_grad=True)
            o = f(x, 0)
            out += [o, T.autograd.grad(o, x)[0], raised(lambda: f(T.ones(2, 3), 2)),
                    f(T.tensor([[1., 2.], [3., 4.]]), 1, dtype=T.float64),
                    raised(lambda: f(T.tensor([[1, 2]]), 1))]
        return out + [F.softmax(T.tensor([float("-inf")] * 2), 0),
                      raised(lambda: T.nn.Softmax2d()(T.ones(2, 3)))]
    check(s)


def test_grid_sample_and_affine_grid_errors():
    def s(T):
        F = T.nn.functional
        inp, g = T.zeros(1, 1, 2, 2), T.zeros(1, 1, 1, 2)
        th, th3 = T.zeros(1, 2, 3, dtype=T.double), T.zeros(1, 3, 4, dtype=T.double)
        out = [raised(lambda: F.grid_sample(inp, g, mode="garbage", align_corners=False)),
               raised(lambda: F.grid_sample(inp, g, padding_mode="garbage")),
               raised(lambda: F.grid_sample(inp[0], g, align_corners=False)),
               raised(lambda: F.grid_sample(inp, T.zeros(2, 1, 1, 2), align_corners=False)),
               raised(lambda: F.grid_sample(T.zeros(1, 1, 0, 2), g, align_corners=False)),
               raised(lambda: F.grid_sample(T.zeros(1, 1, 2, 2, 2), T.zeros(1, 1, 1, 1, 3),
                                            mode="bicubic", align_corners=False))]
        for bad, size in ((th.int(), [1, 1, 2, 2]), (th[0], [1, 1, 2, 2]),
                          (th.repeat(1, 1, 2), [1, 1, 2, 2]),
                          (th3.repeat(1, 2, 1), [1, 1, 2, 2, 2]),
                          (th3, [1, 2, 2]), (th3, [1, 1, 2, 2, 2, 2])):
            out.append(raised(lambda: F.affine_grid(bad, size, align_corners=False)))
        for ac in (False, True):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                F.affine_grid(th, [1, 1, 2, 1], align_corners=ac)
            out.append(len(w))
        return out
    check(s)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_known_points_and_grid_gradients(mode, padding_mode):
    def s(T):
        F = T.nn.functional
        out = []
        for ac in (True, False):
            inp = T.arange(1., 11).view(1, 1, 2, 5)
            grid = T.tensor([[-0.9, -4.1], [0, 0.2], [1, -1], [-0.333, 1e-6], [0.5, 1.0],
                             [-1.0, -0.5], [0, 0.3333], [1, -1], [-0.2, 1e-6], [1.5, 0.5]])
            out.append(F.grid_sample(inp, grid.view(1, 2, 5, 2), mode=mode,
                                     padding_mode=padding_mode, align_corners=ac))
            g = T.tensor([[1.0, 1.0], [1.0, -1.0], [0.8, 0.8], [0.8, -0.8], [-1.0, -1.0],
                          [-1.0, 1.0], [-0.8, -0.8], [-0.8, 0.8]]).view(1, 2, 4, 2)
            g.requires_grad_()
            x = T.arange(0., 5).expand((1, 1, 5, 5)).clone().requires_grad_()
            y = F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=ac)
            out += list(T.autograd.grad(y.sum(), (x, g)))
        return out
    check(s, tol=1e-4)


def test_interpolate_scale_factor_edge_cases():
    def s(T):
        F = T.nn.functional
        x = T.ones(1, 1, 16, 16)
        out = [raised(lambda: F.interpolate(x, scale_factor=sf, mode="bilinear"))
               for sf in (-1e20, 1e20, -1.0, 0.01)]
        out.append(F.interpolate(T.arange(8.).view(1, 2, 2, 2).double(), scale_factor=2.3,
                                 mode="bicubic", align_corners=False,
                                 recompute_scale_factor=False))
        up = T.nn.Upsample(scale_factor=0.5, mode="bilinear")
        out.append(up(T.arange(1., 5).view(1, 1, 2, 2)))
        for rsf in (True, False):
            y = randn(T, 1, 1, 5, dtype=np.float64, requires_grad=True)
            o = F.interpolate(y, scale_factor=1.5, mode="linear", recompute_scale_factor=rsf)
            out += [o, T.autograd.grad(o.sum(), y)[0]]
        return out
    check(s)


def test_modules_on_an_empty_batch_give_zero_gradients():
    def s(T):
        out = []
        for m, shape in ((T.nn.Conv2d(3, 4, 3), (0, 3, 5, 5)), (T.nn.Linear(3, 4), (0, 3)),
                         (T.nn.BatchNorm2d(3), (0, 3, 2, 2)), (T.nn.GroupNorm(1, 3), (0, 3, 2)),
                         (T.nn.ConvTranspose1d(3, 2, 2), (0, 3, 4)),
                         (T.nn.MaxPool2d(2), (0, 3, 4, 4)),
                         (T.nn.MaxPool1d(2, ceil_mode=True), (0, 3, 5)),
                         (T.nn.LSTM(3, 2), (4, 0, 3))):
            x = T.zeros(*shape, requires_grad=True)
            y = m(x)
            y = y[0] if isinstance(y, tuple) else y
            y.backward(T.ones_like(y))
            out.append([y.shape, x.grad] + [p.grad for p in m.parameters()])
        return out + [raised(lambda: T.nn.MaxPool2d(2)(T.zeros(0, 0, 4, 4))),
                      raised(lambda: T.nn.MaxPool2d(2)(T.zeros(2, 3, 0, 4)))]
    check(s)


def test_max_pool_empty_batch_compiled_like_eager():
    def f(x):
        return llgrad.nn.functional.max_pool2d(x * 2, 2, ceil_mode=True)
    compiled_like_eager(f, np.zeros((0, 3, 5, 4), np.float32))


def test_layer_norm_and_group_norm_shape_checks():
    def s(T):
        out = [raised(lambda: T.nn.LayerNorm(ns)(T.ones(*shape)))
               for ns, shape in (((), ()), ((2, 3), (3,)), ((2,), (1, 2, 3)), ((10,), (2, 3)),
                                 (10, (2, 3)))]
        out += [raised(lambda: T.nn.GroupNorm(g, c)) for g, c in ((3, 2), (2, 3), (4, 6))]
        for shape, g in (((1, 2, 3, 4), 2), ((3, 1, 1, 1, 2), 1), ((1, 16, 1, 1), 8)):
            x = T.tensor(np.random.uniform(0, 10, shape), requires_grad=True)
            gn = T.nn.GroupNorm(g, shape[1], eps=0).double()
            y = gn(x)
            y.backward(T.ones_like(y))
            out += [y, x.grad, gn.weight.grad]
        return out
    check(s, tol=1e-7)


def test_instance_norm_parameter_dtypes_checked_like_batch_norm():
    def s(T):
        x = T.ones(2, 3, 5, dtype=T.float64)
        F = T.nn.functional
        return [F.instance_norm(x, running_mean=T.zeros(3), running_var=T.ones(3)),
                raised(lambda: F.instance_norm(x, weight=T.ones(3, dtype=T.float64),
                                               bias=T.zeros(3))),
                raised(lambda: F.instance_norm(x, weight=T.ones(3))),
                raised(lambda: T.nn.InstanceNorm1d(3, affine=True)(x)),
                F.instance_norm(T.ones(2, 3, 5, dtype=T.float16), weight=T.ones(3))]
    check(s)
