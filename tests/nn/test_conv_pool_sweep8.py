"""Sweep 8: convolutions (padding modes, string padding, stride, dilation, groups, bias),
transposed convolutions (output_padding, dilation, groups) and pools (ceil_mode,
count_include_pad, divisor_override, dilation, return_indices, LP norms, adaptive sizes)
built with the generators seeded alike, against torch (tests/nn/oracle_sweep8.py). The
default run takes every 7th configuration of each product; `-m slow` takes them all."""
import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle_sweep8 import check  # noqa: E402


def _x(*shape):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def _convs():
    out = []
    for dim, pm, pad, st, dil, g, bias in itertools.product(
            (1, 2), ("zeros", "reflect", "replicate", "circular"), (0, 1, 2, "same", "valid"),
            (1, 2), (1, 2), (1, 2), (True, False)):
        if pad == "same" and st != 1:
            continue
        out.append((f"Conv{dim}d", (4, 6, 3), dict(stride=st, padding=pad, dilation=dil, groups=g,
                                                   bias=bias, padding_mode=pm), (2, 4) + (7,) * dim))
    for dim, st, pad, op, dil, g in itertools.product((1, 2), (1, 2, 3), (0, 1), (0, 1), (1, 2),
                                                      (1, 2)):
        if op >= st and op >= dil:
            continue
        out.append((f"ConvTranspose{dim}d", (4, 6, 3), dict(stride=st, padding=pad,
                                                            output_padding=op, dilation=dil,
                                                            groups=g), (2, 4) + (5,) * dim))
    return out


def _pools():
    out = []
    for dim in (1, 2, 3):
        shape = (2, 3) + (7, 6, 5)[:dim]
        for k, st, pad, cm in itertools.product((2, 3), (None, 1, 2), (0, 1), (False, True)):
            if pad > k // 2:
                continue
            for dil, ri in itertools.product((1, 2), (False, True)):
                out.append((f"MaxPool{dim}d", (k, st, pad, dil), dict(return_indices=ri,
                                                                      ceil_mode=cm), shape))
            for cip in (False, True):
                out.append((f"AvgPool{dim}d", (k, st, pad, cm, cip), {}, shape))
                if dim > 1:
                    out.append((f"AvgPool{dim}d", (k, st, pad, cm, cip), dict(divisor_override=3),
                                shape))
            if not pad:
                for p in (1, 2, 3.5):
                    out.append((f"LPPool{dim}d", (p, k, st, cm), {}, shape))
        for size in (1, 2, 3, 4, 7):
            out.append((f"AdaptiveAvgPool{dim}d", (size,), {}, shape))
            out.append((f"AdaptiveMaxPool{dim}d", (size, True), {}, shape))
    return out


CASES = _convs() + _pools()


def _ids(cases):
    return [f"{n}-{a}-{kw}" for n, a, kw, _ in cases]


def _check(name, args, kw, shape):
    x = _x(*shape)
    if name.startswith("LPPool"):
        x = np.abs(x) + 0.1
    check(lambda lib: getattr(lib.nn, name)(*args, **kw), [x])


@pytest.mark.parametrize("name,args,kw,shape", CASES[::7], ids=_ids(CASES[::7]))
def test_conv_pool(name, args, kw, shape):
    _check(name, args, kw, shape)


_REST = [c for i, c in enumerate(CASES) if i % 7]


@pytest.mark.slow
@pytest.mark.parametrize("name,args,kw,shape", _REST, ids=_ids(_REST))
def test_conv_pool_every_configuration(name, args, kw, shape):
    _check(name, args, kw, shape)
