"""Compile-contract s78 (G), hostile programs (3 of 5): each calls a compiled step
several times while changing state between calls (and inside them), compared with torch and
llgrad eagerly step by step (contract_harness_sweep7.runs); all matched eager, so they run
with the slow tests."""

import pytest
from contract_harness_sweep7 import runs
from hostile_helpers_s78_g import _catch, _lin, _xs


torch = pytest.importorskip("torch")


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_zero_division_from_item():
    def scenario(lib, wrap, see):
        acc = []

        def step(x):
            d = int(x.sum().item() > 0)
            acc.append(d)
            return x * (1 / d)
        f = wrap(step)
        for i in range(5):
            _catch(see, f, _xs(lib, i) + (0.5 if i != 2 else -1.0))
            see(list(acc))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_kwargs_and_positional_alternate():
    def scenario(lib, wrap, see):
        def step(x, w=None, scale=1.0):
            y = x * scale
            return y if w is None else y @ w
        f = wrap(step)
        w = lib.ones(3, 2)
        for i in range(6):
            x = _xs(lib, i)
            see([f(x), f(x, w), f(x, scale=2.0), f(x, w=w, scale=3.0), f(x, None, 4.0)][i % 5])
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_list_input_length_changes():
    def scenario(lib, wrap, see):
        def step(xs):
            out = xs[0]
            for t in xs[1:]:
                out = out + t
            xs.append(out)
            return out
        f = wrap(step)
        for i in range(5):
            xs = [_xs(lib, k) for k in range(1 + i % 3)]
            see(f(xs), len(xs))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_input_parameter_or_plain_tensor():
    def scenario(lib, wrap, see):
        def step(p):
            (p * p).sum().backward()
            return p.grad
        f = wrap(step)
        for i in range(4):
            p = lib.nn.Parameter(_xs(lib, i)) if i % 2 else _xs(lib, i).requires_grad_()
            see(f(p), type(p).__name__ == "Parameter")
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_input_grad_zeroed_inside():
    def scenario(lib, wrap, see):
        x = _xs(lib, 0).requires_grad_()

        def step(k):
            if x.grad is not None:
                x.grad.zero_()
            (x * k).sum().backward()
            return x.grad.sum()
        f = wrap(step)
        for i in range(4):
            see(f(float(i + 1)), x.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_retain_grad_intermediate_returned():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)

        def step(x):
            h = x * w
            h.retain_grad()
            h.tanh().sum().backward()
            return h
        f = wrap(step)
        for i in range(4):
            h = f(_xs(lib, i))
            see(h, h.grad, w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_backward_twice_retain_graph():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)

        def step(x, twice):
            y = (x * w).pow(2).sum()
            y.backward(retain_graph=True)
            if twice:
                y.backward()
            return y
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i), i % 2 == 1), w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_returns_input_and_same_output_twice():
    def scenario(lib, wrap, see):
        def step(x):
            y = x * 2
            return x, y, y
        f = wrap(step)
        for i in range(4):
            x = _xs(lib, i)
            a, b, c = f(x)
            see(a is x, b is c)
            b.add_(1)
            a.mul_(-1)
            see(x, b, c)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_grad_mode_outside_toggled():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)
        f = wrap(lambda x: (x * w).sum(0))
        for i in range(6):
            with lib.set_grad_enabled(i % 2 == 0):
                y = f(_xs(lib, i))
            see(y, y.requires_grad)
            if i == 4:
                with lib.inference_mode():
                    see(f(_xs(lib, i)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_module_float_attr_and_dropout_p_changed():
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_lin(lib, 3, 3), lib.nn.Dropout(0.5))
        m.scale = 1.0
        f = wrap(lambda x: m(x) * m.scale)
        for i in range(6):
            if i == 2:
                m.scale = 3.0
            if i == 3:
                m[1].p = 0.1
            if i == 4:
                m[1].p = 0.0
            see(f(_xs(lib, i)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_buffer_registered_and_deleted_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)

        def step(x):
            y = m(x)
            if hasattr(m, "shift"):
                m.shift.add_(1)
                y = y + m.shift
            return y
        f = wrap(step)
        for i in range(6):
            if i == 2:
                m.register_buffer("shift", lib.zeros(2))
            if i == 4:
                del m.shift
            see(f(_xs(lib, i)), getattr(m, "shift", None))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_zero_grad_set_to_none_alternates():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x, none):
            opt.zero_grad(set_to_none=none)
            m(x).pow(2).sum().backward()
            opt.step()
        f = wrap(step)
        for i in range(5):
            f(_xs(lib, i), i % 2 == 0)
            see(m.weight, m.weight.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_custom_function_backward_raises_on_third():
    def scenario(lib, wrap, see):
        n = [0]

        class Sq(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                n[0] += 1
                if n[0] == 3:
                    raise RuntimeError("backward three")
                (x,) = ctx.saved_tensors
                return 2 * x * g
        w = lib.ones(3, requires_grad=True)
        f = wrap(lambda x: Sq.apply(x * w).sum().backward())
        for i in range(5):
            _catch(see, f, _xs(lib, i))
            see(w.grad, n[0])
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_requires_grad_set_on_input_inside():
    def scenario(lib, wrap, see):
        def step(x):
            if not x.requires_grad:
                x.requires_grad_()
            (x * x).sum().backward()
            return x.grad
        f = wrap(step)
        for i in range(4):
            x = _xs(lib, i).requires_grad_(i == 2)
            see(f(x), x.requires_grad, x.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_hook_handle_removed_inside_step():
    def scenario(lib, wrap, see):
        m, hs = _lin(lib, 3, 2), []

        def step(x):
            y = m(x)
            if hs:
                hs.pop().remove()
            return y
        f = wrap(step)
        for i in range(5):
            if i in (1, 3):
                hs.append(m.register_forward_hook(lambda mod, a, out: out * 10))
            see(f(_xs(lib, i)), len(hs))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_clip_grad_norm_and_scheduler_inside():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.5)
        sch = lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

        def step(x):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            n = lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            sch.step()
            return n
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i) * (i + 1)), m.weight, opt.param_groups[0]["lr"])
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_nested_compiled_calls_share_state():
    def scenario(lib, wrap, see):
        buf = lib.zeros(3)
        inner = wrap(lambda x: buf.add_(x.sum(0)))

        def outer(x):
            inner(x)
            return buf * 2
        f = wrap(outer)
        for i in range(4):
            see(f(_xs(lib, i)), buf)
            see(inner(_xs(lib, i)), buf)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_same_call_again_after_error():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        f = wrap(step)
        for i in range(6):
            y = lib.tensor([0, 1, 5 if i == 2 else 1, 0])
            _catch(see, f, _xs(lib, i), y)
            see(m.weight, m.weight.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_tensor_attribute_set_inside():
    def scenario(lib, wrap, see):
        def step(x):
            y = x * 2
            x.tag = getattr(x, "tag", 0) + 1
            return y
        f = wrap(step)
        x = _xs(lib, 0)
        for i in range(3):
            see(f(x), x.tag)
    runs(scenario, torch)
