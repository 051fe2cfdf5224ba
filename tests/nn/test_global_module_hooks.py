"""torch.nn.modules.module's global hooks against torch: order with the modules' own hooks,
replaced outputs, backward hooks, registration hooks, removal; a compiled function runs
eagerly (with a warning) while one is registered, giving eager's results and hook calls."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime import global_module_hooks


@pytest.fixture(autouse=True)
def _no_global_hooks():
    yield
    global_module_hooks.clear()


def _run(lib):
    G = lib.nn.modules.module
    log = []
    handles = [
        G.register_module_forward_pre_hook(lambda m, a: log.append(("pre", type(m).__name__))),
        G.register_module_forward_hook(lambda m, a, o: log.append(("fwd", type(m).__name__))),
        G.register_module_full_backward_hook(
            lambda m, gi, go: log.append(("bwd", type(m).__name__, len(gi), len(go)))),
        G.register_module_full_backward_pre_hook(lambda m, go: log.append(("bpre", type(m).__name__))),
    ]
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(), lib.nn.Linear(3, 1))
    m[0].register_forward_hook(lambda mod, a, o: log.append(("own", type(mod).__name__)))
    x = lib.randn(4, 2, requires_grad=True)
    m(x).sum().backward()
    doubled = G.register_module_forward_hook(
        lambda mod, a, k, o: o * 2 if isinstance(mod, lib.nn.ReLU) else None, with_kwargs=True)
    y = m(x).sum()
    for h in handles + [doubled]:
        h.remove()
    z = m(x).sum()
    names = []
    regs = [G.register_module_parameter_registration_hook(lambda mod, n, p: names.append(n)),
            G.register_module_buffer_registration_hook(lambda mod, n, b: names.append("b:" + n)),
            G.register_module_module_registration_hook(lambda mod, n, s: names.append("m:" + n))]
    lib.nn.Sequential(lib.nn.BatchNorm1d(3))
    for h in regs:
        h.remove()
    return log, float(y), float(z), x.grad.numpy(), names


def test_global_hooks_as_torch():
    torch = pytest.importorskip("torch")
    got, want = _run(llgrad), _run(torch)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1:3], want[1:3], rtol=1e-6)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-6)
    assert got[4] == want[4]


def test_both_backward_kinds_refused():
    G = llgrad.nn.modules.module
    G.register_module_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks"):
        G.register_module_backward_hook(lambda *a: None)


def test_compiled_runs_eagerly_while_registered():
    G = llgrad.nn.modules.module
    llgrad.manual_seed(0)
    m = llgrad.nn.Sequential(llgrad.nn.Linear(3, 3), llgrad.nn.Tanh())
    step = llgrad.compile(lambda x: m(x).sum())
    x = llgrad.randn(2, 3)
    step(x)
    step(x)                             # (traced and compiled without hooks)
    seen = []
    h = G.register_module_forward_hook(lambda mod, a, o: seen.append(type(mod).__name__) or o + 1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = [float(step(x)) for _ in range(2)]
    assert any("global module hooks" in str(x.message) for x in w)
    h.remove()
    want_seen = seen[:3]
    assert seen == want_seen * 2 == ["Linear", "Tanh", "Sequential"] * 2
    eager = float(m(x).sum())
    with_hook = float((llgrad.tanh(m[0](x) + 1) + 1 + 1).sum())
    assert got == [with_hook, with_hook]             # (eager calls: the same numbers)
    np.testing.assert_allclose(float(step(x)), eager, atol=1e-6)     # (native again)


def _module_methods(lib):
    m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
    w = m[0].weight
    m.type(lib.float64)
    out = [str(m[0].weight.dtype), str(m[1].num_batches_tracked.dtype), m[0].weight is w,
           m[0].weight.requires_grad]
    m.to_empty(device="cpu")
    out += [m[0].weight is w, tuple(m[0].weight.shape), str(m[0].weight.dtype)]
    m.set_submodule("0", lib.nn.Linear(2, 5))
    out.append(repr(m[0]))
    for args in (("", m[0]), ("x.y", m[0]), ("1", 3), ("nope", m[0])):
        try:
            m.set_submodule(*args, strict=True)
            out.append("ok")
        except (ValueError, AttributeError) as e:
            out.append((type(e).__name__, str(e).replace("torch.", "llgrad.")))
    return [str(v).replace("torch.", "llgrad.") for v in out]


def test_type_to_empty_set_submodule_as_torch():
    torch = pytest.importorskip("torch")
    assert _module_methods(llgrad) == _module_methods(torch)


def test_registration_hook_makes_compiled_calls_eager():
    """A module made inside a compiled function runs the registration hook at every call, as
    eager does (a trace would run it once)."""
    G = llgrad.nn.modules.module
    names = []
    h = G.register_module_parameter_registration_hook(lambda mod, n, p: names.append(n))
    step = llgrad.compile(lambda x: llgrad.nn.Linear(3, 2)(x).sum())
    x = llgrad.randn(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            step(x)
    h.remove()
    assert names == ["weight", "bias"] * 3
