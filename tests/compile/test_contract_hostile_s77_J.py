"""Compile-contract s77 (J), hostile programs: state changed between calls and inside them
(hooks added and removed, a hook that raises on its third call, requires_grad toggled,
.grad set to None, zeros or deleted, `.data =` and set_ on a parameter, param_groups
edited and a group added, a captured dict written on a tensor's .item()), draws before an
error (the RNG stream and captured writes as eager leaves them), and the warning of a
fallback for an nn.Parameter the function stores on a module (named by where it is
stored, not as a result the function never returned) and for a module's full backward
hooks registered between calls of a forward-only function (named as the module's, not as a
hook the function registered): torch, llgrad eagerly and llgrad.compile
(contract_harness_sweep7.runs)."""
import warnings

import pytest
from contract_harness_sweep7 import runs

import llgrad

torch = pytest.importorskip("torch")


def _lin(lib, i, o, k=0.0):
    m = lib.nn.Linear(i, o)
    with lib.no_grad():
        m.weight.copy_(lib.arange(i * o * 1.0).reshape(o, i) / 7 - 0.3 + k)
        m.bias.copy_(lib.arange(o * 1.0) / 3 - 0.2)
    return m


def _xs(lib, i, rows=4, n=3):
    return lib.arange(rows * n * 1.0).reshape(rows, n) / (5 + i) - 0.5


def _step(lib, m, opt=None):
    def step(x):
        if opt is not None:
            opt.zero_grad()
        y = m(x)
        y.pow(2).sum().backward()
        if opt is not None:
            opt.step()
        return y
    return step


def test_captured_dict_written_on_item():
    def scenario(lib, wrap, see):
        m, log = _lin(lib, 3, 2), {"big": 0, "vals": []}

        def step(x):
            loss = m(x).pow(2).sum()
            if loss.item() > 1.0:
                log["big"] += 1
                log["vals"].append(round(loss.item(), 4))
            else:
                m.flag = loss.detach()
            loss.backward()
            return loss
        f = wrap(step)
        for i in range(5):
            see(f(_xs(lib, i) * (i - 2)), log["big"], list(log["vals"]), m.weight.grad,
                getattr(m, "flag", None))
    runs(scenario, torch)


@pytest.mark.parametrize("kind", ["forward", "pre", "full_backward", "tensor", "post_acc"])
def test_hooks_added_and_removed_between_calls(kind):
    def scenario(lib, wrap, see):
        m, got = _lin(lib, 3, 2), []
        f, h = wrap(_step(lib, m)), None
        for i in range(6):
            if i == 2:
                if kind == "forward":
                    h = m.register_forward_hook(lambda mod, a, out: out * 2)
                elif kind == "pre":
                    h = m.register_forward_pre_hook(lambda mod, a: (a[0] + 1,))
                elif kind == "full_backward":
                    h = m.register_full_backward_hook(
                        lambda mod, gi, go: (gi[0] * 3,) if gi[0] is not None else None)
                elif kind == "tensor":
                    h = m.weight.register_hook(lambda g: g * 10)
                else:
                    def moved(p):
                        got.append(round(p.grad.sum().item(), 4))
                        with lib.no_grad():
                            p.add_(-0.01 * p.grad)
                        p.grad = None
                    h = m.weight.register_post_accumulate_grad_hook(moved)
            if i == 4:
                h.remove()
            x = _xs(lib, i).requires_grad_()
            see(f(x), m.weight, m.weight.grad, m.bias.grad, x.grad, list(got))
    runs(scenario, torch)


@pytest.mark.slow     # (an optimiser's momentum: its eager kernels build, ~8 s)
def test_hook_raising_on_third_call_leaves_eager_state():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        calls = {"n": 0}

        def hook(g):
            calls["n"] += 1
            if calls["n"] == 3:
                raise ValueError("boom")
            return g
        m.weight.register_hook(hook)
        f = wrap(_step(lib, m, opt))
        for i in range(6):
            try:
                see(f(_xs(lib, i)))
            except ValueError as e:
                see(e)
            see(m.weight, m.weight.grad, m.bias, m.bias.grad, calls["n"])
    runs(scenario, torch)


