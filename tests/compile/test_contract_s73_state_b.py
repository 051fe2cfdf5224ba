"""Compile-contract adversary s73 (b): state changed between calls of a compiled function:
captured containers and tensors (appended, replaced, deleted, rebound, written in place,
.data set, resized), the inputs (views, dtypes, requires_grad, non-leaves, aliases of
captured parameters, written inside and reused), RNG (seeds, generators, fork_rng), grad
mode and default dtype around the call: torch, llgrad eagerly and llgrad.compile run the
same calls and changes, and every observation must match (contract_harness_sweep7.runs)."""
import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _a(lib, n=4, k=0.0):
    return lib.arange(n * 1.0) / 3 - 0.5 + k


# ---- captured containers and tensors ----------------------------------------------------------
@pytest.mark.parametrize("change", ["append", "replace", "pop", "inplace_item"])
def test_captured_list_of_tensors_changed_between_calls(change):
    def scenario(lib, wrap, see):
        ws = [_a(lib, 4, 0.1), _a(lib, 4, 0.2)]

        def f(x):
            y = x
            for w in ws:
                y = y * w + 1
            return y.sum(), len(ws)
        cf = wrap(f)
        for i in range(5):
            if i:
                if change == "append":
                    ws.append(_a(lib, 4, i))
                elif change == "replace":
                    ws[i % 2] = _a(lib, 4, -i)
                elif change == "pop" and ws:
                    ws.pop(0)
                elif change == "inplace_item":
                    ws[1].mul_(-0.5)
            see(*cf(_a(lib, 4, 1.0)))
    runs(scenario, torch)


@pytest.mark.parametrize("change", ["delete_key", "new_key", "value_replaced_by_float"])
def test_captured_dict_of_tensors_changed_between_calls(change):
    def scenario(lib, wrap, see):
        d = {"a": _a(lib), "b": _a(lib, 4, 1.0)}

        def f(x):
            out = x.clone()
            for k in sorted(d):
                out = out + d[k] * (2 if k == "b" else 1)
            if "c" in d:
                d["c"] = d["c"] + out.sum()     # (the caller's dict written)
            return out
        cf = wrap(f)
        for i in range(5):
            if i == 2:
                if change == "delete_key":
                    del d["a"]
                elif change == "new_key":
                    d["c"] = lib.tensor(1.0)
                else:
                    d["b"] = 0.5
            see(cf(_a(lib, 4, i)), dict(d))
    runs(scenario, torch)


_G = {}


def test_module_global_tensor_reassigned_between_calls():
    def scenario(lib, wrap, see):
        _G["w"] = _a(lib)

        def f(x):
            return (x * _G["w"]).sum() + _G.get("b", 0)
        g = {"_G": _G}
        f2 = type(f)(f.__code__, {**f.__globals__, **g}, "f2", None, f.__closure__)
        cf = wrap(f2)
        for i in range(5):
            if i == 1:
                _G["w"] = _a(lib, 4, 3.0)
            if i == 3:
                _G["b"] = lib.tensor(-1.0)
            see(cf(_a(lib, 4, i)))
        _G.clear()
    runs(scenario, torch)


def test_closure_variable_rebound_between_calls():
    def scenario(lib, wrap, see):
        w = _a(lib)
        scale = 2.0

        def f(x):
            return x * w * scale
        cf = wrap(f)
        for i in range(6):
            if i == 1:
                w = _a(lib, 4, 5.0)             # noqa: F841  (the cell rebound)
            if i == 2:
                scale = -1.0                    # noqa: F841
            if i == 3:
                w = lib.ones(2, 4)              # (another shape)
            if i == 4:
                w = w.double()
            see(cf(_a(lib, 4, i)))
    runs(scenario, torch)


@pytest.mark.parametrize("change", ["add_", "data_same_shape", "data_other_shape",
                                    "resize_", "set_", "requires_grad_"])
