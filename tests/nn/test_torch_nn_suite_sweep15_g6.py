"""Sweep 15 (g6): more module-hook behaviour (backward hooks' returned-value errors, inputs
that need no gradient, non-tensor arguments and outputs, in-place use of hooked inputs and
outputs, the legacy register_backward_hook's warnings, private load_state_dict pre hooks,
hooks and pickling / garbage collection), checked side by side with torch
(tests/nn/oracle_sweep15_g.py) after the topics of PyTorch's test/nn/test_module_hooks.py."""
import gc
import pickle
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")

from oracle_sweep15_g import check  # noqa: E402


def _forget_global_backward_kind(mm):
    """torch remembers for the process whether a global backward hook was ever full (and
    refuses the other kind after it): forget it, so the test does not depend on others."""
    if hasattr(mm, "_global_is_full_backward_hook"):
        mm._global_is_full_backward_hook = None


def _caught(f):
    try:
        return f()
    except Exception as e:      # noqa: BLE001 (compared with torch's)
        return type(e).__name__, str(e).split("\n")[0]


def test_backward_hook_returning_wrong_number_of_grads_raises():
    def s(lib):
        x = lib.ones(2, 2, requires_grad=True)
        out = []
        for reg, hook in (("register_backward_hook", lambda mod, gi, go: gi[:-1]),
                          ("register_backward_hook", lambda mod, gi, go: gi + (lib.ones(1),)),
                          ("register_full_backward_hook", lambda mod, gi, go: ()),
                          ("register_full_backward_pre_hook", lambda mod, go: ()),
                          ("register_full_backward_pre_hook",
                           lambda mod, go: go + (lib.ones(2),))):
            m = lib.nn.Sigmoid()
            with getattr(m, reg)(hook):
                out.append(_caught(lambda: m(x).sum().backward()))
            out.append(_caught(lambda: type(m.register_backward_hook(hook)).__name__))
        return out
    check(s)


def test_full_backward_hook_returning_grads_when_no_input_requires_grad():
    def s(lib):
        m = lib.nn.Linear(2, 3)
        x = lib.ones(1, 2)
        mode = ["none"]

        def hook(mod, gin, gout):
            return {"none": None, "same": gin, "bad": (x,)}[mode[0]]
        m.register_full_backward_hook(hook)
        out = []
        for mode[0] in ("none", "same", "bad"):
            m.zero_grad()
            out.append(_caught(lambda: m(x).sum().backward()))
            out.append(m.bias.grad)
        return out
    check(s)


def test_full_backward_hook_keeps_requires_grad_of_each_argument():
    def s(lib):
        seen = []

        class Three(lib.nn.Module):
            def forward(self, a, b, c):
                seen.append((a.requires_grad, b.requires_grad, c.requires_grad))
                return a.sum() + b.sum() + c.sum()
        m = Three()
        x = lib.ones(2, requires_grad=True)
        m(x, x.detach(), x)
        m.register_full_backward_hook(lambda mod, gi, go: seen.append([g is None for g in gi]))
        m(x, x.detach(), x).backward()
        loss = lib.nn.L1Loss()
        loss.register_full_backward_hook(lambda mod, gi, go: seen.append([g is None for g in gi]))
        loss(x.detach(), x).backward()
        return seen, x.grad
    check(s)


def test_full_backward_hook_with_non_tensor_argument_and_output():
    def s(lib):
        seen = []

        class M(lib.nn.Module):
            def forward(self, flag, t):
                return t.clone() * 2, flag
        m = M()
        m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
        x = lib.arange(2.0, requires_grad=True)
        y, flag = m(True, x)
        y.sum().backward()
        return seen, flag, x.grad
    check(s)


def test_backward_hooks_on_dict_output_warn_and_do_not_run():
    def s(lib):
        log = []

        class D(lib.nn.Module):
            def forward(self, d):
                return {"x": d["x"].softmax(0)}
        m = D()
        m.register_forward_pre_hook(lambda *a: log.append("pre"))
        m.register_forward_hook(lambda *a: log.append("fwd"))
        m.register_full_backward_pre_hook(lambda *a: log.append("bpre"))
        m.register_full_backward_hook(lambda *a: log.append("bwd"))
        x = lib.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            m({"x": x})["x"].sum().backward()
        return log, [str(v.message).split(".")[0] for v in w], x.grad
    check(s)


def test_hooked_input_modified_in_place_and_view_reuse_errors():
    def s(lib):
        class M(lib.nn.Module):
            def forward(self, inp, inplace):
                self.inp = inp
                if inplace:
                    inp += 1
                return inp.clone()
        out = []
        for reg, hook in (("register_full_backward_hook", lambda *a: out.append("h")),
                          ("register_full_backward_pre_hook", lambda *a: out.append("p"))):
            m = M()
            h = getattr(m, reg)(hook)
            x = lib.rand(3, requires_grad=True)
            m(x, False).sum().backward()
            out.append(_caught(lambda: m(x.clone(), True)))
            local = x.clone()
            m(local, False)
            local[0] *= 1
            out.append(_caught(lambda: m.inp + 2))
            y = m(x, False)
            out.append(_caught(lambda: y.add_(1)))
            h.remove()
        return out
    check(s)


