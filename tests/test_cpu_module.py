"""llgrad.cpu answers as torch.cpu does on this machine (the CPU is one device whose work is
done when a call returns), and torch.cpu.amp's deprecated classes warn as PyTorch's."""
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")


def test_the_device_answers_as_torch_cpu():
    for name in ("is_available", "is_initialized", "device_count", "current_device"):
        assert getattr(llgrad.cpu, name)() == getattr(torch.cpu, name)()
    llgrad.cpu.synchronize()
    llgrad.cpu.set_device("cpu")
    s = llgrad.cpu.current_stream()
    assert s is llgrad.cpu.current_stream() and s.query()
    e = llgrad.cpu.Event()
    e.record(s)
    assert e.query()
    with llgrad.cpu.stream(llgrad.cpu.Stream()) as t, llgrad.cpu.StreamContext(t):
        assert t.query()
    caps = llgrad.cpu.get_capabilities()
    assert caps["num_logical_cores"] == torch.cpu.get_capabilities()["num_logical_cores"]


def _messages(make):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        obj = make()
    return obj, [(x.category, str(x.message)) for x in w]


def test_the_deprecated_amp_classes_warn_as_torch():
    for name in ("autocast", "GradScaler"):
        got, said = _messages(lambda: getattr(llgrad.cpu.amp, name)())
        _, want = _messages(lambda: getattr(torch.cpu.amp, name)())
        assert said == [(c, m) for c, m in want]
    ac, _ = _messages(lambda: llgrad.cpu.amp.autocast(enabled=False))
    assert ac.fast_dtype is llgrad.bfloat16
    scaler, _ = _messages(lambda: llgrad.cpu.amp.GradScaler())
    assert scaler.is_enabled() and scaler.get_scale() == 65536.0
    m = llgrad.nn.Linear(3, 2)
    with ac:
        assert m(llgrad.ones(1, 3)).dtype is llgrad.float32
