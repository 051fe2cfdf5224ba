"""Compile-contract s79 (F): the fix the hostile programs of
test_contract_hostile_slow_s79_f.py found: a step that raises on some calls (a bad batch
skipped by raising, caught by the training loop) traces each raising call again (it keeps
no entry); those traces counted against the recompile limit, so after a few bad batches the
limit's warning came and every later new shape (the epoch's last, shorter batch) ran
eagerly. A trace that raised the user's exception no longer counts against the limit."""

import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _bad_batches(counts, n_calls):
    made = []

    def scenario(lib, wrap, see):
        st = {"a": lib.zeros(3), "n": 0}
        w = lib.ones(3, requires_grad=True)

        def step(x):
            st["a"].add_(x.sum(0))
            if counts:
                st["n"] += 1
            if x.sum().item() < 0:
                raise ValueError("bad batch")
            loss = (x * w).pow(2).sum()
            loss.backward()
            return loss
        f = wrap(step)
        made.append(f)
        for i in range(n_calls):
            try:
                see(f(lib.ones(4, 3) * (-1 if i % 3 == 1 else i)))
            except ValueError as e:
                see(e)
            see(dict(st), w.grad)
        see(f(lib.ones(2, 3)), w.grad)   # (the epoch's last, shorter batch)
    own = runs(scenario, torch)
    return own, made[-1]


@pytest.mark.parametrize("counts", [False, True])
def test_raising_calls_do_not_reach_recompile_limit(counts):
    """Nine bad batches in 27 calls (with a Python counter in the state, whose stand-in
    trace of a raising call is traced again with its value, too), then a new shape: no
    recompile-limit warning, and the new shape is traced (its entry kept), not run eagerly."""
    own, f = _bad_batches(counts, 27)
    assert own == [], own
    assert len(f.entries) >= 2, (f.n_traces, len(f.entries))
    assert f.entries[-1].forward is not None