def test_captured_tensor_changed_outside_between_calls(change):
    def scenario(lib, wrap, see):
        w = _a(lib, 4, 0.3)

        def f(x):
            y = (x * w).sum() + w.sum()
            return y, w.shape, w.requires_grad
        cf = wrap(f)
        for i in range(5):
            if i in (1, 3):
                if change == "add_":
                    w.add_(1)
                elif change == "data_same_shape":
                    w.data = _a(lib, 4, i)
                elif change == "data_other_shape":
                    w.data = _a(lib, 1, i) if i == 1 else _a(lib, 4, i).double()
                elif change == "resize_":
                    w.resize_(1 if i == 1 else 4)
                    w.fill_(float(i))
                elif change == "set_":
                    w.set_(_a(lib, 4, -i))
                else:
                    w.requires_grad_(i == 1)
            x = _a(lib, 4, 1.0)
            y, shape, rg = cf(x)
            if y.requires_grad:
                y.backward()
            see(y, tuple(shape), rg, w.grad if w.is_leaf else None)
    runs(scenario, torch)


def test_captured_tensor_written_inside_and_outside_alternately():
    def scenario(lib, wrap, see):
        acc = lib.zeros(3)

        def f(x):
            acc.add_(x)
            return acc * 2
        cf = wrap(f)
        for i in range(5):
            see(cf(_a(lib, 3, i)), acc)
            if i % 2:
                acc.mul_(0.5)
            else:
                acc[1] = -7.0
    runs(scenario, torch)


# ---- inputs --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["transposed", "sliced", "expanded", "contiguous_again"])
def test_same_function_with_views_and_contiguous_inputs(kind):
    def scenario(lib, wrap, see):
        def f(x):
            return x.reshape(-1) * lib.arange(6.0), x.t() @ x
        cf = wrap(f)
        base = lib.arange(12.0).reshape(3, 4) / 5
        for i in range(4):
            if kind == "transposed":
                x = base[:2, :3].contiguous() if i % 2 else base[:, :2].t()
            elif kind == "sliced":
                x = base[::2, 1:4] if i % 2 else base[:2, :3]
            elif kind == "expanded":
                x = base[:1, :3].expand(2, 3) if i % 2 else base[1:3, :3]
            else:
                x = base[:3, :2].t() if i < 2 else base[:3, :2].t().contiguous()
            see(*cf(x))
    runs(scenario, torch)


def test_same_function_called_with_other_dtypes_and_requires_grad():
    def scenario(lib, wrap, see):
        def f(x, w):
            return (x * w).sum() + x.dtype.is_floating_point
        cf = wrap(f)
        for i, (dt, rg) in enumerate([("float32", True), ("float64", True), ("float32", False),
                                      ("int64", False), ("float64", False), ("float32", True)]):
            x = lib.arange(4).to(getattr(lib, dt))
            w = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=rg)
            y = cf(x, w)
            if y.requires_grad:
                y.backward()
            see(y, w.grad)
    runs(scenario, torch)


def test_non_leaf_and_leaf_inputs_alternate():
    def scenario(lib, wrap, see):
        leaf = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)

        def f(x):
            return (x.exp() * x).sum()
        cf = wrap(f)
        for i in range(5):
            x = leaf * (i + 1) if i % 2 else leaf
            if i == 3:
                x.retain_grad()
            cf(x).backward()
            see(leaf.grad, x.grad if i == 3 else None, x.is_leaf)
    runs(scenario, torch)


def test_input_aliasing_a_captured_parameter():
    def scenario(lib, wrap, see):
        m = lib.nn.Linear(3, 3)
        with lib.no_grad():
            m.weight.copy_(lib.eye(3) * 0.5)
            m.bias.zero_()

        def f(x):
            return m(x).sum()
        cf = wrap(f)
        for i in range(4):
            x = m.weight if i % 2 else lib.ones(3, 3)
            cf(x).backward()
            see(m.weight.grad, m.bias.grad)
    runs(scenario, torch)


def test_input_written_inside_then_reused_by_the_caller():
    def scenario(lib, wrap, see):
        def f(x, y):
            x.add_(1)
            y.mul_(2)
            return x + y
        cf = wrap(f)
        a = lib.zeros(4)
        for i in range(5):
            b = a[1:3] if i % 2 else lib.ones(2)
            r = cf(a[:2] if i != 3 else a[2:], b)
            see(r, a, b)
            a = a * 0.5 if i == 2 else a
    runs(scenario, torch)


