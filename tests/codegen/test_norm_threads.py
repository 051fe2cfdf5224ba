"""The row normalisers (codegen/lowerings/ops_norm.py) on inputs big enough to split among
threads, in layouts whose reduced dims merge into one loop and in ones whose do not:
softmax, log_softmax, logsumexp, var, std and batch_norm (training and eval) on 1, 2 and 3
threads, against eager."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F

RNG = np.random.default_rng(11)
X = RNG.standard_normal((16, 12, 20, 24)).astype(np.float32)
W, B = RNG.standard_normal(12).astype(np.float32), RNG.standard_normal(12).astype(np.float32)
RM, RV = RNG.standard_normal(12).astype(np.float32), RNG.uniform(0.5, 2, 12).astype(np.float32)

PROGRAMS = {
    "softmax_last": lambda x: F.softmax(x, -1),
    "log_softmax_mid": lambda x: F.log_softmax(x.transpose(1, 3), 2),
    "logsumexp_two": lambda x: x.logsumexp((2, 3)),
    "var_channels": lambda x: x.var((0, 2, 3)),
    "std_transposed": lambda x: x.transpose(2, 3).std((2, 3), keepdim=True),
    "batch_norm_train": lambda x: F.batch_norm(x, None, None, llgrad.tensor(W),
                                               llgrad.tensor(B), True),
    "batch_norm_eval_strided": lambda x: F.batch_norm(x[:, :, ::2], llgrad.tensor(RM),
                                                      llgrad.tensor(RV), llgrad.tensor(W),
                                                      None, False),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_threads_agree_with_eager(name):
    fn = PROGRAMS[name]
    want = fn(llgrad.tensor(X)).numpy()
    old = llgrad.get_num_threads()
    try:
        for threads in (1, 2, 3):
            llgrad.set_num_threads(threads)
            f = llgrad.compile(fn)
            f(llgrad.tensor(X))
            got = f(llgrad.tensor(X)).numpy()
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    finally:
        llgrad.set_num_threads(old)


@pytest.mark.parametrize("shape", [(1, 3, 4, 5), (4, 1, 3, 3), (5, 3, 1, 1), (1, 1, 4, 4),
                                   (6, 2, 3)])
def test_size_one_dims_merge_away(shape):
    """Size-1 dims leave the loop nest (loops.normalize): a batch of one image, a single
    channel, 1x1 planes; batch_norm (training and eval), var and softmax as eager."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    w, b = (llgrad.tensor(rng.standard_normal(c).astype(np.float32)) for _ in range(2))
    rm = llgrad.tensor(rng.standard_normal(c).astype(np.float32))
    rv = llgrad.tensor(rng.uniform(0.5, 2, c).astype(np.float32))
    programs = [lambda t: F.batch_norm(t, rm, rv, w, b, False), lambda t: t.var(0),
                lambda t: F.softmax(t, -1)]
    if x.size // c > 1:
        programs.append(lambda t: F.batch_norm(t, None, None, w, b, True))
    for fn in programs:
        want = fn(llgrad.tensor(x)).numpy()
        f = llgrad.compile(fn)
        f(llgrad.tensor(x))
        np.testing.assert_allclose(f(llgrad.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
