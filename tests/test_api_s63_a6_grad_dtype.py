"""Tensor.grad_dtype (a leaf's gradient dtype: its own by default, settable, None for any)
compared with PyTorch."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _run(lib):
    out = []
    a = lib.ones(3, requires_grad=True)
    out.append(str(a.grad_dtype))
    a.grad_dtype = lib.float64
    (a * 2).sum().backward()
    out.append((str(a.grad.dtype), a.grad.tolist()))
    (a * 3).sum().backward()                    # accumulates in float64
    out.append((str(a.grad.dtype), a.grad.tolist()))
    a.grad_dtype = None
    a.grad = lib.ones(3, dtype=lib.float16)     # any dtype may be assigned now
    out.append(str(a.grad.dtype))
    b = lib.ones(2, requires_grad=True)
    b.grad_dtype = lib.float16
    (b * 1.5).sum().backward()
    out.append((str(b.grad.dtype), b.grad.tolist()))
    c = lib.ones(2)
    c.grad_dtype = lib.float64
    out.append((str(c.grad_dtype), str(c.detach().grad_dtype)))
    for bad in (lambda: setattr(a * 2, "grad_dtype", lib.float64),
                lambda: (a * 2).grad_dtype,
                lambda: setattr(a, "grad_dtype", "x")):
        with pytest.raises(RuntimeError) as info:
            bad()
        out.append(str(info.value))
    d = lib.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        d.grad = lib.ones(2, dtype=lib.float64)
    out.append(str(info.value).replace("torch.", "").split(".")[0])
    return [str(x).replace("torch.", "").replace("llgrad.", "") for x in out]


@pytest.mark.filterwarnings("ignore:The .grad attribute")
def test_grad_dtype_as_torch():
    assert _run(llgrad) == _run(torch)


def test_grad_dtype_parameter_default():
    p = llgrad.nn.Parameter(llgrad.zeros(2, dtype=llgrad.float64))
    assert p.grad_dtype is llgrad.float64
    np.testing.assert_array_equal(p.detach().numpy(), np.zeros(2))


def test_grad_dtype_is_not_copied_or_saved(tmp_path):
    import copy
    got = []
    for lib in (torch, llgrad):
        a = lib.ones(2, requires_grad=True)
        a.grad_dtype = lib.float64
        lib.save(a, tmp_path / f"{lib.__name__}.pt")
        loaded = lib.load(tmp_path / f"{lib.__name__}.pt")
        got.append([str(t.grad_dtype).split(".")[1] for t in
                    (copy.deepcopy(a), loaded, a.detach(), a.clone().detach())])
    assert got[0] == got[1] == [["float32"] * 4][0]
