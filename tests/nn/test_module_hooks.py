"""Module features: forward pre-hooks, forward hooks, full backward (pre-)hooks, handles,
Module.apply, named_modules, register_buffer(persistent=False) -- each scenario run in
llgrad and, when installed, in torch, recording the same log."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn


def _libs():
    torch = pytest.importorskip("torch")
    return (llgrad, torch)


def _arr(t):
    return None if t is None else np.round(t.detach().numpy().astype(np.float64), 5).tolist()


def _linear(lib):
    m = lib.nn.Linear(3, 2)
    with lib.no_grad():
        m.weight.copy_(lib.tensor([[1.0, 2, 3], [4, 5, 6]]))
        m.bias.copy_(lib.tensor([0.5, -0.5]))
    return m


def _hooks_scenario(lib):
    log = []
    m = _linear(lib)
    m.register_forward_pre_hook(lambda mod, args: log.append(("pre", tuple(args[0].shape))))
    m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs),
                                with_kwargs=True)
    h = m.register_forward_hook(lambda mod, args, out: out + 1)
    m.register_forward_hook(lambda mod, args, out: log.append(("first", _arr(out))),
                            prepend=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("kw", sorted(kwargs))),
                            with_kwargs=True)
    m.register_full_backward_pre_hook(lambda mod, go: log.append(("bwpre", _arr(go[0]))))

    def bw(mod, gi, go):
        log.append(("bw", [_arr(g) for g in gi], [_arr(g) for g in go]))
        return tuple(None if g is None else g * 10 for g in gi)
    m.register_full_backward_hook(bw)
    x = lib.tensor([[1.0, 0, -1], [2, 1, 0]], requires_grad=True)
    y = m(x)
    log.append(("y", _arr(y)))
    (y * lib.tensor([1.0, 2.0])).sum().backward()
    log.append(("grads", _arr(x.grad), _arr(m.weight.grad)))
    h.remove()
    h.remove()                                   # a second remove is a no-op
    log.append(("after remove", _arr(m(x))))
    return log


def test_forward_and_backward_hooks_match_torch():
    logs = [_hooks_scenario(lib) for lib in _libs()]
    assert logs[0] == logs[1]


class TwoIn:
    """forward(a, scale, b) -> (a * scale + b, a - b): tensors and a number."""


def _two_in(lib):
    class M(lib.nn.Module):
        def forward(self, a, scale, b):
            return a * scale + b, a - b
    return M()


def _multi_scenario(lib):
    log = []
    m = _two_in(lib)

    def bw(mod, gi, go):
        log.append(("bw", [_arr(g) for g in gi], [_arr(g) for g in go]))
    m.register_full_backward_hook(bw)

    def pre(mod, go):
        log.append(("pre", [_arr(g) for g in go]))
        return (go[0] * 3, go[1])
    m.register_full_backward_pre_hook(pre)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0])                       # needs no grad: None in grad_input
    out1, out2 = m(a, 2.0, b)
    (out1.sum() + 2 * out2.sum()).backward()
    log.append(("a.grad", _arr(a.grad)))
    with warnings.catch_warnings(record=True) as w:     # no input requires grad
        warnings.simplefilter("always")
        c = lib.tensor([1.0, 1.0])
        d = lib.tensor([0.0, 1.0], requires_grad=True)
        o1, o2 = m(c, d, c)
        o1.sum().backward()
    log.append(("warned", any("Full backward hook is firing" in str(x.message) for x in w)))
    return log


def test_backward_hooks_with_several_inputs_and_outputs_match_torch():
    logs = [_multi_scenario(lib) for lib in _libs()]
    assert logs[0] == logs[1]


def _always_call_scenario(lib):
    log = []

    class Boom(lib.nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    m = Boom()
    m.register_forward_hook(lambda mod, args, out: log.append(("never",)))
    m.register_forward_hook(lambda mod, args, out: log.append(("always", out)),
                            always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(lib.ones(1))
    m2 = _linear(lib)
    m2.register_forward_pre_hook(lambda mod, args: args[0] + 1)     # a bare tensor: wrapped
    log.append(_arr(m2(lib.zeros(1, 3))))
    bad = _linear(lib)
    bad.register_forward_pre_hook(lambda mod, a, k: 3, with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple of "
                                           r"\(new_args, new_kwargs\), but got 3."):
        bad(lib.zeros(1, 3))
    with_handle = _linear(lib)
    with with_handle.register_forward_hook(lambda mod, a, out: out * 0):
        log.append(_arr(with_handle(lib.ones(1, 3))))
    log.append(_arr(with_handle(lib.ones(1, 3))))
    wrong = _linear(lib)
    wrong.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    x = lib.ones(1, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of "
                                           "grad_input, got 2, but expected 1"):
        wrong(x).sum().backward()
    return log


def test_always_call_hooks_handles_and_errors_match_torch():
    logs = [_always_call_scenario(lib) for lib in _libs()]
    assert logs[0] == logs[1]


def _tree(lib):
    shared = lib.nn.Linear(1, 1)
    inner = lib.nn.Sequential(lib.nn.Linear(1, 1), lib.nn.Tanh(), shared)
    return lib.nn.Sequential(inner, shared, lib.nn.Sequential(lib.nn.ReLU(), inner))


def test_apply_and_named_modules_match_torch():
    logs = []
    for lib in _libs():
        root = _tree(lib)
        order = []
        root.apply(lambda m: order.append(type(m).__name__))
        logs.append((order,
                     [n for n, _ in root.named_modules()],
                     [n for n, _ in root.named_modules(remove_duplicate=False)],
                     [n for n, _ in root.named_modules(prefix="model")],
                     [n for n, _ in root.named_children()]))
    assert logs[0] == logs[1]


def test_apply_initialises_in_post_order():
    seen = []
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 2)), nn.Linear(2, 1))

    def init(m):
        seen.append(m)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)
    assert model.apply(init) is model
    assert seen == [model[0][0], model[0], model[1], model]
    assert all(float(abs(m.weight).sum()) == 0 for m in (model[0][0], model[1]))


def _buffers_scenario(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)
            self.register_buffer("mean", lib.zeros(2))
            self.register_buffer("cache", lib.ones(2), persistent=False)
            self.register_buffer("empty", None)
    m = M()
    log = [list(m.state_dict()), [n for n, _ in m.named_buffers()]]
    m.cache = lib.full((2,), 5.0)                # still a non-persistent buffer
    log.append((list(m.state_dict()), _arr(m.cache)))
    sd = m.state_dict()
    log.append(str(m.load_state_dict(sd)))
    m.register_buffer("cache", lib.ones(2))      # registered again, persistent
    log.append(list(m.state_dict()))
    for name, err in (("a.b", KeyError), ("", KeyError), ("lin", KeyError)):
        with pytest.raises(err) as info:
            m.register_buffer(name, lib.zeros(1))
        log.append(str(info.value))
    with pytest.raises(TypeError) as info:
        m.register_buffer("x", [1.0])
    log.append(str(info.value).replace("torch", "llgrad").split(" (")[0])
    return log


def test_register_buffer_persistent_false_matches_torch():
    logs = [_buffers_scenario(lib) for lib in _libs()]
    assert logs[0] == logs[1]


def test_hooks_leave_hook_free_modules_untouched():
    """A module keeps no hook dicts until one is registered (the compiled guard walk over
    a model does not grow); registration makes PyTorch's OrderedDicts."""
    m = nn.Linear(2, 2)
    assert "_forward_hooks" not in m.__dict__ and not m._forward_hooks
    h = m.register_forward_hook(lambda *a: None)
    assert list(m._forward_hooks) == [h.id] and "_forward_hooks" in m.__dict__
    h.remove()
    assert not m._forward_hooks
    assert "_forward_hooks" not in nn.Linear(2, 2).__dict__


def test_hooks_in_a_compiled_model_and_step():
    """A forward hook inside a compiled function is traced like the forward; a full
    backward hook registers node hooks, so the call runs eagerly (a warning) with the
    hooks running as in eager mode."""
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    model[0].register_forward_hook(lambda m, a, out: out * 0.5)
    x = llgrad.randn(5, 3)
    eager = model(x)
    cm = llgrad.compile(model)
    for _ in range(3):
        np.testing.assert_allclose(cm(x).detach().numpy(), eager.detach().numpy(), rtol=1e-6,
                                   atol=1e-7)   # (fused kernels: an ulp of the sum's terms)

    seen = []
    model[2].register_full_backward_hook(lambda m, gi, go: seen.append(_arr(go[0])))

    def step(x):
        model.zero_grad()
        loss = model(x).sum()
        loss.backward()
        return loss.detach()

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        out = llgrad.compile(step)(x)
    assert seen == [[[1.0]] * 5]
    np.testing.assert_allclose(out.item(), eager.sum().item(), rtol=1e-6)
