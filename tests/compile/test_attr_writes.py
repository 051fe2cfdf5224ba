"""Tensors a compiled function puts into the objects it reads (a char-RNN's
`self.hidden = h.detach()`, the weight_norm / spectral_norm pre-hooks' `module.weight =
...`) are outputs of its graph that each compiled call puts back (attr_writes.py): the
entry is reused (at most two traces for a stateful loop) and the objects end up as eager
leaves them: values, requires_grad, history, identity with a returned tensor."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.nn.utils import spectral_norm, weight_norm

BACKENDS = ("llvm", "interpret")


class CharRNN(nn.Module):
    """The tutorials' form: the hidden state kept on the module between calls."""

    def __init__(self, n_in=3, n_hidden=4):
        super().__init__()
        self.i2h = nn.Linear(n_in + n_hidden, n_hidden)
        self.h2o = nn.Linear(n_hidden, 2)
        self.hidden = llgrad.zeros(1, n_hidden)

    def forward(self, x):
        h = self.i2h(llgrad.cat([x, self.hidden], 1)).tanh()
        self.hidden = h.detach()
        return self.h2o(h).log_softmax(1)


def _pair(make):
    llgrad.manual_seed(0)
    eager = make()
    llgrad.manual_seed(0)
    return eager, make()


def _close(a, b, what):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6,
                               err_msg=what)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hidden_state_kept_on_the_module_replays(backend):
    me, mc = _pair(CharRNN)
    cf = llgrad.compile(mc, backend=backend)
    rng = np.random.default_rng(0)
    for i in range(10):
        x = llgrad.tensor(rng.standard_normal((1, 3)).astype(np.float32))
        oe, oc = me(x), cf(x)
        oe[0, 1].backward()
        oc[0, 1].backward()
        _close(oc.detach().numpy(), oe.detach().numpy(), f"output {i}")
        _close(mc.hidden.numpy(), me.hidden.numpy(), f"hidden {i}")
        assert not mc.hidden.requires_grad and mc.hidden.grad_fn is None
        if i == 4:      # the caller changes the state between calls
            me.hidden = llgrad.ones(1, 4) * 0.5
            mc.hidden = llgrad.ones(1, 4) * 0.5
    for (name, pe), (_, pc) in zip(me.named_parameters(), mc.named_parameters()):
        _close(pc.grad.numpy(), pe.grad.numpy(), name)
    assert cf.n_traces <= 2 and not cf.graph_breaks


def test_hidden_state_loop_matches_torch():
    torch = pytest.importorskip("torch")
    _, mc = _pair(CharRNN)
    i2h, h2o = torch.nn.Linear(7, 4), torch.nn.Linear(4, 2)
    with torch.no_grad():
        for tl, ll in ((i2h, mc.i2h), (h2o, mc.h2o)):
            tl.weight.copy_(torch.tensor(ll.weight.detach().numpy()))
            tl.bias.copy_(torch.tensor(ll.bias.detach().numpy()))
    cf = llgrad.compile(mc)
    hidden = torch.zeros(1, 4)
    rng = np.random.default_rng(1)
    for i in range(10):
        a = rng.standard_normal((1, 3)).astype(np.float32)
        h = torch.tanh(i2h(torch.cat([torch.tensor(a), hidden], 1)))
        hidden = h.detach()
        want = torch.log_softmax(h2o(h), 1)
        want.sum().backward()
        got = cf(llgrad.tensor(a))
        got.sum().backward()
        _close(got.detach().numpy(), want.detach().numpy(), f"output {i}")
        _close(mc.hidden.numpy(), hidden.numpy(), f"hidden {i}")
    _close(mc.i2h.weight.grad.numpy(), i2h.weight.grad.numpy(), "i2h.weight.grad")
    assert cf.n_traces <= 2


