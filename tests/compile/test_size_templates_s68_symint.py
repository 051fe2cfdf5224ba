"""Sizes the user's code reads, handed out as SymInts in a second trace (the default): the
idioms of training code that read a batch or sequence length (`B, T, C = x.shape`, then
view / zeros / expand / arange / a mask's slice / a mean over the batch) are served at new
sizes from a template, with eager's numbers at every size; uses a template cannot stand for
(a size as a float, a Python loop over it, an affine size such as T + 1) trace each size,
with eager's numbers too. A SymInt is not an int: each use calls it (runtime/sym_int.py)."""
import math

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
from llgrad.runtime.sym_int import SymInt


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.delenv("LLGRAD_DYNAMIC_SIZES", raising=False)


llgrad.manual_seed(0)
_LIN = nn.Linear(6, 6)
_CLS = llgrad.randn(1, 1, 6)
_MASK = llgrad.tril(llgrad.ones(64, 64)).bool()
_POS = nn.Embedding(64, 6)


def _zeros_state(x):
    B = x.shape[0]
    return _LIN(x[:, 0]) + llgrad.zeros(B, 6)


def _causal(x):
    T = x.size(1)
    a = (x @ x.transpose(1, 2)) / math.sqrt(x.size(-1))
    return a.masked_fill(~_MASK[:T, :T], float("-inf")).softmax(-1) @ x


# name -> (function, templated when the batch varies, when the sequence varies; "affine": a
# size k * s + m, templated once a third trace confirms it: size_confirm.py)
IDIOMS = {
    "view_flat": (lambda x: _LIN(x).view(x.size(0), -1), True, True),
    "reshape_bt": (lambda x: _LIN(x).reshape(x.shape[0] * x.shape[1], 6).sum(0), True, True),
    "zeros_state": (_zeros_state, True, True),
    "new_zeros": (lambda x: x.new_zeros(x.size(0), 6) + x[:, 1], True, True),
    "expand_cls": (lambda x: llgrad.cat([_CLS.expand(x.shape[0], -1, -1), x], 1), True,
                   "affine"),
    "positions": (lambda x: x + _POS(llgrad.arange(x.shape[1])), True, True),
    "causal_mask": (_causal, True, True),
    "mean_by_size": (lambda x: x.sum(0) / x.shape[0], True, True),
    "size_times_tensor": (lambda x: x.shape[0] * x - x.shape[1], True, True),
    "repeat": (lambda x: _CLS.repeat(x.size(0), 1, 1) + x[:, :1], True, True),
    "last_step": (lambda x: x[:, x.size(1) - 1], True, False),
    "full": (lambda x: llgrad.full((x.size(0), 6), 2.0) * x[:, 0], True, True),
    "tensor_of_sizes": (lambda x: x * llgrad.tensor([x.size(0), x.size(1)]).sum(), True, True),
    "as_float": (lambda x: x * (1.0 / float(x.size(0))), False, True),
    "float_over_size": (lambda x: x * (1.0 / (x.size(0) - 1)), False, True),
    "python_loop": (lambda x: sum(x[i] for i in range(x.size(0))), False, True),
    "narrow": (lambda x: x.narrow(0, 0, x.size(0) - 1), "affine", False),   # (B - 1)
    "pow_mod": (lambda x: x * pow(x.size(0), 2, 7), False, True),
    "roll_by_size": (lambda x: x.roll(x.size(1), 0) * 2, True, True),
}


