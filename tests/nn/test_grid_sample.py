"""F.affine_grid and F.grid_sample (llgrad/nn/functional_grid.py): values and float64
gradients (input and grid) against torch for every mode, padding mode and align_corners,
5-D inputs, grids on the borders (affine_grid's corners, where the kernel's clip passes no
gradient), PyTorch's errors and warnings, gradcheck without torch, compiled == eager, and the
spatial transformer tutorial's network: its forward and gradients against torch, and a
compiled training step equal to eager."""
import itertools
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F

RNG = np.random.default_rng(21)
MODES = ["bilinear", "nearest", "bicubic"]
PADDINGS = ["zeros", "border", "reflection"]


def _torch():
    return pytest.importorskip("torch")


def _sample_both(x, g, **kw):
    """grid_sample's output and the gradients of input and grid (fixed cotangent), in llgrad
    and torch (float64)."""
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        xt = lib.tensor(x, requires_grad=True)
        gt = lib.tensor(g, requires_grad=True)
        y = lib.nn.functional.grid_sample(xt, gt, **kw)
        cot = np.random.default_rng(1).standard_normal(tuple(y.shape))
        (y * lib.tensor(cot)).sum().backward()
        out.append((y.detach().numpy(), xt.grad.numpy(), gt.grad.numpy()))
    return out


def _assert_close(a, b, tol=1e-12):
    for u, v in zip(a, b):
        assert u.shape == v.shape
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol * 10)


X = RNG.standard_normal((2, 3, 5, 6))
GRID_IN = RNG.uniform(-1.2, 1.2, (2, 4, 7, 2))          # a little outside [-1, 1]
GRID_FAR = RNG.uniform(-6.0, 6.0, (2, 4, 7, 2))         # many reflections


@pytest.mark.parametrize("mode,padding,align", list(itertools.product(MODES, PADDINGS,
                                                                       [False, True])))
def test_grid_sample_matches_torch(mode, padding, align):
    for g in (GRID_IN, GRID_FAR):
        a, b = _sample_both(X, g, mode=mode, padding_mode=padding, align_corners=align)
        _assert_close(a, b, 1e-11)


@pytest.mark.parametrize("mode,padding,align", list(itertools.product(
    ["bilinear", "nearest"], PADDINGS, [False, True])))
def test_grid_sample_5d_matches_torch(mode, padding, align):
    x = RNG.standard_normal((2, 2, 3, 4, 5))
    g = RNG.uniform(-1.3, 1.3, (2, 3, 2, 4, 3))
    a, b = _sample_both(x, g, mode=mode, padding_mode=padding, align_corners=align)
    _assert_close(a, b, 1e-11)


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_matches_torch_and_border_gradients(align):
    torch = _torch()
    theta = np.array([[[1.0, 0, 0], [0, 1, 0]], [[0.8, 0.3, 0.1], [-0.2, 0.9, 0.05]]])
    cot = RNG.standard_normal((2, 5, 6, 2))
    res = []
    for lib in (llgrad, torch):
        t = lib.tensor(theta, requires_grad=True)
        grid = lib.nn.functional.affine_grid(t, [2, 3, 5, 6], align_corners=align)
        (grid * lib.tensor(cot)).sum().backward()
        res.append((grid.detach().numpy(), t.grad.numpy()))
    _assert_close(*res)
    # identity theta puts points exactly on the borders with align_corners: the clip of
    # border / reflection padding passes them no gradient, as the kernel counts them outside
    grid = res[1][0]
    for mode, padding in itertools.product(MODES, PADDINGS):
        a, b = _sample_both(X, grid, mode=mode, padding_mode=padding, align_corners=align)
        _assert_close(a, b, 1e-11)


def test_affine_grid_3d_and_unit_sizes_match_torch():
    torch = _torch()
    theta = RNG.standard_normal((2, 3, 4))
    for size, align in (([2, 1, 3, 4, 5], False), ([2, 1, 3, 4, 5], True),
                        ([2, 1, 1, 4, 1], False)):
        res = []
        for lib in (llgrad, torch):
            t = lib.tensor(theta, requires_grad=True)
            grid = lib.nn.functional.affine_grid(t, size, align_corners=align)
            grid.pow(2).sum().backward()
            res.append((grid.detach().numpy(), t.grad.numpy()))
        _assert_close(*res)
    unit = RNG.standard_normal((1, 2, 3))
    for lib in (llgrad, torch):            # unit sizes: a single point at 0
        th = lib.tensor(unit)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = lib.nn.functional.affine_grid(th, [1, 1, 1, 3], align_corners=True)
        res.append(g.numpy())
    np.testing.assert_allclose(res[-2], res[-1], rtol=1e-6)


