"""run._overlapping (whether an input a compiled call writes shares bytes with another
input) against the pairwise definition, on views of one buffer in random places."""
import numpy as np
import pytest

import llgrad
from llgrad.compile.run import _overlapping


def _pairwise(arrays, written):
    def span(a):
        lo = a.__array_interface__["data"][0]
        return lo, lo + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + a.itemsize
    spans = [span(a) if a.size else None for a in arrays]
    return any(j != k and spans[k] and spans[j] and spans[j][0] < spans[k][1]
               and spans[k][0] < spans[j][1] for k in written for j in range(len(arrays)))


@pytest.mark.parametrize("seed", range(40))
def test_matches_the_pairwise_check(seed):
    rng = np.random.default_rng(seed)
    buf = np.zeros(200)
    arrays = []
    for _ in range(int(rng.integers(2, 12))):
        lo = int(rng.integers(0, 190))
        arrays.append(buf[lo:lo + int(rng.integers(0, 10))])
    arrays.append(np.zeros(3))                      # a buffer of its own
    tensors = [llgrad.from_numpy(a) for a in arrays]
    written = sorted(set(rng.integers(0, len(arrays), int(rng.integers(1, 4))).tolist()))
    assert _overlapping(tensors, written) == _pairwise(arrays, written)
