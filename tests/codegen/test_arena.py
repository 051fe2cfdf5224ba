"""Arena placement (codegen/schedule/arena.py): the NumPy first fit many buffers take places
every buffer where the loop over the placed ones does, and no two buffers alive at once
share a byte."""
import numpy as np
import pytest

from llgrad.codegen.schedule import arena


class _Buf:
    def __init__(self, nbytes, first, last):
        self.nbytes, self.first, self.last, self.offset = nbytes, first, last, None


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
    order_a = sorted(a, key=lambda x: -x.nbytes)
    order_b = sorted(b, key=lambda x: -x.nbytes)
    assert arena._place_loop(order_a) == arena._place_arrays(order_b)
    assert [x.offset for x in a] == [x.offset for x in b]
    for i, x in enumerate(a):
        assert x.offset % arena.ALIGN == 0 or x.offset == 0
        for y in a[:i]:
            if not (x.last < y.first or y.last < x.first):
                assert x.offset + max(x.nbytes, 1) <= y.offset or \
                    y.offset + max(y.nbytes, 1) <= x.offset


def test_place_takes_the_arrays_for_many_buffers(monkeypatch):
    calls = []
    monkeypatch.setattr(arena, "_place_arrays", lambda order: calls.append(len(order)) or 0)
    arena.place([_Buf(8, 0, 1)] * arena.VECTOR_FROM)
    arena.place([_Buf(8, 0, 1)] * (arena.VECTOR_FROM - 1))
    assert calls == [arena.VECTOR_FROM]