def test_float32_matches_torch():
    torch = _torch()
    x = RNG.standard_normal((2, 3, 8, 9)).astype(np.float32)
    theta = (np.eye(2, 3) + RNG.standard_normal((2, 2, 3)) * 0.2).astype(np.float32)
    out = []
    for lib in (llgrad, torch):
        f = lib.nn.functional
        grid = f.affine_grid(lib.tensor(theta), [2, 3, 6, 7], align_corners=False)
        out.append(f.grid_sample(lib.tensor(x), grid, align_corners=False).numpy())
    assert out[0].dtype == np.float32
    np.testing.assert_allclose(out[0], out[1], rtol=1e-5, atol=1e-5)


def test_errors_and_warnings_match_torch():
    torch = _torch()
    x, g = RNG.standard_normal((2, 3, 4, 5)), RNG.uniform(-1, 1, (2, 6, 7, 2))
    cases = [
        lambda L: L.nn.functional.grid_sample(L.tensor(x), L.tensor(g[:1]), align_corners=False),
        lambda L: L.nn.functional.grid_sample(L.tensor(x), L.tensor(np.zeros((2, 6, 7, 3))),
                                              align_corners=False),
        lambda L: L.nn.functional.grid_sample(L.tensor(x[:, :, :0]), L.tensor(g),
                                              align_corners=False),
        lambda L: L.nn.functional.grid_sample(L.tensor(x[:, :, None]),
                                              L.tensor(np.zeros((2, 1, 6, 7, 3))),
                                              mode="bicubic", align_corners=False),
        lambda L: L.nn.functional.grid_sample(L.tensor(x), L.tensor(g), mode="area"),
        lambda L: L.nn.functional.grid_sample(L.tensor(x), L.tensor(g), padding_mode="wrap"),
        lambda L: L.nn.functional.grid_sample(L.tensor(x, dtype=L.float32), L.tensor(g),
                                              align_corners=False),
        lambda L: L.nn.functional.affine_grid(L.tensor([[[1, 0, 0], [0, 1, 0]]]), [1, 1, 2, 2],
                                              align_corners=False),
        lambda L: L.nn.functional.affine_grid(L.tensor(np.zeros((2, 2, 4))), [2, 3, 4, 5],
                                              align_corners=False),
        lambda L: L.nn.functional.affine_grid(L.tensor(np.zeros((2, 2, 3))), [2, 3, 5],
                                              align_corners=False),
        lambda L: L.nn.functional.affine_grid(L.tensor(np.zeros((2, 2, 3))), [2, 3, 0, 5],
                                              align_corners=False),
        lambda L: L.nn.functional.affine_grid(L.tensor(np.zeros((2, 2, 3))), [3, 3, 4, 5],
                                              align_corners=False),
    ]
    for case in cases:
        msgs = []
        for lib in (llgrad, torch):
            with pytest.raises(Exception) as info:
                case(lib)
            msgs.append((info.type.__name__, str(info.value).replace("torch.", "")))
        assert msgs[0][0] == msgs[1][0]
        assert msgs[0][1].replace("llgrad.", "") == msgs[1][1]
    for fn in (lambda: F.grid_sample(llgrad.zeros(1, 1, 2, 2), llgrad.zeros(1, 1, 1, 2)),
               lambda: F.affine_grid(llgrad.eye(2, 3).unsqueeze(0), [1, 1, 2, 2])):
        with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior"):
            fn()
    with pytest.warns(UserWarning, match="affine_grid behavior has changed for unit-size"):
        F.affine_grid(llgrad.eye(2, 3).unsqueeze(0), [1, 1, 1, 3], align_corners=True)


