"""Sweep 15 (g7): parametrize's errors and the state they leave, parametrized buffers,
nested and many-to-one parametrizations, transfer_parametrizations_and_params, deepcopy and
pickling of parametrized modules, spectral_norm's training / eval behaviour and state_dict
round trips, weight_norm (hook and parametrization forms), checked side by side with torch
(tests/nn/oracle_sweep15_g.py) after the topics of PyTorch's test/nn/test_parametrization.py."""
import copy
import pickle

import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
import oracle_sweep15_g as o  # noqa: E402
from oracle_sweep15_g import check  # noqa: E402


def _caught(f):
    try:
        return f()
    except Exception as e:      # noqa: BLE001 (compared with torch's)
        return type(e).__name__, str(e).split("\n")[0][:70]


def _mods(lib):
    nn = lib.nn

    class Ident(nn.Module):
        def forward(self, x):
            return x

    class ToBool(nn.Module):
        def forward(self, x):
            return x.bool()

    class Shrink(nn.Module):
        def forward(self, x):
            return x[:-1]

    class Pair(nn.Module):
        def forward(self, x):
            return x, x

    class Two(nn.Module):
        def forward(self, x):
            return 2

    class InvNone(Ident):
        def right_inverse(self, x):
            return None

    class InvSeqNone(nn.Module):
        def forward(self, x, y):
            return x

        def right_inverse(self, x):
            return None, x

    class InvBool(Ident):
        def right_inverse(self, x):
            return x.bool()

    class InvShrink(Ident):
        def right_inverse(self, x):
            return x[:-1]

    class InvPair(Ident):
        def right_inverse(self, x):
            return x, x

    class ThreeIn(nn.Module):
        def forward(self, x, y, z):
            return x + y + z

        def right_inverse(self, w):
            return w, lib.zeros_like(w)

    class MultiBool(nn.Module):
        def forward(self, x, y):
            return (x + y).bool()

        def right_inverse(self, w):
            return w, w + 1
    return dict(Ident=Ident, ToBool=ToBool, Shrink=Shrink, Pair=Pair, Two=Two, InvNone=InvNone,
                InvSeqNone=InvSeqNone, InvBool=InvBool, InvShrink=InvShrink, InvPair=InvPair,
                ThreeIn=ThreeIn, MultiBool=MultiBool)


def test_register_errors_on_unparametrized_tensor_leave_it_alone():
    def s(lib):
        P = lib.nn.utils.parametrize
        M = _mods(lib)
        m = lib.nn.Linear(3, 4)
        w0 = m.weight.detach().clone()
        out = [_caught(lambda: P.register_parametrization(m, "foo", M["Ident"]())),
               _caught(lambda: P.remove_parametrizations(m, "bias"))]
        for name in ("ThreeIn", "InvNone", "InvSeqNone", "InvBool", "Two", "ToBool", "Shrink",
                     "MultiBool"):
            out.append(_caught(lambda: P.register_parametrization(m, "weight", M[name]())))
            out.append(P.is_parametrized(m))
        return out + [m.weight, type(m).__name__, (m.weight - w0).abs().sum()]
    check(s)


def test_register_errors_on_parametrized_tensor_keep_the_first_one():
    def s(lib):
        P = lib.nn.utils.parametrize
        M = _mods(lib)
        m = lib.nn.Linear(3, 4)
        P.register_parametrization(m, "weight", M["Ident"]())
        out = []
        for name in ("Pair", "ToBool", "Shrink", "InvPair", "InvBool", "InvShrink"):
            out.append(_caught(lambda: P.register_parametrization(m, "weight", M[name]())))
            out.append(len(m.parametrizations.weight))
        return out
    check(s)


def test_remove_many_to_one_needs_leave_parametrized():
    def s(lib):
        P = lib.nn.utils.parametrize

        class Sum(lib.nn.Module):
            def forward(self, x, y):
                return x + y

            def right_inverse(self, z):
                return z * 0.5, z * 0.5
        m = lib.nn.Linear(2, 2)
        w0 = m.weight.detach().clone()
        P.register_parametrization(m, "weight", Sum())
        out = [_caught(lambda: P.remove_parametrizations(m, "weight", leave_parametrized=False)),
               P.is_parametrized(m)]
        P.remove_parametrizations(m, "weight")
        return out + [m.weight, (m.weight - w0).abs().sum(), list(m._parameters)]
    check(s)


