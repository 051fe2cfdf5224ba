"""Compile-contract s78 (G), hostile programs (2 of 5): each calls a compiled step
several times while changing state between calls (and inside them), compared with torch and
llgrad eagerly step by step (contract_harness_sweep7.runs); all matched eager, so they run
with the slow tests."""
import functools
import random

import numpy as np
import pytest
from contract_harness_sweep7 import runs
from hostile_helpers_s78_g import _catch, _lin, _xs


torch = pytest.importorskip("torch")


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_set_rng_state_inside_step():
    def scenario(lib, wrap, see):
        st = lib.get_rng_state()

        def step(x):
            a = lib.rand(3)
            lib.set_rng_state(st)
            return x + a + lib.rand(3)
        f = wrap(step)
        for i in range(4):
            see(f(_xs(lib, i)), lib.rand(1))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_python_random_inside_step():
    def scenario(lib, wrap, see):
        rng = random.Random(5)

        def step(x):
            return x * rng.random()
        f = wrap(step)
        for i in range(4):
            see(round(float(f(_xs(lib, i)).sum().item()), 4))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_numpy_random_inside_step():
    def scenario(lib, wrap, see):
        rs = np.random.RandomState(3)

        def step(x):
            return x + lib.tensor(rs.rand(3).astype(np.float32))
        f = wrap(step)
        for i in range(4):
            see(f(_xs(lib, i)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_item_drives_loop():
    def scenario(lib, wrap, see):
        def step(x):
            n = 0
            while x.abs().max().item() > 0.1 and n < 10:
                x = x / 2
                n += 1
            return x, n
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i) * (i + 1)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_tolist_and_bool_drive_branches():
    def scenario(lib, wrap, see):
        def step(x):
            vals = x.sum(1).tolist()
            out = x.clone()
            for k, v in enumerate(vals):
                if v > 0:
                    out[k] = out[k] * 2
            if bool((x > 0).any()):
                out = out + 1
            return out
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i) - 0.3 * i))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_global_counter_and_closure_rebinding():
    def scenario(lib, wrap, see):
        state = {"k": 1.0}
        scale = 2.0

        def make():
            def step(x):
                state["k"] += 1
                return x * state["k"] * scale
            return step
        f = wrap(make())
        for i in range(4):
            see(f(_xs(lib, i)), state["k"])
            if i == 1:
                scale = 5.0  # noqa: F841  (the closure reads the cell of `scale`)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_closure_cell_rebound():
    def scenario(lib, wrap, see):
        w = lib.ones(3)

        def step(x):
            return x * w
        f = wrap(step)
        for i in range(4):
            see(f(_xs(lib, i)))
            w = w * 2  # noqa: F841
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_partial_compiled():
    def scenario(lib, wrap, see):
        def step(x, scale, bias):
            return x * scale + bias
        f = wrap(functools.partial(step, bias=lib.ones(3)))
        for i in range(4):
            see(f(_xs(lib, i), float(i)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_bound_method_compiled():
    def scenario(lib, wrap, see):
        class Acc:
            def __init__(self):
                self.total = lib.zeros(3)
                self.n = 0

            def step(self, x):
                self.total = self.total + x.sum(0)
                self.n += 1
                return self.total / self.n
        a = Acc()
        f = wrap(a.step)
        for i in range(4):
            see(f(_xs(lib, i)), a.total, a.n)
            if i == 2:
                a.total = lib.ones(3)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_lambda_and_module_call_compiled():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(m.__call__)
        g = wrap(lambda x: m(x).relu())
        for i in range(4):
            see(f(_xs(lib, i)), g(_xs(lib, i)))
            with lib.no_grad():
                m.weight.mul_(0.9)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_recursion_in_user_code():
    def scenario(lib, wrap, see):
        def rec(x, d):
            return x if d == 0 else rec(x.tanh() + 0.1, d - 1)
        f = wrap(rec)
        for i in range(5):
            x = _xs(lib, i).requires_grad_()
            y = f(x, i % 3)
            y.sum().backward()
            see(y, x.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_try_except_finally_inside():
    def scenario(lib, wrap, see):
        log = []

        def step(x, idx):
            try:
                y = x[idx]
                log.append("ok")
            except IndexError:
                y = x[0] * 0
                log.append("caught")
            finally:
                log.append("fin")
            return y * 2
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i), 7 if i % 2 else 1), list(log))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_grad_modes_inside():
    def scenario(lib, wrap, see):
        def step(x, w):
            with lib.no_grad():
                a = x * w
            with lib.enable_grad():
                b = x * w
            with lib.set_grad_enabled(False):
                c = b * 2
            return a, b, c, a.requires_grad, b.requires_grad, c.requires_grad
        f = wrap(step)
        for i in range(4):
            w = lib.ones(3, requires_grad=i != 2)
            r = f(_xs(lib, i), w)
            see(r)
            with lib.no_grad():
                see(f(_xs(lib, i), w))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_autocast_inside():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)

        def step(x):
            with lib.autocast("cpu", dtype=lib.bfloat16):
                y = m(x)
            return y.float().sum(), y.dtype
        f = wrap(step)
        for i in range(3):
            see(f(_xs(lib, i)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_autograd_grad_create_graph():
    def scenario(lib, wrap, see):
        def step(x):
            y = (x ** 3).sum()
            (g,) = lib.autograd.grad(y, x, create_graph=True)
            (g2,) = lib.autograd.grad(g.sum(), x)
            return g, g2
        f = wrap(step)
        for i in range(4):
            x = _xs(lib, i).requires_grad_()
            see(f(x), x.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_grad_accumulates_across_calls_then_zeroed_outside():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(lambda x: m(x).sum().backward())
        for i in range(6):
            f(_xs(lib, i))
            see(m.weight.grad)
            if i == 2:
                m.zero_grad()
            if i == 4:
                m.weight.grad.mul_(10)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_captured_list_of_tensors_grows():
    def scenario(lib, wrap, see):
        bank = [lib.ones(3)]

        def step(x):
            out = x.sum(0)
            for b in bank:
                out = out + b
            bank.append(out.detach())
            return out
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i)), len(bank))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_detach_and_data_writes():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)

        def step(x):
            y = (x * w).sum()
            y.backward()
            w.data.add_(0.5)
            w.detach().mul_(0.9)
            return y
        f = wrap(step)
        for i in range(4):
            see(f(_xs(lib, i)), w, w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_generator_object_reseeded_between_calls():
    def scenario(lib, wrap, see):
        g = lib.Generator().manual_seed(3)

        def step(x):
            return x + lib.rand(3, generator=g) + lib.randn(3, generator=g)
        f = wrap(step)
        for i in range(5):
            if i == 2:
                g.manual_seed(7)
            if i == 3:
                st = g.get_state()
            see(f(_xs(lib, i)), lib.rand(1))
            if i == 3:
                g.set_state(st)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_error_in_forward_hook_on_third_call():
    def scenario(lib, wrap, see):
        m, n = _lin(lib, 3, 2), [0]

        def hook(mod, a, out):
            n[0] += 1
            if n[0] == 3:
                raise KeyError("hook three")
            return out + 1
        m.register_forward_hook(hook)
        f = wrap(lambda x: m(x).pow(2).sum().backward())
        for i in range(5):
            _catch(see, f, _xs(lib, i))
            see(m.weight.grad, n[0])
    runs(scenario, torch)
