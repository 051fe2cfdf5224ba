"""torch.nn.functional argument combinations (helper s78 X): conv padding 'same'/'valid' with
even kernels, dilation, groups, padding modes and stride > kernel; conv_transpose output
padding; pools in ceil mode whose last window would start in the padding; unpool; adaptive
pools to larger sizes; interpolate, pad and grid_sample grids; embedding options; losses with
probability targets, smoothing, weights and ignored targets; norms with running stats.
Float64 values and gradients against PyTorch, eagerly; compiled (after its native build)
must equal eager."""
import itertools

import numpy as np
import pytest

from parity_harness_s64_f8 import check, rnd

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

F = lambda L: L.nn.functional  # noqa: E731
CASES = []


def add(name, fn, specs):
    CASES.append((name, fn, specs))


# -- convolutions ------------------------------------------------------------------------
for pad, k, d in itertools.product(("same", "valid"), (2, 4), (1, 2)):
    add(f"conv1d_{pad}_k{k}_d{d}_g2", lambda L, x, w, b, pad=pad, d=d: F(L).conv1d(
        x, w, b, padding=pad, dilation=d, groups=2), [rnd(2, 4, 9), rnd(6, 2, k, seed=1),
                                                      rnd(6, seed=2)])
    add(f"conv2d_{pad}_k{k}_d{d}_g2", lambda L, x, w, pad=pad, d=d: F(L).conv2d(
        x, w, padding=pad, dilation=(d, 1), groups=2), [rnd(1, 4, 7, 8), rnd(4, 2, k, 3, seed=1)])
    add(f"conv3d_{pad}_k{k}_d{d}", lambda L, x, w, pad=pad, d=d: F(L).conv3d(
        x, w, padding=pad, dilation=d), [rnd(1, 2, 8, 6, 7), rnd(3, 2, k, 2, 3, seed=1)])
add("conv2d_stride_gt_k", lambda L, x, w: F(L).conv2d(x, w, stride=(3, 4), padding=1),
    [rnd(1, 2, 9, 10), rnd(3, 2, 2, 2, seed=1)])
add("conv1d_stride_gt_k_dil", lambda L, x, w: F(L).conv1d(x, w, stride=5, dilation=2),
    [rnd(1, 2, 17), rnd(3, 2, 2, seed=1)])


def _module(L, cls, w, b=None, **kw):
    m = getattr(L.nn, cls)(bias=b is not None, **kw).double()
    with L.no_grad():
        m.weight.copy_(w)
        if b is not None:
            m.bias.copy_(b)
    return m


for pm in ("reflect", "replicate", "circular", "zeros"):
    add(f"Conv2d_{pm}_g2_dil", lambda L, x, w, b, pm=pm: _module(
        L, "Conv2d", w, b, in_channels=4, out_channels=6, kernel_size=(3, 2), stride=(2, 1),
        padding=(2, 1), dilation=(1, 2), groups=2, padding_mode=pm)(x),
        [rnd(2, 4, 6, 7), rnd(6, 2, 3, 2, seed=1), rnd(6, seed=2)])
    add(f"Conv1d_same_even_{pm}", lambda L, x, w, pm=pm: _module(
        L, "Conv1d", w, in_channels=2, out_channels=2, kernel_size=4, padding="same",
        padding_mode=pm)(x), [rnd(2, 2, 7), rnd(2, 2, 4, seed=1)])
    add(f"Conv3d_{pm}", lambda L, x, w, pm=pm: _module(
        L, "Conv3d", w, in_channels=2, out_channels=2, kernel_size=3, padding=(1, 2, 1),
        padding_mode=pm)(x), [rnd(1, 2, 4, 5, 3), rnd(2, 2, 3, 3, 3, seed=1)])
    add(f"Conv2d_same_even_dil_{pm}", lambda L, x, w, pm=pm: _module(
        L, "Conv2d", w, in_channels=2, out_channels=2, kernel_size=(2, 4), padding="same",
        dilation=(3, 1), padding_mode=pm)(x), [rnd(1, 2, 7, 6), rnd(2, 2, 2, 4, seed=1)])
    add(f"Conv1d_stride_gt_k_{pm}", lambda L, x, w, pm=pm: _module(
        L, "Conv1d", w, in_channels=2, out_channels=4, kernel_size=3, stride=4, padding=2,
        groups=2, padding_mode=pm)(x), [rnd(3, 2, 9), rnd(4, 1, 3, seed=1)])
    add(f"Conv2d_unbatched_{pm}", lambda L, x, w, pm=pm: _module(
        L, "Conv2d", w, in_channels=2, out_channels=2, kernel_size=3, padding=1,
        padding_mode=pm)(x), [rnd(2, 5, 4), rnd(2, 2, 3, 3, seed=1)])