def test_legacy_backward_hook_warnings_for_unusual_modules():
    def s(lib):
        a = lib.rand(2, requires_grad=True)
        b = lib.rand(2, requires_grad=True)

        class ListIn(lib.nn.Module):
            def forward(self, pair):
                return pair[0].clone(), pair[1].clone()

        class ListOut(lib.nn.Module):
            def forward(self, u, v):
                return [u.clone(), v.clone()]

        class TwoNodes(lib.nn.Module):
            def forward(self, u, v):
                return u.clone(), v.clone()

        class Chain(lib.nn.Module):
            def forward(self, u):
                return u.clone().clone()
        out = []
        for m, args in ((ListIn(), ([a, b],)), (ListOut(), (a, b)), (TwoNodes(), (a, b)),
                        (Chain(), (a,))):
            m.register_backward_hook(lambda *x: None)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                m(*args)
            out.append([str(v.message).split(".")[0][:60] for v in w])
        return out
    check(s)


def test_backward_hook_sizes_with_several_ops_and_pre_hook_interaction():
    def s(lib):
        seen = []

        class M(lib.nn.Module):
            def forward(self, p, q):
                t = p.sum() * q + q.sum() * p.sum()
                return t.sum().view(1).expand(4).contiguous()
        m = M()
        m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 0.5,))
        m.register_full_backward_hook(
            lambda mod, gi, go: seen.append(([g.shape for g in gi], go[0])))
        p = lib.ones(2, 2, requires_grad=True)
        q = lib.ones(3, requires_grad=True)
        m(p, q).sum().backward()
        return seen, p.grad, q.grad
    check(s)


def test_hooks_run_once_per_backward_with_retain_graph():
    def s(lib):
        m = lib.nn.Sigmoid()
        count = []
        m.register_full_backward_hook(lambda mod, gi, go: count.append(go[0].sum()))
        mm = lib.nn.modules.module
        _forget_global_backward_kind(mm)
        h = mm.register_module_backward_hook(lambda mod, gi, go: count.append("global"))
        try:
            x = lib.ones(2, 2, requires_grad=True)
            y = m(x)
            y.backward(lib.ones(2, 2) * 2, retain_graph=True)
            y.backward(lib.ones(2, 2) * 3, retain_graph=True)
        finally:
            h.remove()
            _forget_global_backward_kind(mm)
        y.backward(lib.ones(2, 2))
        return count, x.grad
    check(s)


def test_private_load_state_dict_pre_hook_with_and_without_module():
    def s(lib):
        log = []
        sd = lib.nn.Linear(2, 2).state_dict()

        class Holder(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = lib.nn.Linear(2, 2)
        m = Holder()

        def plain(state_dict, prefix, meta, strict, missing, unexpected, errors):
            log.append(("plain", prefix, strict, sorted(state_dict)))

        def with_module(module, state_dict, prefix, meta, strict, missing, unexpected, errors):
            log.append(("module", module is m.inner, prefix))
        m.inner._register_load_state_dict_pre_hook(plain)
        m.inner._register_load_state_dict_pre_hook(with_module, True)
        m.load_state_dict({"inner." + k: v for k, v in sd.items()})
        return log, m.inner.weight
    check(s)


def test_post_hook_keys_make_strict_load_fail_and_clearing_them_lets_it_pass():
    def s(lib):
        inner = lib.nn.Linear(1, 1)
        wrapped = lib.nn.ModuleList([inner])

        def add(mod, keys):
            keys.missing_keys.append("foo")
            keys.unexpected_keys.append("bar")
        h = inner.register_load_state_dict_post_hook(add)
        r = wrapped.load_state_dict(wrapped.state_dict(), strict=False)
        out = [r.missing_keys, r.unexpected_keys,
               _caught(lambda: wrapped.load_state_dict(wrapped.state_dict()))]
        h.remove()

        def clear(mod, keys):
            keys.missing_keys.clear()
            keys.unexpected_keys.clear()
        inner.register_load_state_dict_post_hook(clear)
        sd = dict(wrapped.state_dict(), extra=lib.ones(1))
        r = wrapped.load_state_dict(sd)
        return out + [r.missing_keys, r.unexpected_keys]
    check(s)


def _pickle_hook(*args):
    return None


def test_hooks_hold_no_reference_to_the_module_and_pickle_with_it():
    def s(lib):
        gc.disable()
        try:
            m = lib.nn.Linear(2, 2)
            m._register_load_state_dict_pre_hook(_pickle_hook, True)
            m.register_forward_hook(_pickle_hook)
            m2 = pickle.loads(pickle.dumps(m))
            ref = weakref.ref(m)
            del m
            gone = ref() is None
        finally:
            gc.enable()
        return gone, len(m2._forward_hooks), m2(lib.ones(1, 2)).shape
    check(s)
