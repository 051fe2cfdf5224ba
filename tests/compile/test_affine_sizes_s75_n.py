"""Affine size templates (s75): a size k * s + m (a KV cache grown by cat: s + 1; the
offset s - 1 of seq[:, -1:]) served from a template once a THIRD trace confirms it (two
sizes fit any affine rule), and cases a template must not serve (each against eager)."""
import numpy as np
import pytest

import llgrad


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    from llgrad.codegen.native import cache, jit
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    jit._reset()
    cache._reset()
    yield monkeypatch
    monkeypatch.undo()
    jit._reset()
    cache._reset()


def _close(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


@llgrad.no_grad()
def _grow(kc, k):
    kc = llgrad.cat([kc, k], 0)
    return kc.sum(0) * kc.shape[1], kc


def test_cat_grown_cache_is_served_after_a_third_trace(fresh_cache):
    cf = llgrad.compile(_grow)
    kc = ek = llgrad.zeros(2, 4)
    builds = []
    for t in range(14):
        k = llgrad.full((1, 4), float(t))
        (out, kc), (want, ek) = cf(kc, k), _grow(ek, k)
        _close(out, want)
        _close(kc, ek)
        builds.append(cf.n_llvm_compiles)
        assert cf.n_traces == min(t + 1, 3)     # (sizes 2, 3 fit s + 1; 4 confirms)
    # (an entry builds when run again: the first size served builds the code all share)
    assert builds[-1] <= 1 and builds[3:] == [builds[3]] * len(builds[3:])
    (t,) = cf._sizes.templates
    assert t.confirmed and t.uses == 11
    assert "s0+1" in cf.dump(kc, llgrad.ones(1, 4))


def test_sliced_last_token_of_a_growing_sequence(fresh_cache):
    """seq[:, -1:]: shape (2, 1) at every length, stride (s, 1), offset s - 1."""
    w = llgrad.arange(6.).view(2, 3)

    @llgrad.no_grad()
    def step(tok, w):
        return (tok * w).sum(1) + 1.0

    cf = llgrad.compile(step)
    seq = llgrad.arange(4.).view(2, 2)
    builds = []
    for t in range(13):
        tok = seq[:, -1:]
        out = cf(tok, w)
        _close(out, step(tok, w))
        builds.append(cf.n_llvm_compiles)
        seq = llgrad.cat([seq, out[:, None] % 7.0], 1)
    assert cf.n_traces <= 3
    assert builds[-1] <= 1 and builds[3:] == [builds[3]] * len(builds[3:])
    for sl in (seq[:, 0:1], seq[:, 3:4]):     # (another offset at a served stride)
        _close(cf(sl, w), step(sl, w))
    assert cf.n_traces <= 3


def test_kv_cache_decode_step_of_an_attention_layer():
    """The decode step of tests/programs/.._s75_u3_2.py's growing cache, 12 tokens."""
    llgrad.manual_seed(0)
    nn, F = llgrad.nn, llgrad.nn.functional
    qkv, proj = nn.Linear(16, 48, bias=False), nn.Linear(16, 16, bias=False)

    @llgrad.no_grad()
    def decode(x, kc, vc):
        q, k, v = (z.view(2, 1, 2, 8).transpose(1, 2) for z in qkv(x).chunk(3, -1))
        kc, vc = llgrad.cat([kc, k], dim=2), llgrad.cat([vc, v], dim=2)
        att = F.scaled_dot_product_attention(q, kc, vc)
        return proj(att.transpose(1, 2).reshape(2, 1, 16)), kc, vc

    cf = llgrad.compile(decode)
    kc, vc = llgrad.zeros(2, 2, 2, 8), llgrad.zeros(2, 2, 2, 8)
    ek, ev = kc, vc
    x = llgrad.randn(2, 1, 16)
    for t in range(12):
        (out, kc, vc), (want, ek, ev) = cf(x, kc, vc), decode(x, ek, ev)
        _close(out, want)
        _close(kc, ek)
        x = out.tanh()
    assert cf.n_traces <= 3
    assert sum(t.uses for t in cf._sizes.templates) == 9


def test_s_plus_one_then_s_plus_two_traces_the_third():
    """s + 1 at two sizes, s + 2 at the third (a comparison the user's code made): the
    third traces (the affine template waits for it) and its results are eager's."""
    def f(x):
        pad = 1 if x.shape[0] < 4 else 2
        return llgrad.cat([x, llgrad.ones(pad, 3)]).cumsum(0)

    cf = llgrad.compile(f)
    for n in (2, 3, 4, 5, 6, 7, 3, 6):
        x = llgrad.arange(3. * n).view(n, 3)
        _close(cf(x), f(x))
    assert cf.n_traces >= 4     # (2, 3: s + 1; 4 unconfirmed: its s + 2 traced)


def test_an_unconfirmed_template_never_serves(monkeypatch):
    """Two traces fit s + 1; the third size, even where the rule would be right, traces."""
    cf = llgrad.compile(lambda x: llgrad.cat([x, x[:1]]).sum(0))
    for n in (2, 3):
        cf(llgrad.ones(n, 2))
    (t,) = cf._sizes.templates
    assert not t.confirmed
    cf(llgrad.ones(5, 2))
    assert cf.n_traces == 3 and t.confirmed and t.uses == 0


@pytest.mark.parametrize("third", [7, 6, 9])
def test_a_number_that_moves_by_one_with_the_size(third):
    """An int argument n = s + 1 at two calls, another number at the third: guarded by
    value (no template), results eager's."""
    def f(x, n):
        return llgrad.cat([x, llgrad.ones(n, 2)]).sum(0) + n

    cf = llgrad.compile(f)
    for s, n in ((2, 3), (3, 4), (4, third), (5, 6), (6, 7)):
        x = llgrad.arange(2. * s).view(s, 2)
        _close(cf(x, n), f(x, n))


def test_a_constant_that_differs_by_one_between_two_calls():
    """A closure's list item (state the caller changes) read as a size: 3, 4, then 9."""
    extra = [3]

    def f(x):
        return llgrad.cat([x, llgrad.zeros(extra[0], 2)]).cumsum(0)

    cf = llgrad.compile(f)
    for s, e in ((2, 3), (3, 4), (4, 9), (5, 6), (6, 2), (7, 8)):
        extra[0] = e
        x = llgrad.arange(2. * s).view(s, 2)
        _close(cf(x), f(x))


def test_a_size_used_as_a_python_number():
    """(s + 1) made a float, an index and a range: the template is refused, eager's results."""
    def f(kc, k):
        kc = llgrad.cat([kc, k])
        n = kc.shape[0]
        scale = float(n) + [i + 0.5 for i in range(20)][n]
        return kc.sum(0) * scale + sum(range(n)), kc

    cf = llgrad.compile(f)
    kc = ek = llgrad.ones(2, 3)
    for t in range(7):
        k = llgrad.full((1, 3), float(t))
        (out, kc), (want, ek) = cf(kc, k), f(ek, k)
        _close(out, want)


def test_a_comparison_of_an_affine_size_is_checked_at_each_size():
    """kc.shape[0] (s + 1) compared by the user's code: a served size where it flips traces."""
    def f(kc, k):
        kc = llgrad.cat([kc, k])
        if kc.shape[0] > 6:
            return kc.sum(0) * 2.0, kc
        return kc.sum(0) - (kc.shape[0] - 1), kc

    cf = llgrad.compile(f)
    kc = ek = llgrad.ones(2, 3)
    for t in range(10):
        k = llgrad.full((1, 3), float(t))
        (out, kc), (want, ek) = cf(kc, k), f(ek, k)
        _close(out, want)
    # (3, 4 fit; 5 confirms; 6 served; 7 flips the check: traced, and again with ints as
    # its reads differ; 8 fits; 9 confirms; 10, 11 served)
    assert cf.n_traces >= 4 and sum(t.uses for t in cf._sizes.templates) >= 3


def test_a_size_llgrad_floors_after_an_affine_one():
    """(s + 1) // 2 by a pooling of the cache grown by cat: no affine rule at three sizes
    (each pair's template is dropped by the next size's trace)."""
    F = llgrad.nn.functional

    def f(x):
        return F.avg_pool1d(llgrad.cat([x, x[..., -1:] * 2.0], -1), 2).cumsum(-1)

    cf = llgrad.compile(f, recompile_limit=16)
    for s in (4, 5, 6, 7, 8, 9, 10, 11, 5, 12):
        x = llgrad.arange(float(s)).view(1, 1, s)
        _close(cf(x), f(x))


def test_an_affine_size_not_served_where_it_would_be_empty():
    """s - 2 fitted at 4, 5 and confirmed at 6 serves 7, not 2 (an empty dimension: traced)."""
    def f(x):
        return x.narrow(0, 2, x.size(0) - 2).sum(0) + x[0]

    cf = llgrad.compile(f)
    for s in (4, 5, 6, 7, 2, 8):
        x = llgrad.arange(3. * s).view(s, 3)
        _close(cf(x), f(x))
    assert cf.n_traces - cf._sizes.redone == 4     # (2 traced: its SymInts fit no rule)
    assert [t.uses for t in cf._sizes.templates] == [2]
