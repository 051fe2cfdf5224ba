"""Top-level names older and newer PyTorch programs call: set_default_tensor_type (deprecated,
with PyTorch's warning), get_device, torch.vmap; against PyTorch."""
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _run(lib, what):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            lib.set_default_tensor_type(what)
            out = (str(lib.get_default_dtype()).split(".")[-1], str(lib.ones(1).dtype).split(".")[-1])
        except TypeError as e:
            out = ("TypeError", str(e))
        finally:
            lib.set_default_dtype(lib.float32)
    return out, len(caught)


@pytest.mark.parametrize("what", ["DoubleTensor", "FloatTensor", "LongTensor",
                                  "torch.DoubleTensor"])
def test_set_default_tensor_type_as_torch(what):
    def arg(lib):
        return what if "." in what else getattr(lib, what)
    ours, theirs = _run(llgrad, arg(llgrad)), _run(torch, arg(torch))
    assert ours[0] == theirs[0] and ours[1] <= 1      # (the warning: once per process)


def test_get_device_and_vmap():
    assert llgrad.get_device(llgrad.ones(2)) == torch.get_device(torch.ones(2)) == -1
    assert llgrad.vmap(lambda x: x.sum())(llgrad.ones(3, 2)).tolist() == [2.0, 2.0, 2.0]
