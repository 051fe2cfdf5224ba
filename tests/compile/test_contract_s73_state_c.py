"""Compile-contract adversary s73 (c): state a compiled call changes or reads that lives
outside its arguments: function defaults and instance/class methods replaced between calls,
parametrizations registered, ModuleLists grown, a tensor's Python attributes, grad mode,
seeds, default dtype and train mode left changed by the call itself, hooks that remove or
add hooks: torch, llgrad eagerly and llgrad.compile (contract_harness_sweep7.runs). Fixed
here: a traced run that breaks is put back and run again eagerly, and StateSnapshot.restore
left what the traced run changed in llgrad's settings (grad mode, default dtype), nn's and
optim's global hooks and the attributes of the user's modules (`config.calls += 1`)."""
import importlib

import pytest
import s73_config_state
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _a(lib, n=4, k=0.0):
    return lib.arange(n * 1.0) / 3 - 0.5 + k


def test_function_defaults_replaced_between_calls():
    def scenario(lib, wrap, see):
        def f(x, k=2.0, w=None):
            return x * k + (0 if w is None else w)
        cf = wrap(f)
        for i in range(5):
            if i == 2:
                f.__defaults__ = (-1.0, None)
            if i == 3:
                f.__defaults__ = (0.5, _a(lib, 3, 1.0))
            if i == 4:
                f.__kwdefaults__ = None
                f.__defaults__ = (0.5, _a(lib, 3, -1.0))
            see(cf(_a(lib, 3, i)))
    runs(scenario, torch)


def test_mutable_default_written_by_the_call():
    def scenario(lib, wrap, see):
        def f(x, acc=[]):           # noqa: B006 (the classic: it grows at each call)
            acc.append(x.sum())
            return x * len(acc), len(acc)
        cf = wrap(f)
        for i in range(4):
            see(*cf(_a(lib, 3, i)))
        see(f.__defaults__[0])
    runs(scenario, torch)


@pytest.mark.parametrize("where", ["instance", "class"])
def test_forward_or_method_replaced_between_calls(where):
    def scenario(lib, wrap, see):
        class M(lib.nn.Module):
            k = 2.0

            def __init__(self):
                super().__init__()
                self.w = lib.nn.Parameter(_a(lib, 3))

            def forward(self, x):
                return self.act(x * self.w) * self.k

            def act(self, y):
                return y.relu()
        m = M()
        cf = wrap(m)
        for i in range(5):
            if i == 1:
                if where == "instance":
                    m.act = lambda y: y.tanh()
                else:
                    M.act = lambda self, y: y.sigmoid()
            if i == 2:
                if where == "instance":
                    m.k = -1.0
                else:
                    M.k = 3.0
            if i == 3:
                if where == "instance":
                    m.forward = lambda x: x * m.w.sum()
                else:
                    M.forward = lambda self, x: x - self.w
            y = cf(_a(lib, 3, i))
            y.sum().backward()
            see(y, m.w.grad)
    runs(scenario, torch)


@pytest.mark.parametrize("kind", ["parametrize", "weight_norm", "spectral_norm"])
def test_parametrization_registered_between_calls(kind):
    def scenario(lib, wrap, see):
        m = lib.nn.Linear(3, 2)
        with lib.no_grad():
            m.weight.copy_(lib.arange(6.0).reshape(2, 3) / 4 - 0.5)
            m.bias.fill_(0.1)
        cf = wrap(lambda x: m(x))
        for i in range(4):
            if i == 2:
                if kind == "parametrize":
                    class Sym(lib.nn.Module):
                        def forward(self, w):
                            return w.abs() * 2
                    lib.nn.utils.parametrize.register_parametrization(m, "weight", Sym())
                elif kind == "weight_norm":
                    lib.nn.utils.parametrizations.weight_norm(m)
                else:
                    lib.nn.utils.parametrizations.spectral_norm(m, n_power_iterations=3)
            y = cf(_a(lib, 3, i).reshape(1, 3))
            y.sum().backward()
            see(y, [p.grad for p in m.parameters()], [p for p in m.parameters()])
            m.zero_grad()
    runs(scenario, torch)


