"""Sweep 8: the nn.Module API against torch, the same script run with each library:
registration order and names (shared modules, remove_duplicate, None entries, buffers that
do not persist), the errors of register_* / add_module / assignments of the wrong kind to a
parameter, child module or buffer name, get_submodule / get_parameter / get_buffer,
dtype moves, requires_grad_, zero_grad, train / eval, deepcopy, deleting a buffer, module
hooks (pre, with_kwargs, full backward and its pre hook) and state_dict hooks."""
import copy
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


class _Foo:
    pass


def _script(lib):
    out = []

    def rec(f):
        try:
            out.append(f())
        except Exception as e:      # noqa: BLE001 (compared with torch's)
            out.append((type(e).__name__, str(e).split("\n")[0]))
    nn = lib.nn
    lib.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.register_buffer("b1", lib.zeros(2))
            self.register_buffer("b2", lib.ones(1), persistent=False)
            self.p = nn.Parameter(lib.ones(3))
            self.shared = self.a
            self.register_parameter("none_p", None)
            self.register_buffer("none_b", None)

        def forward(self, x):
            return self.a(x) + self.b1
    m = M()
    for what in ("named_parameters", "named_buffers", "named_modules", "named_children"):
        rec(lambda: [n for n, _ in getattr(m, what)()])
    rec(lambda: [n for n, _ in m.named_parameters(remove_duplicate=False)])
    rec(lambda: [n for n, _ in m.named_modules(remove_duplicate=False)])
    rec(lambda: (list(m.state_dict()), repr(m)))
    for name, value in (("a", lambda: lib.zeros(1)), ("x.y", lambda: lib.zeros(1)),
                        ("", lambda: lib.zeros(1)), ("q", lambda: 3), ("r", lambda: np.ones(1))):
        rec(lambda: m.register_buffer(name, value()))
        rec(lambda: m.register_parameter(name, value()))
    rec(lambda: m.register_parameter("b1", nn.Parameter(lib.zeros(1))))
    rec(lambda: m.add_module("a.b", nn.ReLU()))
    rec(lambda: m.add_module(3, nn.ReLU()))
    rec(lambda: m.add_module("z", 3))
    for name, value in (("p", lambda: lib.zeros(3)), ("p", lambda: 3), ("a", lambda: 5),
                        ("a", lambda: lib.ones(1)), ("a", _Foo), ("b1", lambda: 3),
                        ("b1", lambda: np.ones(1))):
        rec(lambda: setattr(m, name, value()))
    rec(lambda: [n for n, _ in m.named_modules()])
    rec(lambda: m.get_submodule("a").__class__.__name__)
    rec(lambda: m.get_submodule("zz"))
    rec(lambda: tuple(m.get_parameter("a.weight").shape))
    rec(lambda: m.get_parameter("a.nope"))
    rec(lambda: tuple(m.get_buffer("b1").shape))
    rec(lambda: m.get_buffer("a.weight"))
    rec(lambda: m.nope)
    rec(lambda: (m.double().a.weight.dtype, m.b1.dtype, m.float().p.dtype))
    rec(lambda: m.to(lib.float64).a.weight.dtype)
    m.float()
    rec(lambda: m.requires_grad_(False).p.requires_grad)
    m.requires_grad_(True)
    m(lib.ones(1, 2)).sum().backward()
    m.zero_grad(set_to_none=False)
    rec(lambda: (m.a.weight.grad.tolist(), m.p.grad))
    m.zero_grad()
    rec(lambda: m.a.weight.grad)
    rec(lambda: (m.training, m.eval().a.training, m.train(False).training, m.train().a.training))
    rec(lambda: m.train("x"))
    rec(lambda: [type(x).__name__ for x in m.modules()])
    rec(lambda: list(copy.deepcopy(m).state_dict()))
    del m.b1
    rec(lambda: ([n for n, _ in m.named_buffers()], hasattr(m, "b1")))
    rec(lambda: (m.half().a.weight.dtype, m.type(lib.float64).a.weight.dtype))
    # a module assigned over a buffer or a parameter's name replaces it
    m.b2 = nn.Linear(1, 1)
    rec(lambda: setattr(m, "p", nn.Tanh()))       # (a module's class path is llgrad's own)
    out[-1] = (out[-1][0], re.sub(r"'[\w.]*\.Tanh'", "'Tanh'", out[-1][1]))
    rec(lambda: (list(m.state_dict()), [n for n, _ in m.named_buffers()]))
    m.a = None
    rec(lambda: (m.a, list(m.state_dict())))

    lin = nn.Linear(2, 2)
    calls = []
    hooks = [
        lin.register_forward_pre_hook(lambda mod, args: calls.append(("pre", len(args)))),
        lin.register_forward_hook(lambda mod, args, kwargs, res: calls.append(("fwd", list(kwargs))),
                                  with_kwargs=True),
        lin.register_full_backward_hook(lambda mod, gi, go: calls.append(
            ("bwd", [g is None for g in gi], [tuple(g.shape) for g in go]))),
        lin.register_full_backward_pre_hook(lambda mod, go: calls.append(("bwdpre", len(go))))]
    lin(lib.ones(3, 2, requires_grad=True)).sum().backward()
    lin(lib.ones(3, 2)).sum().backward()
    rec(lambda: list(calls))
    for h in hooks:
        h.remove()
    rec(lambda: (len(lin._forward_hooks), len(lin._forward_pre_hooks), len(lin._backward_hooks)))
    lin.register_state_dict_post_hook(
        lambda mod, sd, prefix, local_metadata: sd.__setitem__(prefix + "extra", lib.zeros(1)))
    rec(lambda: list(lin.state_dict()))
    lin.register_load_state_dict_pre_hook(lambda mod, sd, prefix, *a: sd.pop(prefix + "extra"))
    rec(lambda: repr(lin.load_state_dict(lin.state_dict())))
    lin.register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.clear())
    rec(lambda: repr(lin.load_state_dict({"extra": 0}, strict=True)))
    return out


def test_module_api_against_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = _script(torch), _script(llgrad)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert str(a) == str(b).replace("torch", "llgrad"), i
