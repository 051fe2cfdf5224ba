"""vmap's batching of every op of the op table (tests/func/op_cases.py: one case per op):
the batched result equals the function run sample by sample (the oracle needs no torch),
with every input batched, only the first, and under two nested vmaps; every op has a
batching path (elementwise / reduce / rule / loop), and the loop agrees with the rules."""
import numpy as np
import pytest

import llgrad
import llgrad.func as F
from llgrad.func import batching
from llgrad.ir import OPS
from op_cases import CASES, RANDOM_CASES, batched_inputs


def per_sample(fn, args, in_dims, size):
    return llgrad.stack([fn(*[a if d is None else a[b] for a, d in zip(args, in_dims)])
                         for b in range(size)])


def check(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", ["all", "first"])
def test_op_batched_equals_per_sample(name, mode):
    fn = CASES[name][0]
    args = batched_inputs(name, 3, seed=1)
    if mode == "first":
        args = [a if k == 0 else a[0] for k, a in enumerate(args)]
    in_dims = tuple(0 if mode == "all" or k == 0 else None for k in range(len(args)))
    check(F.vmap(fn, in_dims=in_dims)(*args), per_sample(fn, args, in_dims, 3))


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_under_two_vmaps(name):
    fn = CASES[name][0]
    outer = batched_inputs(name, 2, seed=2)
    args = [llgrad.stack([a, a.flip(0) * 1]) if k == 0 else a for k, a in enumerate(outer)]
    # args[0]: (2, 2, ...) mapped by both levels; the others by the outer only
    got = F.vmap(F.vmap(fn, in_dims=(0,) + (None,) * (len(args) - 1)),
                 in_dims=(1,) + (0,) * (len(args) - 1))(*args)
    want = llgrad.stack([llgrad.stack([fn(args[0][j, i], *[a[i] for a in args[1:]])
                                       for j in range(2)]) for i in range(2)])
    check(got, want)


@pytest.mark.parametrize("name", ["add", "sum", "softmax", "mm", "layer_norm", "conv2d",
                                  "nll_loss", "index", "as_strided", "scatter_add"])
def test_loop_agrees_with_the_rules(name, monkeypatch):
    fn = CASES[name][0]
    args = batched_inputs(name, 3, seed=4)
    fast = F.vmap(fn)(*args)
    monkeypatch.setattr(batching, "force_loop", True)
    check(F.vmap(fn)(*args), fast)


@pytest.mark.parametrize("name", sorted(RANDOM_CASES))
def test_random_ops_with_randomness_same(name):
    fn = RANDOM_CASES[name]
    x = llgrad.rand(3, 4, dtype=llgrad.float64)
    llgrad.manual_seed(3)
    got = F.vmap(fn, randomness="same")(x)
    assert got.shape == (3, 4)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        F.vmap(fn)(x)


def test_every_op_has_a_batching_path():
    paths = {name: batching.path(name) for name in OPS}
    for name, op in OPS.items():
        if op.kind == "elementwise":
            assert paths[name] in ("elementwise", "rule"), name
        elif op.kind == "reduce":
            assert paths[name] == "reduce", name
    # only ops without tensor inputs (which a vmap never batches) are left to the loop, and
    # rrelu's draw, which eager makes outside the dispatcher (a vmap never batches it either)
    # (and the ops of complex values, looped per element: tests/runtime/test_complex.py)
    looped = {n for n, p in paths.items() if p == "loop" and OPS[n].complex != "only"}
    assert looped <= {"full", "arange", "rng_normal", "rng_uniform",
                                                                 "rng_integers", "rng_randperm",
                                                                 "rng_rrelu_noise",
                                                                 "rng_standard_gamma",
                                                                 "rng_dirichlet",
                                                                 "rng_poisson",
                                                                 "rng_binomial"}
    for name in ("matmul", "view", "as_strided", "nll_loss", "layer_norm", "strided_scatter"):
        assert paths[name] == "rule"