def test_module_list_grown_between_calls():
    def scenario(lib, wrap, see):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = lib.nn.ModuleList([lib.nn.Linear(3, 3)])

            def forward(self, x):
                for b in self.blocks:
                    x = b(x).tanh()
                return x
        lib.manual_seed(0)
        m = M()
        with lib.no_grad():
            for p in m.parameters():
                p.copy_(_a(lib, p.numel()).reshape(p.shape))
        cf = wrap(m)
        for i in range(4):
            if i in (1, 3):
                lin = lib.nn.Linear(3, 3)
                with lib.no_grad():
                    lin.weight.copy_(lib.eye(3) * (0.5 * i))
                    lin.bias.fill_(-0.1 * i)
                m.blocks.append(lin)
            y = cf(_a(lib, 3, i))
            y.sum().backward()
            see(y, [p.grad for p in m.parameters()])
            m.zero_grad()
    runs(scenario, torch)


def test_python_attribute_of_a_captured_tensor_changed_between_calls():
    def scenario(lib, wrap, see):
        w = _a(lib, 3)
        w.tag = 1.0

        def f(x):
            return x * w * getattr(w, "tag", 0.0)
        cf = wrap(f)
        for i in range(4):
            if i == 1:
                w.tag = -2.0
            if i == 2:
                del w.tag
            if i == 3:
                w.tag = 5
            see(cf(_a(lib, 3, i)))
    runs(scenario, torch)


def test_int_attribute_used_as_a_shape_changed_between_calls():
    def scenario(lib, wrap, see):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = 2

            def forward(self, x):
                return x.view(self.heads, -1).softmax(-1).sum(0)
        m = M()
        cf = wrap(m)
        for i, h in enumerate([2, 3, 6, 1, 2]):
            m.heads = h
            see(cf(lib.arange(6.0) / (i + 1)))
    runs(scenario, torch)


def test_nonlocal_counter_written_by_the_call():
    def scenario(lib, wrap, see):
        n = 0

        def f(x):
            nonlocal n
            n += 1
            return x * n
        cf = wrap(f)
        for i in range(4):
            if i == 2:
                n = 10
            see(cf(_a(lib, 3)), n)
    runs(scenario, torch)


# ---- global state the call itself leaves changed -----------------------------------------------
@pytest.mark.parametrize("what", ["grad_mode", "default_dtype", "seed", "train_mode"])
def test_state_the_call_leaves_changed(what):
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.Dropout(0.5))
        w = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)

        def f(x, flag):
            y = m(x) * w
            if what == "grad_mode":
                lib.set_grad_enabled(flag)
            elif what == "default_dtype":
                lib.set_default_dtype(lib.float64 if flag else lib.float32)
            elif what == "seed":
                lib.manual_seed(5 if flag else 6)
            else:
                m.train(flag)
            return y
        cf = wrap(f)
        try:
            for i in range(5):
                y = cf(_a(lib, 3, i).float(), i % 2 == 0)
                see(y, lib.is_grad_enabled(), lib.get_default_dtype(), lib.rand(2),
                    m.training, lib.zeros(1).dtype)
        finally:
            lib.set_grad_enabled(True)
            lib.set_default_dtype(lib.float32)
    warned = runs(scenario, torch)
    # (the reason names the setting: it was "a result requires grad (enable_grad() inside
    # the function) while the call runs under no_grad", read after the run turned it off)
    setting = {"grad_mode": "grad mode", "default_dtype": "default dtype"}.get(what)
    assert setting is None or all(f"changes llgrad's {setting}" in w for w in warned), warned


def test_hook_that_removes_itself_and_one_that_adds_another():
    def scenario(lib, wrap, see):
        m = lib.nn.Linear(3, 2)
        with lib.no_grad():
            m.weight.fill_(0.5)
            m.bias.fill_(0.0)
        seen_calls, handles = [], {}

        def once(mod, args, out):
            seen_calls.append("once")
            handles["once"].remove()
            return out * 10

        def adder(mod, args):
            seen_calls.append("adder")
            if len(seen_calls) < 6:
                handles["late"] = mod.register_forward_hook(
                    lambda mo, a, o: seen_calls.append("late") or o + 1)
        handles["once"] = m.register_forward_hook(once)
        m.register_forward_pre_hook(adder)
        cf = wrap(m)
        for i in range(4):
            see(cf(_a(lib, 3, i)), list(seen_calls))
    runs(scenario, torch)


