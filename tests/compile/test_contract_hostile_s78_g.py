"""Compile-contract s78 (G): the fixes the hostile programs of
test_contract_hostile_*_s78_g.py found: set_rng_state() inside a compiled function named as
the reason it runs eagerly (not Tensor.numpy()); a step whose loss check raises on an early
call keeps its .item() reads stand-ins (not a trace per loss and an eager fallback); a meta
tensor (an argument, a captured tensor, a module's parameters) where a CPU call's trace
exists runs eagerly as a meta call (not the CPU code over its zero pages)."""

import pytest
from contract_harness_sweep7 import runs
from hostile_helpers_s78_g import _catch, _lin, _xs

import llgrad

torch = pytest.importorskip("torch")


def test_set_rng_state_inside_warns_with_its_name():
    """set_rng_state() inside the function reads a captured state tensor's values: the
    fallback names set_rng_state (as get_rng_state and manual_seed are named), not
    Tensor.numpy() of a traced tensor."""
    def scenario(lib, wrap, see):
        st = lib.get_rng_state()

        def step(x):
            lib.set_rng_state(st)
            return x + lib.rand(3)
        f = wrap(step)
        for i in range(3):
            see(f(_xs(lib, i)), lib.rand(1))
    own = runs(scenario, torch)
    assert len(own) == 1, own
    assert "set_rng_state() of the default random generator" in own[0], own[0]
    assert "numpy" not in own[0], own[0]


@pytest.mark.parametrize("raise_at", [0, 1])
def test_raise_on_early_call_keeps_item_reads_inputs(raise_at):
    """A step whose check of loss.item() raises on its first (or second) call: the trace
    with the read as a stand-in raised, so compile traced it again with the number guarded
    by value, which raised the same exception; the number did not cause it, so it stays a
    stand-in: later calls reuse one trace, not a trace per loss up to an eager fallback."""
    made = []

    def scenario(lib, wrap, see):
        w, log = lib.ones(3, requires_grad=True), []

        def step(x, k):
            loss = (x * w).sum()
            log.append(round(loss.item(), 4))
            if loss.item() > k:
                raise RuntimeError(f"loss over {k}")
            loss.backward()
            return loss
        f = wrap(step)
        made.append(f)
        for i in range(10):
            _catch(see, f, lib.ones(3) * i, -1.0 if i == raise_at else 100.0)
            see(w.grad, list(log))
    own = runs(scenario, torch)
    assert own == [], own
    assert made[-1].n_traces <= 4, made[-1].n_traces


@pytest.mark.parametrize("backend", ["interpret", pytest.param(None, marks=pytest.mark.slow)])
def test_meta_input_after_cpu_entry_runs_eagerly(backend):
    """A meta tensor passed where a CPU tensor's trace exists: the guards (and the lean
    call path's key) tell them apart, so the call runs eagerly (a trace of it breaks) and
    returns a meta tensor, as eager; not the CPU code over the meta tensor's zero pages."""
    f = llgrad.compile(lambda x: (x * 2).sum(0), backend=backend)
    with pytest.warns(UserWarning, match="an op on meta tensors"):
        for i in range(4):
            x = llgrad.ones(4, 3) * (i + 1)
            y = f(x.to("meta") if i % 2 else x)
            assert y.device.type == ("meta" if i % 2 else "cpu") and tuple(y.shape) == (3,)
            if not i % 2:
                assert y.tolist() == [8.0 * (i + 1)] * 3
    assert f.n_traces == 2


def test_captured_tensor_moved_to_meta_between_calls():
    def scenario(lib, wrap, see):
        w = lib.ones(3)
        box = {"w": w}
        f = wrap(lambda x: (x * box["w"]).sum(0))
        for i in range(4):
            box["w"] = w.to("meta") if i == 2 else w * (i + 1)
            try:
                y = f(_xs(lib, i))
            except RuntimeError as e:       # (a CPU tensor times a meta one)
                see(e)
                continue
            see(y.device.type, y if y.device.type == "cpu" else tuple(y.shape))
    runs(scenario, torch, with_torch=False)     # (eager is the oracle: torch's meta
    # kernels cost seconds to import; tests/test_meta_device_* hold eager to them)


def test_module_moved_to_meta_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(lambda x: m(x).relu())
        for i in range(4):
            if i == 2:
                m.to("meta")
            x = _xs(lib, i)
            y = f(x.to("meta") if i >= 2 else x)
            see(y.device.type, tuple(y.shape), y if y.device.type == "cpu" else None)
    runs(scenario, torch, with_torch=False)     # (eager is the oracle: torch's meta
    # kernels cost seconds to import; tests/test_meta_device_* hold eager to them)
