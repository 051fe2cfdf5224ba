"""Real programs whose compiled function meets shapes that change between calls (issue 19
item 3): generation with a growing sequence (with and without a KV cache), seq2seq greedy
and beam decoding, a ragged last batch, padded and packed variable-length batches, buckets,
multi-scale images, batch 1 after 64, mark_dynamic, dynamic=True/False, dimensions that
are sometimes 1 or 0, sizes in view arithmetic, arange/tril/slices and .item() control
flow (dynamic_programs_s79_h.py). Each against eager, and eager against PyTorch; the
counters (n_traces, n_llvm_compiles) at what each costs today: a new size after the
family's first two (three for an affine size) costs no trace, and past its shared build no
LLVM compile, except where a note says why.

Two of them found costs beyond that promise, fixed:
- a size a pool halves (14 at 28 px, 16 at 32 px; its plane 196 and 256) fitted no size
  rule, so every image size traced (runtime/sym_int.py: the rule p * s**e / q, confirmed
  by a third size and used only at sizes where it is exact); x.view(x.size(0) // 2, -1)
  was the same case: every batch size traced, up to the recompile limit;
- a float32 sum's vectorisation hint, given only to loops of at least 8 vectors, made the
  module of a short size differ from the code shared between sizes: every sequence length
  under the threshold built its own (codegen/lowerings/loops.py)."""
import numpy as np
import pytest

import llgrad
from llgrad.runtime.sym_int import affine, at, exact, rule

import dynamic_programs_s79_h as P

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")   # (builds counted on the caller's thread)


def _close(a, b, what):
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        assert a == b, what
        return
    np.testing.assert_allclose(np.asarray(b, dtype=float), np.asarray(a, dtype=float),
                               rtol=1e-4, atol=1e-5, err_msg=what)


def _check(program, W, traces, max_builds, quiet_from=None):
    """program compiled == eager == torch; n_traces == traces,
    n_llvm_compiles <= max_builds, and from call quiet_from on neither grows."""
    eager, _ = program(llgrad, W, False)
    want, _ = program(torch, W, False)
    assert len(want) == len(eager)
    for i, (w, e) in enumerate(zip(want, eager)):
        _close(e, w, f"eager against torch, value {i}")
    got, probe = program(llgrad, W, True)
    assert len(got) == len(eager)
    for i, (e, g) in enumerate(zip(eager, got)):
        _close(g, e, f"compiled against eager, value {i}")
    log = probe.log
    assert log[-1][0] == traces, log
    assert log[-1][1] <= max_builds, log
    if quiet_from is not None:
        assert log[quiet_from - 1] == log[-1], log
    return log


# (program, width, traces, max LLVM builds, the call from which nothing more is traced or built)
FAST = [
    (P.view_arith, 1, 3, 1, 4),          # (B // 2: a quotient, confirmed by a third size)
    (P.dyn_true, 2, 2, 1, 3),
    (P.item_flow, 3, 2, 1, 3),
]
SLOW = [
    (P.gpt_cache, 4, 5, 1, 6),          # (cache lengths 0 and 1 traced apart, as torch's)
    (P.ragged_train, 5, 2, 2, 10),
    (P.padded_masked, 6, 2, 1, 4),
    (P.buckets, 7, 2, 1, 4),
    (P.infer_b1, 8, 3, 3, 6),           # (batch 1: its own trace, as torch's)
    (P.mark_dyn, 9, 2, 2, 3),
    (P.dyn_false, 10, 5, 1, None),      # (dynamic=False: every new size traces)
    (P.bcast_one, 11, 4, 1, None),      # (a dimension of 1 broadcasts: its own trace)
    (P.zero_size, 12, 5, 4, None),      # (0 and 1: their own traces; .grad None at first)
    (P.arange_tril, 13, 3, 4, None),    # (T - 2 is affine: a third size confirms it)
    (P.beam, 14, 3, 1, None),           # (one beam, then K: the batch 1 traced apart)
    (P.gpt_train_windows, 15, 2, 1, 4),
    (P.ones_dim, 16, 3, 2, None),      # (width 1, a stride-0 view: its own trace)
]


@pytest.mark.parametrize("program,W,traces,builds,quiet", FAST,
                         ids=[p[0].__name__ for p in FAST])
def test_program_fast(program, W, traces, builds, quiet):
    _check(program, W, traces, builds, quiet)


@pytest.mark.slow
@pytest.mark.parametrize("program,W,traces,builds,quiet", SLOW,
                         ids=[p[0].__name__ for p in SLOW])
def test_program(program, W, traces, builds, quiet):
    _check(program, W, traces, builds, quiet)


