"""complex32 exists as a name, as in PyTorch (dtype tables, comparisons, finfo, pickling),
but llgrad has no tensors of it: every way to make one raises a NotImplementedError saying
why, never a NumPy error or a tensor of another dtype. bfloat16, complex64 and complex128
tensors are made as PyTorch makes them (tests/runtime/test_complex.py, test_bfloat16.py)."""
import pickle

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

NAMES = ["bfloat16", "complex32", "complex64", "complex128", "chalf", "cfloat", "cdouble"]


@pytest.mark.parametrize("name", NAMES)
def test_the_names_and_their_attributes_are_torch_s(name):
    d, t = getattr(llgrad, name), getattr(torch, name)
    assert (d.is_floating_point, d.is_complex, d.is_signed, d.itemsize) == \
        (t.is_floating_point, t.is_complex, t.is_signed, t.itemsize)
    assert repr(d) == repr(t).replace("torch.", "llgrad.")
    assert pickle.loads(pickle.dumps(d)) is d
    assert d != llgrad.float32 and d in {d: 1}


@pytest.mark.parametrize("name", ["bfloat16", "complex32", "complex64", "complex128"])
def test_finfo_and_iinfo_as_torch(name):
    got, want = llgrad.finfo(getattr(llgrad, name)), torch.finfo(getattr(torch, name))
    assert repr(got) == repr(want)
    assert (got.bits, got.eps, got.max, got.min, got.tiny, got.resolution) == \
        (want.bits, want.eps, want.max, want.min, want.tiny, want.resolution)
    with pytest.raises(TypeError, match="requires an integer input type"):
        llgrad.iinfo(getattr(llgrad, name))


MAKERS = {
    "zeros": lambda d: llgrad.zeros(3, dtype=d),
    "empty": lambda d: llgrad.empty(2, dtype=d),
    "full": lambda d: llgrad.full((2,), 1, dtype=d),
    "arange": lambda d: llgrad.arange(3, dtype=d),
    "rand": lambda d: llgrad.rand(2, dtype=d),
    "randn": lambda d: llgrad.randn(2, dtype=d),
    "linspace": lambda d: llgrad.linspace(0, 1, 3, dtype=d),
    "tensor": lambda d: llgrad.tensor([1.0, 2.0], dtype=d),
    "to": lambda d: llgrad.ones(3).to(d),
    "to_kw": lambda d: llgrad.ones(3).to(dtype=d),
    "to_device": lambda d: llgrad.ones(3).to("cpu", d),
    "type": lambda d: llgrad.ones(2).type(d),
    "zeros_like": lambda d: llgrad.zeros_like(llgrad.ones(2), dtype=d),
    "new_zeros": lambda d: llgrad.ones(2).new_zeros(2, dtype=d),
    "view": lambda d: llgrad.ones(4).view(d),
    "set_default_dtype": lambda d: llgrad.set_default_dtype(d),
}


@pytest.mark.parametrize("how", sorted(MAKERS))
def test_making_a_complex32_tensor_raises_why(how):
    before = llgrad.get_default_dtype()
    if how == "set_default_dtype":     # (PyTorch refuses it too)
        with pytest.raises(TypeError, match="only floating-point types"):
            MAKERS[how](llgrad.complex32)
        return
    with pytest.raises(NotImplementedError, match="llgrad has no complex32 tensors"):
        MAKERS[how](llgrad.complex32)
    assert llgrad.get_default_dtype() is before


@pytest.mark.parametrize("how", sorted(set(MAKERS) - {"rand", "randn", "empty"}))
@pytest.mark.parametrize("name", ["complex64", "bfloat16"])
def test_making_a_tensor_is_as_torch(how, name):
    def made(lib):
        before = lib.get_default_dtype()
        try:
            return repr(_with(lib, MAKERS[how])(getattr(lib, name)))
        except (NotImplementedError, TypeError, RuntimeError) as e:
            return type(e).__name__
        finally:
            lib.set_default_dtype(before)
    got, want = made(llgrad).replace("llgrad.", ""), made(torch).replace("torch.", "")
    if how == "view" and name == "bfloat16":    # (its memory is not 16-bit words)
        assert got == "NotImplementedError"
        return
    assert got == want


def _with(lib, maker):
    """maker with lib in place of llgrad (the lambdas above name llgrad)."""
    import types
    return types.FunctionType(maker.__code__, {**maker.__globals__, "llgrad": lib})


def test_a_module_to_bfloat16_rounds_its_parameters_as_torch():
    m = llgrad.nn.Linear(3, 2)
    t = torch.nn.Linear(3, 2)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(m.weight.detach().numpy()))
        t.bias.copy_(torch.tensor(m.bias.detach().numpy()))
    m.to(llgrad.bfloat16)
    t.to(torch.bfloat16)
    assert m.weight.dtype is llgrad.bfloat16 and m.weight.requires_grad
    assert m.weight.float().tolist() == t.weight.float().tolist()


def test_a_complex_numpy_array_is_a_complex_tensor():
    assert llgrad.from_numpy(np.ones(2, np.complex64)).dtype is llgrad.complex64
    assert llgrad.tensor(np.ones(2, np.complex128)).dtype is llgrad.complex128


def test_the_bfloat16_methods_convert():
    x, m = llgrad.ones(2), llgrad.nn.Linear(2, 2)
    assert x.bfloat16().dtype is llgrad.bfloat16
    m.bfloat16()
    assert m.weight.dtype is llgrad.bfloat16
    m.float()
    assert llgrad.get_autocast_dtype("cpu") is llgrad.bfloat16
    with llgrad.autocast("cpu", dtype=llgrad.bfloat16, enabled=False):
        assert m(x).dtype is llgrad.float32