def test_grad_held_by_the_caller_is_accumulated_in_place():
    def scenario(lib, wrap, see):
        w = lib.tensor([1.0, -1.0, 2.0], requires_grad=True)

        def f(x):
            (x * w).pow(2).sum().backward()
        cf = wrap(f)
        held = []
        for i in range(5):
            if i == 2:
                w.grad = lib.zeros(6)[::2]      # (a strided .grad)
            if i == 3:
                held.append(w.grad)
            cf(_a(lib, 3, i))
            see(w.grad, [h for h in held], w.grad.stride())
    runs(scenario, torch)


@pytest.mark.parametrize("what", ["default_dtype", "grad_mode"])
def test_a_call_that_breaks_after_changing_a_setting_runs_from_the_callers(what):
    # (the traced run is put back and run eagerly: from the setting it was called with, not
    # the one the traced run left; it was run again with the setting toggled twice)
    class Odd:
        pass

    def scenario(lib, wrap, see):
        w = lib.ones(2, requires_grad=True)

        def f(x):
            z = lib.zeros(2) + x * w
            if what == "grad_mode":
                lib.set_grad_enabled(not lib.is_grad_enabled())
            else:
                lib.set_default_dtype(lib.float64 if lib.get_default_dtype() == lib.float32
                                      else lib.float32)
            return z, Odd()     # (a graph break, found after the run)
        cf = wrap(f)
        try:
            for i in range(3):
                z, _ = cf(lib.ones(2, dtype=lib.float32))
                see(z, lib.get_default_dtype(), lib.is_grad_enabled())
        finally:
            lib.set_default_dtype(lib.float32)
            lib.set_grad_enabled(True)
    runs(scenario, torch)


@pytest.mark.parametrize("kind", ["module", "optimizer"])
def test_a_call_that_breaks_after_registering_a_global_hook_registers_it_once(kind):
    # (the traced run's hook stayed registered and the eager run after the break added a
    # second one: every later module call added 1 twice, every step counted twice)
    class Odd:
        pass

    def scenario(lib, wrap, see):
        m = lib.nn.Linear(2, 2)
        with lib.no_grad():
            m.weight.fill_(0.5)
            m.bias.zero_()
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
        m(lib.ones(1, 2)).sum().backward()
        opt.step()                  # (its state made: a step the trace can keep)
        register = importlib.import_module(lib.__name__ + ".optim.optimizer") \
            .register_optimizer_step_post_hook
        handles, steps = [], []

        def f(x):
            if kind == "module":
                handles.append(lib.nn.modules.module.register_module_forward_hook(
                    lambda mod, a, o: o + 1))
                return m(x), Odd()     # (a graph break, found after the run)
            handles.append(register(lambda o, a, kw: steps.append(1)))
            opt.zero_grad()
            loss = m(x).sum()
            loss.backward()
            opt.step()
            return loss, Odd()
        cf = wrap(f)
        try:
            for i in range(2):
                y, _ = cf(lib.ones(1, 2))
                opt.step()
                see(y, m(lib.ones(1, 2)), m.weight, len(handles), len(steps))
        finally:
            for h in handles:
                h.remove()
    runs(scenario, torch)


class _Odd:
    pass


def test_a_call_that_breaks_after_counting_in_a_users_module_counts_once():
    # (`config.calls += 1` was not put back after the traced run broke, and the eager run
    # after it counted again: 2, 4, 6 where eager counts 1, 2, 3)
    def scenario(lib, wrap, see):
        s73_config_state.calls = 0

        def f(x):
            s73_config_state.calls += 1
            return x * s73_config_state.calls, _Odd()  # (a graph break, found after the run)
        cf = wrap(f)
        for i in range(3):
            y, _ = cf(lib.ones(2))
            see(y, s73_config_state.calls)
    runs(scenario, torch)
