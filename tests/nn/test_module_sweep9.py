"""Sweep 9: Module._apply, through which PyTorch's conversions (to, float / double / half,
type, cpu, to_empty) run, so that a subclass overriding it converts its own cached tensors;
against torch: the same script run with each library."""
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _text(x):
    return str(x).replace("torch", "llgrad")


def _conversions(lib):
    nn = lib.nn
    out = []

    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.cache = lib.ones(3)
            self.calls = 0

        def _apply(self, fn, recurse=True):
            self.calls += 1
            self.cache = fn(self.cache)
            return super()._apply(fn, recurse)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.rot = Rotary()
            self.bn = nn.BatchNorm1d(2)

    m = Outer()
    m.rot.lin.weight.grad = lib.ones(2, 2)
    w, g = m.rot.lin.weight, m.rot.lin.weight.grad
    m.double()
    out += [m.rot.cache.dtype, m.rot.calls, m.rot.lin.weight.dtype, m.rot.lin.weight.grad.dtype,
            w is m.rot.lin.weight, g is m.rot.lin.weight.grad, m.bn.num_batches_tracked.dtype]
    for convert in (lambda: m.float(), lambda: m.to(lib.float64), lambda: m.half(),
                    lambda: m.type(lib.float32), lambda: m.cpu(), lambda: m.to("cpu"),
                    lambda: m.to_empty(device="cpu"),
                    lambda: m.to(lib.float32, non_blocking=True)):
        assert convert() is m
        out += [m.rot.cache.dtype, m.rot.calls, m.bn.num_batches_tracked.dtype]
    m._apply(lambda t: lib.full_like(t, 2.0) if t.is_floating_point() else t)
    out += [m.rot.cache.tolist(), m.rot.lin.weight.tolist(), m.bn.running_var.tolist()]
    s = nn.Sequential(nn.Linear(1, 1))
    out += [s._apply(lambda t: t.double(), recurse=False) is s, s[0].weight.dtype]
    return out


def test_conversions_run_through_apply_as_torch():
    assert _text(_conversions(llgrad)) == _text(_conversions(torch))
