"""Sweep 15 (g): module hooks (forward / pre / backward / full backward, with_kwargs,
always_call, prepend, global hooks, state_dict and load_state_dict hooks) and
parametrizations, checked side by side with torch (tests/nn/oracle_sweep15_g.py) after the
topics of PyTorch's test/nn/test_module_hooks.py and test_parametrization.py."""
import pytest

torch = pytest.importorskip("torch")

from oracle_sweep15_g import check  # noqa: E402


def _forget_global_backward_kind(mm):
    """torch remembers for the process whether a global backward hook was ever full (and
    refuses the other kind after it): forget it, so the test does not depend on others."""
    if hasattr(mm, "_global_is_full_backward_hook"):
        mm._global_is_full_backward_hook = None


def _lin(lib, i=3, o=2):
    return lib.nn.Linear(i, o)


def test_forward_pre_hook_with_kwargs_rewrites_args_and_kwargs():
    def s(lib):
        class Scale(lib.nn.Module):
            def forward(self, x, *, k=1.0):
                return x * k

        m = Scale()
        m.register_forward_pre_hook(lambda mod, a, kw: ((a[0] + 1,), {"k": kw["k"] * 2}),
                                    with_kwargs=True)
        m.register_forward_hook(lambda mod, a, kw, out: out + kw["k"], with_kwargs=True)
        return m(lib.ones(2), k=3.0)
    check(s)


def test_forward_hook_order_prepend_and_removal_inside_hook():
    def s(lib):
        m = _lin(lib)
        log, handles = [], []
        handles.append(m.register_forward_hook(lambda *a: log.append("a")))
        m.register_forward_hook(lambda *a: log.append("b"), prepend=True)
        m.register_forward_pre_hook(lambda *a: log.append("pa"))
        m.register_forward_pre_hook(lambda *a: log.append("pb"), prepend=True)

        def once(*a):
            log.append("once")
            h.remove()
        h = m.register_forward_hook(once)
        m(lib.ones(1, 3))
        m(lib.ones(1, 3))
        handles[0].remove()
        m(lib.ones(1, 3))
        return log
    check(s)


def test_always_call_forward_hook_runs_when_forward_raises():
    def s(lib):
        class Bad(lib.nn.Module):
            def forward(self, x):
                raise ValueError("boom")
        m, log = Bad(), []
        m.register_forward_hook(lambda *a: log.append("plain"))
        m.register_forward_hook(lambda mod, a, out: log.append(("always", out)), always_call=True)
        try:
            m(lib.ones(1))
        except ValueError as e:
            log.append(str(e))
        return log
    check(s)


def test_forward_hook_returning_none_keeps_output_and_value_replaces_it():
    def s(lib):
        m = _lin(lib)
        m.register_forward_hook(lambda mod, a, out: None)
        m.register_forward_hook(lambda mod, a, out: out * 10)
        m.register_forward_pre_hook(lambda mod, a: a[0] * 2)    # a bare tensor is wrapped
        return m(lib.ones(1, 3))
    check(s)


def test_global_module_hooks_run_around_local_ones():
    def s(lib):
        mm = lib.nn.modules.module
        _forget_global_backward_kind(mm)
        log = []
        hs = [mm.register_module_forward_pre_hook(lambda m, a: log.append("gpre")),
              mm.register_module_forward_hook(lambda m, a, o: log.append("gpost")),
              mm.register_module_full_backward_hook(lambda m, gi, go: log.append("gbwd"))]
        try:
            m = _lin(lib)
            m.register_forward_pre_hook(lambda *a: log.append("pre"))
            m.register_forward_hook(lambda *a: log.append("post"))
            m.register_full_backward_hook(lambda *a: log.append("bwd"))
            x = lib.ones(1, 3, requires_grad=True)
            m(x).sum().backward()
        finally:
            for h in hs:
                h.remove()
            _forget_global_backward_kind(mm)
        m(x)
        return log
    check(s)


def test_full_backward_hook_sees_and_replaces_grad_input():
    def s(lib):
        m = _lin(lib)
        seen = []

        def hook(mod, gin, gout):
            seen.append((gin, gout))
            return (gin[0] * 3,)
        m.register_full_backward_hook(hook)
        x = lib.arange(6.0).reshape(2, 3).requires_grad_()
        (m(x) ** 2).sum().backward()
        return seen, x.grad, m.weight.grad
    check(s)


