"""Compile-contract s78 (G), hostile programs (5 of 5): each calls a compiled step
several times while changing state between calls (and inside them), compared with torch and
llgrad eagerly step by step (contract_harness_sweep7.runs); all matched eager, so they run
with the slow tests."""

import pytest
from contract_harness_sweep7 import runs
from hostile_helpers_s78_g import _catch, _lin, _xs


torch = pytest.importorskip("torch")


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_create_graph_result_backwarded_outside():
    def scenario(lib, wrap, see):
        def step(x):
            (g,) = lib.autograd.grad((x ** 3).sum(), x, create_graph=True)
            return g
        f = wrap(step)
        for i in range(4):
            x = _xs(lib, i).requires_grad_()
            g = f(x)
            g.pow(2).sum().backward()
            see(g, x.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_non_leaf_input_written_inside_then_backward_outside():
    def scenario(lib, wrap, see):
        def step(h, k):
            h.mul_(k)
            return h.sum(1)
        f = wrap(step)
        for i in range(5):
            w = lib.ones(3, requires_grad=True)
            h = _xs(lib, i) * w
            y = f(h, float(i + 1))
            (y.sum() + h.pow(2).sum()).backward()
            see(y, h, w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_view_of_non_leaf_input_written_inside():
    def scenario(lib, wrap, see):
        def step(v):
            v.mul_(3)
            return v * 2
        f = wrap(step)
        for i in range(4):
            w = lib.ones(3, requires_grad=True)
            h = _xs(lib, i) * w
            y = f(h[1:3] if i % 2 else h.t()[0])
            (y.sum() + h.sum()).backward()
            see(y, h, w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_leaf_requiring_grad_written_inside_raises():
    def scenario(lib, wrap, see):
        def step(x):
            x.add_(1)
            return x
        f = wrap(step)
        for i in range(4):
            x = _xs(lib, i).requires_grad_(i % 2 == 1)
            _catch(see, f, x)
            see(x)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_returned_view_written_outside_then_backward():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)

        def step(x):
            y = x * w
            return y, y[1]
        f = wrap(step)
        for i in range(4):
            y, row = f(_xs(lib, i))
            row.mul_(i + 1)
            y.pow(2).sum().backward()
            see(y, w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_returned_view_of_leaf_written_outside_raises():
    def scenario(lib, wrap, see):
        f = wrap(lambda x: x[0])
        for i in range(3):
            x = _xs(lib, i).requires_grad_()
            v = f(x)
            _catch(see, lambda: v.add_(1))
            see(v, x)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_backward_twice_outside_on_returned():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)
        f = wrap(lambda x: (x * w).tanh().sum())
        for i in range(4):
            y = f(_xs(lib, i))
            y.backward(retain_graph=True)
            if i % 2:
                y.backward()
            else:
                _catch(see, lambda: (y.backward(), y.backward()))
            see(w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_int_input_in_place_float_op_raises():
    def scenario(lib, wrap, see):
        def step(x):
            x.mul_(0.5)
            return x.sum()
        f = wrap(step)
        for i, dt in enumerate([lib.float32, lib.float32, lib.int64, lib.float64, lib.int64]):
            x = _xs(lib, i).to(dt) * 10
            _catch(see, f, x)
            see(x)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_shape_error_on_third_call():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(lambda x: m(x).sum().backward())
        for i in range(5):
            _catch(see, f, _xs(lib, i, 4, 4 if i == 2 else 3))
            see(m.weight.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_error_after_optimizer_step():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, weight_decay=0.01)
        log = []

        def step(x, k):
            opt.zero_grad()
            loss = m(x).pow(2).sum()
            loss.backward()
            opt.step()
            log.append(round(loss.item(), 4))
            if loss.item() > k:
                raise RuntimeError("loss exploded")
            return loss
        f = wrap(step)
        for i in range(5):
            _catch(see, f, _xs(lib, i), 5.0 if i != 2 else -1.0)
            see(m.weight, m.bias.grad, list(log))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_post_accumulate_hook_on_input_leaf():
    def scenario(lib, wrap, see):
        got = []
        f = wrap(lambda x, w: (x * w).sum().backward())
        for i in range(4):
            w = lib.ones(3, requires_grad=True)
            if i % 2:
                w.register_post_accumulate_grad_hook(lambda p: got.append(p.grad.sum().item()))
            if i == 2:
                w.register_hook(lambda g: g * -1)
            f(_xs(lib, i), w)
            see(w.grad, list(got))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_raise_on_first_call_after_writes_and_draws():
    """The first call writes a captured buffer, appends, draws and then raises on its read
    loss (traced twice by compile): the writes and draws happen once, as eager's."""
    def scenario(lib, wrap, see):
        buf, log = lib.zeros(3), []

        def step(x, k):
            n = lib.rand(3)
            buf.add_(x.sum(0) + n)
            log.append("c")
            s = (x + n).sum()
            if s.item() > k:
                raise ValueError("over")
            return s
        f = wrap(step)
        for i in range(6):
            _catch(see, f, _xs(lib, i), -5.0 if i in (0, 3) else 50.0)
            see(buf, list(log), lib.rand(1))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_raise_depends_on_float_argument_only():
    def scenario(lib, wrap, see):
        w = lib.ones(3, requires_grad=True)

        def step(x, lr):
            if lr <= 0:
                raise ValueError(f"lr must be positive, got {lr}")
            y = (x * w * lr).sum()
            y.backward()
            return y
        f = wrap(step)
        for i in range(7):
            _catch(see, f, _xs(lib, i), [0.1, 0.2, -0.3, 0.4, 0.0, 0.5, 0.6][i])
            see(w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_first_step_optimizer_created_then_raise():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).sum()
            loss.backward()
            opt.step()
            if loss.item() > 0.5:
                raise RuntimeError("diverged")
            return loss
        f = wrap(step)
        for i in range(6):
            _catch(see, f, _xs(lib, i) * (3 if i in (0, 1, 4) else 0.1))
            see(m.weight, m.weight.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_meta_device_input_between_calls():
    def scenario(lib, wrap, see):
        f = wrap(lambda x: (x * 2).sum(0))
        for i in range(4):
            x = _xs(lib, i)
            y = f(x.to("meta") if i % 2 else x)
            see(tuple(y.shape), y.device.type, y if y.device.type == "cpu" else None)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_compiled_module_object_toggled_and_hooked():
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_lin(lib, 3, 4), lib.nn.Dropout(0.3), _lin(lib, 4, 2, 0.1))
        cm = wrap(m)
        h = None
        for i in range(6):
            m.train(i % 2 == 0)
            if i == 2:
                h = m[2].register_forward_pre_hook(lambda mod, a: (a[0] * 0.5,))
            if i == 4:
                h.remove()
            y = cm(_xs(lib, i))
            y.sum().backward()
            see(y, m[0].weight.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_lr_and_parameter_changed_inside_step():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x, k):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            opt.step()
            if k == 1:
                opt.param_groups[0]["lr"] = opt.param_groups[0]["lr"] * 0.5
            if k == 3:
                with lib.no_grad():
                    m.bias.fill_(0.0)
        f = wrap(step)
        for i in range(6):
            f(_xs(lib, i), i)
            see(m.weight, m.bias, opt.param_groups[0]["lr"])
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_dropout_stream_with_reseed_outside():
    def scenario(lib, wrap, see):
        m = lib.nn.Dropout(0.4)
        f = wrap(lambda x: m(x) + lib.rand_like(x))
        for i in range(6):
            if i == 3:
                lib.manual_seed(11)
            if i == 4:
                st = lib.get_rng_state()
            see(f(_xs(lib, i)))
            if i == 4:
                lib.set_rng_state(st)
    runs(scenario, torch)
