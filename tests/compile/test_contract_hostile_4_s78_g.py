"""Compile-contract s78 (G), hostile programs (4 of 5): each calls a compiled step
several times while changing state between calls (and inside them), compared with torch and
llgrad eagerly step by step (contract_harness_sweep7.runs); all matched eager, so they run
with the slow tests."""

import pytest
from contract_harness_sweep7 import runs
from hostile_helpers_s78_g import _lin, _xs


torch = pytest.importorskip("torch")


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_checkpoint_with_dropout():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 3)
        from importlib import import_module
        ckpt = import_module(lib.__name__ + ".utils.checkpoint").checkpoint

        def body(x):
            return lib.nn.functional.dropout(m(x), 0.5).tanh()

        def step(x):
            y = ckpt(body, x, use_reentrant=False)
            y.sum().backward()
            return y
        f = wrap(step)
        for i in range(4):
            see(f(_xs(lib, i)), m.weight.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_global_tensor_rebound_between_calls():
    def scenario(lib, wrap, see):
        g = globals()
        g["_S78_W"] = lib.ones(3)
        f = wrap(lambda x: x * _S78_W)  # noqa: F821
        for i in range(4):
            see(f(_xs(lib, i)))
            g["_S78_W"] = g["_S78_W"] + 1 if i % 2 else lib.full((3,), -1.0)
        del g["_S78_W"]
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_set_grad_enabled_call_inside_leaks_out():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)

        def step(x, off):
            y = (x * w).sum()
            if off:
                lib.set_grad_enabled(False)
            return y, (x * w).sum().requires_grad
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i), i == 2), lib.is_grad_enabled())
            lib.set_grad_enabled(True)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_default_dtype_changed_between_calls():
    def scenario(lib, wrap, see):
        def step(x):
            return x.sum() + lib.ones(2), lib.tensor([1.5, 2.5]) * 2
        f = wrap(step)
        try:
            for i in range(4):
                lib.set_default_dtype(lib.float64 if i in (1, 2) else lib.float32)
                see(f(_xs(lib, i)), lib.get_default_dtype())
        finally:
            lib.set_default_dtype(lib.float32)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_default_dtype_set_inside():
    def scenario(lib, wrap, see):
        def step(x, d):
            lib.set_default_dtype(d)
            return x + lib.zeros(3)
        f = wrap(step)
        try:
            for i in range(4):
                see(f(_xs(lib, i), lib.float64 if i % 2 else lib.float32),
                    lib.get_default_dtype(), lib.ones(1))
        finally:
            lib.set_default_dtype(lib.float32)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_global_module_forward_hook_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(lambda x: m(x))
        reg = lib.nn.modules.module.register_module_forward_hook
        h = None
        for i in range(5):
            if i == 1:
                h = reg(lambda mod, a, out: out * 3)
            if i == 3:
                h.remove()
            see(f(_xs(lib, i)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_saved_tensors_hooks_around_call():
    def scenario(lib, wrap, see):
        w, packed = lib.ones(3, requires_grad=True), []

        def pack(t):
            packed.append(tuple(t.shape))
            return t * 2

        f = wrap(lambda x: (x * w).pow(2).sum())
        for i in range(4):
            if i % 2:
                with lib.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    y = f(_xs(lib, i))
            else:
                y = f(_xs(lib, i))
            y.backward()
            see(y, w.grad, len(packed) > 0)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_module_forward_replaced_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(lambda x: m(x) + 1)
        for i in range(5):
            if i == 2:
                m.forward = lambda x: x[:, :2] * 100
            if i == 4:
                del m.forward
            see(f(_xs(lib, i)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_eval_called_inside_persists():
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_lin(lib, 3, 3), lib.nn.Dropout(0.5))

        def step(x, k):
            y = m(x)
            if k == 1:
                m.eval()
            if k == 3:
                m.train()
            return y
        f = wrap(step)
        for i in range(6):
            see(f(_xs(lib, i), i), m.training, m[1].training)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_freeze_inside_persists():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)

        def step(x, k):
            m(x).pow(2).sum().backward()
            if k == 1:
                m.weight.requires_grad_(False)
                m.weight.grad = None
            return m.weight.requires_grad
        f = wrap(step)
        for i in range(4):
            see(f(_xs(lib, i), i), m.weight.grad, m.bias.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_hook_registered_once_inside_persists():
    def scenario(lib, wrap, see):
        m, hs = _lin(lib, 3, 2), []

        def step(x):
            if not hs:
                hs.append(m.weight.register_hook(lambda g: g * 2))
            m(x).sum().backward()
        f = wrap(step)
        for i in range(5):
            f(_xs(lib, i))
            see(m.weight.grad, m.bias.grad)
            if i == 3:
                hs[0].remove()
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_add_param_group_inside():
    def scenario(lib, wrap, see):
        m, m2 = _lin(lib, 3, 2), _lin(lib, 2, 1, 0.3)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x, k):
            opt.zero_grad()
            m2(m(x)).sum().backward()
            if k == 1:
                opt.add_param_group({"params": list(m2.parameters()), "lr": 1.0})
            opt.step()
        f = wrap(step)
        for i in range(4):
            f(_xs(lib, i), i)
            see(m.weight, m2.weight, len(opt.param_groups))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_grad_set_to_none_inside_on_alternate_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)

        def step(x, k):
            m(x).sum().backward()
            if k % 2:
                m.weight.grad = None
            else:
                m.bias.grad = m.bias.grad * 0.5
        f = wrap(step)
        for i in range(5):
            f(_xs(lib, i), i)
            see(m.weight.grad, m.bias.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_captured_tensor_data_reshaped_between_calls():
    def scenario(lib, wrap, see):
        w = lib.ones(3)
        f = wrap(lambda x: (x * w).sum(-1))
        for i in range(5):
            if i == 2:
                w.data = lib.arange(6.0).reshape(2, 3)
            if i == 3:
                w.data = lib.full((3,), 2.0)
            see(f(_xs(lib, i, 2)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_input_resized_between_calls():
    def scenario(lib, wrap, see):
        x = _xs(lib, 0)

        def step(t):
            t.add_(1)
            return t.sum(0)
        f = wrap(step)
        for i in range(4):
            if i == 2:
                x.resize_(2, 3)
            see(f(x), x)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_step_is_generator_function():
    def scenario(lib, wrap, see):
        def step(x):
            yield x * 2
            yield x + 1
        f = wrap(step)
        for i in range(3):
            see(list(f(_xs(lib, i))))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_exception_carrying_tensor():
    def scenario(lib, wrap, see):
        class Stop(Exception):
            pass

        def step(x, k):
            y = x * 3
            if k == 2:
                raise Stop(y)
            return y
        f = wrap(step)
        for i in range(4):
            try:
                see(f(_xs(lib, i), i))
            except Stop as e:
                see(type(e).__name__, e.args[0])
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_stop_iteration_inside():
    def scenario(lib, wrap, see):
        def step(x, items):
            it = iter(items)
            first = next(it)
            return x * first + next(it, 10.0)
        f = wrap(step)
        for i in range(4):
            try:
                see(f(_xs(lib, i), [2.0, 3.0][:2 - i % 3] if i % 3 < 3 else []))
            except StopIteration:
                see("stop")
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_anomaly_mode_toggled():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)
        f = wrap(lambda x: (x * w).sum().backward())
        for i in range(4):
            with lib.autograd.set_detect_anomaly(i % 2 == 1):
                f(_xs(lib, i))
            see(w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_forward_hook_with_kwargs_and_always_call():
    def scenario(lib, wrap, see):
        m, seen_ = _lin(lib, 3, 2), []

        def hook(mod, args, kwargs, out):
            seen_.append(sorted(kwargs))
            return out * 2
        f = wrap(lambda x: m(x))
        for i in range(4):
            if i == 1:
                h = m.register_forward_hook(hook, with_kwargs=True, always_call=True)
            if i == 3:
                h.remove()
            see(f(_xs(lib, i)), list(seen_))
    runs(scenario, torch)
