"""Regressions found by the second training-program fuzzer (tests/fuzz/test_train_fuzz_sweep23.py),
each checked against eager llgrad and torch."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.utils.checkpoint

torch = pytest.importorskip("torch")
import torch.utils.checkpoint  # noqa: E402


def _checkpointed_steps(lib, compiled, preserve, reentrant=False, calls=3):
    """A dropout inside checkpoint, trained for a few calls: the outputs, the Linear's grad
    and the next number the default generator gives, and the warnings raised."""
    lib.manual_seed(0)
    blk = lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.Dropout(0.5))
    x = lib.randn(3, 4, requires_grad=reentrant)

    def step(x):
        y = lib.utils.checkpoint.checkpoint(blk, x, use_reentrant=reentrant,
                                            preserve_rng_state=preserve)
        y.square().sum().backward()
        return y.detach()

    if compiled:
        step = lib.compile(step, backend="interpret")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ys = [step(x).numpy().copy() for _ in range(calls)]
    return ys + [blk[0].weight.grad.numpy().copy(), lib.rand(2).numpy().copy()], \
        [str(w.message) for w in caught]


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_without_preserved_rng_redraws_in_backward_as_eager(reentrant):
    """checkpoint(preserve_rng_state=False) around a dropout: eager's backward runs the
    segment again with new random numbers (another mask, the generator advanced again); the
    compiled step used the forward's mask in backward and advanced the generator once, a
    silent difference in gradients, parameters and every later draw. It now runs eagerly
    with a warning naming the call."""
    ref, _ = _checkpointed_steps(torch, False, False, reentrant)
    eager, _ = _checkpointed_steps(llgrad, False, False, reentrant)
    got, said = _checkpointed_steps(llgrad, True, False, reentrant)
    for a, b, c in zip(ref, eager, got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(c, b)
    assert any("running eagerly" in m and "preserve_rng_state=False" in m for m in said), said


def test_checkpoint_with_preserved_rng_still_compiles():
    """The default (preserve_rng_state=True) replays the forward's mask: one trace, no break,
    the same numbers as eager."""
    eager, _ = _checkpointed_steps(llgrad, False, True)
    got, said = _checkpointed_steps(llgrad, True, True)
    for a, b in zip(eager, got):
        np.testing.assert_array_equal(b, a)
    assert not [m for m in said if "running eagerly" in m], said


def test_checkpoint_without_preserved_rng_and_no_draw_still_compiles():
    """preserve_rng_state=False matters only to a segment that draws: a segment with no
    dropout compiles as before."""
    def run(compiled):
        llgrad.manual_seed(0)
        blk = llgrad.nn.Sequential(llgrad.nn.Linear(4, 4), llgrad.nn.Tanh())
        x = llgrad.randn(3, 4)

        def step(x):
            y = llgrad.utils.checkpoint.checkpoint(blk, x, use_reentrant=False,
                                                   preserve_rng_state=False)
            y.sum().backward()
            return y.detach()

        if compiled:
            step = llgrad.compile(step, backend="interpret")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = [step(x).numpy() for _ in range(2)]
        return out + [blk[0].weight.grad.numpy()], caught

    (eager, _), (got, caught) = run(False), run(True)
    for a, b in zip(eager, got):
        np.testing.assert_array_equal(b, a)
    assert not [w for w in caught if "running eagerly" in str(w.message)]


def _checkpointed_norm(lib, compiled, reentrant, block="bn"):
    """A BatchNorm (or a module counting its calls) inside checkpoint, three calls: its
    buffers, the Linear's grad, and the warnings raised."""
    lib.manual_seed(0)
    nn = lib.nn

    class Counted(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", lib.zeros((), dtype=lib.long))

        def forward(self, h):
            self.calls += 1
            return h.tanh()

    blk = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4) if block == "bn" else Counted())
    x = lib.randn(6, 4, requires_grad=reentrant)

    def step(x):
        y = lib.utils.checkpoint.checkpoint(blk, x, use_reentrant=reentrant)
        y.square().sum().backward()
        return y.detach()

    if compiled:
        step = lib.compile(step, backend="interpret")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            step(x)
    return [b.numpy().copy() for b in blk.buffers()] + [blk[0].weight.grad.numpy().copy()], \
        [str(w.message) for w in caught]