def test_input_passed_twice_then_two_tensors():
    def scenario(lib, wrap, see):
        def f(x, y):
            x.mul_(2)
            return x + y
        cf = wrap(f)
        for i in range(4):
            a, b = _a(lib, 3, i), _a(lib, 3, -i)
            see(cf(a, a) if i % 2 else cf(a, b), a, b)
    runs(scenario, torch)


# ---- RNG, grad mode, default dtype -------------------------------------------------------------
def test_manual_seed_between_calls_and_generator_passed_in():
    def scenario(lib, wrap, see):
        def f(x, g=None):
            noise = lib.rand(x.shape, generator=g) if g is not None else lib.rand(x.shape)
            keep = lib.bernoulli(lib.full(x.shape, 0.5), generator=g)
            return x + noise * keep, lib.randn(2, generator=g)
        cf = wrap(f)
        g = lib.Generator().manual_seed(7)
        for i in range(6):
            if i == 2:
                lib.manual_seed(3)
            if i == 4:
                g.manual_seed(3)
            see(*cf(_a(lib, 3, i), g if i % 2 else None), lib.rand(1), g.initial_seed())
    runs(scenario, torch)


def test_generator_state_set_between_calls():
    def scenario(lib, wrap, see):
        g = lib.Generator().manual_seed(1)

        def f(n):
            return lib.randn(n, generator=g)
        cf = wrap(f)
        s0 = g.get_state()
        for i in range(5):
            if i == 3:
                g.set_state(s0)
            if i == 4:
                lib.set_rng_state(lib.get_rng_state())
            see(cf(3), g.get_state().sum())
    runs(scenario, torch)


def test_dropout_under_fork_rng_inside_and_outside():
    def scenario(lib, wrap, see):
        drop = lib.nn.Dropout(0.5)

        def f(x, forked):
            if forked:
                with lib.random.fork_rng():
                    lib.manual_seed(11)
                    a = drop(x)
            else:
                a = drop(x)
            return a, lib.rand(2)
        cf = wrap(f)
        for i in range(5):
            if i == 3:
                with lib.random.fork_rng():
                    see(*cf(lib.ones(6), True))
            see(*cf(lib.ones(6), i % 2 == 0))
    runs(scenario, torch)


@pytest.mark.parametrize("mode", ["no_grad", "set_grad_enabled", "inference_mode",
                                  "enable_grad_inside"])
def test_grad_mode_around_the_call_changes_between_calls(mode):
    def scenario(lib, wrap, see):
        w = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)

        def f(x):
            if mode == "enable_grad_inside":
                with lib.enable_grad():
                    y = (x * w).pow(2)
            else:
                y = (x * w).pow(2)
            return y, lib.is_grad_enabled()
        cf = wrap(f)
        for i in range(5):
            x = _a(lib, 3, i)
            off = i % 2 == 1
            if mode == "set_grad_enabled":
                with lib.set_grad_enabled(not off):
                    y, ge = cf(x)
            elif mode == "inference_mode" and off:
                with lib.inference_mode():
                    y, ge = cf(x)
            elif off:
                with lib.no_grad():
                    y, ge = cf(x)
            else:
                y, ge = cf(x)
            if y.requires_grad:
                y.sum().backward()
            see(y, ge, w.grad, y.grad_fn is None)
    runs(scenario, torch)


def test_default_dtype_changed_between_calls():
    def scenario(lib, wrap, see):
        def f(x):
            z = lib.zeros(3) + lib.tensor([0.1, 0.2, 0.3]) + lib.arange(3.0)
            return z, z.dtype, x * 1.5, lib.tensor(2.5) * x, lib.full((2,), 1 / 3)
        cf = wrap(f)
        try:
            for i in range(5):
                lib.set_default_dtype(lib.float64 if i in (1, 3) else lib.float32)
                see(*cf(lib.arange(3)))
        finally:
            lib.set_default_dtype(lib.float32)
    runs(scenario, torch)
