"""The elementwise result layout (memory_layout.iterator_layout, PyTorch's TensorIterator's)
is worked out once per operand geometry and cached: results equal PyTorch's strides and
values on the first call and on later calls with the same geometry, over expanded,
transposed, permuted, sliced and negative-stride operands, promotion between dtypes and
Python numbers."""
import numpy as np
import pytest

import llgrad
from llgrad.runtime import memory_layout

torch = pytest.importorskip("torch")


def _base(lib, shape, dtype, seed):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return lib.tensor(a)


# each: fn(lib) -> result; operands built inside so both libraries see the same geometry
CASES = {
    "expanded row": lambda lib: _base(lib, (1, 5), np.float32, 0).expand(4, 5)
    * _base(lib, (4, 5), np.float32, 1),
    "expanded column, transposed other": lambda lib: _base(lib, (4, 1), np.float32, 0)
    .expand(4, 6) + _base(lib, (6, 4), np.float32, 1).t(),
    "transposed first": lambda lib: _base(lib, (5, 3), np.float32, 0).t()
    * _base(lib, (3, 5), np.float32, 1),
    "permuted 3-d with a broadcast": lambda lib: _base(lib, (2, 3, 4), np.float32, 0)
    .permute(2, 0, 1) - _base(lib, (3,), np.float32, 1),
    "expanded 0-d times permuted": lambda lib: _base(lib, (), np.float32, 0).expand(3, 4, 2)
    * _base(lib, (2, 3, 4), np.float32, 1).permute(1, 2, 0),
    "sliced step": lambda lib: _base(lib, (6, 8), np.float32, 0)[:, ::2]
    + _base(lib, (6, 4), np.float32, 1),
    "promoted float64 transposed": lambda lib: _base(lib, (4, 3), np.float64, 0).t()
    * _base(lib, (3, 4), np.float32, 1),
    "int with float number": lambda lib: lib.arange(12).reshape(3, 4).t() * 2.5,
    "float with int number": lambda lib: _base(lib, (3, 4), np.float32, 0).t() + 2,
    "number base pow": lambda lib: 2.0 ** _base(lib, (4, 3), np.float32, 0).t(),
    "channels-last-like": lambda lib: _base(lib, (2, 4, 3, 3), np.float32, 0)
    .permute(0, 2, 3, 1) * _base(lib, (4,), np.float32, 1),
    "size-1 dims": lambda lib: _base(lib, (1, 4, 1), np.float32, 0).permute(2, 1, 0)
    * _base(lib, (1, 4, 3), np.float32, 1),
    "flipped (negative strides)": lambda lib: lib.flip(_base(lib, (3, 4), np.float32, 0), [0])
    * _base(lib, (4, 3), np.float32, 1).t(),
}


def _strides(t):
    # (a size-1 dim's stride aside: PyTorch's choice there varies by op, and no element
    # is addressed by it)
    return tuple(s for n, s in zip(t.shape, t.stride()) if n != 1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_layout_matches_torch_first_and_cached(name):
    fn = CASES[name]
    want = fn(torch)
    first = None
    for _ in range(3):          # the first call works the layout out, the others reuse it
        got = fn(llgrad)
        assert tuple(got.shape) == tuple(want.shape)
        assert _strides(got) == _strides(want), (got.stride(), want.stride())
        assert got.dtype.name == str(want.dtype).replace("torch.", "")
        # (values: NumPy's exp2 and sin round apart from PyTorch's by an ulp at times)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        if first is None:
            first = got
        assert got.stride() == first.stride()
        np.testing.assert_array_equal(got.numpy(), first.numpy())


def test_cache_keeps_geometries_apart():
    # the same shapes with other strides (or dtypes) must not share an entry
    a = _base(llgrad, (4, 4), np.float32, 0)
    b = _base(llgrad, (4, 4), np.float32, 1)
    ta, tb = torch.tensor(a.numpy()), torch.tensor(b.numpy())
    for x, y, tx, ty in ((a.t(), b, ta.t(), tb), (a, b.t(), ta, tb.t()),
                         (a.t(), b.t(), ta.t(), tb.t()), (a.t(), b.double(), ta.t(), tb.double())):
        for _ in range(2):
            assert (x * y).stride() == (tx * ty).stride()
    assert memory_layout._wanted         # (the cache was used)


def test_gradient_of_mean_through_transposed_input_matches_torch():
    # mean's backward expands the gradient: the op after it meets a stride-0 operand
    a = np.random.default_rng(4).standard_normal((5, 3)).astype(np.float32)
    grads = []
    for lib in (llgrad, torch):
        x = lib.tensor(a, requires_grad=True)
        for _ in range(2):
            x.grad = None
            (x.t().sin() * x.t()).mean().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