add("convT1d_op_g_d", lambda L, x, w, b: F(L).conv_transpose1d(
    x, w, b, stride=3, padding=2, output_padding=2, groups=2, dilation=2),
    [rnd(2, 4, 5), rnd(4, 3, 3, seed=1), rnd(6, seed=2)])
add("convT2d_op_g_d", lambda L, x, w: F(L).conv_transpose2d(
    x, w, stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(2, 1)),
    [rnd(1, 4, 4, 3), rnd(4, 1, 3, 2, seed=1)])
add("convT3d_op", lambda L, x, w: F(L).conv_transpose3d(
    x, w, stride=2, output_padding=1, dilation=(1, 2, 1)), [rnd(1, 2, 3, 2, 3),
                                                           rnd(2, 2, 2, 2, 2, seed=1)])
add("convT2d_op_g4", lambda L, x, w: F(L).conv_transpose2d(
    x, w, stride=3, output_padding=(2, 1), groups=4, padding=1),
    [rnd(1, 4, 3, 3), rnd(4, 2, 2, 2, seed=1)])
# output_padding may reach the dilation when the stride is smaller
add("convT1d_op_ge_stride_lt_dil", lambda L, x, w: F(L).conv_transpose1d(
    x, w, stride=2, output_padding=2, dilation=3), [rnd(1, 2, 4), rnd(2, 3, 2, seed=1)])

# -- pools -----------------------------------------------------------------------------
# in 5, kernel 4, stride 4, padding 2, ceil: the third window would start at padded index 8,
# past the input and its left padding, so PyTorch drops it
add("maxpool1d_ceil_drop", lambda L, x: F(L).max_pool1d(x, 4, 4, 2, ceil_mode=True),
    [rnd(1, 2, 5)])
add("maxpool1d_ceil_dil", lambda L, x: F(L).max_pool1d(x, 2, 3, padding=1, dilation=2,
                                                       ceil_mode=True), [rnd(1, 2, 8)])
add("maxpool3d_ceil", lambda L, x: F(L).max_pool3d(x, 2, 2, padding=1, ceil_mode=True),
    [rnd(1, 1, 4, 5, 3)])
for cip, dv in itertools.product((False, True), (None, 3)):
    add(f"avgpool1d_ceil_drop_{cip}_{dv}", lambda L, x, cip=cip, dv=dv: F(L).avg_pool1d(
        x, 4, 4, 2, ceil_mode=True, count_include_pad=cip), [rnd(1, 2, 5)])
    add(f"avgpool2d_ceil_{cip}_{dv}", lambda L, x, cip=cip, dv=dv: F(L).avg_pool2d(
        x, 3, 2, padding=1, ceil_mode=True, count_include_pad=cip, divisor_override=dv),
        [rnd(1, 2, 6, 6)])
    add(f"avgpool3d_ceil_{cip}_{dv}", lambda L, x, cip=cip, dv=dv: F(L).avg_pool3d(
        x, 2, 2, padding=1, ceil_mode=True, count_include_pad=cip, divisor_override=dv),
        [rnd(1, 1, 4, 5, 3)])


def _unpool2(L, x):
    y, i = F(L).max_pool2d(x, 2, 2, padding=1, ceil_mode=True, return_indices=True)
    return y, i, F(L).max_unpool2d(y, i, 2, 2, padding=1, output_size=x.shape[-2:])


def _unpool3(L, x):
    y, i = F(L).max_pool3d(x, 2, 2, return_indices=True)
    return F(L).max_unpool3d(y, i, 2, 2, output_size=(5, 4, 3))


