"""A compiled function that puts a new tensor into an attribute the user set on a tensor
(BinaryNet's `self.bias.org = self.bias.data.clone()` in every forward, on a Parameter):
the guard walk enters a tensor's own attributes, so the trace is kept, and each compiled
call writes its own result there (attr_writes.py), as eager does. Before, the write was
seen as a change calls could not replay: no trace was kept, so every call traced again
(an eager run) without a warning."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _program(lib, compiled):
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)))
        lin.bias.zero_()
    lin.weight.org = lin.weight.data.clone()        # (set before the first call)
    opt = lib.optim.SGD(lin.parameters(), lr=0.1)

    def step(x):
        lin.bias.org = lin.bias.data.clone()         # (a new tensor every call)
        lin.weight.org = lin.weight.org * 0.5 + lin.weight.data     # (and one from org)
        opt.zero_grad()
        loss = lin(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss.detach()

    f = llgrad.compile(step) if compiled else step
    seen = []
    for k in range(4):
        loss = f(lib.full((2, 3), float(k + 1)))
        seen.append((loss.numpy().copy(), lin.bias.org.numpy().copy(),
                     lin.weight.org.numpy().copy(), lin.bias.org.requires_grad))
    return seen, f


def test_a_tensor_attribute_written_each_call_is_replayed():
    ref, _ = _program(torch, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, cf = _program(llgrad, True)
    assert cf.entries and cf.n_traces == 1, (cf.n_traces, cf.graph_breaks)
    for r, g in zip(ref, got):
        for a, b in zip(r[:3], g[:3]):
            np.testing.assert_allclose(b, a, rtol=1e-6)
        assert r[3] is g[3]
