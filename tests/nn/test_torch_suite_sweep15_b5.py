"""Sweep 15 (b), continued: forward + backward scenarios of the side-by-side checks run
compiled (llgrad.compile) and compared with eager, value and input gradients, on the tracing
call and on a cache hit (tests/nn/oracle_sweep15_b.py). The native builds are slow on a
loaded machine: three run by default, the rest are marked slow."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from oracle_sweep15_b import compiled_like_eager  # noqa: E402

F = llgrad.nn.functional
_R = np.random.RandomState(0)
_T = llgrad.tensor([0, 3, -100, 2, 1, 2])
_W = llgrad.tensor([1., 2., 0.5, 3.])

_CASES = {
    "cross_entropy_weight_smoothing": (
        lambda x: F.cross_entropy(x, _T, weight=_W, label_smoothing=0.2),
        [_R.randn(6, 4).astype(np.float32)]),
    "grid_sample_bicubic_reflection": (
        lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode="reflection",
                                   align_corners=False),
        [_R.randn(2, 3, 4, 5), _R.randn(2, 3, 2, 2) * 1.2]),
    "nearest_1d_scale_not_recomputed": (
        lambda x: F.interpolate(x, scale_factor=2.00001, recompute_scale_factor=False,
                                mode="nearest") ** 2, [_R.randn(1, 2, 7)]),
    "pad_reflect_negative": (lambda x: F.pad(x, (1, 2, -1, 1), mode="reflect") ** 2,
                             [_R.randn(2, 3, 4, 4)]),
    "pad_circular_3d": (lambda x: F.pad(x, (1, 2, 2, 0, 1, 1), mode="circular") ** 2,
                        [_R.randn(1, 2, 3, 4, 4)]),
    "fold_of_unfold": (
        lambda x: F.fold(F.unfold(x, (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)),
                         (5, 6), (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)) ** 2,
        [_R.randn(2, 3, 5, 6)]),
    "instance_norm_affine": (
        lambda x: F.instance_norm(x, weight=llgrad.ones(3).double() * 2,
                                  bias=llgrad.zeros(3).double()) ** 2,
        [_R.randn(2, 3, 5)]),
    "affine_grid": (lambda th: F.affine_grid(th, [2, 3, 4, 5], align_corners=False) ** 2,
                    [_R.randn(2, 2, 3)]),
    "pdist_repeated_rows": (lambda x: F.pdist(x, 1.5),
                            [np.array([[0., 1., -2.], [0., 1., -2.], [3., 0., 1.]])]),
    "cosine_similarity_zero_vector": (lambda a, b: F.cosine_similarity(a, b * 0, 0),
                                      [_R.randn(5), _R.randn(5)]),
    "weighted_huber": (
        lambda x, y: F.huber_loss(x, y, weight=llgrad.arange(12.).view(3, 4).double(),
                                  delta=0.5), [_R.randn(3, 4), _R.randn(3, 4)]),
    "bce_logits_pos_weight": (
        lambda x: F.binary_cross_entropy_with_logits(
            x, llgrad.ones(4, 3) * 0.3, pos_weight=llgrad.tensor([1., 2., 3.]).double(),
            weight=llgrad.tensor([[0.5], [1.], [2.], [1.]]).double()), [_R.randn(4, 3)]),
    "embedding_padding_idx": (
        lambda w: F.embedding(llgrad.tensor([[1, 4], [4, 0]]), w, padding_idx=4) ** 2,
        [_R.randn(5, 3)]),
    "channel_shuffle_channels_last": (
        lambda x: F.channel_shuffle(x.contiguous(memory_format=llgrad.channels_last), 2) ** 2,
        [_R.randn(2, 4, 3, 3)]),
}
_FAST = ("cross_entropy_weight_smoothing", "nearest_1d_scale_not_recomputed",
         "weighted_huber")


@pytest.mark.parametrize("name", [n if n in _FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in _CASES])
def test_compiled_like_eager(name):
    fn, arrays = _CASES[name]
    compiled_like_eager(fn, *arrays, tol=1e-5)