add("maxunpool2d_ceil_pad", _unpool2, [rnd(1, 2, 5, 5)])
add("maxunpool3d_output_size", _unpool3, [rnd(1, 1, 5, 4, 3)])
add("adapt_avg1d_up", lambda L, x: F(L).adaptive_avg_pool1d(x, 7), [rnd(1, 2, 3)])
add("adapt_avg2d_up_none", lambda L, x: F(L).adaptive_avg_pool2d(x, (5, None)), [rnd(1, 2, 3, 4)])
add("adapt_avg3d_up", lambda L, x: F(L).adaptive_avg_pool3d(x, (4, 3, 5)), [rnd(1, 2, 2, 3, 2)])
add("adapt_max1d_up_idx", lambda L, x: F(L).adaptive_max_pool1d(x, 7, return_indices=True),
    [rnd(1, 2, 3)])
add("adapt_max2d_up", lambda L, x: F(L).adaptive_max_pool2d(x, (5, 6)), [rnd(1, 2, 3, 4)])
add("adapt_max3d_up_none", lambda L, x: F(L).adaptive_max_pool3d(x, (None, 4, 1)),
    [rnd(1, 2, 3, 2, 5)])

# -- interpolate (every mode x align_corners x size / scale / recompute x antialias) --------
_SHAPES = {1: (2, 2, 5), 2: (1, 2, 5, 6), 3: (1, 1, 4, 3, 5)}
_MODES = {1: ["nearest", "nearest-exact", "linear", "area"],
          2: ["nearest", "nearest-exact", "bilinear", "bicubic", "area"],
          3: ["nearest", "nearest-exact", "trilinear", "area"]}
_SIZING = {"size": lambda d: dict(size=(3, 7, 2)[:d]),
           "up": lambda d: dict(scale_factor=(1.7, 2.3, 1.4)[:d]),
           "down": lambda d: dict(scale_factor=(0.6, 0.45, 0.7)[:d]),
           "up_rc": lambda d: dict(scale_factor=(1.7, 2.3, 1.4)[:d],
                                   recompute_scale_factor=True),
           "down_rc": lambda d: dict(scale_factor=(0.6, 0.45, 0.7)[:d],
                                     recompute_scale_factor=True)}
INTERP = []
for d, modes in _MODES.items():
    for m in modes:
        acs = (None,) if m in ("nearest", "nearest-exact", "area") else (False, True)
        aas = (False, True) if m in ("bilinear", "bicubic") else (False,)
        for ac, aa, (sz, kw) in itertools.product(acs, aas, _SIZING.items()):
            if (d, m, sz) == (3, "nearest", "up"):
                continue  # PyTorch's own gradient is wrong here: see the test below
            kw = dict(kw(d), mode=m)
            if ac is not None:
                kw["align_corners"] = ac
            if aa:
                kw["antialias"] = True
            INTERP.append((f"interp{d}d_{m}_{ac}_{aa}_{sz}",
                           lambda L, x, kw=kw: F(L).interpolate(x, **kw), [rnd(*_SHAPES[d])]))

# -- pad on each count of padded dims, grid_sample, unfold / fold ---------------------------
for d in (1, 2, 3):
    for m in ("constant", "reflect", "replicate", "circular"):
        for nd in range(1, d + 1):
            if m != "constant" and nd != d:
                continue  # PyTorch (and llgrad) reject these: a test below checks that
            p = (2, 1, 1, 2, 1, 0)[:2 * nd]
            kw = dict(value=0.5) if m == "constant" else {}
            add(f"pad{d}d_{m}_{nd}", lambda L, x, p=p, m=m, kw=kw: F(L).pad(x, p, mode=m, **kw),
                [rnd(*_SHAPES[d], seed=3)])
_G = rnd(2, 3, 3, 2, seed=7) * 1.3
_HALF = np.array([[[[0.5, 0.5], [-0.5, -0.5], [0.25, 0.75], [-1 / 3, 1 / 3]]]])
for mode, pm, ac in itertools.product(("bilinear", "bicubic", "nearest"),
                                      ("zeros", "border", "reflection"), (False, True)):
    add(f"grid_sample_{mode}_{pm}_{ac}", lambda L, x, g, mode=mode, pm=pm, ac=ac: F(
        L).grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac),
        [rnd(2, 2, 4, 5), _G])
    add(f"grid_sample_half_{mode}_{pm}_{ac}", lambda L, x, g, mode=mode, pm=pm, ac=ac: F(
        L).grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac),
        [rnd(1, 1, 4, 4), _HALF])