class Stateful(nn.Module):
    """A tuple state, a plain tensor attribute also returned, a constant put each call,
    and a registered buffer replaced (nn.Module puts it in _buffers)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.state = (llgrad.zeros(1, 3), llgrad.zeros(1, 3))
        self.last = llgrad.zeros(1, 3)
        self.fresh = llgrad.zeros(3)
        self.register_buffer("count", llgrad.zeros(3))

    def forward(self, x):
        h, c = self.state
        c = (c + self.lin(x + h)).tanh()
        h = c * 2
        self.state = (h.detach(), c.detach())
        self.last = h
        self.fresh = llgrad.ones(3)
        self.count = self.count + 1
        return h


@pytest.mark.parametrize("backend", BACKENDS)
def test_structures_constants_buffers_and_identity(backend):
    me, mc = _pair(Stateful)
    cf = llgrad.compile(mc, backend=backend)
    for i in range(6):
        x = llgrad.ones(1, 3) * i
        mode = llgrad.no_grad() if i == 5 else llgrad.enable_grad()
        with mode:
            oe, oc = me(x), cf(x)
        _close(oc.detach().numpy(), oe.detach().numpy(), f"output {i}")
        assert (oc is mc.last) == (oe is me.last) is True
        assert mc.last.requires_grad == me.last.requires_grad == (i != 5)
        assert type(mc.state) is tuple and not mc.state[0].requires_grad
        _close(mc.state[1].numpy(), me.state[1].numpy(), f"state {i}")
        assert "count" in mc._buffers and "count" not in vars(mc)
        assert mc.count.tolist() == me.count.tolist() == [i + 1.0] * 3
        mc.fresh.add_(5)       # (a constant put by each call: a tensor of its own)
        me.fresh.add_(5)
        assert mc.fresh.tolist() == me.fresh.tolist() == [6.0] * 3
    assert cf.n_traces <= 3      # (the second call: .last now requires grad; no_grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_go_to_the_objects_of_each_call(backend):
    class Box:
        def __init__(self):
            self.state = llgrad.zeros(3)

    def step(box, x):
        box.state = (box.state * 0.5 + x).detach()
        return box.state.sum()

    cf = llgrad.compile(step, backend=backend)
    a, b, ea, eb = Box(), Box(), Box(), Box()
    for _ in range(3):
        assert cf(a, llgrad.ones(3)).item() == step(ea, llgrad.ones(3)).item()
        assert cf(b, llgrad.full((3,), 2.0)).item() == step(eb, llgrad.full((3,), 2.0)).item()
    assert a.state.tolist() == ea.state.tolist() and b.state.tolist() == eb.state.tolist()
    assert cf.n_traces == 1


def _train(model, call, steps=5):
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = llgrad.tensor(rng.standard_normal((3, 4)).astype(np.float32))
        opt.zero_grad()
        loss = (call(x) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _normed(kind):
    def make():
        m = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            if kind == "weight_norm":
                weight_norm(m[0])
                weight_norm(m[2], dim=None)
            else:
                spectral_norm(m[0])
        return m
    return make


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm"])
def test_norm_hooks_setting_the_weight_train_as_eager(kind, backend):
    me, mc = _pair(_normed(kind))
    cf = llgrad.compile(mc, backend=backend)
    _close(_train(mc, cf), _train(me, me), "losses")
    for (name, pe), (_, pc) in zip(me.state_dict().items(), mc.state_dict().items()):
        _close(pc.numpy(), pe.numpy(), name)
    assert mc[0].weight.requires_grad and mc[0].weight.grad_fn is not None
    # weight_norm's weight is made at weight_norm() as each hook makes it: one trace;
    # spectral_norm's starts as a copy that does not require grad: two
    assert cf.n_traces <= 2 and not cf.graph_breaks


def test_dump_names_the_writes():
    _, mc = _pair(CharRNN)
    cf = llgrad.compile(mc)
    cf(llgrad.ones(1, 3))
    assert "self.hidden = output 1" in cf.dump(llgrad.ones(1, 3))