def _input(shape):
    rng = np.random.default_rng(sum(shape))
    return llgrad.tensor(rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("vary", ["batch", "seq"])
@pytest.mark.parametrize("name", IDIOMS)
def test_an_idiom_at_new_sizes_equals_eager(name, vary):
    fn, by_batch, by_seq = IDIOMS[name]
    compiled = llgrad.compile(fn)
    sizes = [8, 12, 40, 20, 9, 8]
    for s in sizes:
        x = _input((s, 5, 6) if vary == "batch" else (4, s, 6))
        want, got = fn(x), compiled(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name} at {s}")
    templated = by_batch if vary == "batch" else by_seq
    if templated == "affine":   # (8, 12 fit; 40 traces and confirms; 20, 9 served)
        assert compiled.n_traces == 3, compiled.n_traces
        assert [t.uses for t in compiled._sizes.templates] == [2]
    elif templated:
        assert compiled.n_traces == 2, compiled.n_traces
        assert [t.uses for t in compiled._sizes.templates] == [3]
    else:
        assert compiled.n_traces >= 5 and not any(t.uses for t in compiled._sizes.templates)


def test_a_training_step_reading_its_sizes_is_served_at_twelve_sizes():
    def make():
        llgrad.manual_seed(0)
        emb, pos, head = nn.Embedding(20, 8), nn.Embedding(16, 8), nn.Linear(8, 20)
        params = [*emb.parameters(), *pos.parameters(), *head.parameters()]
        opt = llgrad.optim.Adam(params, lr=1e-2)

        def step(idx, y):
            B, T = idx.shape
            h = emb(idx) + pos(llgrad.arange(T))
            att = (h @ h.transpose(1, 2)).masked_fill(~_MASK[:T, :T], -1e9).softmax(-1)
            logits = head((att @ h).reshape(B * T, 8))
            loss = F.cross_entropy(logits, y.reshape(B * T))
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.detach()
        return step, params

    def run(compiled):
        step, params = make()
        step = llgrad.compile(step) if compiled else step
        rng, out = np.random.default_rng(0), []
        for b, t in [(16, 8), (24, 8), (7, 8), (16, 12), (16, 5), (40, 8), (3, 8), (16, 9)]:
            idx = llgrad.tensor(rng.integers(0, 20, (b, t)))
            loss = step(idx, llgrad.tensor(rng.integers(0, 20, (b, t))))
            out.append(float(loss))
        return out, [p.detach().numpy().copy() for p in params], step

    want, want_params, _ = run(False)
    got, got_params, step = run(True)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for g, w in zip(got_params, want_params):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    # (the first call meets a fresh optimiser and runs eagerly; the batch then the length
    # change: a template each, 7 and 40 and 3 from the batch's, 5 and 9 from the length's)
    assert step.n_traces <= 5, step.n_traces


def test_a_size_returned_or_written_into_the_users_objects_is_an_int_there():
    log = {"sizes": []}

    def f(x):
        B = x.size(0)
        log["last"] = (B, x.size(1))
        return _LIN(x).view(B, -1), B * 2
    compiled = llgrad.compile(f)
    for b in [8, 12, 40, 20]:
        out, n = compiled(_input((b, 6)))
        assert log["last"] == (b, 6) and [type(v) for v in log["last"]] == [int, int]
        assert n == 2 * b and type(n) is int


def test_a_symint_is_not_an_int_and_acts_as_one_outside_its_trace():
    s = SymInt(12, lambda c: 3 * c, None)
    x = llgrad.ones(3)
    assert not isinstance(s, int) and isinstance(s, __import__("numbers").Integral)
    assert s + 1 == 13 and type(s + 1) is int and s // 5 == 2 and -s == -12
    assert [0, 1, 2][s - 11] == 1 and len(range(s)) == 12 and np.zeros(s).shape == (12,)
    assert 0.5 * s == 6.0 and math.log2(s // 3) == 2.0 and f"{s}" == "12" and hash(s) == 12
    assert pow(s, 2, 7) == 4 and s ** 2 == 144 and 2 ** (s - 10) == 4
    # (true division with a float or a complex, as an int's: 1.0 / B raised a TypeError)
    assert 1.0 / (s - 2) == 0.1 and s / 2.0 == 6.0 and 3 / s == 0.25 and s / 4 == 3.0
    assert (1 + 2j) / s == (1 + 2j) / 12 and np.float32(6) / s == 0.5
    np.testing.assert_array_equal((x / s).numpy(), np.full(3, 1 / 12, np.float32))
    np.testing.assert_array_equal((s * x).numpy(), np.full(3, 12, np.float32))
    assert (x == s).tolist() == [False] * 3 and llgrad.zeros(s, 2).shape == (12, 2)
    assert llgrad.tensor([s, 2]).tolist() == [12, 2] and x.new_full((s,), s).shape == (12,)
    assert llgrad.arange(s).shape == (12,) and llgrad.empty(s).shape == (12,)
    assert s != None and s != "12"      # noqa: E711  (no comparison of a size with them)


def test_a_trace_done_again_with_ints_does_not_count_against_the_recompile_limit():
    # (T * (T + 1) // 2 is no size a template holds, not even an affine one at 3, 5: every
    # length traces, 5's and 7's twice)
    def f(x):
        return llgrad.cat([_CLS.expand(x.shape[0], -1, -1), x], 1).sum(1) * (
            x.shape[1] * (x.shape[1] + 1) // 2)
    compiled = llgrad.compile(f)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no "recompile limit reached")
        for t in [3, 5, 7, 9, 11, 13, 15, 17]:
            x = _input((2, t, 6))
            np.testing.assert_allclose(compiled(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert compiled.n_traces == 10 and compiled._sizes.redone == 2


def test_a_step_reading_its_batch_size_with_state_changed_between_calls():
    # the step reads B (a SymInt in its second trace) and divides by it; between calls an
    # lr a scheduler changes, a hook registered later, a float attribute, a NumPy array the
    # step reads as a tensor, rewritten: every call against eager's
    table = np.linspace(0.5, 1.5, 3).astype(np.float32)

    def make():
        model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
        model.scale = 1.0
        opt = llgrad.optim.SGD(model.parameters(), 0.1, momentum=0.9)
        sched = llgrad.optim.lr_scheduler.ExponentialLR(opt, 0.9)
        weights = llgrad.from_numpy(table)

        def step(x, y):
            B, T, C = x.shape
            logits = model(x.reshape(B * T, C)).view(B, T, 3) * model.scale
            loss = (F.cross_entropy(logits.reshape(B * T, 3), y.reshape(B * T),
                                    weight=weights, reduction="sum") / B)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            return loss
        return step, list(model.parameters()), model

    outs = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        table[:] = np.linspace(0.5, 1.5, 3)
        step, params, model = make()
        if compiled:
            step = llgrad.compile(step)
        rng, out = np.random.default_rng(0), []
        for k, b in enumerate([16, 16, 24, 40, 7, 33, 9, 50]):
            if k == 4:
                params[0].register_hook(lambda g: g * 0.5)
                model.scale = 2.0
            if k == 5:
                table[1] = 3.0
            x = llgrad.tensor(rng.standard_normal((b, 4, 6)).astype(np.float32))
            y = llgrad.tensor(rng.integers(0, 3, (b, 4)))
            out.append(step(x, y).item())
        outs.append(out + [float(p.detach().sum()) for p in params])
    np.testing.assert_allclose(outs[1], outs[0], rtol=2e-5, atol=1e-6)
    assert sum(t.uses for t in step._sizes.templates) >= 2, step.n_traces