add("unfold_dil_pad_stride", lambda L, x: F(L).unfold(
    x, (2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)), [rnd(2, 3, 6, 7)])
add("fold_dil_pad_stride", lambda L, x: F(L).fold(
    x, (7, 8), (2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)), [rnd(2, 18, 16)])
add("unfold_unbatched", lambda L, x: F(L).unfold(x, 2, dilation=2, padding=1, stride=2),
    [rnd(3, 5, 6)])

# -- normalize, local_response_norm, embedding ---------------------------------------------
for p in (float("inf"), float("-inf"), 0, 0.5, 3):
    add(f"normalize_{p}", lambda L, x, p=p: F(L).normalize(x, p=p, dim=1), [rnd(3, 4, 2)])
add("lrn3", lambda L, x: F(L).local_response_norm(x, 3, alpha=0.3, beta=0.7, k=1.5),
    [rnd(2, 5, 4)])
add("lrn4_even", lambda L, x: F(L).local_response_norm(x, 2), [rnd(2, 5, 3, 4)])
add("lrn5", lambda L, x: F(L).local_response_norm(x, 4, alpha=0.1), [rnd(1, 6, 2, 3, 2)])
_IDX = np.array([[0, 2, 1, 2], [3, 2, 0, 0]])
for kw in (dict(padding_idx=2), dict(padding_idx=-3), dict(scale_grad_by_freq=True),
           dict(padding_idx=0, scale_grad_by_freq=True)):
    add("embedding_" + "_".join(f"{k}{v}" for k, v in kw.items()),
        lambda L, w, kw=kw: F(L).embedding(L.tensor(_IDX), w, **kw), [rnd(5, 3)])

# -- losses --------------------------------------------------------------------------------
_LOG = rnd(4, 5, 3, 2)
_PROB = np.abs(rnd(4, 5, 3, 2, seed=4)) / 3
_TGT = np.random.RandomState(3).randint(0, 5, (4, 3, 2))
_TGT[0, 0, 0] = _TGT[2, 1, 0] = -100
_W = np.arange(1.0, 6.0)
for red in ("mean", "sum", "none"):
    add(f"ce_probs_kdim_w_ls_{red}", lambda L, x, t, red=red: F(L).cross_entropy(
        x, t, weight=L.tensor(_W), label_smoothing=0.2, reduction=red), [_LOG, _PROB])
    add(f"ce_kdim_w_ls_ignore_{red}", lambda L, x, red=red: F(L).cross_entropy(
        x, L.tensor(_TGT), weight=L.tensor(_W), label_smoothing=0.15, reduction=red), [_LOG])
    add(f"ce_all_ignored_ls_{red}", lambda L, x, red=red: F(L).cross_entropy(
        x, L.tensor(np.full((4, 3, 2), 2)), ignore_index=2, label_smoothing=0.2,
        weight=L.tensor(_W), reduction=red), [_LOG])
    add(f"nll_4d_w_ignore_{red}", lambda L, x, red=red: F(L).nll_loss(
        x, L.tensor(np.repeat(np.where(_TGT < 0, 1, _TGT)[..., None], 2, -1)),
        weight=L.tensor(_W), ignore_index=1, reduction=red), [rnd(4, 5, 3, 2, 2)])
    add(f"kl_log_target_{red}", lambda L, x, t, red=red: F(L).kl_div(
        x, t, reduction=red, log_target=True), [rnd(3, 4), rnd(3, 4, seed=1)])
    add(f"cosine_embedding_{red}", lambda L, a, b, red=red: F(L).cosine_embedding_loss(
        a, b, L.tensor([1, -1, 1, -1.]), margin=0.2, reduction=red), [rnd(4, 3), rnd(4, 3, seed=1)])
    add(f"margin_ranking_bcast_{red}", lambda L, a, b, red=red: F(L).margin_ranking_loss(
        a, b, L.tensor([[1.], [-1.]]), margin=-0.1, reduction=red), [rnd(2, 3), rnd(2, 3, seed=1)])
    add(f"triplet_dist_swap_{red}", lambda L, a, p, n, red=red: F(
        L).triplet_margin_with_distance_loss(a, p, n, margin=0.5, swap=True, reduction=red),
        [rnd(4, 3), rnd(4, 3, seed=1), rnd(4, 3, seed=2)])
    add(f"triplet_dist_fn_{red}", lambda L, a, p, n, red=red: F(
        L).triplet_margin_with_distance_loss(a, p, n, distance_function=lambda x, y: 1 - F(
            L).cosine_similarity(x, y), margin=1.5, swap=True, reduction=red),
        [rnd(4, 3), rnd(4, 3, seed=1), rnd(4, 3, seed=2)])
    # [1, 1, 2, 3] needs 5 frames (a blank between the ones), only 4 are given: infinite
    add(f"ctc_zero_infinity_{red}", lambda L, lp, red=red: F(L).ctc_loss(
        F(L).log_softmax(lp, -1), L.tensor([[1, 1, 2, 3], [2, 2, 2, 2]]), L.tensor([4, 3]),
        L.tensor([4, 3]), zero_infinity=True, reduction=red), [rnd(4, 2, 5)])
    add(f"ctc_blank2_zero_len_{red}", lambda L, lp, red=red: F(L).ctc_loss(
        F(L).log_softmax(lp, -1), L.tensor([1, 1, 0]), L.tensor([5, 4]), L.tensor([3, 0]),
        blank=2, zero_infinity=True, reduction=red), [rnd(5, 2, 5)])
