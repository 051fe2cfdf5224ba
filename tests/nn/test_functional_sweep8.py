"""Sweep 8: torch.nn.functional calls over their options against torch, the generators
seeded alike (tests/nn/oracle_sweep8.py): scaled_dot_product_attention (masks, causal,
scale, dropout, grouped-query heads and the error of heads that do not match),
gumbel_softmax, the functional dropouts in and out of training, one_hot, normalize, pad
over modes and dims, grid_sample over affine grids."""
import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle_sweep8 import check, identity  # noqa: E402


def _x(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape).astype(
        np.float32)


def _sdpa(**kw):
    def fwd(m, xs, lib):
        k = {a: lib.tensor(v) if isinstance(v, np.ndarray) else v for a, v in kw.items()}
        return lib.nn.functional.scaled_dot_product_attention(*xs, **k)
    return fwd


@pytest.mark.parametrize("kw", [
    dict(), dict(is_causal=True), dict(scale=0.3), dict(attn_mask=np.triu(np.ones((3, 5), bool), 1)),
    dict(attn_mask=_x(3, 5)), dict(attn_mask=_x(2, 1, 3, 5), scale=1.0), dict(dropout_p=0.3),
    dict(dropout_p=0.3, is_causal=True), dict(attn_mask=np.zeros((3, 5), bool)),
    dict(is_causal=True, attn_mask=_x(3, 5))], ids=str)
def test_scaled_dot_product_attention(kw):
    check(identity, [_x(2, 4, 3, 8), _x(2, 4, 5, 8), _x(2, 4, 5, 6)], _sdpa(**kw))


def test_scaled_dot_product_attention_heads():
    q, k, v = _x(2, 4, 3, 8), _x(2, 2, 5, 8), _x(2, 2, 5, 6)
    check(identity, [q, k, v], _sdpa(enable_gqa=True))
    check(identity, [q, k, v], _sdpa())         # (torch: the batch dims do not broadcast)
    check(identity, [_x(4, 3, 8), _x(4, 5, 8), _x(4, 5, 8)], _sdpa(is_causal=True))


@pytest.mark.parametrize("a,b", [((2, 4, 3, 8), (2, 2, 8, 5)), ((3, 8), (2, 8, 5)), ((8,), (2, 7, 5)), ((4, 3, 8), (2, 8, 5)),
                                 ((4, 3, 8), (2, 7, 5)), ((3, 2, 3, 8), (2, 2, 8, 5)),
                                 ((4, 1, 3, 8), (2, 8, 5)), ((3, 8), (2, 7, 5)),
                                 ((2, 3, 8), (7, 5))], ids=str)
def test_matmul_batched_folding_and_errors(a, b):
    """PyTorch broadcasts the batch dims of two batched operands before bmm compares the
    inner sizes, so a batch mismatch is what it names; a 1-D or 2-D operand times a batch
    is folded into one mm / mv when it requires grad (its error names the folded shapes,
    the result of a matrix is a contiguous copy, CloneBackward0), else broadcast to bmm
    (UnsafeViewBackward0)."""
    for grads in ((True, True), (False, True), (True, False)):
        check(identity, [np.ones(a, np.float32), np.ones(b, np.float32)],
              lambda m, xs, lib: lib.matmul(*(x.requires_grad_(g) for x, g in zip(xs, grads))))


def test_gumbel_softmax_and_dropouts():
    for kw in [dict(), dict(tau=0.5, hard=True), dict(dim=0)]:
        check(identity, [_x(4, 5)], lambda m, xs, lib: lib.nn.functional.gumbel_softmax(xs[0], **kw))
    shapes = {"dropout1d": (2, 3, 4), "dropout2d": (2, 3, 2, 2), "dropout3d": (2, 3, 2, 2, 2)}
    for fn, training in itertools.product(["dropout", "alpha_dropout", "feature_alpha_dropout",
                                           "dropout1d", "dropout2d", "dropout3d"], (True, False)):
        check(identity, [_x(*shapes.get(fn, (2, 3, 4)))],
              lambda m, xs, lib: getattr(lib.nn.functional, fn)(xs[0], 0.4, training))


def test_one_hot_and_normalize():
    idx = np.array([0, 3, 1])
    check(identity, [idx], lambda m, xs, lib: (lib.nn.functional.one_hot(xs[0]),
                                               lib.nn.functional.one_hot(xs[0], 5)))
    check(identity, [idx], lambda m, xs, lib: lib.nn.functional.one_hot(xs[0], 2))
    check(identity, [np.array([0, -1, 1])], lambda m, xs, lib: lib.nn.functional.one_hot(xs[0]))
    for p in (1, 2, 3.5, float("inf")):
        check(identity, [_x(3, 4)], lambda m, xs, lib: lib.nn.functional.normalize(xs[0], p=p,
                                                                                   dim=0))


@pytest.mark.parametrize("mode", ("constant", "reflect", "replicate", "circular"))
def test_pad(mode):
    value = {"value": 1.5} if mode == "constant" else {}
    for pad, shape in itertools.product([(1, 2), (2, 0, 1, 1), (-1, 1), (1, 1, 1, 1, 1, 1)],
                                        [(2, 3, 4), (2, 3, 4, 5), (2, 3, 4, 5, 3), (3, 4)]):
        check(identity, [_x(*shape)],
              lambda m, xs, lib: lib.nn.functional.pad(xs[0], pad, mode=mode, **value))


@pytest.mark.parametrize("align_corners", (False, True))
def test_grid_sample_affine_grid(align_corners):
    theta = np.array([[[1, 0.2, 0.1], [0.1, 0.9, -0.2]]], np.float32).repeat(2, 0)
    for mode, padding in itertools.product(("bilinear", "nearest", "bicubic"),
                                           ("zeros", "border", "reflection")):
        def fwd(m, xs, lib):
            F = lib.nn.functional
            grid = F.affine_grid(xs[1], [2, 3, 4, 7], align_corners=align_corners)
            return F.grid_sample(xs[0], grid, mode=mode, padding_mode=padding,
                                 align_corners=align_corners)
        check(identity, [_x(2, 3, 5, 6), theta], fwd)
