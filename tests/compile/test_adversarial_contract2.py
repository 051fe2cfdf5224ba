"""Differential probes of the compile contract, second round: the same program run eagerly
and under llgrad.compile for several calls, with state changed between calls (defaults,
rebound globals, class attributes, a parameter replaced in its optimiser group, partial
backwards, outputs that are inputs or detached aliases, failing index checks); every
observation must match eager's (or the call runs eagerly with a warning naming why).
Each test failed before its fix."""
import warnings

import numpy as np
import pytest
import torch

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
import llgrad.optim as optim


def _seen(v):
    """An observation that later writes cannot change."""
    if isinstance(v, llgrad.Tensor):
        return ("tensor", v.detach().numpy().copy(), str(v.dtype), v.requires_grad)
    if isinstance(v, BaseException):
        return ("raised", type(v).__name__, str(v).splitlines()[0])
    if isinstance(v, (list, tuple)):
        return [_seen(x) for x in v]
    return v


def _both(scenario, **compile_kw):
    """scenario(wrap, seen) with seen(value) recording an observation, run eagerly and
    compiled (after llgrad.manual_seed(0) each); the observations must be equal."""
    logs = []
    for wrap in (lambda f: f, lambda f: llgrad.compile(f, **compile_kw)):
        llgrad.manual_seed(0)
        log = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scenario(wrap, lambda *vs: log.extend(_seen(v) for v in vs))
        logs.append(log)
    eager, compiled = logs
    assert len(eager) == len(compiled)
    for k, (a, b) in enumerate(zip(eager, compiled)):
        _same(a, b, f"observation {k}")


def _same(a, b, where):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[0] == "tensor", f"{where}: {a!r} vs {b!r}"
        np.testing.assert_allclose(b[1], a[1], rtol=1e-5, atol=1e-6, err_msg=where)
        assert a[2:] == b[2:], f"{where}: dtype/requires_grad {a[2:]} vs {b[2:]}"
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    else:
        assert a == b, f"{where}: eager {a!r}, compiled {b!r}"


# ---- outputs that are inputs, or aliases of inputs without history --------------------------
def _identity_outputs(x, w):
    return x, x * w, w.detach(), w.detach().view(-1), w.view(-1)


@pytest.mark.slow
def test_an_input_returned_is_the_input_and_a_detached_alias_has_no_base():
    """Before: with grad on, `return x` gave a view of x with CompiledFunctionBackward (not
    x, not a leaf), and x.detach() a view of x (so an in-place write through it raised "a
    view of a leaf Variable that requires grad")."""
    def scenario(wrap, seen):
        g = wrap(_identity_outputs)
        for i in range(4):
            leaf = llgrad.ones(2, 2, requires_grad=True)
            x = leaf * 2 if i % 2 else leaf             # a leaf, then a non-leaf input
            w = llgrad.full((2, 2), 3.0, requires_grad=True)
            a, b, c, d, e = g(x, w)
            seen(a is x, a.is_leaf, c._base is None, c.requires_grad, d._base is c,
                 e._base is w, b.grad_fn is not None)
            (a.sum() * 5 + b.sum()).backward()
            seen(leaf.grad, w.grad)
            c.add_(1)
            d.mul_(2)                                   # eager: writes w, bumps its version
            seen(w, w._version)
            try:
                e.add_(1)                               # a view of a leaf that requires grad
            except RuntimeError as err:
                seen(err)
    _both(scenario)
    xt = torch.ones(2, 2, requires_grad=True)       # (torch.compile gives the input itself)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.compile(_identity_outputs)(xt, torch.ones(2, 2))[0] is xt


