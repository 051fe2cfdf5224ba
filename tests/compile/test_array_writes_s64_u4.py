"""A compiled function that puts NumPy arrays it makes into the objects it reaches
(karpathy/pytorch-made's update_masks: `self.m[l] = rng.randint(...)` from a RandomState
seeded by a guarded number) is kept as compiled code: each call writes a fresh copy of the
traced run's array (compile/array_writes.py). Before, such a trace was never kept: every
call traced again up to the recompile limit, then ran eagerly. Each case runs eagerly and
compiled from the same start and compares every call's result and the arrays left behind (the
last three: cases where a copy would not do, or would be stale, guarded already by the arrays'
contents; they keep it so)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


class Orderings:
    """MADE's mask bookkeeping, cut down: two orderings, cycled every call."""

    def __init__(self, lib, n=6):
        self.lib, self.n, self.seed, self.m = lib, n, 0, {}
        self.mask = lib.ones(n, n)
        self.w = lib.randn(n, n, generator=None).requires_grad_()
        self.update()

    def update(self):
        rng = np.random.RandomState(self.seed)
        self.seed = (self.seed + 1) % 2
        self.m[-1] = rng.permutation(self.n)
        self.m[0] = rng.randint(self.m[-1].min(), self.n - 1, size=self.n)
        mask = self.m[-1][:, None] <= self.m[0][None, :]
        self.mask.data.copy_(self.lib.from_numpy(mask.astype(np.uint8).T))

    def step(self, x):
        self.update()
        return ((x @ (self.mask * self.w).T) ** 2).sum()


def _orderings(lib, compiled, calls=6):
    lib.manual_seed(0)
    o = Orderings(lib)
    f = llgrad.compile(o.step) if compiled else o.step
    x = lib.randn(3, o.n)
    out, kept, traces = [], [], []
    for _ in range(calls):
        out.append(f(x).item())
        kept.append(o.m[0])
        traces.append(getattr(f, "n_traces", 0))
    return out, kept, o, traces


def test_fresh_arrays_written_into_slots_are_replayed_as_eager():
    want, want_arrays, _, _ = _orderings(torch, False, calls=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # (no recompile-limit warning)
        got, got_arrays, o, traces = _orderings(llgrad, True, calls=8)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for a, b in zip(got_arrays, want_arrays):
        np.testing.assert_array_equal(a, b)
    # (an entry per ordering, and one for the first call, before the seed was seen to count)
    assert traces[3] == traces[-1] <= 3, traces
    assert len({id(a) for a in got_arrays}) == len(got_arrays)     # (a fresh array a call)


def test_an_in_place_change_to_a_written_array_does_not_reach_the_next_call():
    # (a large array, whose contents no guard reads: each call must write its own)
    def run(compiled):
        class S:
            pass
        s = S()
        s.k, s.a = 2, None
        w = llgrad.ones(3, requires_grad=True)

        def f():
            s.a = np.arange(5000) * s.k
            return (w * llgrad.from_numpy(s.a[:3]).float()).sum()
        g = llgrad.compile(f) if compiled else f
        out = []
        for i in range(5):
            out.append(float(g().detach()))
            out.append(int(s.a[0]))
            s.a[0] = 100 + i            # (the caller scribbles on this call's array)
        return out
    assert run(True) == run(False)


def test_a_view_of_a_reached_array_keeps_sharing_its_memory():
    def run(compiled):
        class S:
            pass
        s = S()
        s.b, s.a = np.arange(5000.0), None
        w = llgrad.ones(5, requires_grad=True)

        def f():
            s.a = s.b[1:]
            return (w * llgrad.ones(5)).sum()
        g = llgrad.compile(f) if compiled else f
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(5):
                out.append(float(g().detach()))
                if i >= 3:
                    s.b[2] = 50.0 + i   # (seen through s.a only if s.a is b's view)
                out.append(float(s.a[1]))
        return out
    assert run(True) == run(False)


def test_an_array_made_from_a_tensors_values_follows_the_values():
    def run(compiled):
        class S:
            pass
        s = S()
        s.a = None
        x = llgrad.zeros(3)

        def f():
            s.a = x.numpy() * 2
            return x.sum() + 1
        g = llgrad.compile(f) if compiled else f
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(4):
                x.add_(1.0)
                out.append((float(g()), s.a.tolist()))
        return out
    assert run(True) == run(False)