add("kl_batchmean_log_target", lambda L, x, t: F(L).kl_div(
    x, t, reduction="batchmean", log_target=True), [rnd(3, 4), rnd(3, 4, seed=1)])

ALL = CASES + INTERP
# the default run: each family's first case eagerly, one compiled; everything under -m slow
_FAMILIES = {}
for _c in ALL:
    _FAMILIES.setdefault(_c[0].split("_")[0], _c[0])
# (PyTorch's first max_unpool call costs ~0.5-1 s of lazy set-up: those run under -m slow)
EAGER_FAST = (set(_FAMILIES.values()) - {"maxunpool2d_ceil_pad", "maxunpool3d_output_size"}
              | {"maxpool1d_ceil_drop", "avgpool1d_ceil_drop_False_None",
                 "ce_all_ignored_ls_mean", "ctc_zero_infinity_mean"})
COMPILED_FAST = {"ce_probs_kdim_w_ls_mean"}


def _params(fast):
    unknown = fast - {c[0] for c in ALL}
    assert not unknown, unknown
    return [pytest.param(*c, id=c[0], marks=() if c[0] in fast else pytest.mark.slow)
            for c in ALL]


@pytest.mark.parametrize("name,fn,specs", _params(EAGER_FAST))
def test_eager_matches_torch(name, fn, specs):
    check(fn, specs, compiled=False)


def _run(fn, specs, compiled):
    xs = [llgrad.tensor(np.asarray(s), requires_grad=True) for s in specs]
    f = (lambda *a: fn(llgrad, *a))
    f = llgrad.compile(f) if compiled else f
    for _ in range(2):  # compiled: the first call traces; after wait() native code runs
        for x in xs:
            x.grad = None
        res = f(*xs)
        outs = list(res) if isinstance(res, tuple) else [res]
        loss = sum((o * llgrad.tensor(rnd(*o.shape, seed=100 + k))).sum()
                   for k, o in enumerate(outs) if o.requires_grad)
        loss.backward()
        if compiled:
            f.wait()
    got = [o.detach().numpy() for o in outs] + [x.grad if x.grad is None else x.grad.numpy()
                                                 for x in xs]
    return got, (f.n_traces if compiled else 1)


@pytest.mark.parametrize("name,fn,specs", _params(COMPILED_FAST))
def test_compiled_matches_eager(name, fn, specs):
    (want, _), (got, n_traces) = _run(fn, specs, False), _run(fn, specs, True)
    assert n_traces == 1
    _close(got, want)


def _close(got, want):
    """(a .grad left None, e.g. a weight copied into a module, must be None on both sides)"""
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)


