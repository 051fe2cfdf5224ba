"""Against torch: matmul's errors for mismatched inner sizes (the folded mm's and mv's,
the batch broadcast's, bmm's over the batch product), and what scripts ask of a tensor's
layout (Tensor.layout, llgrad.strided, is_sparse, is_quantized, ...)."""
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

SHAPES = [((2, 3, 4), (5, 6)), ((2, 3, 4), (5,)), ((4,), (2, 5, 6)), ((3, 4), (2, 5, 6)),
          ((2, 3, 4), (2, 5, 6)), ((2, 3, 4), (3, 5, 6)), ((7, 2, 3, 4), (2, 5, 6)),
          ((3, 4), (5, 6)), ((4,), (5, 6)), ((3, 4), (5,))]


@pytest.mark.parametrize("a,b", SHAPES)
def test_matmul_mismatch_errors(a, b):
    got = []
    for lib in (torch, llgrad):
        with pytest.raises(RuntimeError) as e:
            lib.ones(a) @ lib.ones(b)
        got.append(str(e.value))
    assert got[1] == got[0]


def test_layout_and_kind_flags():
    for lib in (torch, llgrad):
        x = lib.randn(2, 3)
        assert x.layout == lib.strided and x.layout != lib.sparse_coo
        assert repr(lib.strided) == f"{lib.__name__}.strided"
        for flag in ("is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn", "is_mps",
                     "is_nested", "is_meta"):
            assert getattr(x, flag) is False, (lib.__name__, flag)