def test_nonfinite_grid_values_match_torch():
    """NaN and infinite coordinates: zeros padding reads nothing, border and reflection clip
    them (the kernel's max(NaN, 0) is 0), bicubic gives NaN, as PyTorch's CPU kernel."""
    torch = _torch()
    x = RNG.standard_normal((1, 2, 4, 4))
    g = np.array([[[[0.1, 0.2], [np.nan, 0.0], [0.3, np.inf], [-np.inf, 0.5]]]])
    for mode, padding, align in itertools.product(MODES, PADDINGS, [False, True]):
        with np.errstate(invalid="ignore"):         # (inf - inf in NumPy's eager kernels)
            a, b = (lib.nn.functional.grid_sample(lib.tensor(x), lib.tensor(g), mode=mode,
                                                  padding_mode=padding,
                                                  align_corners=align).numpy()
                    for lib in (llgrad, torch))
        np.testing.assert_allclose(a, b, rtol=1e-12, equal_nan=True)


def test_empty_batch_and_channels_and_nearest_grid_gradient():
    x = llgrad.randn(2, 0, 4, 4, requires_grad=True)
    g = llgrad.rand(2, 3, 3, 2, requires_grad=True)
    assert tuple(F.grid_sample(x, g, align_corners=False).shape) == (2, 0, 3, 3)
    assert tuple(F.grid_sample(llgrad.randn(0, 2, 4, 4), llgrad.rand(0, 3, 3, 2),
                               align_corners=False).shape) == (0, 2, 3, 3)
    # nearest mode: the grid gets a zero gradient (not none), NaN in the grid included
    x = llgrad.randn(1, 2, 4, 4, requires_grad=True)
    g = llgrad.tensor([[[[0.1, 0.2], [float("nan"), 0.0]]]], requires_grad=True)
    F.grid_sample(x, g, mode="nearest", align_corners=False).sum().backward()
    assert g.grad is not None and np.array_equal(g.grad.numpy(), np.zeros((1, 1, 2, 2)))


@pytest.mark.parametrize("mode,padding", [("bilinear", "zeros"), ("bilinear", "reflection"),
                                          ("bicubic", "border")])
def test_gradcheck(mode, padding):
    x = llgrad.tensor(RNG.standard_normal((1, 2, 4, 5)), requires_grad=True)
    g = llgrad.tensor(RNG.uniform(-1.1, 1.1, (1, 3, 2, 2)), requires_grad=True)
    assert llgrad.autograd.gradcheck(
        lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=False),
        (x, g))
    theta = llgrad.tensor(RNG.standard_normal((2, 2, 3)), requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda t: F.affine_grid(t, [2, 1, 3, 4],
                                                             align_corners=True), (theta,))


@pytest.mark.parametrize("mode,padding", [("bilinear", "zeros"), ("nearest", "border"),
                                          ("bicubic", "reflection")])
