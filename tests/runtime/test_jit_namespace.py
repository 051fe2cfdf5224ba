"""llgrad.jit (torch.jit's names without TorchScript: scripted and traced objects run the
original Python code, share its parameters, save and load as pickled objects) and the
flag namespaces llgrad.accelerator and llgrad.backends, against torch's answers."""
import io
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.backends.cudnn
import llgrad.jit as jit

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class Net(llgrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = llgrad.nn.Linear(3, 2)
        self.bn = llgrad.nn.BatchNorm1d(2)

    def forward(self, x):
        return self.bn(self.l(x)).relu()


def double(x):
    return x * 2


def test_trace_and_script_behave_as_the_original():
    llgrad.manual_seed(0)
    m = Net().eval()
    x = llgrad.randn(4, 3)
    for wrapped, kind in ((jit.trace(m, x), "TopLevelTracedModule"),
                          (jit.trace(m, (x,)), "TopLevelTracedModule"),
                          (jit.trace_module(m, {"forward": x}), "TopLevelTracedModule"),
                          (jit.script(m), "RecursiveScriptModule")):
        assert type(wrapped).__name__ == kind and isinstance(wrapped, jit.ScriptModule)
        assert isinstance(wrapped, Net) and wrapped.original_name == "Net"
        np.testing.assert_array_equal(wrapped(x).detach().numpy(), m(x).detach().numpy())
        assert wrapped.l.weight is m.l.weight
        assert list(wrapped.state_dict()) == list(m.state_dict())
        with llgrad.no_grad():
            wrapped.l.weight.add_(1.0)              # (shared: the original sees it)
        np.testing.assert_array_equal(wrapped(x).detach().numpy(), m(x).detach().numpy())
    assert jit.script(jit.script(m)).l is m.l
    f = jit.script(double)
    assert isinstance(f, jit.ScriptFunction) and f.name == "double" and f.__name__ == "double"
    np.testing.assert_array_equal(f(x).numpy(), (x * 2).numpy())
    tf = jit.trace(double, (x,))
    np.testing.assert_array_equal(tf(x).numpy(), (x * 2).numpy())
    with pytest.raises(NotImplementedError, match="does not compile TorchScript"):
        jit.script(m).code
    with pytest.raises(NotImplementedError, match="does not compile TorchScript"):
        f.graph


def test_trace_state_dict_keys_and_sharing_as_torch():
    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(3, 2)
            self.bn = torch.nn.BatchNorm1d(2)

        def forward(self, x):
            return self.bn(self.l(x)).relu()
    tm, lm = TNet().eval(), Net().eval()
    tt = torch.jit.trace(tm, torch.ones(4, 3))
    lt = jit.trace(lm, llgrad.ones(4, 3))
    assert list(tt.state_dict()) == list(lt.state_dict())
    assert (tt.l.weight is tm.l.weight) == (lt.l.weight is lm.l.weight) is True


def test_is_tracing_only_during_the_trace_run():
    seen = []

    def f(x):
        seen.append(jit.is_tracing())
        return x + 1
    tf = jit.trace(f, llgrad.ones(2))
    tf(llgrad.ones(2))
    assert seen == [True, False]
    assert not jit.is_scripting() and not torch.jit.is_scripting()


def test_save_load_round_trip_and_extra_files(tmp_path):
    m = Net().eval()
    t = jit.trace(m, llgrad.ones(4, 3))
    buf = io.BytesIO()
    jit.save(t, buf, _extra_files={"meta.txt": b"hello"})
    buf.seek(0)
    extra = {"meta.txt": ""}
    loaded = jit.load(buf, _extra_files=extra)
    assert extra["meta.txt"] == b"hello"
    assert type(loaded).__name__ == "TopLevelTracedModule" and isinstance(loaded, Net)
    x = llgrad.randn(4, 3)
    np.testing.assert_array_equal(loaded(x).detach().numpy(), m(x).detach().numpy())
    path = tmp_path / "m.pt"
    jit.script(m).save(str(path))
    np.testing.assert_array_equal(jit.load(str(path))(x).detach().numpy(),
                                  m(x).detach().numpy())
    with pytest.raises(NotImplementedError, match="cannot be pickled"):
        jit.save(jit.script(lambda v: v), io.BytesIO())


def test_torchscript_archive_is_refused(tmp_path):
    path = tmp_path / "ts.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(path))
    with pytest.raises(NotImplementedError, match="TorchScript archive"):
        jit.load(str(path))


def test_freeze_errors_as_torch_and_decorators():
    m = Net()
    for lib_jit, mod in ((torch.jit, torch.nn.Linear(2, 2)), (jit, m)):
        with pytest.raises(RuntimeError, match="Freezing expects a ScriptModule"):
            lib_jit.freeze(mod)
        with pytest.raises(RuntimeError, match="only implemented for modules in eval mode"):
            lib_jit.freeze(lib_jit.script(mod.train()))
    frozen = jit.freeze(jit.script(m.eval()))
    x = llgrad.randn(2, 3)
    np.testing.assert_array_equal(frozen(x).detach().numpy(), m(x).detach().numpy())
    assert jit.ignore(double) is double and jit.ignore(drop=True)(double) is double
    assert jit.unused(double) is double and jit.export(double) is double
    assert jit.Final is torch.jit.Final
    assert jit.annotate(list, [1]) == [1]
    assert jit.wait(jit.fork(double, 3)) == 6
    assert jit.isinstance([1, 2], list[int]) and not jit.isinstance([1, "a"], list[int])
    assert set(torch.jit.__all__) - set(jit.__all__) <= {
        "CompilationUnit", "enable_onednn_fusion", "export_opnames", "onednn_fusion_enabled",
        "set_fusion_strategy", "strict_fusion"}


def test_accelerator_and_backends_as_torch_on_cpu():
    assert llgrad.accelerator.is_available() is torch.accelerator.is_available() is False
    assert llgrad.accelerator.current_accelerator() is None
    assert llgrad.accelerator.device_count() == torch.accelerator.device_count() == 0
    with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
        llgrad.accelerator.current_device_index()
    b, tb = llgrad.backends, torch.backends
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(b.cudnn, name) == getattr(tb.cudnn, name), name
    assert b.cudnn.is_available() == tb.cudnn.is_available()
    assert b.cuda.matmul.allow_tf32 == tb.cuda.matmul.allow_tf32
    assert b.mps.is_available() == tb.mps.is_available() is False
    assert b.mps.is_built() == tb.mps.is_built()
    assert b.mkldnn.enabled == tb.mkldnn.enabled
    assert b.opt_einsum.enabled == tb.opt_einsum.enabled
    assert b.cpu.get_cpu_capability() == tb.cpu.get_cpu_capability()
    assert llgrad.backends.cudnn is b.cudnn
    b.cudnn.benchmark = True
    b.cuda.matmul.allow_tf32 = True
    try:
        assert b.cudnn.benchmark and b.cuda.matmul.allow_tf32
        with b.cudnn.flags(enabled=False):
            assert b.cudnn.enabled is False
        assert b.cudnn.enabled is True
    finally:
        b.cudnn.benchmark = False
        b.cuda.matmul.allow_tf32 = False


def test_deprecation_warnings_as_torch():
    def messages(lib):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lib.jit.trace(lib.nn.Linear(2, 2), lib.ones(1, 2))
            lib.jit.script(double)
            lib.jit.freeze(lib.jit.script(lib.nn.Linear(2, 2).eval()))
        return [str(x.message) for x in w if x.category is DeprecationWarning]
    assert messages(llgrad) == messages(torch)


def test_cuda_matmul_allow_tf32_is_the_float32_matmul_precision_as_torch():
    """torch ties backends.cuda.matmul.allow_tf32 to set_float32_matmul_precision both
    ways: a program (or a test's fixture) that puts the precision back puts the flag back."""
    seen = {}
    for lib in (torch, llgrad):
        flags, out = lib.backends.cuda.matmul, []
        try:
            for p in ("high", "medium", "highest"):
                lib.set_float32_matmul_precision(p)
                out.append(flags.allow_tf32)
            for v in (True, False):
                flags.allow_tf32 = v
                out.append(lib.get_float32_matmul_precision())
        finally:
            lib.set_float32_matmul_precision("highest")
        seen[lib.__name__] = out
    assert seen["llgrad"] == seen["torch"] == [True, True, False, "high", "highest"]
