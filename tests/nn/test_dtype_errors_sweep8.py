"""Sweep 8: modules given inputs of another dtype than their parameters (float64, int64,
a module moved to float64), and the functional norms, prelu, bilinear and rms_norm over
dtype pairs, against torch: the results' dtypes and grad_fn chains, or the errors
(tests/nn/oracle_sweep8.py). (Convolutions are left out: which of its CPU backends torch
picks, and so the words of its error, depends on the sizes.)"""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from oracle_sweep8 import check, identity  # noqa: E402

MODULES = [("Linear", (4, 3), (2, 4)), ("Conv1d", (4, 3, 2), (2, 4, 5)),
           ("BatchNorm1d", (4,), (3, 4)), ("LayerNorm", (4,), (3, 4)),
           ("GroupNorm", (2, 4), (3, 4)), ("LSTM", (4, 3), (2, 3, 4)), ("GRU", (4, 3), (2, 3, 4)),
           ("RNN", (4, 3), (2, 3, 4)), ("MultiheadAttention", (4, 2), (2, 3, 4)),
           ("Bilinear", (4, 4, 2), (2, 4)), ("PReLU", (), (2, 4)), ("InstanceNorm1d", (4,), (2, 4, 3)),
           ("RMSNorm", (4,), (2, 4)), ("TransformerEncoderLayer", (4, 2, 8, 0.0), (2, 3, 4))]


def _x(*shape):
    return np.random.default_rng(sum(shape)).standard_normal(shape)


@pytest.mark.parametrize("name,args,shape", MODULES, ids=[m[0] for m in MODULES])
def test_module_dtype_mismatch(name, args, shape):
    n = {"MultiheadAttention": 3, "Bilinear": 2}.get(name, 1)
    build = lambda lib: getattr(lib.nn, name)(*args)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(build, [_x(*shape)] * n)
        check(build, [np.ones(shape, np.int64)] * n, grad=False)
        check(lambda lib: build(lib).double(), [_x(*shape).astype(np.float32)] * n)


def test_embedding_index_dtypes():
    build = lambda lib: lib.nn.Embedding(5, 3)  # noqa: E731
    for idx in (np.array([1.0, 2.0], np.float32), np.array([1, 2], np.int32), np.array([1, 5]),
                np.array([1, -1])):
        check(build, [idx], grad=False)


def _norms(lib, x):
    F = lib.nn.functional
    w = lib.ones(4)
    return [lambda: F.batch_norm(x, lib.zeros(4), lib.ones(4)),
            lambda: F.batch_norm(x, None, None, training=True),
            lambda: F.batch_norm(x, lib.zeros(4), lib.ones(4), w, w),
            lambda: F.instance_norm(x.reshape(3, 4, 1).expand(3, 4, 2)), lambda: F.layer_norm(x, (4,)),
            lambda: F.group_norm(x, 2), lambda: F.layer_norm(x, (4,), w, w),
            lambda: F.rms_norm(x, (4,)), lambda: F.prelu(x, lib.ones(1))]


@pytest.mark.parametrize("dtype", ("int64", "bool"))
def test_norms_of_integer_inputs(dtype):
    """PyTorch's kernels take floating inputs only (NotImplementedError) once the mixed
    dtype check has passed; llgrad normalised integers."""
    for i in range(len(_norms(torch, torch.ones(3, 4)))):
        got = []
        for lib in (torch, llgrad):
            x = lib.ones(3, 4, dtype=getattr(lib, dtype))
            try:
                got.append(("ok", _norms(lib, x)[i]().dtype.__repr__().split(".")[-1]))
            except Exception as e:      # noqa: BLE001 (compared with torch's)
                got.append((type(e).__name__, str(e).replace("torch", "llgrad")))
        assert got[1] == got[0], i


@pytest.mark.parametrize("x_dtype,w_dtype", [("float32", "float64"), ("float64", "float32"),
                                             ("float16", "float32"), ("float32", "float16"),
                                             ("float16", None), ("float32", None)])
def test_rms_norm_dtypes(x_dtype, w_dtype):
    """PyTorch's composite: a half input computed in float, the weight's product promoted,
    the result cast back to the input's dtype (ToCopyBackward0)."""
    def fwd(m, xs, lib):
        w = None if w_dtype is None else lib.linspace(0.5, 2, 4, dtype=getattr(lib, w_dtype))
        y = lib.nn.functional.rms_norm(xs[0].to(getattr(lib, x_dtype)), (4,), w)
        chain, fn = [], y.grad_fn
        while fn is not None and len(chain) < 4:
            chain.append(type(fn).__name__)
            fn = fn.next_functions[0][0] if fn.next_functions else None
        return y, chain
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(identity, [_x(2, 4).astype(np.float32)], fwd, tol=2e-3)


@pytest.mark.parametrize("dtypes", ["ddff", "ffdd", "fdff", "fffd", "fff", "dff"])
def test_bilinear_dtype_error(dtypes):
    names = {"f": "float32", "d": "float64"}

    def fwd(m, xs, lib):
        d = [getattr(lib, names[c]) for c in dtypes]
        return lib.nn.functional.bilinear(lib.ones(2, 3, dtype=d[0]), lib.ones(2, 4, dtype=d[1]),
                                          lib.ones(5, 3, 4, dtype=d[2]),
                                          lib.ones(5, dtype=d[3]) if len(d) == 4 else None)
    check(identity, [], fwd)