def test_grad_and_requires_grad_changed_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        f = wrap(_step(lib, m))
        for i in range(8):
            if i == 1:
                m.weight.grad = None
            if i == 2:
                m.weight.grad = lib.zeros_like(m.weight)
            if i == 3:
                m.bias.grad = lib.ones_like(m.bias)
            if i == 4:
                del m.weight.grad
            if i == 5:
                m.weight.requires_grad_(False)
            if i == 6:
                m.weight.requires_grad_(True)
                m.bias.requires_grad_(False)
            see(f(_xs(lib, i)), m.weight.grad, m.bias.grad)
    runs(scenario, torch)


@pytest.mark.slow     # (an optimiser's momentum: its eager kernels build, ~8 s)
def test_parameter_data_swapped_and_groups_edited():
    def scenario(lib, wrap, see):
        m, m2 = _lin(lib, 3, 2), _lin(lib, 2, 2, 0.1)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)

        def step(x):
            opt.zero_grad()
            m2(m(x)).pow(2).sum().backward()
            opt.step()
        f = wrap(step)
        for i in range(7):
            if i == 1:
                m.weight.data = lib.ones(2, 3)
            if i == 2:
                m.weight.data.set_(lib.full((2, 3), 0.5))
            if i == 3:
                opt.param_groups[0]["lr"] = 0.5
            if i == 4:
                opt.add_param_group({"params": list(m2.parameters()), "lr": 0.2})
            if i == 5:
                opt.param_groups[1]["momentum"] = 0.9
            f(_xs(lib, i))
            see(m.weight, m.bias, m2.weight, m2.weight.grad)
    runs(scenario, torch)


def test_draws_then_index_error():
    def scenario(lib, wrap, see):
        buf, log = lib.zeros(3), []

        def step(x, idx):
            n = lib.rand(3)
            buf.add_(n)
            log.append(1)
            return lib.nn.functional.dropout(x, 0.3)[idx] + n.sum()
        f = wrap(step)
        for i in range(6):
            try:
                see(f(_xs(lib, i), lib.tensor([0, 9 if i in (2, 4) else 1])))
            except IndexError as e:
                see(type(e).__name__)
            see(buf, len(log), lib.rand(2))
    runs(scenario, torch)


def test_parameter_stored_on_module_warning_names_where():
    """The fallback's warning names the module attribute the new nn.Parameter went into:
    it is no result of the function (its only result is result 0)."""
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)

        def step(x):
            if not hasattr(m, "extra"):
                m.extra = lib.nn.Parameter(lib.ones(2))
            y = m(x) * m.extra
            y.sum().backward()
            return y
        f = wrap(step)
        for i in range(4):
            see(f(_xs(lib, i)), m.extra.grad, m.weight.grad, len(list(m.parameters())))
    own = runs(scenario, torch)
    assert len(own) == 1, own
    assert "(m.extra) is a new leaf that requires grad" in own[0], own[0]
    assert "result 1" not in own[0] and f"{__name__.split('.')[-1]}.py:" in own[0], own[0]


def test_returned_new_leaf_still_named_as_a_result():
    f = llgrad.compile(lambda x: (x * 2, llgrad.ones(2, requires_grad=True)))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a, b = f(llgrad.ones(2))
    text = [str(x.message) for x in w if "running eagerly" in str(x.message)]
    assert len(text) == 1 and "result 1 of the function is a new leaf" in text[0], text
    assert b.requires_grad and b.grad_fn is None and a.tolist() == [2.0, 2.0]


def test_module_backward_hooks_added_between_forward_only_calls():
    """Full backward (pre-)hooks put on a submodule between calls of a compiled forward
    (the backward runs after the call): the fallback names the module's hooks and the line
    calling it, not "a hook registered inside the compiled function"."""
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_lin(lib, 3, 3), lib.nn.Tanh(), _lin(lib, 3, 2, 0.1))
        fwd = wrap(lambda x: m(x) * 2)
        got = []
        for i in range(5):
            if i == 1:
                m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] * 0.5,))
            if i == 2:
                m[0].register_full_backward_hook(lambda mod, gi, go: got.append(
                    round(go[0].sum().item(), 4)))
            y = fwd(_xs(lib, i))
            y.pow(2).sum().backward()
            see(y, m[0].weight.grad, m[2].weight.grad, list(got))
    own = runs(scenario, torch)
    assert len(own) == 1, own
    assert "the full backward hooks of a Linear module the function calls (at " \
        "test_contract_hostile_s77_J.py:" in own[0], own[0]
    assert "registered inside" not in own[0], own[0]
