"""The eager hot path's shortcuts give what the general code gave: broadcasts_to against
NumPy's broadcast rule, addmm's bias checks and add/sub's alpha against torch."""
import itertools

import numpy as np
import pytest

import llgrad
from llgrad.ir.geometry import broadcasts_to


def test_broadcasts_to_is_numpys_rule():
    sizes = (0, 1, 2, 3)
    shapes = [s for n in range(4) for s in itertools.product(sizes, repeat=n)]
    for small in shapes:
        for shape in shapes:
            try:
                want = np.broadcast_shapes(small, shape) == shape
            except ValueError:
                want = False
            assert broadcasts_to(small, shape) == want, (small, shape)


@pytest.mark.parametrize("bias_shape", [(5,), (1, 5), (3, 5), (3, 1), (), (1,), (4,), (2, 5),
                                        (2, 3, 5), (1, 3, 5)])
def test_addmm_bias_shapes_as_torch(bias_shape):
    torch = pytest.importorskip("torch")
    x, w = np.random.rand(3, 4).astype(np.float32), np.random.rand(5, 4).astype(np.float32)
    b = np.asarray(np.random.rand(*bias_shape), dtype=np.float32)
    results = []
    for lib in (torch, llgrad):
        try:
            results.append(lib.tensor(b).addmm(lib.tensor(x), lib.tensor(w).t()).numpy())
        except RuntimeError as e:
            results.append(str(e).splitlines()[0])
    if isinstance(results[0], str):
        assert results[1] == results[0]
    else:
        np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


def test_add_alpha_as_torch():
    torch = pytest.importorskip("torch")
    for dt in ("int8", "uint8", "float32", "bool"):
        for other, alpha in ((300, 1), (3, 1), (2, 2), (1.5, 1), (True, 1)):
            got = want = None
            try:
                want = torch.ones(3, dtype=getattr(torch, dt)).add(other, alpha=alpha)
            except RuntimeError as e:
                want = type(e)
            try:
                got = llgrad.ones(3, dtype=getattr(llgrad, dt)).add(other, alpha=alpha)
            except RuntimeError as e:
                got = type(e)
            if isinstance(want, type):
                assert got is want, (dt, other, alpha)
            else:
                assert str(got.dtype) == str(want.dtype).replace("torch.", "llgrad.") \
                    and np.array_equal(got.numpy(), want.numpy()), (dt, other, alpha)
