"""Strided convolutions unfold and fold on phase planes (codegen/lowerings/conv_phases.py):
the three convolution ops against their NumPy implementations over strides, paddings,
dilations, groups, uneven sizes (input rows no window reaches) and both product layouts
(per image and batched), bitwise where the sums are the same; and a small DCGAN step (the
layers of bench/untuned_models_more.py's, two Adams, `.detach()` of the fake batch)
compiled against eager and torch, on 1 and 2 threads: losses, every parameter, gradient,
Adam moment and BatchNorm running statistic after three steps."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import conv_phases
from llgrad.codegen.lowerings.conv_common import Geometry
from llgrad.ir import OPS, Builder, TensorType

# (x shape, weight shape, stride, padding, dilation, groups)
GEOMETRIES = [
    ((3, 4, 16, 16), (8, 4, 4, 4), (2, 2), (1, 1), (1, 1), 1),      # DCGAN's, per image
    ((5, 6, 8, 8), (16, 6, 4, 4), (2, 2), (1, 1), (1, 1), 1),       # 4x4 out: batched
    ((2, 3, 11, 9), (4, 3, 3, 2), (3, 2), (2, 0), (1, 1), 1),       # uneven; rows unreached
    ((2, 4, 13, 12), (6, 2, 3, 3), (2, 2), (1, 2), (2, 1), 2),      # dilation, groups
    ((2, 5, 9, 17), (7, 5, 4, 3), (2, 1), (1, 1), (1, 1), 1),       # strided rows only
    ((3, 2, 20, 18), (5, 2, 5, 5), (2, 3), (2, 1), (1, 1), 1),      # 5x5 offsets
]


def _geometry(g):
    xs, ws, s, p, d, groups = g
    return Geometry(xs, ws, {"stride": s, "padding": p, "dilation": d, "groups": groups})


def _kernel(name, g, dt, rng):
    xs, ws, s, p, d, groups = g
    geo = _geometry(g)
    attrs = {"stride": s, "padding": p, "dilation": d, "groups": groups}
    gs = (xs[0], ws[0], geo.oh, geo.ow)
    if name == "convolution":
        shapes, extra = [xs, ws], [None]
    elif name == "convolution_backward_input":
        shapes, extra, attrs["input_size"] = [gs, ws], [], xs[2:]
    else:
        shapes, extra, attrs["weight_size"] = [gs, xs], [], ws
    arrays = [rng.standard_normal(sh).astype(dt) for sh in shapes]
    bld = Builder("conv")
    ins = [bld.input(TensorType(dt, a.shape, tuple(st // a.itemsize for st in a.strides)))
           for a in arrays]
    return lower(bld.ret(bld.add(name, ins + extra, attrs))), arrays, attrs


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("geo", range(len(GEOMETRIES)))
@pytest.mark.parametrize("name", ["convolution", "convolution_backward_input",
                                  "convolution_backward_weight"])
def test_phase_planes_match_numpy(name, geo, dt):
    k, arrays, attrs = _kernel(name, GEOMETRIES[geo], dt, np.random.default_rng(geo))
    if conv_phases.applies(_geometry(GEOMETRIES[geo]), name):
        assert "pz.head" in k.ir_before            # (the planes are used)
    (got,) = k(arrays)
    want = OPS[name].impl(*arrays, *([None] if name == "convolution" else []), **attrs)
    tol = 1e-4 if dt == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["convolution", "convolution_backward_input",
                                  "convolution_backward_weight"])
def test_batched_unfold_and_fold_split_among_threads(name, threads):
    # a DCGAN's 8x8 -> 4x4 layer: one product over the images, whose unfolds and folds
    # (enough work for two threads) run image by image on the threads' own planes
    g = ((32, 64, 8, 8), (128, 64, 4, 4), (2, 2), (1, 1), (1, 1), 1)
    old = llgrad.get_num_threads()
    try:
        llgrad.set_num_threads(threads)
        k, arrays, attrs = _kernel(name, g, "float32", np.random.default_rng(7))
        assert "i64 512" in k.ir_before                 # (one product over the images)
        assert "llgrad_parallel_run" in k.ir_before     # (its image loops threaded)
        (got,) = k(arrays)
    finally:
        llgrad.set_num_threads(old)
    want = OPS[name].impl(*arrays, *([None] if name == "convolution" else []), **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_phase_planes_are_used_where_they_apply():
    geos = [_geometry(g) for g in GEOMETRIES]
    assert all(conv_phases.applies(g, "convolution_backward_input") for g in geos)
    assert conv_phases.applies(geos[0], "convolution")
    assert not conv_phases.applies(geos[1], "convolution")        # (4-wide rows)
    assert not conv_phases.applies(_geometry(((1, 4, 8, 8), (4, 4, 3, 3), (1, 1), (1, 1),
                                              (1, 1), 1)), "convolution_backward_input")


@pytest.fixture
def direct_loops(monkeypatch):
    """Kernels lowered without the planes (the direct unfold and fold), built afresh: the
    kernel caches key by the graph, which is the same either way."""
    from llgrad.codegen.native import cache, jit
    monkeypatch.setenv("LLGRAD_CACHE_DIR", "0")
    monkeypatch.setattr(conv_phases, "applies", lambda geo, op: False)
    jit._reset()
    cache._reset()
    yield
    monkeypatch.undo()
    jit._reset()
    cache._reset()


@pytest.fixture
def unfold_only(monkeypatch):
    """Kernels built afresh on the unfold path: 4 input channels would take the direct
    kernels of ops_conv_direct.py, which sum in another order."""
    from llgrad.codegen.lowerings import ops_conv_direct
    from llgrad.codegen.native import cache, jit
    monkeypatch.setenv("LLGRAD_CACHE_DIR", "0")
    monkeypatch.setattr(ops_conv_direct, "applies", lambda node, geo, dt: False)
    jit._reset()
    cache._reset()


@pytest.mark.parametrize("name", ["convolution", "convolution_backward_input",
                                  "convolution_backward_weight"])
def test_phase_planes_give_the_direct_loops_bits(name, request):
    # the same terms summed in the same order: equal to the bit, infinities included
    request.getfixturevalue("unfold_only")
    g = GEOMETRIES[0]
    k, arrays, _ = _kernel(name, g, "float32", np.random.default_rng(5))
    arrays[1].flat[::97] = np.inf
    (got,) = k(arrays)
    request.getfixturevalue("direct_loops")
    k2, _, _ = _kernel(name, g, "float32", np.random.default_rng(5))
    assert k2.built_llvm and "pz.head" not in k2.ir_before
    (want,) = k2(arrays)
    np.testing.assert_array_equal(got, want)


def _dcgan(lib):
    nn = lib.nn
    lib.manual_seed(0)
    g = nn.Sequential(nn.ConvTranspose2d(16, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16),
                      nn.ReLU(True), nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False),
                      nn.BatchNorm2d(8), nn.ReLU(True),
                      nn.ConvTranspose2d(8, 4, 4, 2, 1, bias=False), nn.BatchNorm2d(4),
                      nn.ReLU(True), nn.ConvTranspose2d(4, 1, 4, 2, 1, bias=False), nn.Tanh())
    d = nn.Sequential(nn.Conv2d(1, 4, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
                      nn.Conv2d(4, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8),
                      nn.LeakyReLU(0.2, True), nn.Conv2d(8, 16, 4, 2, 1, bias=False),
                      nn.BatchNorm2d(16), nn.LeakyReLU(0.2, True),
                      nn.Conv2d(16, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    opt_g = lib.optim.Adam(g.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = lib.optim.Adam(d.parameters(), 2e-4, betas=(0.5, 0.999))
    crit = nn.BCELoss()
    real, z = lib.rand(4, 1, 32, 32) * 2 - 1, lib.randn(4, 16, 1, 1)
    ones, zeros = lib.ones(4), lib.zeros(4)

    def step():
        opt_d.zero_grad()
        fake = g(z)
        loss_d = crit(d(real).view(-1), ones) + crit(d(fake.detach()).view(-1), zeros)
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = crit(d(fake).view(-1), ones)
        loss_g.backward()
        opt_g.step()
        return loss_d, loss_g
    return step, (g, d), (opt_g, opt_d)


def _run(lib, wrap, steps=3):
    step, models, opts = _dcgan(lib)
    step = wrap(step)
    losses = [[float(v.detach()) for v in step()] for _ in range(steps)]
    state = []
    for m, opt in zip(models, opts):
        for k, v in m.state_dict().items():
            state.append((k, v.detach().numpy().copy()))
        for p in m.parameters():
            st = opt.state[p]
            state += [("grad", p.grad.numpy().copy()),
                      ("exp_avg", st["exp_avg"].numpy().copy()),
                      ("exp_avg_sq", st["exp_avg_sq"].numpy().copy())]
    return losses, state


def _close(a, b, tol):
    la, sa = a
    lb, sb = b
    np.testing.assert_allclose(la, lb, rtol=tol, atol=tol)
    assert [k for k, _ in sa] == [k for k, _ in sb]
    for (k, x), (_, y) in zip(sa, sb):
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol * max(1.0, np.abs(y).max()),
                                   err_msg=k)


@pytest.mark.parametrize("threads", [1, 2])
def test_dcgan_step_compiled_as_eager(threads):
    old = llgrad.get_num_threads()
    try:
        llgrad.set_num_threads(threads)
        got = _run(llgrad, llgrad.compile)
        want = _run(llgrad, lambda f: f)
    finally:
        llgrad.set_num_threads(old)
    _close(got, want, 2e-4)


@pytest.mark.slow          # (torch's first steps of a model take seconds)
def test_dcgan_step_compiled_as_torch():
    torch = pytest.importorskip("torch")
    got = _run(llgrad, llgrad.compile)
    want = _run(torch, lambda f: f)
    _close(got, want, 5e-4)
