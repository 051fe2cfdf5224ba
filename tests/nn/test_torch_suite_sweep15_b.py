"""Sweep 15 (b): behaviour checked by PyTorch's test/test_nn.py (TestNN), rewritten as
side-by-side runs with torch (tests/nn/oracle_sweep15_b.py): module registration rules and
their errors, Module.to's argument parsing, state_dict extra state, containers, the
weighted mse_loss, ctc_loss's length checks and zero lengths, p < 1 norms at zero, pixel
shuffle layouts."""
from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from oracle_sweep15_b import check, compiled_like_eager, raised, randn  # noqa: E402


# ---- registration ----------

def test_buffer_assignment_over_plain_attribute_raises_key_error():
    def s(T):
        m = T.nn.Module()
        m.attribute_name = 5
        out = [raised(lambda: m.register_buffer("attribute_name", T.rand(5))),
               raised(lambda: setattr(m, "attribute_name", T.nn.Buffer(T.rand(5))))]
        return out + [m.attribute_name, len(list(m.buffers()))]
    check(s)


def test_buffer_assignment_with_register_buffer_override_lacking_persistent():
    def s(T):
        class MyBad(T.nn.Linear):
            def __init__(self):
                super().__init__(2, 2)
                self.bar = T.nn.Buffer(T.rand(2, 2))

            def register_buffer(self, name, value):
                super().register_buffer(name, value, True)
        m = MyBad()
        err = raised(lambda: setattr(m, "baz", T.nn.Buffer(T.rand(2), persistent=False)))
        return [err, sorted(m.state_dict().keys()), "baz" in m._buffers]
    check(s)


def test_register_buffer_and_parameter_name_errors():
    def s(T):
        m = T.nn.Module()
        out = []
        for name in (1, None, "", "a.b"):
            out.append(raised(lambda: m.register_buffer(name, T.rand(5))))
            out.append(raised(lambda: m.register_parameter(name, T.nn.Parameter(T.rand(2)))))
            out.append(raised(lambda: m.add_module(name, T.nn.ReLU())))
        m.register_parameter("p", T.nn.Parameter(T.rand(2)))
        out.append(raised(lambda: m.register_buffer("p", T.rand(5))))
        m.add_module("sub", T.nn.ReLU())
        out.append(raised(lambda: m.register_parameter("sub", T.nn.Parameter(T.rand(2)))))
        out.append(raised(lambda: m.register_buffer("x", 5)))
        out.append(raised(lambda: m.add_module("x", "not a module")))
        return out
    check(s)


def test_buffer_persistence_through_reassignment():
    def s(T):
        m = T.nn.Module()
        m.buf = T.nn.Buffer(T.rand(5), persistent=False)
        out = [(len(list(m.buffers())), len(m.state_dict()))]
        for value in (T.nn.Buffer(T.rand(5)), T.nn.Buffer(T.rand(5), persistent=False), None,
                      T.rand(5), T.nn.Parameter(T.rand(5))):
            m.buf = value
            out.append((len(list(m.buffers())), len(m.state_dict())))
        return out
    check(s)


# ---- Module.to ----------

_TO_CALLS = [
    lambda T, m: m.to(T.device("cpu"), True),
    lambda T, m: m.to(None, True),
    lambda T, m: m.to("cpu", copy=True),
    lambda T, m: m.to(copy=False),
    lambda T, m: m.to(T.float64, False, False),
    lambda T, m: m.to(foo=1),
    lambda T, m: m.to(T.float64, True),
    lambda T, m: m.to(T.device("cpu"), T.float64, True),
    lambda T, m: m.to(T.float64, non_blocking=True),
    lambda T, m: m.to(device="cpu", dtype=T.float64, non_blocking=True),
    lambda T, m: m.to(T.zeros(1, dtype=T.float64), True),
    lambda T, m: m.to(T.device("cpu"), T.device("cpu")),
    lambda T, m: m.to(T.float64, T.device("cpu")),
    lambda T, m: m.to(dtype="float"),
    lambda T, m: m.to(memory_format=3),
    lambda T, m: m.to(T.float64, device="cpu"),
    lambda T, m: m.to(tensor=T.zeros(1, dtype=T.float64)),
    lambda T, m: m.to(T.float16, memory_format=T.contiguous_format),
    lambda T, m: m.to(T.int64),
    lambda T, m: m.to([]),
]


@pytest.mark.parametrize("i", range(len(_TO_CALLS)))
def test_module_to_argument_parsing(i):
    def s(T):
        m = T.nn.Linear(2, 2)
        err = raised(lambda: _TO_CALLS[i](T, m))
        return [err, str(m.weight.dtype)]
    check(s)


# ---- state_dict ----------

