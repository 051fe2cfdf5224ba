"""Interop: DLPack (zero-copy with NumPy always, with torch when installed), NumPy's and
torch's conversions through __array__, llgrad.device and the refusal of devices other than
the CPU, llgrad.Generator."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn

DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def _torch():
    return pytest.importorskip("torch")


def _sample(dtype):
    return (np.arange(12) % 5).reshape(3, 4).astype(np.dtype(dtype))


# ---- DLPack --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_from_dlpack_shares_memory(dtype):
    t = llgrad.from_numpy(_sample(dtype))
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(dtype) and a.shape == (3, 4)
    np.testing.assert_array_equal(a, _sample(dtype))
    assert np.shares_memory(a, t.numpy())
    view = t[1:, ::2]                                    # a strided view, an offset
    av = np.from_dlpack(view)
    np.testing.assert_array_equal(av, _sample(dtype)[1:, ::2])
    assert av.__array_interface__["data"][0] == view.data_ptr()
    assert t.__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dlpack_of_numpy_shares_memory(dtype):
    a = _sample(dtype)
    t = llgrad.from_dlpack(a)
    assert t.dtype == getattr(llgrad, dtype) and tuple(t.shape) == a.shape
    assert t.data_ptr() == a.__array_interface__["data"][0]
    if dtype != "bool":
        a[0, 0] = 3
        assert t[0, 0].item() == 3
    t2 = llgrad.from_dlpack(a.T[::2])                   # strides carried over
    assert t2.stride() == tuple(s // a.itemsize for s in a.T[::2].strides)
    assert llgrad.from_dlpack(t) is t


def test_dlpack_writes_go_both_ways():
    t = llgrad.zeros(2, 3)
    a = np.from_dlpack(t)
    a[1, 2] = 5.0
    assert t[1, 2].item() == 5.0
    t.add_(1.0)
    assert a[0, 0] == 1.0


def test_dlpack_refuses_tensors_that_require_grad():
    t = llgrad.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't export tensors that require gradient, use "
                                           "tensor.detach()"):
        np.from_dlpack(t)
    assert np.from_dlpack(t.detach()).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="expected an object with __dlpack__"):
        llgrad.from_dlpack([1, 2])


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlpack_with_torch_shares_memory(dtype):
    torch = _torch()
    t = llgrad.from_numpy(_sample(dtype))
    tt = torch.from_dlpack(t)
    assert str(tt.dtype) == f"torch.{dtype}" and tt.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(tt.numpy(), _sample(dtype))
    src = torch.from_numpy(_sample(dtype))[1:, 1::2]
    back = llgrad.from_dlpack(src)
    assert back.data_ptr() == src.data_ptr() and back.stride() == src.stride()
    np.testing.assert_array_equal(back.numpy(), src.numpy())
    if dtype not in ("bool",):
        src[0, 0] = 4
        assert back[0, 0].item() == 4
    capsule = torch.utils.dlpack.to_dlpack(torch.arange(3.0))
    c = llgrad.from_dlpack(capsule)
    c.add_(1.0)                                        # a legacy capsule is writable too
    assert c.tolist() == [1.0, 2.0, 3.0]
    assert torch.from_dlpack(llgrad.utils.dlpack.to_dlpack(llgrad.ones(2))).tolist() == [1, 1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_tensor_and_numpy_of_an_llgrad_tensor(dtype):
    torch = _torch()
    t = llgrad.from_numpy(_sample(dtype))
    tt = torch.tensor(t)
    assert str(tt.dtype) == f"torch.{dtype}" and tt.tolist() == t.tolist()
    assert torch.as_tensor(t).tolist() == t.tolist()
    assert np.asarray(t).dtype == np.dtype(dtype)
    grad = llgrad.ones(2, requires_grad=True) * 2
    assert torch.tensor(grad.detach()).tolist() == [2.0, 2.0]


# ---- devices -------------------------------------------------------------------------------------

def test_device_objects_match_torch():
    torch = _torch()
    for args in (("cpu",), ("cuda",), ("cuda:1",), ("cuda", 0), ("cpu", 0), ("mps",), ("meta",)):
        d, td = llgrad.device(*args), torch.device(*args)
        assert (repr(d), str(d), d.type, d.index) == (repr(td), str(td), td.type, td.index)
    assert llgrad.device("cpu") == llgrad.device("cpu") != llgrad.device("cpu", 0)
    assert llgrad.device("cpu") != "cpu" and hash(llgrad.device("cuda:1")) == \
        hash(llgrad.device("cuda", 1))
    for bad in ("gpu", "cuda:x", "cuda:-1"):
        with pytest.raises(RuntimeError):
            llgrad.device(bad)
        with pytest.raises(RuntimeError):
            torch.device(bad)


def test_tensor_device():
    t = llgrad.ones(2)
    assert t.device == llgrad.device("cpu") and t.device.type == "cpu"
    assert llgrad.zeros(2, device=t.device).device == t.device
    assert not t.is_cuda


CREATION = [lambda d: llgrad.tensor([1.0], device=d), lambda d: llgrad.as_tensor([1], device=d),
            lambda d: llgrad.zeros(2, device=d), lambda d: llgrad.ones(2, device=d),
            lambda d: llgrad.empty(2, device=d), lambda d: llgrad.full((2,), 1.0, device=d),
            lambda d: llgrad.arange(3, device=d), lambda d: llgrad.linspace(0, 1, 3, device=d),
            lambda d: llgrad.eye(2, device=d), lambda d: llgrad.randn(2, device=d),
            lambda d: llgrad.rand(2, device=d), lambda d: llgrad.randint(0, 3, (2,), device=d),
            lambda d: llgrad.randperm(3, device=d),
            lambda d: llgrad.zeros_like(llgrad.ones(2), device=d),
            lambda d: llgrad.ones_like(llgrad.ones(2), device=d),
            lambda d: llgrad.full_like(llgrad.ones(2), 3.0, device=d),
            lambda d: llgrad.randn_like(llgrad.ones(2), device=d),
            lambda d: llgrad.rand_like(llgrad.ones(2), device=d)]


@pytest.mark.parametrize("make", CREATION, ids=range(len(CREATION)))
def test_creation_functions_refuse_other_devices(make):
    for ok in (None, "cpu", "cpu:0", llgrad.device("cpu")):
        make(ok)
    for bad in ("cuda", "cuda:0", llgrad.device("mps")):
        with pytest.raises(RuntimeError, match="llgrad runs on the CPU only; cannot create a "
                                               "tensor on device"):
            make(bad)


def test_creation_accepts_torch_cpu_device_and_refuses_cuda():
    torch = _torch()
    assert llgrad.zeros(2, device=torch.device("cpu")).tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="cannot create a tensor on device 'cuda'"):
        llgrad.zeros(2, device=torch.device("cuda"))
    with pytest.raises(RuntimeError, match="cannot move a tensor to device 'cuda:1'"):
        llgrad.ones(2).to(torch.device("cuda", 1))


LAYERS = [lambda d: nn.Linear(2, 3, device=d), lambda d: nn.Linear(2, 3, bias=False, device=d),
          lambda d: nn.Conv2d(1, 2, 3, device=d), lambda d: nn.BatchNorm1d(4, device=d),
          lambda d: nn.BatchNorm2d(4, affine=False, track_running_stats=False, device=d),
          lambda d: nn.LayerNorm(4, device=d),
          lambda d: nn.LayerNorm(4, elementwise_affine=False, device=d),
          lambda d: nn.Embedding(5, 2, device=d),
          lambda d: nn.Embedding(5, 2, _weight=llgrad.zeros(5, 2), device=d)]


@pytest.mark.parametrize("make", LAYERS, ids=range(len(LAYERS)))
def test_layers_refuse_other_devices(make):
    for ok in (None, "cpu", "cpu:0", llgrad.device("cpu")):
        make(ok)
    for bad in ("cuda", "cuda:0", llgrad.device("mps")):
        with pytest.raises(RuntimeError, match="llgrad runs on the CPU only; cannot create a "
                                               "tensor on device"):
            make(bad)


def test_to_refuses_other_devices():
    t = llgrad.ones(2)
    assert t.to("cpu") is t and t.to(llgrad.device("cpu")) is t and t.to(device="cpu") is t
    assert t.to("cpu", llgrad.float64).dtype == llgrad.float64
    assert t.to(device="cpu", dtype=llgrad.int32).dtype == llgrad.int32
    for args, kwargs in ((("cuda",), {}), (("cuda:0", llgrad.float64), {}),
                         ((), {"device": "mps"}), ((llgrad.device("cuda"),), {})):
        with pytest.raises(RuntimeError, match="llgrad runs on the CPU only; cannot move a "
                                               "tensor to device"):
            t.to(*args, **kwargs)
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        t.to("gpu")
    m = nn.Linear(2, 2)
    assert m.to("cpu") is m and m.cpu() is m
    with pytest.raises(RuntimeError, match="cannot move a module to device 'cuda'"):
        m.to("cuda")
    with pytest.raises(RuntimeError, match="CPU only"):
        m.cuda()
    with pytest.raises(RuntimeError, match="cannot make a generator on device 'cuda'"):
        llgrad.Generator(device="cuda")
    with pytest.raises(RuntimeError, match="Tensor.cuda\\(\\) is not available"):
        t.cuda()


def test_cuda_namespace_picks_the_cpu():
    device = "cuda" if llgrad.cuda.is_available() else "cpu"
    assert device == "cpu" and llgrad.cuda.device_count() == 0
    llgrad.cuda.manual_seed_all(0)
    assert llgrad.randn(2, device=device).device.type == "cpu"


# ---- Generator -----------------------------------------------------------------------------------

def test_generator():
    g = llgrad.Generator()
    assert g.initial_seed() == 67280421310721              # PyTorch's default seed
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    a = llgrad.randn(4, generator=g)
    g.manual_seed(5)
    assert llgrad.randn(4, generator=g).tolist() == a.tolist()
    state = g.get_state()
    assert state.dtype == llgrad.uint8
    b = llgrad.rand(3, generator=g)
    llgrad.rand(3, generator=g)
    g.set_state(state)
    assert llgrad.rand(3, generator=g).tolist() == b.tolist()
    assert g.device == llgrad.device("cpu")
    s = g.seed()
    assert g.initial_seed() == s
    llgrad.manual_seed(3)
    st = llgrad.get_rng_state()
    x = llgrad.randn(3)
    llgrad.set_rng_state(st)
    assert llgrad.randn(3).tolist() == x.tolist()
    assert isinstance(llgrad.default_generator.initial_seed(), int)
    with pytest.raises(TypeError, match="uint8"):
        g.set_state(llgrad.zeros(3))
