"""F.scaled_dot_product_attention with attn_mask and is_causal together: PyTorch's CPU flash
kernel (4-d inputs, no dropout) masks the later keys on top of the mask; the math path
refuses the pair. A GQA query whose heads the key's do not divide: PyTorch's error."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_MASKS = {
    "float": [[0., -1., 2.], [0.5, 0., 0.], [0., 0., -3.]],
    "bool": [[True, False, True], [True, True, False], [False, True, True]],
    "first_row_masked": [[False, True, True], [True, True, False], [False, True, True]],
}


def _run(lib, shape, mask, **kw):
    g = np.random.RandomState(0)
    q, k, v = (lib.tensor(g.randn(*shape).astype(np.float32), requires_grad=True)
               for _ in range(3))
    try:
        y = lib.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=lib.tensor(mask),
                                                           is_causal=True, **kw)
    except RuntimeError as e:
        return str(e)
    (y * y).sum().backward()
    return [y.detach().numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy(),
            type(y.grad_fn).__name__]


@pytest.mark.parametrize("mask", sorted(_MASKS))
@pytest.mark.parametrize("shape", [(1, 2, 3, 4), (2, 3, 4)])
def test_mask_and_causal(mask, shape):
    want, got = _run(torch, shape, _MASKS[mask]), _run(llgrad, shape, _MASKS[mask])
    if isinstance(want, str):
        assert got == want
        return
    assert got[4] == want[4]
    for a, b in zip(got[:4], want[:4]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_mask_and_causal_with_dropout_refused():
    want = _run(torch, (1, 2, 3, 4), _MASKS["float"], dropout_p=0.3)
    assert _run(llgrad, (1, 2, 3, 4), _MASKS["float"], dropout_p=0.3) == want


def test_gqa_heads_not_divisible():
    msgs = []
    for lib in (torch, llgrad):
        with pytest.raises(RuntimeError) as e:
            lib.nn.functional.scaled_dot_product_attention(
                lib.ones(1, 3, 3, 4), lib.ones(1, 2, 3, 4), lib.ones(1, 2, 3, 4), enable_gqa=True)
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]