def test_extra_state_without_set_extra_state_is_unexpected():
    def s(T):
        class GetOnly(T.nn.Module):
            def get_extra_state(self):
                return {"foo": 5}

        class SetOnly(T.nn.Module):
            def set_extra_state(self, state):
                pass
        out = [list(GetOnly().state_dict().keys()),
               raised(lambda: GetOnly().load_state_dict(GetOnly().state_dict())),
               raised(lambda: SetOnly().load_state_dict(SetOnly().state_dict()))]
        keys = GetOnly().load_state_dict({"_extra_state": 1}, strict=False)
        return out + [list(keys.missing_keys), list(keys.unexpected_keys)]
    check(s)


def test_extra_state_round_trip_in_submodules():
    def s(T):
        class Sub(T.nn.Module):
            def __init__(self, foo):
                super().__init__()
                self.foo = foo

            def get_extra_state(self):
                return {"foo": self.foo}

            def set_extra_state(self, state):
                self.foo = state["foo"]

        class Top(T.nn.Module):
            def __init__(self, foo):
                super().__init__()
                self.sub = Sub(foo)
                self.lin = T.nn.Linear(1, 1)
        a, b = Top(3), Top(5)
        b.load_state_dict(a.state_dict())
        return [list(a.state_dict().keys()), b.sub.foo]
    check(s)


# ---- containers ----------

def test_sequential_indexing_slicing_and_editing():
    def s(T):
        ls = [T.nn.Linear(i + 1, i + 2) for i in range(4)]
        n = T.nn.Sequential(*ls)
        out = [n[T.tensor(3)] is ls[3], [m is x for m, x in zip(n[::-1], ls[::-1])]]
        n2 = T.nn.Sequential(OrderedDict([("a", ls[0]), ("b", ls[1]), ("c", ls[2])]))
        n2[0] = ls[3]
        n2[-1] = ls[3]
        out.append((n2.a is ls[3], n2.c is ls[3], list(n2._modules)))
        del n[1::2]
        out.append(list(n._modules))
        n3 = T.nn.Sequential(*ls[:3])
        n3.insert(-2, ls[3])
        out.append(([ls.index(m) for m in n3], list(n3._modules)))
        out += [raised(lambda: n3.insert(-6, ls[0])), raised(lambda: n3.insert(1, [ls[0]]))]
        out += [len(n3 * 2), len(2 * n3), raised(lambda: n3 * 0), raised(lambda: n3 * 1.5),
                raised(lambda: n3 + T.nn.ReLU())]
        return out
    check(s)


def test_module_list_and_dict_operations_and_errors():
    def s(T):
        ml = T.nn.ModuleList([T.nn.ReLU(), T.nn.Linear(5, 5)])
        ml += [T.nn.Tanh()]
        ml = ml + T.nn.ModuleList([T.nn.GELU()])
        ml.insert(1, T.nn.Linear(3, 2))
        ml[T.tensor(2, dtype=T.int32)] = T.nn.Sigmoid()
        del ml[1::2]
        out = [[type(m).__name__ for m in ml], list(ml._modules)]
        out += [raised(lambda: ml.__iadd__(T.nn.ReLU())), raised(lambda: ml.extend(T.nn.ReLU())),
                raised(lambda: ml()), raised(lambda: ml[10]), type(ml.pop(1)).__name__]
        md = T.nn.ModuleDict({"act": T.nn.ReLU(), "fc": T.nn.Linear(5, 5)})
        md.update([("fc2", T.nn.Linear(5, 5)), ("act", T.nn.Sigmoid())])
        out.append([(k, type(v).__name__) for k, v in md.items()])
        out += [raised(lambda: md.update(T.nn.ReLU())), raised(lambda: md.update([T.nn.ReLU()])),
                raised(lambda: md.update([[T.nn.ReLU()]])),
                raised(lambda: md.__setitem__(1, T.nn.ReLU())), raised(lambda: md())]
        return out
    check(s)


def test_parameter_list_and_dict_conversions():
    def s(T):
        pl = T.nn.ParameterList([T.nn.Parameter(T.zeros(2))])
        pl.append(T.rand(2, 2))
        pl.extend([T.rand(2), "foo"])
        pl += ["bar", T.rand(3)]
        out = [[type(p).__name__ for p in pl], [n for n, _ in pl.named_parameters()],
               raised(lambda: pl.__iadd__(T.nn.Parameter(T.zeros(1)))), repr(pl[:2])]
        pd = T.nn.ParameterDict({"a": T.nn.Parameter(T.zeros(2))})
        pd["t"] = T.rand(2)
        pd.update({"u": T.rand(2), "foo": "bar"})
        out += [[(k, type(v).__name__) for k, v in pd.items()], list(reversed(pd)),
                raised(lambda: pd.update(1)), raised(lambda: pd.update([1])),
                raised(lambda: pd.update(T.nn.Parameter(T.zeros(2)))), pd.setdefault("n"),
                list((T.nn.ParameterDict({"q": T.nn.Parameter(T.zeros(1))}) | pd).keys())]
        return out
    check(s)
