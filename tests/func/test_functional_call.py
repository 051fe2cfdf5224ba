"""llgrad.func.functional_call: parameters and buffers replaced for one call (and restored),
tied weights (tie_weights=True replaces every tied name), buffers the module reassigns
written back into the dict, strict keys, several dicts, torch's errors; composed with grad.
Against torch.func.functional_call when torch is installed."""
import numpy as np
import pytest

import llgrad
import llgrad.func as F
import llgrad.nn as nn
from func_helpers import error_of, load_torch, same_message


def make_tied(lib):
    class Tied(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(3, 3, bias=False)
            self.b = lib.nn.Linear(3, 3, bias=False)
            self.b.weight = self.a.weight           # tied: one Parameter, two names
            self.register_buffer("count", lib.zeros(()))

        def forward(self, x, shift=0.0):
            self.count = self.count + 1             # a buffer the call reassigns
            return self.b(self.a(x)) + self.count + shift
    return Tied().double()


def weights(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((3, 3)), rng.standard_normal((3, 3)), rng.standard_normal((2, 3))


def test_replaced_for_the_call_and_restored():
    m = make_tied(llgrad)
    w, _, x = weights(0)
    before = m.a.weight
    out = F.functional_call(m, {"a.weight": llgrad.tensor(w), "count": llgrad.zeros(())},
                            llgrad.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T @ w.T + 1)
    assert m.a.weight is before and m.b.weight is before
    assert float(m.count) == 0.0                 # the module's own buffer is untouched
    F.functional_call(m, {"a.weight": llgrad.tensor(w)}, llgrad.tensor(x))
    assert float(m.count) == 1.0                 # (not replaced: the module's own changes)


def test_tie_weights():
    m = make_tied(llgrad)
    w, v, x = weights(1)
    out = F.functional_call(m, {"a.weight": llgrad.tensor(w), "count": llgrad.zeros(())},
                            llgrad.tensor(x), tie_weights=False)   # b keeps its own weight
    own = m.a.weight.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T @ own.T + 1, atol=1e-6)
    with pytest.raises(ValueError, match="functional_call got multiple values for keys "
                                         r"\['a.weight', 'b.weight'\], which are tied"):
        F.functional_call(m, {"a.weight": llgrad.tensor(w), "b.weight": llgrad.tensor(v)},
                          llgrad.tensor(x))
    out = F.functional_call(m, {"a.weight": llgrad.tensor(w), "b.weight": llgrad.tensor(v),
                                "count": llgrad.zeros(())}, llgrad.tensor(x), tie_weights=False)
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T @ v.T + 1, atol=1e-6)


def test_buffers_written_back_and_several_dicts():
    m = make_tied(llgrad)
    w, _, x = weights(2)
    params = {"a.weight": llgrad.tensor(w)}
    buffers = {"count": llgrad.tensor(5.0, dtype=llgrad.float64)}
    out = F.functional_call(m, (params, buffers), (llgrad.tensor(x),), {"shift": 1.0})
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T @ w.T + 6 + 1)
    assert float(buffers["count"]) == 6.0         # what the module assigned, as torch does
    assert float(m.count) == 0.0
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        F.functional_call(m, (params, dict(params)), llgrad.tensor(x))


def test_strict_keys():
    m = make_tied(llgrad)
    w, _, x = weights(3)
    with pytest.raises(RuntimeError, match="Error\\(s\\) in reparametrizing for Tied:\n\t"
                                           "Unexpected key\\(s\\): 'nope'.\n\t"
                                           "Missing key\\(s\\): 'count'."):
        F.functional_call(m, {"a.weight": llgrad.tensor(w), "nope": llgrad.tensor(w)},
                          llgrad.tensor(x), strict=True)


def test_restored_when_the_call_raises():
    m = make_tied(llgrad)
    before = m.a.weight
    with pytest.raises(RuntimeError):
        F.functional_call(m, {"a.weight": llgrad.zeros(3, 3)}, llgrad.zeros(2, 5))
    assert m.a.weight is before and m.b.weight is before


def test_grad_through_functional_call():
    llgrad.manual_seed(0)
    m = nn.Linear(3, 2).double()
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = llgrad.tensor(np.random.default_rng(0).standard_normal((4, 3)))
    g = F.grad(lambda p: F.functional_call(m, p, x).pow(2).sum())(params)
    out = m(x)
    (out ** 2).sum().backward()
    np.testing.assert_allclose(g["weight"].numpy(), m.weight.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(g["bias"].numpy(), m.bias.grad.numpy(), atol=1e-12)


def test_against_torch():
    torch = load_torch()
    ours, theirs = make_tied(llgrad), make_tied(torch)
    w, v, x = weights(4)
    for tie in (True, False):
        for given in ({"a.weight": w}, {"b.weight": v}, {"a.weight": w, "count": np.array(2.0)}):
            o_buf = {k: llgrad.tensor(a) for k, a in given.items()}
            t_buf = {k: torch.tensor(a) for k, a in given.items()}
            theirs.a.weight.data = torch.tensor(ours.a.weight.detach().numpy())
            o = F.functional_call(ours, o_buf, llgrad.tensor(x), tie_weights=tie)
            t = torch.func.functional_call(theirs, t_buf, torch.tensor(x), tie_weights=tie)
            np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), atol=1e-6)
            for k in given:
                np.testing.assert_allclose(o_buf[k].detach().numpy(),
                                           t_buf[k].detach().numpy(), atol=1e-6)
    cases = [
        lambda f, lib, m: f(m, {"a.weight": lib.zeros(3, 3), "b.weight": lib.ones(3, 3)},
                            lib.zeros(2, 3)),
        lambda f, lib, m: f(m, {"a.weight": lib.zeros(3, 3), "x": lib.zeros(1)},
                            lib.zeros(2, 3), strict=True),
        lambda f, lib, m: f(m, ({"count": lib.zeros(())}, {"count": lib.zeros(())}),
                            lib.zeros(2, 3)),
        lambda f, lib, m: f(m, 3, lib.zeros(2, 3)),
    ]
    for case in cases:
        a = error_of(lambda: case(F.functional_call, llgrad, ours))
        b = error_of(lambda: case(torch.func.functional_call, torch, theirs))
        assert a[0] == b[0] and same_message(a[1], b[1]), (a, b)