@pytest.mark.slow
def test_gpt_generate_window():
    """generate(): idx[:, -block_size:] of a growing idx. Lengths 2..5 are one symbol (a
    third size confirms the tril slice's affine size); at block_size the slice of the mask is
    whole (a graph of its own, traced twice: the SymInt trace differs in more than sizes),
    then the window is a view whose stride and offset grow: two traces more, then served.
    (Today's cost, above the promise: left for the size-template work.)"""
    log = _check(P.gpt, 17, 7, 3)
    assert log[-2][0] == log[-1][0] == 7


@pytest.mark.slow
def test_seq2seq_gru_greedy():
    """The encoder's GRU unrolls over the source length: each length is a graph of its own
    (a trace each, up to the recompile limit); the results still eager's and torch's."""
    _check(P.gru_greedy, 18, 8, 8)


@pytest.mark.slow
def test_pack_padded_sequence():
    """pack_padded_sequence reads the lengths' values: a trace per set of lengths."""
    _check(P.packed, 19, 4, 4)


@pytest.mark.slow
def test_multiscale_images_share_a_template():
    """24/28/32 px batches (then 20, 16 and odd 25): the pools' halved sizes fit the
    quotient rule, confirmed by the third size, which then serves every even size; 25 px
    (the pool rounds down) traces.
    (The conv kernels' modules still differ with the image size: a build per size, left.)"""
    _check(P.multiscale, 20, 4, 5)


def test_quotient_rule_exact_only_where_divisible():
    r = rule(14, 16, 28, 32)                        # a 2x2 pool's side
    assert r == (1, 1, 0, 2) and at(r, 20) == 10 and exact(r, 20) and not exact(r, 25)
    r = rule(196, 256, 28, 32)                      # its plane
    assert at(r, 24) == 144 and exact(r, 24) and not exact(r, 25)
    with pytest.raises(ValueError):     # (s + 3) // 2 at 5, 7: no quotient with an offset
        rule(4, 5, 5, 7)
    assert affine((1, 1, 0, 2))         # (a quotient waits for a third size's confirmation)


def test_pooled_sizes_served_by_one_template():
    """A 2x2 average pool at 8, 12 px, 16 px (confirming s / 2), then 20, 10 px served (no
    trace), and 9 px (the pool rounds down: no exact size of the rule) traced; torch's
    numbers at every size."""

    def prog(T):
        def f(x):
            return T.nn.functional.avg_pool2d(x, 2).flatten(1) * 3.0
        return f
    fn = llgrad.compile(prog(llgrad))
    sizes = (8, 12, 16, 20, 10, 9)
    rng = np.random.default_rng(0)
    for k, s in enumerate(sizes):
        x = rng.standard_normal((2, 3, s, s)).astype(np.float32)
        got = fn(llgrad.tensor(x))
        fn.wait()
        np.testing.assert_allclose(got.numpy(), prog(torch)(torch.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)
        assert fn.n_traces == (min(k + 1, 3) if k < 5 else 4), (s, fn.n_traces)


def test_short_sums_share_the_code_of_long_ones():
    """Row sums of float32 over lengths on both sides of the vectorisation hint's threshold
    (8 vectors): one shared build serves them all, the short ones too."""
    fn = llgrad.compile(lambda x: (x * 2.0).sum(-1) + 1.0)
    rng = np.random.default_rng(1)
    for k, n in enumerate((301, 403, 507, 45, 37, 29, 611)):
        x = rng.standard_normal((3, n)).astype(np.float32)
        got = fn(llgrad.tensor(x))
        fn.wait()
        np.testing.assert_allclose(got.numpy(), (torch.tensor(x) * 2.0).sum(-1).numpy() + 1.0,
                                   rtol=1e-5, atol=1e-5)
    assert fn.n_traces == 2
    assert fn.n_llvm_compiles <= 1, fn.n_llvm_compiles


def test_a_rounded_length_is_never_served_from_a_quotient():
    """arange(-t, t, 3) has ceil(2t / 3) values: 4, 5, 6 at t = 5, 7, 9 lie on (t + 3) / 2,
    which is 7 at 11 (eager: 8); no rule with an offset is a quotient, so each t traces and
    every length is eager's (as NumPy's)."""
    def f(x):
        t = x.shape[1]
        return x.sum(), llgrad.arange(-t, t, 3, dtype=llgrad.int16)
    cf = llgrad.compile(f)
    for t in (5, 7, 9, 11, 13, 17):
        x = llgrad.ones(2, t)
        got = cf(x)[1].numpy()
        np.testing.assert_array_equal(got, np.arange(-t, t, 3, dtype=np.int16))
