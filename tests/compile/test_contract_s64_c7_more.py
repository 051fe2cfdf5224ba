"""Compile-contract adversary s64 (c7), more lockstep programs (torch, llgrad eager, llgrad
compiled; contract_harness_sweep7.runs): random draws made by hooks that run inside a compiled
step (gradient noise in parameter hooks, noise in a forward hook, a tensor hook drawing during
backward, manual_seed in a post-accumulate-grad hook), the generator's state after a call that
raised, .grad kept by identity across steps (zero_grad(set_to_none=False)), a forward hook whose
return depends on tensor values, the text hooks and the step print; on the inputs side: **kwargs
with changing keys, functools.partial with changed keywords, one tensor passed twice and written
through, expanded/strided views of a parameter, grad mode and default dtype flipped between
calls."""
import contextlib
import functools
import io

import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _mlp_dropout(T):
    T.manual_seed(0)
    return T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Dropout(0.5), T.nn.Linear(4, 1))


def grad_noise_hooks(T, C, see):
    m = _mlp_dropout(T)
    for p in m.parameters():
        p.register_hook(lambda g: g + T.randn_like(g) * 0.01)
    m.register_forward_hook(lambda mod, a, o: o + T.randn(o.shape) * 0.1)
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l, T.rand(2)
    s = C(step)
    for i in range(4):
        see(s(T.ones(2, 3) * (i + 1)), list(m.parameters()), T.get_rng_state())


def tensor_hook_draws_in_backward(T, C, see):
    T.manual_seed(0)
    w = T.ones(4, requires_grad=True)

    def step(x):
        y = T.nn.functional.dropout(x * w, 0.5)
        y.register_hook(lambda g: g * T.rand(4))
        l = y.sum(); l.backward()
        return l, T.rand(2)
    s = C(step)
    for i in range(4):
        see(s(T.ones(4) * (i + 1)), w.grad)


def seed_in_post_accumulate_hook(T, C, see):
    m = _mlp_dropout(T)
    m[0].weight.register_post_accumulate_grad_hook(
        lambda p: (T.manual_seed(int(p.grad.abs().sum() * 1000) % 97), None)[1])

    def step(x):
        l = m(x).pow(2).sum(); l.backward()
        return l, T.rand(2), T.nn.functional.dropout(T.ones(4), 0.5)
    s = C(step)
    for i in range(4):
        see(s(T.ones(2, 3) * (i + 1)), m[0].weight.grad)


def rng_state_after_raise(T, C, see):
    T.manual_seed(0)

    def f(x):
        y = T.nn.functional.dropout(x, 0.5)
        z = T.randn(3)
        if z.sum() > 0:
            raise ValueError("positive draw")
        return y + z.sum()
    s = C(f)
    for i in range(8):
        try:
            see(s(T.ones(4)))
        except ValueError as e:
            see(e)
        see(T.get_rng_state())


def grad_kept_by_identity(T, C, see):
    T.manual_seed(0)
    m = T.nn.Linear(3, 2)
    opt = T.optim.SGD(m.parameters(), lr=0.1)
    kept = []
    m.weight.register_post_accumulate_grad_hook(lambda p: kept.append(p.grad))

    def step(x):
        opt.zero_grad(set_to_none=False); l = m(x).sum(); l.backward(); opt.step()
        return l
    s = C(step)
    first = None
    for i in range(4):
        see(s(T.ones(2, 3) * (i + 1)))
        first = m.weight.grad if first is None else first
        see(first is m.weight.grad, first, m.weight)
    see(kept, [k is kept[0] for k in kept])


def value_dependent_hook_and_printing(T, C, see):
    T.manual_seed(0)
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Tanh(), T.nn.Linear(4, 1))
    m[0].register_forward_hook(lambda mod, a, o: o * 2 if o.sum() > 0 else None)
    m[1].register_full_backward_hook(
        lambda mod, gi, go: print(f"bwd {go[0].sum().item():.4f}"))
    m[2].weight.register_post_accumulate_grad_hook(
        lambda p: print(f"acc {p.grad.norm().item():.4f}"))
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        print(f"loss {l.item():.4f}")
        return l
    s = C(step)
    for i in range(5):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            see(s(T.ones(2, 3) * (i - 2)))
        see(out.getvalue(), m[0].weight)