def test_compiled_equals_eager(mode, padding):
    x = llgrad.tensor(RNG.standard_normal((2, 3, 6, 7)).astype(np.float32), requires_grad=True)
    theta = llgrad.tensor((np.eye(2, 3) + RNG.standard_normal((2, 2, 3)) * 0.1)
                          .astype(np.float32), requires_grad=True)

    def loss(x, theta):
        grid = F.affine_grid(theta, [2, 3, 5, 4], align_corners=False)
        return F.grid_sample(x, grid, mode=mode, padding_mode=padding,
                             align_corners=False).pow(2).sum()

    results = []
    for fn in (loss, llgrad.compile(loss)):
        for _ in range(2):
            x.grad = theta.grad = None
            value = fn(x, theta)
            value.backward()
        results.append((value.item(), x.grad.numpy().copy(), theta.grad.numpy().copy()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    for a, b in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _stn_net(lib):
    """The spatial transformer tutorial's network (PyTorch's tutorial, as written there)."""
    nn_, F_ = lib.nn, lib.nn.functional

    class Net(nn_.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn_.Conv2d(1, 10, kernel_size=5)
            self.conv2 = nn_.Conv2d(10, 20, kernel_size=5)
            self.conv2_drop = nn_.Dropout2d()
            self.fc1 = nn_.Linear(320, 50)
            self.fc2 = nn_.Linear(50, 10)
            self.localization = nn_.Sequential(
                nn_.Conv2d(1, 8, kernel_size=7), nn_.MaxPool2d(2, stride=2), nn_.ReLU(True),
                nn_.Conv2d(8, 10, kernel_size=5), nn_.MaxPool2d(2, stride=2), nn_.ReLU(True))
            self.fc_loc = nn_.Sequential(nn_.Linear(10 * 3 * 3, 32), nn_.ReLU(True),
                                         nn_.Linear(32, 3 * 2))
            self.fc_loc[2].weight.data.zero_()
            self.fc_loc[2].bias.data.copy_(lib.tensor([1, 0, 0, 0, 1, 0], dtype=lib.float))

        def stn(self, x):
            xs = self.localization(x)
            xs = xs.view(-1, 10 * 3 * 3)
            theta = self.fc_loc(xs)
            theta = theta.view(-1, 2, 3)
            grid = F_.affine_grid(theta, x.size())
            return F_.grid_sample(x, grid)

        def forward(self, x):
            x = self.stn(x)
            x = F_.relu(F_.max_pool2d(self.conv1(x), 2))
            x = F_.relu(F_.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 320)
            x = F_.relu(self.fc1(x))
            x = F_.dropout(x, training=self.training)
            x = self.fc2(x)
            return F_.log_softmax(x, dim=1)

    return Net()


def test_spatial_transformer_tutorial_matches_torch():
    torch = _torch()
    nets = [_stn_net(llgrad), _stn_net(torch)]
    state = {k: v.detach().numpy() + 0.01 * RNG.standard_normal(v.shape).astype(np.float32)
             for k, v in nets[1].state_dict().items()}    # (theta away from the identity)
    nets[0].load_state_dict({k: llgrad.tensor(v) for k, v in state.items()})
    nets[1].load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    x = RNG.standard_normal((4, 1, 28, 28)).astype(np.float32)
    y = np.array([3, 1, 4, 1])
    res = []
    for lib, net in zip((llgrad, torch), nets):
        net.eval()                                           # (no dropout: other streams)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loss = lib.nn.functional.nll_loss(net(lib.tensor(x)), lib.tensor(y))
        loss.backward()
        res.append((loss.item(), {k: p.grad.numpy() for k, p in net.named_parameters()}))
    assert res[0][0] == pytest.approx(res[1][0], rel=1e-5)
    for k in res[0][1]:
        np.testing.assert_allclose(res[0][1][k], res[1][1][k], rtol=2e-3, atol=2e-5,
                                   err_msg=k)


def test_spatial_transformer_training_step_compiled_equals_eager():
    llgrad.manual_seed(0)
    x = llgrad.randn(4, 1, 28, 28)
    y = llgrad.tensor([3, 1, 4, 1])
    results = []
    for compiled in (False, True):
        llgrad.manual_seed(1)
        net = _stn_net(llgrad)
        with llgrad.no_grad():                  # theta away from the identity
            net.fc_loc[2].weight.normal_(0.0, 0.01)
        opt = llgrad.optim.SGD(net.parameters(), lr=0.05, momentum=0.5)

        def step(x, y):
            opt.zero_grad()
            loss = F.nll_loss(net(x), y)
            loss.backward()
            opt.step()
            return loss

        run = llgrad.compile(step) if compiled else step
        llgrad.manual_seed(2)                   # the same dropout masks in both
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            losses = [run(x, y).item() for _ in range(3)]
        results.append((losses, {k: p.detach().numpy().copy()
                                 for k, p in net.named_parameters()}))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-4)
    for k in results[0][1]:
        np.testing.assert_allclose(results[0][1][k], results[1][1][k], rtol=1e-3, atol=1e-5,
                                   err_msg=k)


def test_module_free_function_and_torch_names():
    x = llgrad.randn(1, 2, 4, 4)
    g = llgrad.rand(1, 3, 3, 2) * 2 - 1
    ref = F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True)
    for fn in (llgrad.grid_sampler, llgrad.grid_sampler_2d):
        np.testing.assert_array_equal(fn(x, g, 1, 1, True).numpy(), ref.numpy())
    theta = llgrad.randn(1, 2, 3)
    np.testing.assert_array_equal(llgrad.affine_grid_generator(theta, [1, 2, 3, 3], False)
                                  .numpy(), F.affine_grid(theta, [1, 2, 3, 3], False).numpy())
    with pytest.raises(RuntimeError, match="expected 5D input"):
        llgrad.grid_sampler_3d(x, g, 0, 0, False)