def test_nearest_3d_upscale_gradient_is_the_forwards():
    """PyTorch 2.13's nearest 3-D backward with a given scale_factor (no recompute) disagrees
    with its own forward (the gradient is not the forward's adjoint), so the forward is
    compared with PyTorch and the gradient with the adjoint of PyTorch's forward."""
    x0, sf = rnd(1, 1, 4, 3, 5), (1.7, 2.3, 1.4)
    fn = lambda L, x: F(L).interpolate(x, scale_factor=sf, mode="nearest")  # noqa: E731
    want = fn(torch, torch.tensor(x0)).numpy()
    x = llgrad.tensor(x0, requires_grad=True)
    y = fn(llgrad, x)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    w = rnd(*want.shape, seed=1)
    (y * llgrad.tensor(w)).sum().backward()
    # torch's forward is a 0/1 gather matrix: its adjoint applied to w, one basis input a time
    eye = np.eye(x0.size).reshape((x0.size,) + x0.shape)
    adj = np.array([(fn(torch, torch.tensor(e)).numpy() * w).sum() for e in eye])
    np.testing.assert_allclose(x.grad.numpy().ravel(), adj, rtol=1e-12, atol=1e-12)
    check(fn, [x0], torch_oracle=False, compiled=True)


@pytest.mark.parametrize("shape,pad", [((1, 2, 5, 6), (1, 1)), ((1, 1, 4, 3, 5), (1, 1, 2, 2))])
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_mode_rejects_what_torch_rejects(shape, pad, mode):
    with pytest.raises(NotImplementedError):
        F(torch).pad(torch.zeros(shape), pad, mode=mode)
    with pytest.raises(NotImplementedError):
        F(llgrad).pad(llgrad.zeros(shape), pad, mode=mode)


def _norm_steps(L, fn, compiled):
    rm, rv = L.tensor(np.linspace(-1, 1, 4)), L.tensor(np.linspace(0.5, 2, 4))
    x = L.tensor(rnd(2, 4, 5, 3), requires_grad=True)
    w = L.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)
    f = (lambda *a: fn(L, *a))
    f = llgrad.compile(f) if compiled else f
    for i in range(3):  # running stats move on every call, compiled too
        y = f(x * (i + 1), rm, rv, w)
        (y * L.tensor(rnd(*y.shape, seed=5))).sum().backward()
        if compiled:
            f.wait()
    return [a if a is None else a.detach().numpy().copy() for a in (y, rm, rv, x.grad, w.grad)]


NORMS = {
    "instance_norm_running": lambda L, x, rm, rv, w: F(L).instance_norm(
        x, rm, rv, w, None, use_input_stats=True, momentum=0.3, eps=1e-3),
    "instance_norm_eval_stats": lambda L, x, rm, rv, w: F(L).instance_norm(
        x, rm, rv, w, use_input_stats=False),
    "instance_norm_1d_running": lambda L, x, rm, rv, w: F(L).instance_norm(
        x.flatten(2), rm, rv, momentum=0.5),
    "batch_norm_train_running": lambda L, x, rm, rv, w: F(L).batch_norm(
        x, rm, rv, w, training=True, momentum=0.25),
    "group_norm_2": lambda L, x, rm, rv, w: F(L).group_norm(x, 2, w, eps=1e-2),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == "instance_norm_running"
                                               else pytest.mark.slow) for n in NORMS])
def test_norm_running_stats(name):
    want = _norm_steps(torch, NORMS[name], False)
    eager = _norm_steps(llgrad, NORMS[name], False)
    _close(eager, want)
    _close(_norm_steps(llgrad, NORMS[name], True), eager)


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(max_norm=1.0), dict(max_norm=0.7, norm_type=1.0,
                                padding_idx=2, scale_grad_by_freq=True),
                                dict(max_norm=1.2, norm_type=3.0, padding_idx=-1)])
def test_embedding_max_norm_renorms_weight_in_place(kw):
    idx = np.array([[0, 2, 1, 2], [3, 2, 0, 4]])
    res = []
    for L, compiled in ((torch, False), (llgrad, False), (llgrad, True)):
        m = L.nn.Embedding(5, 3, **kw).double()
        with L.no_grad():
            m.weight.copy_(L.tensor(rnd(5, 3)))
        f = llgrad.compile(m) if compiled else m
        outs = []
        for i in range(3):
            m.weight.grad = None
            y = f(L.tensor(idx))
            (y * L.tensor(rnd(*y.shape, seed=1))).sum().backward()
            if compiled:
                f.wait()
            outs += [y.detach().numpy().copy(), m.weight.detach().numpy().copy(),
                     m.weight.grad.numpy().copy()]
            with L.no_grad():
                m.weight.mul_(1.5)  # pushes rows back over max_norm for the next call
        res.append(outs)
    for got in res[1:]:
        for g, w in zip(got, res[0]):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)
