"""Compile-contract s78 (G), hostile programs (1 of 5): each calls a compiled step
several times while changing state between calls (and inside them), compared with torch and
llgrad eagerly step by step (contract_harness_sweep7.runs); all matched eager, so they run
with the slow tests."""

import pytest
from contract_harness_sweep7 import runs
from hostile_helpers_s78_g import _catch, _lin, _xs


torch = pytest.importorskip("torch")


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_error_on_third_call_leaves_grad_and_list():
    def scenario(lib, wrap, see):
        m, log, n = _lin(lib, 3, 2), [], {"c": 0}

        def step(x):
            n["c"] += 1
            y = m(x).pow(2).sum()
            y.backward()
            log.append(round(y.item(), 3))
            if n["c"] == 3:
                raise ValueError(f"bad call {n['c']}")
            return y
        f = wrap(step)
        for i in range(5):
            _catch(see, f, _xs(lib, i))
            see(m.weight.grad, list(log), n["c"])
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_error_before_backward_on_third_call():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x, k):
            opt.zero_grad()
            y = m(x).pow(2).sum()
            if k == 2:
                raise RuntimeError("stop before backward")
            y.backward()
            opt.step()
            return y
        f = wrap(step)
        for i in range(5):
            _catch(see, f, _xs(lib, i), i)
            see(m.weight, m.weight.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_error_after_in_place_input_write():
    def scenario(lib, wrap, see):
        def step(x, k):
            x.mul_(2)
            if x.sum().item() > k:
                raise ValueError("too big")
            return x + 1
        f = wrap(step)
        for i in range(5):
            x = _xs(lib, i) + 1
            _catch(see, f, x, 3.0 * i * i)
            see(x)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_returns_dict_of_views():
    def scenario(lib, wrap, see):
        def step(x):
            return {"t": x.t(), "row": x[1], "flat": x.view(-1), "sum": x.sum()}
        f = wrap(step)
        for i in range(4):
            x = _xs(lib, i)
            d = f(x)
            d["row"].add_(1)
            see(d, x)
            x.mul_(3)
            see(d["t"], d["flat"])
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_returns_generator():
    def scenario(lib, wrap, see):
        def step(x):
            return (x * k for k in range(3))
        f = wrap(step)
        for i in range(3):
            see(list(f(_xs(lib, i))))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_same_tensor_twice_one_written():
    def scenario(lib, wrap, see):
        def step(a, b):
            a.add_(1)
            return a * b
        f = wrap(step)
        for i in range(4):
            x = _xs(lib, i)
            if i % 2:
                see(f(x, x), x)
            else:
                y = _xs(lib, i + 1)
                see(f(x, y), x, y)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_input_view_of_other_input():
    def scenario(lib, wrap, see):
        def step(a, b):
            b.mul_(-1)
            return a.sum(0) + b.sum()
        f = wrap(step)
        for i in range(5):
            x = _xs(lib, i)
            if i in (1, 3):
                see(f(x, x[1:3]), x)
            elif i == 2:
                see(f(x, x.t()[0]), x)
            else:
                see(f(x, _xs(lib, i)[0]), x)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_requires_grad_changes_between_calls():
    def scenario(lib, wrap, see):
        def step(x, w):
            y = (x * w).sum()
            if y.requires_grad:
                y.backward()
            return y
        f = wrap(step)
        for i in range(6):
            x = _xs(lib, i).requires_grad_(i % 2 == 0)
            w = lib.ones(3).requires_grad_(i % 3 == 0)
            see(f(x, w), x.grad, w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_dtype_changes_between_calls():
    def scenario(lib, wrap, see):
        def step(x):
            return (x * 2 + 1).sum(0)
        f = wrap(step)
        for i, dt in enumerate([lib.float32, lib.float64, lib.float32, lib.int64, lib.float64]):
            see(f(_xs(lib, i).to(dt)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_strides_change_between_calls():
    def scenario(lib, wrap, see):
        def step(x):
            x.add_(1)
            return x.cumsum(0) * x
        f = wrap(step)
        for i in range(6):
            base = _xs(lib, i, 4, 4)
            x = [base, base.t(), base[::2], base[:, 1:3], base[1].expand(3, 4).clone(),
                 base.t()[1:]][i]
            see(f(x), base)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_expanded_input_read_only():
    def scenario(lib, wrap, see):
        def step(x, w):
            return (x * w).sum(1)
        f = wrap(step)
        for i in range(4):
            w = lib.ones(3, requires_grad=True)
            x = _xs(lib, i)[0].expand(4, 3) if i % 2 else _xs(lib, i)
            y = f(x, w)
            y.sum().backward()
            see(y, w.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_train_eval_toggled():
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_lin(lib, 3, 4), lib.nn.Dropout(0.5), lib.nn.BatchNorm1d(4))
        f = wrap(lambda x: m(x).sum(0))
        for i in range(6):
            m.train(i % 3 != 1)
            see(f(_xs(lib, i)), m[2].running_mean, m[2].num_batches_tracked, m.training)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_parameter_replaced_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(lambda x: m(x).pow(2).sum().backward())
        for i in range(5):
            if i == 2:
                m.weight = lib.nn.Parameter(lib.full((2, 3), 0.25))
            if i == 3:
                m.bias = lib.nn.Parameter(lib.zeros(2))
            f(_xs(lib, i))
            see(m.weight.grad, m.bias.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_parameter_frozen_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            opt.step()
        f = wrap(step)
        for i in range(5):
            m.weight.requires_grad_(i not in (1, 2))
            f(_xs(lib, i))
            see(m.weight, m.bias, m.weight.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_lr_edited_and_group_added():
    def scenario(lib, wrap, see):
        m, m2 = _lin(lib, 3, 2), _lin(lib, 2, 1, 0.2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m2(m(x)).pow(2).sum()
            loss.backward()
            opt.step()
            return loss
        f = wrap(step)
        for i in range(6):
            if i == 1:
                opt.param_groups[0]["lr"] = 0.01
            if i == 3:
                opt.add_param_group({"params": m2.parameters(), "lr": 0.05})
            if i == 4:
                opt.param_groups[1]["lr"] *= 2
            see(f(_xs(lib, i)), m.weight, m2.weight)
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_tensor_hook_added_inside_on_some_calls():
    def scenario(lib, wrap, see):
        got = []

        def step(x, k):
            y = x * 2
            if k % 2:
                y.register_hook(lambda g: got.append(g.sum().item()) or g * k)
            y.pow(2).sum().backward()
            return y
        f = wrap(step)
        for i in range(5):
            x = _xs(lib, i).requires_grad_()
            see(f(x, i), x.grad, list(got))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_forward_pre_hook_removed_and_readded():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(lambda x: m(x))
        h = None
        for i in range(6):
            if i in (1, 4):
                h = m.register_forward_pre_hook(lambda mod, a: (a[0] * (i + 1),))
            if i in (3, 5):
                h.remove()
            see(f(_xs(lib, i)))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_full_backward_hook_counts():
    def scenario(lib, wrap, see):
        m, got = _lin(lib, 3, 2), []
        f = wrap(lambda x: m(x).pow(2).sum().backward())
        for i in range(5):
            if i == 1:
                h = m.register_full_backward_hook(
                    lambda mod, gi, go: got.append(round(go[0].sum().item(), 4)))
            if i == 3:
                h.remove()
            x = _xs(lib, i).requires_grad_()
            f(x)
            see(x.grad, m.weight.grad, list(got))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_rng_state_saved_inside_restored_outside():
    def scenario(lib, wrap, see):
        saved = []

        def step(x):
            saved.append(lib.get_rng_state())
            return x + lib.rand(3)
        f = wrap(step)
        for i in range(4):
            see(f(_xs(lib, i)))
            if i == 1:
                lib.set_rng_state(saved[0])
            see(lib.rand(2))
    runs(scenario, torch)


@pytest.mark.slow     # (a program that matched eager already: the slow run keeps it)
def test_manual_seed_inside_step():
    def scenario(lib, wrap, see):
        def step(x, s):
            lib.manual_seed(s)
            return lib.nn.functional.dropout(x, 0.5) + lib.randn(3)
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i), i % 2), lib.rand(2))
    runs(scenario, torch)
