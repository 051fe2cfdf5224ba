"""Sweep 62 (H3), writes by index against torch: x[idx] = value with a uint8 mask beside a
Python bool. PyTorch records a Python bool in an index as an index tensor of its own (True:
[0] at a new dim, False: an empty one), so x[mask_u8, True] = 1 goes to index_put_ with two
index tensors and writes; llgrad counted the mask alone and raised masked_fill_'s "only
supports boolean masks" error, which PyTorch gives only for a lone uint8 mask
(runtime/methods_setitem._byte_mask_fill).

Also put_ with a source whose number of elements is not the index's: PyTorch raises, llgrad's
index_put broadcast a one-element source to every index (runtime/functions_misc.put)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch

MASK = np.array([0, 1, 1], dtype=np.uint8)

INDICES = {
    "mask": lambda L: (L.tensor(MASK),),
    "mask_true": lambda L: (L.tensor(MASK), True),
    "mask_true_none": lambda L: (L.tensor(MASK), True, None),
    "true_mask": lambda L: (True, L.tensor(MASK)),
    "mask_false": lambda L: (L.tensor(MASK), False),
    "mask_slice": lambda L: (L.tensor(MASK), slice(None)),
    "mask_ints": lambda L: (L.tensor(MASK), L.tensor([0, 1])),
    "mask_2d": lambda L: (L.tensor(MASK).reshape(3, 1).expand(3, 4).contiguous(),),
}
VALUES = {"number": lambda L: -1, "float_0d": lambda L: L.tensor(-1.),
          "float_1": lambda L: L.tensor([-1.]), "int_0d": lambda L: L.tensor(5)}


def _write(L, name, value):
    x = L.arange(12.).reshape(3, 4)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (PyTorch's uint8-index deprecation warning)
            x[INDICES[name](L)] = VALUES[value](L)
    except (RuntimeError, IndexError) as e:
        return type(e).__name__, str(e).split(",")[0]
    return x.tolist()


@pytest.mark.parametrize("value", list(VALUES))
@pytest.mark.parametrize("name", list(INDICES))
def test_setitem_with_a_uint8_mask_beside_other_indices(name, value):
    assert _write(llgrad, name, value) == _write(torch, name, value)


def test_setitem_with_a_uint8_mask_and_true_compiled(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")

    def f(L, x, m):
        y = x * 2
        y[m, True] = -1.0
        return y
    cf = llgrad.compile(lambda x, m: f(llgrad, x, m))
    a = np.arange(12.).reshape(3, 4)
    want = f(torch, torch.tensor(a), torch.tensor(MASK))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            got = cf(llgrad.tensor(a), llgrad.tensor(MASK))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("src", [[1.], [1., 2., 3.], [[1., 2.]], [[5.], [6.]]])
def test_put_needs_as_many_source_elements_as_indices(src, accumulate):
    res = []
    for L in (torch, llgrad):
        try:
            r = L.zeros(5).put_(L.tensor([0, -1]), L.tensor(src), accumulate=accumulate)
            res.append(r.tolist())
        except IndexError as e:
            res.append(str(e))
    assert res[0] == res[1]