def test_full_backward_hook_input_without_grad_gives_none():
    def s(lib):
        m = _lin(lib)
        seen = []
        m.register_full_backward_hook(lambda mod, gin, gout: seen.append(gin))
        m(lib.ones(2, 3)).sum().backward()
        return seen, m.bias.grad
    check(s)


def test_full_backward_pre_hook_replaces_grad_output():
    def s(lib):
        m = _lin(lib)
        m.register_full_backward_pre_hook(lambda mod, gout: (gout[0] * 0 + 1,))
        m.register_full_backward_pre_hook(lambda mod, gout: (gout[0] * 5,), prepend=True)
        x = lib.ones(2, 3, requires_grad=True)
        (m(x) * 7).sum().backward()
        return x.grad, m.weight.grad
    check(s)


def test_full_backward_hook_output_modified_in_place_raises():
    def s(lib):
        m = lib.nn.Identity()
        m.register_full_backward_hook(lambda *a: None)
        x = lib.ones(3, requires_grad=True)
        y = m(x)
        y.mul_(2)
        return y
    check(s)


def test_full_backward_hook_on_module_with_input_modified_in_place_raises():
    def s(lib):
        class AddOne(lib.nn.Module):
            def forward(self, x):
                return x.add_(1)
        m = AddOne()
        m.register_full_backward_hook(lambda *a: None)
        x = lib.ones(3, requires_grad=True).clone()
        return m(x)
    check(s)


def test_full_backward_hook_with_tuple_outputs_and_kwargs_inputs():
    def s(lib):
        class Two(lib.nn.Module):
            def forward(self, a, b):
                return a * 2, a * b
        m, seen = Two(), []
        m.register_full_backward_hook(lambda mod, gin, gout: seen.append((gin, gout)))
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        u, v = m(a, b)
        u.sum().backward()
        return seen, a.grad, b.grad
    check(s)


def test_mixing_old_and_full_backward_hooks_raises():
    def s(lib):
        m = _lin(lib)
        m.register_full_backward_hook(lambda *a: None)
        m.register_backward_hook(lambda *a: None)
        m(lib.ones(1, 3, requires_grad=True)).sum().backward()
    check(s)


def test_state_dict_pre_and_post_hooks():
    def s(lib):
        m = lib.nn.Sequential(_lin(lib))
        log = []
        m[0].register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(prefix))

        def post(mod, sd, prefix, local_metadata):
            sd[prefix + "extra"] = lib.zeros(1)
        m[0].register_state_dict_post_hook(post)
        sd = m.state_dict(prefix="top.")
        return log, list(sd)
    check(s)


def test_load_state_dict_pre_and_post_hooks():
    def s(lib):
        m = _lin(lib)
        log = []

        def pre(mod, sd, prefix, local_metadata, strict, missing, unexpected, errors):
            log.append(sorted(sd))
            sd[prefix + "bias"] = sd.pop(prefix + "b")
        m.register_load_state_dict_pre_hook(pre)

        def post(mod, keys):
            log.append((list(keys.missing_keys), list(keys.unexpected_keys)))
            keys.unexpected_keys.clear()
        m.register_load_state_dict_post_hook(post)
        res = m.load_state_dict({"weight": lib.ones(2, 3), "b": lib.ones(2), "junk": lib.ones(1)})
        return log, list(res.unexpected_keys), m.bias
    check(s)


def test_register_module_buffer_and_parameter_global_hooks():
    def s(lib):
        mm = lib.nn.modules.module
        log = []
        hs = [mm.register_module_module_registration_hook(lambda m, n, v: log.append(("mod", n))),
              mm.register_module_parameter_registration_hook(lambda m, n, v: log.append(("p", n))),
              mm.register_module_buffer_registration_hook(lambda m, n, v: log.append(("b", n)))]
        try:
            m = lib.nn.Module()
            m.sub = lib.nn.Identity()
            m.w = lib.nn.Parameter(lib.ones(1))
            m.register_buffer("buf", lib.zeros(1))
        finally:
            for h in hs:
                h.remove()
        return log
    check(s)


# ---- parametrizations ----

def _sym(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)
    return Symmetric()


