"""bfloat16 sums PyTorch's CPU kernels make one term at a time, each rounded, against
PyTorch bit for bit: index_put_(accumulate=True), a 1-d index_add_, put_(accumulate=True),
and the backward of indexing and of embedding (600 ones added at one index make 256 in
bfloat16, not 600); a 2-d index_add_ and scatter_add_ sum in float32 and round once."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as LF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

R = np.random.default_rng(0)
N = 600
I = R.integers(0, 5, N)
V = (R.standard_normal(N) * 3).astype(np.float32)
S = R.standard_normal((N, 4)).astype(np.float32)
W = R.standard_normal((5, 4)).astype(np.float32)


def _b(M, a):
    return M.tensor(a).bfloat16()


def _both(fn):
    got, want = fn(llgrad, LF), fn(torch, TF)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.detach().float().numpy(), w.detach().float().numpy())


@pytest.mark.parametrize("fn", [
    lambda M, F: M.zeros(2).bfloat16().index_put_((M.zeros(N, dtype=M.int64),),
                                                  M.ones(N).bfloat16(), accumulate=True),
    lambda M, F: _b(M, W[:, 0]).index_put_((M.tensor(I),), _b(M, V), accumulate=True),
    lambda M, F: _b(M, W).index_put_((M.tensor(I),), _b(M, S), accumulate=True),
    lambda M, F: _b(M, W).index_put_((M.tensor(I), M.tensor(I % 4)), _b(M, V),
                                     accumulate=True),
    lambda M, F: _b(M, W).index_put_((M.tensor(I),), _b(M, 1.37), accumulate=True),
    lambda M, F: _b(M, W[:, 0]).index_add_(0, M.tensor(I), _b(M, V)),
    lambda M, F: _b(M, W[:, 0]).index_add_(0, M.tensor(I), _b(M, V), alpha=0.37),
    lambda M, F: _b(M, W).index_add_(0, M.tensor(I), _b(M, S)),
    lambda M, F: _b(M, W).put_(M.tensor(I * 3), _b(M, V), accumulate=True),
    lambda M, F: _b(M, W[:, 0]).scatter_add_(0, M.tensor(I), _b(M, V)),
], ids=["ones", "index_put", "index_put_rows", "index_put_2", "index_put_number",
        "index_add", "index_add_alpha", "index_add_rows", "put", "scatter_add"])
def test_accumulating_writes(fn):
    _both(fn)


def _index_backward(M, F):
    w = _b(M, W).requires_grad_()
    w[M.tensor(I)].backward(_b(M, S))
    return w.grad


def _embedding_backward(M, F, **kw):
    w = _b(M, W).requires_grad_()
    y = F.embedding(M.tensor(I), w, **kw)
    y.backward(_b(M, S))
    return y, w.grad


def test_backward_of_indexing_and_embedding_adds_in_order():
    _both(_index_backward)
    _both(_embedding_backward)
    _both(lambda M, F: _embedding_backward(M, F, padding_idx=2))
