"""Arena placement (codegen/schedule/arena.py): its NumPy first fit places every buffer where
a plain loop over the placed ones does (the oracle below, the placement it replaced), and no
two buffers alive at once share a byte."""
import numpy as np
import pytest

from llgrad.codegen.schedule import arena


class _Buf:
    def __init__(self, nbytes, first, last):
        self.nbytes, self.first, self.last, self.offset = nbytes, first, last, None


def _place_loop(order):
    placed, size = [], 0
    for b in order:
        need = max(b.nbytes, 1)
        busy = sorted((p.offset, p.offset + max(p.nbytes, 1)) for p in placed
                      if not (p.last < b.first or b.last < p.first))
        off = 0
        for lo, hi in busy:
            if off + need <= lo:
                break
            off = max(off, -(-hi // arena.ALIGN) * arena.ALIGN)
        b.offset = off
        placed.append(b)
        size = max(size, off + need)
    return size


def _bufs(rng, n, span):
    out = []
    for _ in range(n):
        first = int(rng.integers(0, span))
        size = int(rng.choice([0, 1, 4, 60, 64, 100, 256, 4096, int(rng.integers(1, 10_000))]))
        out.append(_Buf(size, first, first + int(rng.integers(0, span))))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_both_placements_agree_and_never_overlap(seed):
    rng = np.random.default_rng(seed)
    n, span = int(rng.integers(1, 300)), int(rng.integers(1, 60))
    a, b = _bufs(rng, n, span), None
    b = [_Buf(x.nbytes, x.first, x.last) for x in a]
    assert _place_loop(sorted(a, key=lambda x: -x.nbytes)) == arena.place(b)
    assert [x.offset for x in a] == [x.offset for x in b]
    for i, x in enumerate(a):
        assert x.offset % arena.ALIGN == 0 or x.offset == 0
        for y in a[:i]:
            if not (x.last < y.first or y.last < x.first):
                assert x.offset + max(x.nbytes, 1) <= y.offset or \
                    y.offset + max(y.nbytes, 1) <= x.offset