def test_parametrization_forward_state_dict_and_gradient():
    def s(lib):
        P = lib.nn.utils.parametrize
        m = lib.nn.Linear(3, 3)
        P.register_parametrization(m, "weight", _sym(lib))
        w = m.weight
        m(lib.ones(2, 3)).sum().backward()
        orig = m.parametrizations.weight.original
        return (w, list(m.state_dict()), orig.grad, P.is_parametrized(m),
                P.is_parametrized(m, "bias"), type(m).__name__,
                P.type_before_parametrizations(m).__name__)
    check(s)


def test_parametrization_right_inverse_on_assignment():
    def s(lib):
        P = lib.nn.utils.parametrize

        class Double(lib.nn.Module):
            def forward(self, x):
                return x * 2

            def right_inverse(self, x):
                return x / 2
        m = lib.nn.Linear(2, 2)
        P.register_parametrization(m, "weight", Double())
        m.weight = lib.ones(2, 2) * 6
        return m.weight, m.parametrizations.weight.original
    check(s)


def test_parametrization_chain_and_cached():
    def s(lib):
        P = lib.nn.utils.parametrize
        calls = []

        class Count(lib.nn.Module):
            def forward(self, x):
                calls.append(1)
                return x + 1
        m = lib.nn.Linear(2, 2)
        P.register_parametrization(m, "weight", Count())
        P.register_parametrization(m, "weight", _sym(lib))
        with P.cached():
            a = m.weight
            b = m.weight
        c = m.weight
        return a, len(calls), a is b, c, len(m.parametrizations.weight)
    check(s)


def test_parametrization_unsafe_changes_shape_and_safe_one_refuses():
    def s(lib):
        P = lib.nn.utils.parametrize

        class Flat(lib.nn.Module):
            def forward(self, x):
                return x.flatten()
        out = []
        m = lib.nn.Linear(2, 2)
        try:
            P.register_parametrization(m, "weight", Flat())
        except Exception as e:      # noqa: BLE001
            out.append(type(e).__name__)
        out.append(P.is_parametrized(m))
        P.register_parametrization(m, "weight", Flat(), unsafe=True)
        out.append(m.weight.shape)
        return out
    check(s)


def test_remove_parametrizations_leave_parametrized_or_not():
    def s(lib):
        P = lib.nn.utils.parametrize
        out = []
        for leave in (True, False):
            m = lib.nn.Linear(3, 3)
            orig = m.weight.detach().clone()
            P.register_parametrization(m, "weight", _sym(lib))
            P.remove_parametrizations(m, "weight", leave_parametrized=leave)
            out += [m.weight, type(m.weight).__name__, type(m).__name__,
                    (m.weight - orig).abs().sum(), hasattr(m, "parametrizations")]
        try:
            P.remove_parametrizations(m, "weight")
        except Exception as e:      # noqa: BLE001
            out.append(type(e).__name__)
        return out
    check(s)


def test_parametrization_right_inverse_with_several_originals():
    def s(lib):
        P = lib.nn.utils.parametrize

        class Sum(lib.nn.Module):
            def forward(self, a, b):
                return a + b

            def right_inverse(self, w):
                return w * 0.25, w * 0.75
        m = lib.nn.Linear(2, 2)
        P.register_parametrization(m, "weight", Sum())
        p = m.parametrizations.weight
        return m.weight, p.original0, p.original1, list(m.state_dict())
    check(s)


def test_orthogonal_parametrization_maps():
    def s(lib):
        out = []
        for omap in ("matrix_exp", "cayley", "householder"):
            lib.manual_seed(1)
            m = lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(4, 3), orthogonal_map=omap)
            w = m.weight
            out += [w, w @ w.T, list(m.state_dict())]
        return out
    check(s, atol=1e-5)


def test_spectral_norm_parametrization_power_iterations():
    def s(lib):
        m = lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(5, 4), n_power_iterations=3)
        w1 = m.weight
        m.eval()
        w2 = m.weight
        return w1, w2, list(m.state_dict()), m.parametrizations.weight[0]._u
    check(s, atol=1e-5)


def test_weight_norm_parametrization_originals_and_grads():
    def s(lib):
        m = lib.nn.utils.parametrizations.weight_norm(lib.nn.Linear(3, 2), dim=1)
        p = m.parametrizations.weight
        m(lib.ones(4, 3)).pow(2).sum().backward()
        return m.weight, p.original0, p.original1, p.original0.grad, p.original1.grad
    check(s)
