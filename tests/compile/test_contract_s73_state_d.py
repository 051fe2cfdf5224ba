"""Compile-contract adversary s73 (d): memory a captured tensor shares with NumPy written
between calls, print options changed between calls of a function that prints, anomaly
mode, generators alternated, hooks that read and write module state, in-place writes to
leaves that eager refuses, Parameters and plain tensors alternated as inputs: torch,
llgrad eagerly and llgrad.compile (contract_harness_sweep7.runs)."""
import contextlib
import io

import numpy as np
import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _a(lib, n=4, k=0.0):
    return lib.arange(n * 1.0) / 3 - 0.5 + k


def test_captured_tensor_sharing_numpy_memory_written_through_numpy():
    def scenario(lib, wrap, see):
        arr = np.ones(3, np.float32)
        w = lib.from_numpy(arr)
        v = lib.zeros(3)

        def f(x):
            return x * w + v
        cf = wrap(f)
        for i in range(4):
            if i == 1:
                arr[:] = [5.0, 6.0, 7.0]        # (no version bump: NumPy's own write)
            if i == 2:
                v.numpy()[1] = -3.0
            if i == 3:
                np.multiply(arr, 2, out=arr)
            see(cf(_a(lib, 3, i)))
    runs(scenario, torch)


def test_print_options_changed_between_calls_of_a_function_that_prints():
    def scenario(lib, wrap, see):
        def f(x):
            y = x / 3
            print(y)
            print(f"{y.sum().item():.3f}", y[0])
            return y * 2
        cf = wrap(f)
        try:
            for i in range(4):
                if i == 1:
                    lib.set_printoptions(precision=2)
                if i == 2:
                    lib.set_printoptions(precision=6, sci_mode=True)
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    y = cf(_a(lib, 3, i))
                text = buf.getvalue().replace("torch", "llgrad")
                see(y, text)
        finally:
            lib.set_printoptions(profile="default")
            lib.set_printoptions(sci_mode=None)
    runs(scenario, torch)


def test_anomaly_mode_toggled_between_calls():
    def scenario(lib, wrap, see):
        w = lib.tensor([1.0, 0.0, 2.0], requires_grad=True)

        def f(x):
            return (x * w).sqrt().sum()
        cf = wrap(f)
        try:
            for i in range(4):
                lib.autograd.set_detect_anomaly(i % 2 == 1)
                y = cf(_a(lib, 3, 1.0))
                try:
                    y.backward()
                    see(y, w.grad)
                except RuntimeError as e:
                    see(y, type(e).__name__)
                w.grad = None
        finally:
            lib.autograd.set_detect_anomaly(False)
    runs(scenario, torch)


def test_two_generators_alternated_and_drawn_from_in_place():
    def scenario(lib, wrap, see):
        g1, g2 = lib.Generator().manual_seed(1), lib.Generator().manual_seed(2)
        buf = lib.zeros(4)

        def f(x, g):
            buf.normal_(generator=g)
            return x + buf, lib.randperm(5, generator=g), lib.multinomial(
                lib.tensor([0.2, 0.3, 0.5]), 4, replacement=True, generator=g)
        cf = wrap(f)
        for i in range(6):
            see(*cf(_a(lib, 4, i), g1 if i % 3 else g2), buf)
    runs(scenario, torch)


def test_forward_pre_hook_counts_and_forward_reads_the_count():
    def scenario(lib, wrap, see):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = lib.nn.Parameter(_a(lib, 3))
                self.calls = 0

            def forward(self, x):
                return x * self.w * self.calls
        m = M()

        def pre(mod, args):
            mod.calls += 1
            return (args[0] + mod.calls,)
        m.register_forward_pre_hook(pre)
        cf = wrap(m)
        for i in range(4):
            if i == 2:
                m.calls = 10
            y = cf(_a(lib, 3, i))
            y.sum().backward()
            see(y, m.calls, m.w.grad)
    runs(scenario, torch)


def test_forward_hook_with_kwargs_and_always_call():
    def scenario(lib, wrap, see):
        class M(lib.nn.Module):
            def forward(self, x, scale=1.0):
                return x * scale
        m = M()
        log = []
        h = m.register_forward_pre_hook(
            lambda mod, args, kw: (args, {**kw, "scale": kw.get("scale", 1.0) * 3}),
            with_kwargs=True)
        m.register_forward_hook(lambda mod, a, kw, o: log.append(kw["scale"]) or o + 1,
                                with_kwargs=True, always_call=True)
        cf = wrap(lambda x, s: m(x, scale=s))
        for i in range(4):
            if i == 2:
                h.remove()
            see(cf(_a(lib, 3, i), 0.5 * (i + 1)), list(log))
    runs(scenario, torch)


def test_in_place_write_to_a_leaf_that_requires_grad_raises_on_the_calls_that_pass_one():
    def scenario(lib, wrap, see):
        def f(x):
            x.mul_(2)
            return x.sum()
        cf = wrap(f)
        for i in range(4):
            x = _a(lib, 3, i).requires_grad_(i % 2 == 1)
            try:
                see(cf(x), x)
            except RuntimeError as e:
                see(type(e).__name__, x)
    runs(scenario, torch)


def test_parameter_and_plain_tensor_alternated_as_the_input():
    def scenario(lib, wrap, see):
        def f(x):
            y = x * 2
            return y.sum(), isinstance(x, lib.nn.Parameter), x.is_leaf
        cf = wrap(f)
        for i in range(4):
            x = lib.nn.Parameter(_a(lib, 3, i)) if i % 2 else _a(lib, 3, i)
            s, is_p, leaf = cf(x)
            if s.requires_grad:
                s.backward()
            see(s, is_p, leaf, x.grad)
    runs(scenario, torch)


def test_scalar_input_alternating_between_number_and_zero_dim_tensor():
    def scenario(lib, wrap, see):
        def f(x, s):
            return x * s + s
        cf = wrap(f)
        for i, s in enumerate([2.0, 3, True, -1.5, 0.5, 4]):
            s = lib.tensor(s) if i in (3, 4) else s
            see(cf(_a(lib, 3, i), s))
    runs(scenario, torch)


def test_varargs_count_and_keyword_order_change_between_calls():
    def scenario(lib, wrap, see):
        def f(*xs, **kw):
            out = sum(xs[1:], xs[0])
            for k in kw:
                out = out * kw[k] + len(k)
            return out
        cf = wrap(f)
        a, b = _a(lib, 3), _a(lib, 3, 1.0)
        see(cf(a, b), cf(a), cf(a, b, a), cf(a, p=b, q=2.0), cf(a, q=2.0, p=b),
            cf(a, b, p=lib.tensor(3.0)))
    runs(scenario, torch)
