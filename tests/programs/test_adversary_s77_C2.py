"""Randomized sweeps against PyTorch (s77 C), eager: binary ops over every pair of dtypes
with 0-d, n-d and Python-number operands (in place too), and random indices mixing
integers, slices, None, ..., index lists / tensors and bool masks (read, written with a
number or a broadcast tensor, += and the gradient of the read). Observed: dtype, shape,
values, the written tensor, the exception's type. (Strides of size-0 and size-1 dims are
left out: PyTorch's there are arbitrary.)"""
import random
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402

pytestmark = pytest.mark.slow

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "eq", "lt",
          "maximum", "minimum", "pow", "atan2", "bitwise_and", "logical_xor", "true_divide",
          "hypot", "copysign", "ge", "fmax", "xlogy", "bitwise_left_shift"]
COMPARES = ("eq", "lt", "ge", "maximum", "minimum", "fmax", "logical_xor")
NUMBERS = [2, -3, 2.5, True, 0, 0.0]
VALS = np.array([[3, -2, 0], [1, 7, -5]])


def _seen(o):
    if isinstance(o, (tuple, list)):
        return [_seen(x) for x in o]
    t = o.detach()
    name = str(t.dtype).split(".")[-1]
    return (name, tuple(t.shape), np.array((t.float() if "16" in name else t).numpy()))


def _run(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 (the type is compared with torch's)
            return ("raises", type(e).__name__)


def _same(want, got, what, rtol):
    if isinstance(want, tuple) and want[0] == "raises" or \
            isinstance(got, tuple) and got[0] == "raises":
        assert want == got, what
        return
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), what
        for a, b in zip(want, got):
            _same(a, b, what, rtol)
        return
    assert want[:2] == got[:2], (what, want[:2], got[:2])
    np.testing.assert_allclose(got[2], want[2], rtol=rtol, atol=1e-6, equal_nan=True,
                               err_msg=what)


def _operand(lib, dt, kind):
    v = VALS if kind == "n" else VALS[0, 0]
    return lib.tensor((v > 0 if dt == "bool" else v).tolist()).to(getattr(lib, dt))


def test_promotion_sweep():
    rng = random.Random(0)
    for _ in range(3000):
        op, d1, d2 = rng.choice(BINARY), rng.choice(DTYPES), rng.choice(DTYPES)
        k1, k2, number = rng.choice("n0"), rng.choice("n0s"), rng.choice(NUMBERS)
        inplace = rng.random() < 0.3 and k1 == "n" and op not in COMPARES

        def case(lib):
            a = _operand(lib, d1, k1)
            b = number if k2 == "s" else _operand(lib, d2, k2)
            return _seen(getattr(a, op + "_")(b) if inplace else getattr(lib, op)(a, b))
        what = f"{op} {d1}/{k1} {d2 if k2 != 's' else number}/{k2} inplace={inplace}"
        _same(_run(lambda: case(torch)), _run(lambda: case(llgrad)), what,
              2e-2 if "16" in d1 + d2 else 1e-6)


def _random_index(rng, shape):
    idx, d, ellipsis = [], 0, False
    while d < len(shape) and rng.random() < 0.85:
        r, n = rng.random(), shape[d]
        if r < 0.15:
            idx.append(rng.randrange(-n, n))
        elif r < 0.35:
            idx.append(slice(rng.choice([None, rng.randrange(-n - 1, n + 1)]),
                             rng.choice([None, rng.randrange(-n - 1, n + 2)]),
                             rng.choice([None, 1, 2, 3])))
        elif r < 0.45:
            idx.append(None)
            continue
        elif r < 0.5 and not ellipsis:
            idx.append(Ellipsis)
            ellipsis = True
            d = len(shape) - rng.randrange(0, len(shape) - d + 1)
            continue
        elif r < 0.7:
            idx.append(("list", [rng.randrange(-n, n) for _ in range(rng.randrange(0, 4))]))
        elif r < 0.8:
            s = rng.choice([(2, 1), (1, 3), (2,), (3,)])
            idx.append(("tensor", np.array([rng.randrange(-n, n) for _ in range(int(np.prod(s)))])
                        .reshape(s)))
        elif r < 0.9:
            k = rng.randrange(1, min(2, len(shape) - d) + 1)
            m = np.array([rng.random() < 0.5 for _ in range(int(np.prod(shape[d:d + k])))])
            idx.append(("tensor", m.reshape(shape[d:d + k])))
            d += k
            continue
        else:
            idx.append(("tensor", np.array(rng.randrange(-n, n))))
        d += 1
    return idx


def _build(lib, idx):
    return tuple(list(i[1]) if isinstance(i, tuple) and i[0] == "list" else
                 lib.tensor(i[1]) if isinstance(i, tuple) else i for i in idx)


def test_indexing_sweep():
    rng = random.Random(1)
    for it in range(3000):
        shape = tuple(rng.randrange(1, 5) for _ in range(rng.randrange(1, 5)))
        base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        idx, mode = _random_index(rng, shape), rng.choice(["get", "set", "setv", "iadd", "grad"])

        def case(lib):
            x = lib.tensor(base.copy(), requires_grad=mode == "grad")
            ii = _build(lib, idx)
            if mode == "get":
                return _seen(x[ii])
            if mode == "set":
                x[ii] = -1.5
            elif mode == "setv":
                shp = tuple(x[ii].shape)
                shp = shp[random.Random(it).randrange(0, len(shp) + 1):]
                x[ii] = lib.arange(float(np.prod(shp))).reshape(shp) + 100
            elif mode == "iadd":
                x[ii] += 10
            else:
                y = x[ii]
                (y * lib.arange(float(y.numel())).reshape(y.shape)).sum().backward()
                return _seen([y, x.grad])
            return _seen(x)
        _same(_run(lambda: case(torch)), _run(lambda: case(llgrad)), f"{mode} {shape} {idx}",
              1e-6)
