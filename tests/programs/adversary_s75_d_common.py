"""The inputs the s75 (d) vision-functional comparisons share (test_adversary_s75_d.py,
_d2.py, _d3.py): float32 / float64 images, their permuted (non-contiguous) and step-sliced
views, a 5-D volume. Each file draws its own further inputs from its own generator."""
import numpy as np

R = np.random.default_rng(75)
X = R.standard_normal((2, 3, 5, 7)).astype(np.float32)
X64 = R.standard_normal((2, 3, 5, 7))
V5 = R.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
XP = np.ascontiguousarray(X.transpose(0, 2, 3, 1))         # (permuted back: non-contiguous)
X64P = np.ascontiguousarray(X64.transpose(0, 2, 3, 1))
XS = R.standard_normal((2, 3, 9, 13)).astype(np.float32)   # (sliced with steps: (2, 3, 5, 6))


def perm(t):
    return t.permute(0, 3, 1, 2)


def step(t):
    return t[:, :, ::2, 1::2]


PERM, PERM64, STEP = ("view", XP, True, perm), ("view", X64P, True, perm), ("view", XS, True, step)


def _ids(runs):
    return [f"{n}-{k}" for k, (n, _) in enumerate(runs)]
