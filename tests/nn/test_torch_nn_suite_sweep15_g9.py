"""Sweep 15 (g9): odds and ends of hooks and state_dict (None buffers and parameters,
keep_vars, destination, a pre hook's tuple / non-tuple returns, hooks under no_grad, handles as
context managers, always_call hooks when forward or a pre hook raises, the legacy
state_dict hook, the state a failed load leaves), checked side by side with torch
(tests/nn/oracle_sweep15_g.py)."""
import pytest

torch = pytest.importorskip("torch")

from oracle_sweep15_g import check  # noqa: E402

CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


def caught(f):
    try:
        return f()
    except Exception as e:      # noqa: BLE001 (compared with torch's)
        return type(e).__name__, str(e).split("\n")[0][:80]


@case
def none_buffer_sd(lib):
    m = lib.nn.Linear(2, 2)
    m.register_buffer("b", None)
    m.register_parameter("p", None)
    return list(m.state_dict()), caught(lambda: m.load_state_dict(
        {"weight": lib.ones(2, 2), "bias": lib.ones(2), "b": lib.ones(1)}))


@case
def keep_vars(lib):
    m = lib.nn.Linear(2, 2)
    sd = m.state_dict(keep_vars=True)
    sd2 = m.state_dict()
    return sd["weight"] is m.weight, sd2["weight"].requires_grad, sd2["weight"]._version


@case
def sd_destination(lib):
    m = lib.nn.Sequential(lib.nn.Linear(1, 1))
    d = {}
    r = m.state_dict(destination=d, prefix="x.")
    return r is d, list(d)


@case
def hook_modifies_kwargs_no_with_kwargs(lib):
    class M(lib.nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale
    m = M()
    m.register_forward_pre_hook(lambda mod, args: (args[0] + 1, ))
    return m(lib.ones(2), scale=3.0), caught(lambda: m(lib.ones(2), 2.0))


@case
def pre_hook_returns_non_tuple_with_kwargs(lib):
    m = lib.nn.Identity()
    m.register_forward_pre_hook(lambda mod, a, kw: a[0] * 2, with_kwargs=True)
    return caught(lambda: m(lib.ones(2)))


@case
def backward_hook_in_no_grad(lib):
    m = lib.nn.Linear(2, 2)
    log = []
    m.register_full_backward_hook(lambda *a: log.append(1))
    with lib.no_grad():
        y = m(lib.ones(1, 2, requires_grad=True))
    return y.requires_grad, log


@case
def module_hook_handles_ctx(lib):
    m = lib.nn.Linear(2, 2)
    log = []
    with m.register_forward_hook(lambda *a: log.append("a")):
        m(lib.ones(1, 2))
    m(lib.ones(1, 2))
    h = m.register_forward_hook(lambda *a: log.append("b"))
    h.remove()
    h.remove()
    m(lib.ones(1, 2))
    return log


@case
def forward_hook_with_kwargs_and_always_call(lib):
    class Bad(lib.nn.Module):
        def forward(self, x, k=0):
            raise RuntimeError("no")
    m = Bad()
    log = []
    m.register_forward_hook(lambda mod, a, kw, out: log.append((kw, out)), with_kwargs=True,
                            always_call=True)
    return caught(lambda: m(lib.ones(1), k=2)), log


@case
def global_hook_exception_in_pre_hook_always_call(lib):
    m = lib.nn.Linear(1, 1)
    log = []
    def bad(mod, a):
        raise ValueError("pre")
    m.register_forward_pre_hook(bad)
    m.register_forward_hook(lambda *a: log.append("always"), always_call=True)
    return caught(lambda: m(lib.ones(1, 1))), log


@case
def state_dict_hook_legacy(lib):
    m = lib.nn.Linear(1, 1)
    def hook(mod, sd, prefix, meta):
        sd[prefix + "extra"] = lib.ones(1)
        return sd
    m._register_state_dict_hook(hook)
    return list(m.state_dict())


@case
def load_state_dict_strict_error_text(lib):
    m = lib.nn.Sequential(lib.nn.Linear(2, 2))
    e = caught(lambda: m.load_state_dict({"0.weight": lib.ones(3, 3), "1.x": lib.ones(1)}))
    return e


@case
def load_sd_partial_failure_state(lib):
    m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Linear(2, 2))
    sd = {k: lib.ones_like(v) for k, v in m.state_dict().items()}
    sd["1.weight"] = lib.ones(3, 3)
    before = [p.detach().clone() for p in m.parameters()]
    e = caught(lambda: m.load_state_dict(sd))
    return e, [(p - b).abs().sum() for p, b in zip(m.parameters(), before)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_hook_and_state_dict_case(name):
    check(CASES[name])