def kwargs_partial_and_aliases(T, C, see):
    w = T.ones(3, requires_grad=True)

    def f(x, **kw):
        y = x * w
        for k in sorted(kw):
            y = y * kw[k] if k.startswith("m") else y + kw[k]
        return y.sum()
    s = C(f)
    for kw in [{}, {"m1": 2.0}, {"a": T.ones(3)}, {"m1": 2.0, "a": 1.0}, {"a": 1.0, "m1": 2.0},
               {"m2": T.full((3,), 3.0, requires_grad=True)}, {}]:
        l = s(T.arange(3.0), **kw); l.backward()
        see(l, w.grad)
    p = functools.partial(lambda x, s, b=0.0: (x * w * s + b).sum(), s=2.0)
    c = C(p)
    for i in range(4):
        l = c(T.arange(3.0), b=float(i % 2)); l.backward()
        see(l, w.grad)
        p.keywords["s"] = 3.0 + i

    def g(a, b):
        a.mul_(2)
        return (a * b * w).sum()
    s2 = C(g)
    for i in range(5):
        x = T.arange(3.0) + i
        l = s2(x, x if i % 2 == 0 else x.clone()); l.backward()
        see(l, x, w.grad)


def parameter_views_and_modes(T, C, see):
    p = T.nn.Parameter(T.arange(3.0))
    f = C(lambda v, x: (v * x).sum())
    for i in range(4):
        v = [p.expand(2, 3), p.as_strided((2,), (2,)), p[None], p.unsqueeze(1).t()][i]
        l = f(v, T.ones(v.shape) * (i + 1)); l.backward()
        see(l, p.grad)
    s = C(lambda x: (x * p).exp())
    for i in range(6):
        with T.set_grad_enabled(i % 2 == 0):
            y = s(T.arange(3.0) + i)
        see(y)
        if y.requires_grad:
            y.sum().backward(); see(p.grad)
    d = C(lambda x: (x + T.rand(3), T.zeros(2), T.tensor([1.5]), T.arange(3.0)))
    try:
        for i in range(4):
            T.set_default_dtype(T.float64 if i % 2 else T.float32)
            see(d(T.ones(3)))
    finally:
        T.set_default_dtype(T.float32)


def hooks_reading_changed_state(T, C, see):
    """Hooks reading a tensor written between calls, a submodule swapped, a pre-hook that flips
    its module's training flag, spectral_norm's power iteration (a forward pre-hook)."""
    T.manual_seed(0)
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Tanh(), T.nn.BatchNorm1d(4), T.nn.Linear(4, 1))
    m[3] = T.nn.utils.spectral_norm(m[3])
    scale = T.ones(4)
    m[0].register_forward_hook(lambda mod, a, o: o * scale)
    m[0].weight.register_hook(lambda g: g * scale[0])
    m[2].register_forward_pre_hook(lambda mod, a: mod.train(not mod.training) and None)
    opt = T.optim.SGD(m.parameters(), lr=0.02)

    def step(x):
        opt.zero_grad(); l = m(x).pow(2).sum(); l.backward(); opt.step()
        return l, m[2].training
    s = C(step)
    for i in range(5):
        if i == 3:
            m[1] = T.nn.ReLU()
        see(s(T.arange(6.0).reshape(2, 3) * (i + 1) / 4), m[2].running_mean, m[3].weight_u,
            list(m.parameters()))
        scale.add_(0.5)


PROGRAMS = [grad_noise_hooks, tensor_hook_draws_in_backward, rng_state_after_raise,
            grad_kept_by_identity, value_dependent_hook_and_printing, kwargs_partial_and_aliases,
            parameter_views_and_modes, hooks_reading_changed_state]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_compiled_program_equals_eager_and_torch(prog):
    runs(lambda T, C, see: prog(T, C, see), torch)


@pytest.mark.parametrize("prog", [grad_noise_hooks, value_dependent_hook_and_printing,
                                  hooks_reading_changed_state],
                         ids=lambda p: p.__name__)
def test_native_program_equals_eager_and_torch(prog):
    runs(lambda T, C, see: prog(T, C, see), torch, backend="llvm")


def test_manual_seed_in_a_hook_runs_eagerly_with_warning():
    own = runs(lambda T, C, see: seed_in_post_accumulate_hook(T, C, see), torch)
    assert any("running eagerly" in w and "manual_seed()" in w and "test_contract_s64_c7_more.py"
               in w for w in own), own