def test_single_element_sequence_right_inverse_and_no_grad_originals():
    def s(lib):
        P = lib.nn.utils.parametrize

        class Seq1(lib.nn.Module):
            def forward(self, x):
                return x

            def right_inverse(self, w):
                return (w,)

        class Split(lib.nn.Module):
            def right_inverse(self, x):
                return lib.split(x, x.shape[1] // 2)

            def forward(self, a, b):
                return lib.cat([a, b])
        m = lib.nn.Linear(2, 2)
        P.register_parametrization(m, "weight", Seq1())
        p = m.parametrizations.weight
        out = [hasattr(p, "original0"), hasattr(p, "original1"), hasattr(p, "original"), m.weight]
        m2 = lib.nn.Linear(4, 4)
        m2.weight.requires_grad = False
        P.register_parametrization(m2, "weight", Split())
        q = m2.parametrizations.weight
        return out + [m2.weight.requires_grad, q.original0.requires_grad, q.original0.shape,
                      m2.weight]
    check(s)


def test_parametrized_buffer_register_and_remove():
    def s(lib):
        P = lib.nn.utils.parametrize

        class FirstZero(lib.nn.Module):
            def forward(self, x):
                return lib.cat([x.new_zeros(1), x[1:]])
        m = lib.nn.Linear(4, 4)
        del m.bias
        m.bias = lib.nn.Buffer(lib.ones(4))
        P.register_parametrization(m, "bias", FirstZero())
        out = [m.bias, len(list(m.parameters())), list(m.state_dict()),
               type(m.parametrizations.bias.original).__name__]
        P.remove_parametrizations(m, "bias")
        return out + [m.bias, list(m._buffers), len(list(m.parameters()))]
    check(s)


def test_nested_parametrization_and_training_mode_on_registration():
    def s(lib):
        P = lib.nn.utils.parametrize
        M = _mods(lib)

        class Skew(lib.nn.Module):
            def forward(self, x):
                x = x.tril(-1)
                return x - x.T
        m = lib.nn.Linear(3, 3)
        P.register_parametrization(m, "weight", Skew())
        pm = m.parametrizations.weight
        P.register_parametrization(pm, "original", Skew())
        out = [m.weight, pm.original, type(pm).__name__, P.is_parametrized(pm, "original")]
        P.remove_parametrizations(pm, "original", leave_parametrized=False)
        out += [type(pm).__name__, hasattr(pm, "parametrizations")]
        m2 = lib.nn.Linear(2, 2).eval()
        P.register_parametrization(m2, "weight", M["Ident"]())
        out.append(m2.parametrizations.weight[0].training)
        m2.train()
        P.register_parametrization(m2, "weight", M["Ident"]().eval())
        return out + [[p.training for p in m2.parametrizations.weight]]
    check(s)


def test_transfer_parametrizations_and_params():
    def s(lib):
        P = lib.nn.utils.parametrize

        class Double(lib.nn.Module):
            def forward(self, x):
                return x * 2

            def right_inverse(self, x):
                return x / 2

        class AddOne(lib.nn.Module):
            def forward(self, x):
                return x + 1
        a = lib.nn.Linear(3, 3)
        P.register_parametrization(a, "weight", AddOne())
        P.register_parametrization(a, "weight", Double())
        P.register_parametrization(a, "bias", Double())
        b = lib.nn.Linear(3, 3)
        P.transfer_parametrizations_and_params(a, b, "weight")
        out = [b.weight, b.parametrizations.weight.original, "bias" in b.parametrizations,
               b.parametrizations.weight.original is a.parametrizations.weight.original]
        a.extra = lib.nn.Parameter(lib.ones(2, 2))
        P.register_parametrization(a, "extra", Double())
        P.transfer_parametrizations_and_params(a, b)
        with P.cached():
            same = b.weight is b.weight
            distinct = a.weight is not b.weight
        return out + [b.extra, b.bias, same, distinct, sorted(b.state_dict())]
    check(s)


def test_deepcopy_and_pickle_of_parametrized_modules():
    def s(lib):
        P = lib.nn.utils.parametrize

        class AddOne(lib.nn.Module):
            def forward(self, x):
                return x + 1
        m = lib.nn.Linear(2, 2)
        m.attr = [1, 2]
        P.register_parametrization(m, "weight", AddOne())
        P.register_parametrization(m, "bias", AddOne())
        c = copy.deepcopy(m)
        out = [c.weight, c.parametrizations.weight.original is m.parametrizations.weight.original,
               c.attr == m.attr, c.attr is m.attr, type(c).__name__ == type(m).__name__,
               P.is_parametrized(c, "bias")]
        out.append(_caught(lambda: pickle.dumps(m)))
        return out
    check(s)


def test_spectral_norm_parametrization_train_eval_and_remove():
    def s(lib):
        sn = lib.nn.utils.parametrizations.spectral_norm
        P = lib.nn.utils.parametrize
        m = sn(lib.nn.Linear(3, 4))
        snm = m.parametrizations.weight[0]
        x = lib.randn(2, 3)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
        out = [m(x), snm._u, snm._v, sorted(snm._buffers), m.parametrizations.weight.original]
        m(x)
        last = m(x)
        m.eval()
        out += [m(x) - last, m(x), snm._u]
        P.remove_parametrizations(m, "weight")
        out += [m(x), list(m._parameters)]
        m2 = sn(sn(sn(lib.nn.Linear(2, 3)), "weight"), "bias")
        P.remove_parametrizations(m2, "bias")
        return out + ["bias" in m2._parameters, len(m2.parametrizations.weight), m2.weight]
    check(s, atol=1e-5)


def test_spectral_norm_state_dict_round_trip_and_dims():
    def s(lib):
        sn = lib.nn.utils.parametrizations.spectral_norm
        a = sn(lib.nn.Conv2d(2, 3, 2))
        b = sn(lib.nn.ConvTranspose2d(2, 3, 2))
        x = lib.randn(1, 2, 3, 3)
        a(x)
        b(x)
        sd = a.state_dict()
        c = sn(lib.nn.Conv2d(2, 3, 2))
        c.load_state_dict(sd)
        c.eval()
        a.eval()
        return sorted(sd), c(x), a(x), b.parametrizations.weight[0]._u.shape, b(x)
    check(s, atol=1e-5)


def test_old_style_spectral_norm_and_weight_norm_hooks():
    def s(lib):
        U = lib.nn.utils
        m = U.spectral_norm(lib.nn.Linear(3, 2), n_power_iterations=2)
        x = lib.randn(4, 3)
        y = m(x)
        y.sum().backward()
        out = [y, sorted(m.state_dict()), m.weight_orig.grad, m.weight_u]
        U.remove_spectral_norm(m)
        out.append(sorted(m.state_dict()))
        w = U.weight_norm(lib.nn.Linear(3, 2), dim=None)
        y = w(x)
        y.sum().backward()
        out += [y, sorted(w.state_dict()), w.weight_g, w.weight_g.grad, w.weight_v.grad]
        U.remove_weight_norm(w)
        out += [w.weight, sorted(w.state_dict()), _caught(lambda: U.remove_weight_norm(w))]
        return out
    check(s, atol=1e-5)


def test_weight_norm_parametrization_dims_and_state_dict_from_hook_form():
    def s(lib):
        U = lib.nn.utils
        out = []
        for dim in (0, 1, -1, None):
            m = U.parametrizations.weight_norm(lib.nn.Conv1d(2, 3, 2), dim=dim)
            p = m.parametrizations.weight
            out += [p.original0.shape, m.weight]
        old = U.weight_norm(lib.nn.Linear(3, 2))
        new = U.parametrizations.weight_norm(lib.nn.Linear(3, 2))
        new.load_state_dict(old.state_dict())
        return out + [sorted(new.state_dict()), new.weight, old.weight]
    check(s, atol=1e-5)


@pytest.mark.slow
def test_parametrized_training_step_eager_and_compiled():
    def run(lib, compiled):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
        lib.nn.utils.parametrizations.weight_norm(m[0])
        lib.nn.utils.parametrizations.orthogonal(m[2])
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        f = llgrad.compile(step) if compiled else step
        x = lib.arange(6.0).reshape(2, 3) / 6
        return [f(x) for _ in range(3)] + list(m.parameters())
    want = o._norm(run(torch, False))
    eager = o._norm(run(llgrad, False))
    comp = o._norm(run(llgrad, True))
    o._same(eager, want, 1e-4, 1e-5, ())
    o._same(comp, eager, 1e-4, 1e-5, ())