# ---- default argument values ------------------------------------------------------------------
def test_default_values_are_read_at_each_call():
    """Before: defaults were not guarded (a list default changed in place and a tensor
    default written in place were constants of the trace) and the traced copy of the
    function kept the defaults it was made with (`f.__defaults__ = ...` was not seen)."""
    def scenario(wrap, seen):
        box, weight, cfg = [2.0], llgrad.ones(2), {"scale": 1.0}

        def f(x, s=box, w=weight, *, c=cfg):
            return x * s[0] * w * c["scale"]
        g = wrap(f)
        for i in range(3):
            seen(g(llgrad.ones(2)), g(llgrad.ones(2), [5.0]))
            box[0] += 1
            weight.add_(1)
            cfg["scale"] *= 2
        f.__defaults__ = ([10.0], llgrad.full((2,), 3.0))
        seen(g(llgrad.ones(2)))
        f.__kwdefaults__ = {"c": {"scale": -1.0}}
        seen(g(llgrad.ones(2)), g(llgrad.ones(2)))
    _both(scenario)


# ---- index checks in a kernel without write-backs ---------------------------------------------
def _gather(x, idx, w):
    return (w[idx] * x).sum()


def test_an_index_out_of_range_raises_eagers_error_on_the_direct_kernel_path():
    """Before: the quick runner (one kernel launch) let the kernel's own IndexError ("index:
    index out of range") through, where eager raises its own."""
    def scenario(wrap, seen):
        g = wrap(_gather)
        w = llgrad.ones(4, requires_grad=True)
        for idx in ([0, 1], [2, 9], [3, 3], [2, 9], [-5, 0], [1, 1]):
            try:
                loss = g(llgrad.ones(2), llgrad.tensor(idx), w)
                loss.backward()
                seen(loss, w.grad)
            except IndexError as e:
                seen(e)
    _both(scenario)
    with pytest.raises(IndexError):
        _gather(torch.ones(2), torch.tensor([2, 9]), torch.ones(4))


# ---- optimiser state keyed by tensors ---------------------------------------------------------
def test_a_parameter_replaced_in_its_group_gets_fresh_optimiser_state():
    """Before: opt.state's tensor keys were guarded by type only, so a new parameter put
    into the group took the old parameter's Adam state (step 4, its moments) instead of
    starting its own, as eager and torch do."""
    def scenario(wrap, seen):
        m = nn.Linear(3, 2)
        opt = optim.Adam(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).sum()
            loss.backward()
            opt.step()
            return loss.detach()
        g = wrap(step)
        for i in range(7):
            seen(g(llgrad.ones(4, 3)), m.weight, sorted(int(s["step"]) for s in opt.state.values()))
            if i == 2:
                m.weight = nn.Parameter(llgrad.zeros(2, 3))     # the optimiser holds the old
            if i == 4:
                opt.param_groups[0]["params"][0] = m.weight
    _both(scenario)


# ---- a backward through some of the outputs ---------------------------------------------------
def _two_losses(x, y):
    return (x * x * y).sum(), (y * 2).sum()


def test_a_backward_through_one_output_leaves_inputs_only_the_other_reaches_alone():
    """Before: the one CompiledFunctionBackward node gave every input a gradient, so
    b.backward() set x.grad to zeros (eager leaves it None: b's graph does not reach x) and
    autograd.grad(b, x) gave zeros where eager raises (allow_unused=False) or gives None.
    (torch.compile gives the zeros too.)"""
    def scenario(wrap, seen):
        g = wrap(_two_losses)
        for i in range(4):
            x = llgrad.full((2,), float(i + 1), requires_grad=True)
            y = llgrad.ones(2, requires_grad=True)
            a, b = g(x, y)
            b.backward(retain_graph=True)
            seen(x.grad is None, y.grad)
            try:
                seen(list(llgrad.autograd.grad(b, [x, y], allow_unused=i % 2 == 0,
                                               retain_graph=True)))
            except RuntimeError as e:
                seen(e)
            a.backward()
            seen(x.grad, y.grad)
    _both(scenario)


# ---- what the function reads from its globals and from classes ---------------------------------
act = F.relu


def _activated(x):
    return act(x) * 2