@pytest.mark.parametrize("reentrant, block", [(False, "bn"), (True, "bn"), (False, "counter")])
def test_checkpoint_segment_writing_buffers_writes_twice_as_eager(reentrant, block):
    """A segment that writes memory from outside it (a BatchNorm's running stats and
    num_batches_tracked, a call counter): eager's backward runs it again and writes again
    (num_batches_tracked 6 after 3 steps, as torch); the compiled step wrote once (3), a
    silent difference. It now runs eagerly with a warning."""
    ref, _ = _checkpointed_norm(torch, False, reentrant, block)
    eager, _ = _checkpointed_norm(llgrad, False, reentrant, block)
    got, said = _checkpointed_norm(llgrad, True, reentrant, block)
    for a, b, c in zip(ref, eager, got):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)     # (a norm over 6 rows)
        np.testing.assert_array_equal(c, b)
    assert any("running eagerly" in m and "checkpoint" in m for m in said), said


def test_reentrant_checkpoint_with_no_input_requiring_grad_gives_no_grads_as_eager():
    """use_reentrant=True and no input requiring grad: eager's segment runs under no_grad,
    its output needs no grad and the parameters inside it get none (torch's documented
    limitation, with a warning); the compiled step traced the segment as plain code and gave
    them gradients, so the optimiser then moved them."""
    def run(lib, compiled):
        lib.manual_seed(0)
        blk, head = lib.nn.Linear(4, 4), lib.nn.Linear(4, 1)
        x = lib.randn(6, 4)

        def step(x):
            y = lib.utils.checkpoint.checkpoint(blk, x, use_reentrant=True)
            loss = head(y).sum()
            loss.backward()
            return loss.detach(), y.requires_grad

        if compiled:
            step = lib.compile(step, backend="interpret")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = [step(x) for _ in range(2)]
        return [(float(a), b) for a, b in outs], blk.weight.grad, head.weight.grad.numpy()

    ref, eager, got = run(torch, False), run(llgrad, False), run(llgrad, True)
    assert ref[1] is None and eager[1] is None and got[1] is None
    assert got[0] == eager[0]
    assert [b for _, b in ref[0]] == [b for _, b in got[0]] == [False, False]
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-5)


def test_reentrant_checkpoint_keyword_error_raised_when_compiled():
    """Eager's use_reentrant=True refuses keyword arguments for the segment (torch's
    ValueError); the compiled call took them silently."""
    blk = llgrad.nn.Linear(4, 4)

    def step(x):
        return llgrad.utils.checkpoint.checkpoint(lambda h, scale: blk(h) * scale, x,
                                                  use_reentrant=True, scale=2.0)

    x = llgrad.randn(2, 4, requires_grad=True)
    for f in (step, llgrad.compile(step, backend="interpret")):
        with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
            f(x)


@pytest.mark.parametrize("where", ["hook", "function"])
def test_checkpoint_segment_python_effects_run_twice_as_eager(where):
    """A checkpoint segment's Python effects (a forward hook, an attribute it counts) run
    twice in eager (forward, and the recomputation in backward): the compiled call runs
    eagerly, with a warning, as the trace watches the Python state across the segment."""
    class Count:
        n = 0

    def run(compiled):
        c = Count()
        llgrad.manual_seed(0)
        blk = llgrad.nn.Sequential(llgrad.nn.Linear(4, 4), llgrad.nn.Tanh())
        if where == "hook":
            blk[1].register_forward_hook(lambda m, a, o: setattr(c, "n", c.n + 1))
        x = llgrad.randn(6, 4)

        def segment(h):
            if where == "function":
                c.n += 1
            return blk(h)

        def step(x):
            y = llgrad.utils.checkpoint.checkpoint(segment, x, use_reentrant=False)
            y.square().sum().backward()
            return y.detach()

        if compiled:
            step = llgrad.compile(step, backend="interpret")
        for _ in range(3):
            step(x)
        return c.n

    assert run(False) == 6
    assert run(True) == 6