def test_a_global_rebound_to_another_function_is_seen():
    """Before: a function that reads only library functions and modules from its globals
    took the flat-key path, which never re-read them: `act = F.gelu` between calls still
    ran relu once a key's runner was remembered."""
    global act

    def scenario(wrap, seen):
        global act
        g = wrap(_activated)
        for a in (F.relu, F.relu, F.gelu, llgrad.tanh, F.relu, F.relu, lambda t: t * 3, F.gelu):
            act = a
            seen(g(llgrad.tensor([-1.0, 2.0])))
    try:
        _both(scenario)
    finally:
        act = F.relu


def test_class_attributes_and_methods_changed_between_calls():
    """Before: the guards walked an object's own __dict__, not its class's, so a class
    attribute (`Model.SCALE = 5.0`), a class-level function or a property replaced between
    calls left the compiled code stale (both on the full walk and the compiled walker)."""
    def scenario(wrap, seen):
        class Scaled(nn.Module):
            SCALE = 2.0
            ACT = staticmethod(F.relu)

            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(2, 2)

            @property
            def gain(self):
                return self.SCALE + 1

            def forward(self, x):
                return self.ACT(self.lin(x)) * self.gain

        m = Scaled()

        def f(x):
            return m(x).sum()
        g = wrap(f)
        x = llgrad.tensor([[1.0, -2.0]])
        changes = [lambda: None, lambda: None, lambda: setattr(Scaled, "SCALE", 5.0),
                   lambda: None, lambda: setattr(Scaled, "ACT", staticmethod(llgrad.tanh)),
                   lambda: None, lambda: setattr(Scaled, "gain", property(lambda s: -s.SCALE)),
                   lambda: None, lambda: setattr(m, "SCALE", 0.5)]
        for change in changes:
            change()
            seen(g(x))
    _both(scenario)


def test_an_explicit_generator_runs_eagerly_and_says_so():
    """The draws from an llgrad.Generator given to the function run eagerly (compiled
    code replays the default generator only); the warning had said it drew from "a
    numpy.random.Generator object" and advised llgrad's generator, which it was using."""
    def scenario(wrap, seen):
        def f(x, gen):
            return x + llgrad.randn(3, generator=gen)
        g = wrap(f)
        gen = llgrad.Generator().manual_seed(1)
        for i in range(3):
            seen(g(llgrad.ones(3), gen), llgrad.randn(1))
        gen.manual_seed(1)
        seen(g(llgrad.ones(3), gen))
    _both(scenario)
    gen = llgrad.Generator().manual_seed(0)
    llgrad.randn(1, generator=gen)          # (its NumPy generator made: the draws are seen)
    cf = llgrad.compile(lambda x, gen: x + llgrad.randn(3, generator=gen))
    with pytest.warns(UserWarning, match="draws from an llgrad.Generator object"):
        cf(llgrad.ones(3), gen)


# ---- version counters -------------------------------------------------------------------------
def _writes_twice(x, y):
    x.add_(1)
    x.mul_(2)
    y[0] = 5.0
    return x.sum()


def _relu_in_place(x, w):
    return (x @ w).relu_()


def test_version_counters_count_every_in_place_write():
    """Before: a compiled call bumped a written input's version once (eager: once per
    in-place op), and an output written in place (`return y.relu_()`) came back at version
    0 (eager: 1). torch counts as eager does."""
    def scenario(wrap, seen):
        g, h = wrap(_writes_twice), wrap(_relu_in_place)
        for i in range(4):
            x, y = llgrad.ones(3), llgrad.zeros(2)
            view = x[1:]
            seen(g(x, y), x, y, x._version, y._version, view._version)
            w = llgrad.randn(3, 2, requires_grad=True)
            out = h(llgrad.randn(2, 3), w)
            seen(out, out._version)
            out.sum().backward()
            seen(w.grad)
    _both(scenario)
    xt = torch.ones(3)
    _writes_twice(xt, torch.zeros(2))
    assert xt._version == 2
