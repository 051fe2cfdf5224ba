"""llgrad.func.vmap's API: in_dims / out_dims (ints, negative, None, nested tuples, dicts),
kwargs, chunk_size, randomness, nesting, in-place semantics and torch's errors for misuse;
against explicit per-sample loops and, when installed, torch.func.vmap."""
import numpy as np
import pytest

import llgrad
import llgrad.func as F
from func_helpers import assert_trees_close, error_of, load_torch, rand, same_message, to_torch


def loop(fn, in_dims, args, size, out_dim=0):
    """The oracle: fn on each sample (index `in_dims` of each arg), stacked at out_dim."""
    outs = []
    for b in range(size):
        outs.append(fn(*[a if d is None else a.select(d, b) for a, d in zip(args, in_dims)]))
    return llgrad.stack(outs, out_dim)


def close(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-12)


def test_in_dims_variants():
    x, y, z = rand(3, 4, seed=1), rand(4, 3, seed=2), rand(4, seed=3)

    def f(a, c):
        return a * c.sum() + c
    close(F.vmap(f, in_dims=(0, 1))(x, y), loop(f, (0, 1), (x, y), 3))
    close(F.vmap(f, in_dims=(-1, 0))(y, x), loop(f, (1, 0), (y, x), 3))
    close(F.vmap(f, in_dims=(0, None))(x, z), loop(f, (0, None), (x, z), 3))
    close(F.vmap(f, in_dims=(None, 1))(z, y), loop(f, (None, 1), (z, y), 3))


def test_nested_tuple_and_dict_inputs():
    x, y, z = rand(3, 4, seed=1), rand(4, 3, seed=2), rand(4, seed=3)

    def f(pair, d, scale):
        a, c = pair
        return a * d["w"] + c.sum() * scale
    got = F.vmap(f, in_dims=((0, 1), {"w": None}, None))((x, y), {"w": z}, 2.0)
    want = loop(lambda a, c: f((a, c), {"w": z}, 2.0), (0, 1), (x, y), 3)
    close(got, want)
    # a leaf of in_dims stands for a whole subtree
    got = F.vmap(f, in_dims=(0, None, None))((x, y.t()), {"w": z}, 2.0)
    close(got, loop(lambda a, c: f((a, c), {"w": z}, 2.0), (0, 0), (x, y.t()), 3))


def test_out_dims_variants():
    x = rand(3, 4, seed=1)

    def f(a):
        return a * 2, {"s": a.sum(), "m": a.unsqueeze(0)}
    out = F.vmap(f, out_dims=(1, {"s": 0, "m": -1}))(x)
    close(out[0], (x * 2).t())
    close(out[1]["s"], x.sum(1))
    assert out[1]["m"].shape == (1, 4, 3)
    close(out[1]["m"][0], x.t())
    # out_dims None: an output that does not depend on the batch
    val, const = F.vmap(lambda a: (a.exp(), llgrad.ones(2)), out_dims=(0, None))(x)
    close(val, x.exp())
    close(const, llgrad.ones(2))


def test_unbatched_output_is_expanded():
    out = F.vmap(lambda a: llgrad.ones(2, dtype=llgrad.float64))(rand(3, 4))
    assert out.shape == (3, 2)
    close(out, llgrad.ones(3, 2, dtype=llgrad.float64))


def test_kwargs_are_passed_unbatched():
    x = rand(3, 4, seed=1)
    got = F.vmap(lambda a, scale=1.0: a * scale)(x, scale=3.0)
    close(got, x * 3)


@pytest.mark.parametrize("chunk", [1, 2, 3, 10])
def test_chunk_size(chunk):
    x, y = rand(7, 4, seed=1), rand(4, seed=2)

    def f(a, c):
        return {"p": a * c, "s": (a @ c).reshape(1)}
    got = F.vmap(f, in_dims=(0, None), chunk_size=chunk, out_dims={"p": 1, "s": 0})(x, y)
    want = F.vmap(f, in_dims=(0, None), out_dims={"p": 1, "s": 0})(x, y)
    close(got["p"], want["p"])
    close(got["s"], want["s"])


def test_nested_vmaps():
    x, y = rand(2, 3, 4, seed=1), rand(3, 4, seed=2)

    def f(a, c):
        return (a * c).sum() + a.max()
    got = F.vmap(F.vmap(f, in_dims=(0, 0)), in_dims=(0, None))(x, y)
    want = llgrad.stack([llgrad.stack([f(x[i, j], y[j]) for j in range(3)]) for i in range(2)])
    close(got, want)
    z = rand(4, 5, seed=3)
    got = F.vmap(F.vmap(f, in_dims=(1, None)), in_dims=(None, 0))(z, y)
    want = llgrad.stack([llgrad.stack([f(z[:, j], y[i]) for j in range(5)]) for i in range(3)])
    close(got, want)


def test_randomness():
    x = rand(4, 3)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        F.vmap(lambda a: a + llgrad.rand(3, dtype=llgrad.float64))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        F.vmap(lambda a: llgrad.nn.functional.dropout(a, 0.5))(x)
    same = F.vmap(lambda a: a * 0 + llgrad.rand(3, dtype=llgrad.float64), randomness="same")(x)
    assert np.allclose(same.numpy(), same.numpy()[0])
    diff = F.vmap(lambda a: a * 0 + llgrad.rand(3, dtype=llgrad.float64),
                  randomness="different")(x)
    assert not np.allclose(diff.numpy()[0], diff.numpy()[1])
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        F.vmap(lambda a: a, randomness="sometimes")


def test_inplace_semantics():
    x = rand(3, 4, seed=1)
    before = x.numpy().copy()
    F.vmap(lambda a: a.mul_(2))(x)           # writes through to the input, as torch's does
    np.testing.assert_allclose(x.numpy(), before * 2)
    y = rand(4, seed=2)
    out = F.vmap(lambda a, c: a.clone().add_(c), in_dims=(0, None))(x, y)
    close(out, x + y)


def test_data_dependent_control_flow():
    x = rand(3, 4, seed=1).abs()
    # a condition all samples agree on runs as in Python
    close(F.vmap(lambda a: a * 2 if a.min() >= 0 else a)(x), x * 2)
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        F.vmap(lambda a: a * 2 if a.sum() > a.sum().mean() * 0 + 5.5 else a)(
            llgrad.tensor([[1.0], [10.0]]))
    with pytest.raises(RuntimeError, match="calling .item"):
        F.vmap(lambda a: a * a.sum().item())(llgrad.tensor([[1.0], [10.0]]))


def test_against_torch_vmap():
    torch = load_torch()
    tf = torch.func
    x, y = rand(3, 4, seed=1), rand(4, 3, seed=2)
    tx, ty = to_torch((x, y), torch)

    def f(a, c):
        return {"u": a * c.sum(), "v": (a.unsqueeze(1) * c).sum(0)}
    assert_trees_close(F.vmap(f, in_dims=(0, 1), out_dims={"u": 1, "v": 0})(x, y),
                       tf.vmap(f, in_dims=(0, 1), out_dims={"u": 1, "v": 0})(tx, ty))
    assert_trees_close(F.vmap(F.vmap(lambda a, c: a * c), in_dims=(None, 0))(x[0, :3], y),
                       tf.vmap(tf.vmap(lambda a, c: a * c), in_dims=(None, 0))(tx[0, :3], ty))


def _misuse_cases():
    return [
        lambda m, t, T: m.vmap(lambda a: a, in_dims=(0, 0))(t),            # in_dims size
        lambda m, t, T: m.vmap(lambda a, c: a + c)(t, t[:1]),              # batch sizes
        lambda m, t, T: m.vmap(lambda a: (a, 1))(t),                       # non-tensor output
        lambda m, t, T: m.vmap(lambda a: a, out_dims=(0, 1))(t),           # out_dims structure
        lambda m, t, T: m.vmap(lambda a: a, in_dims=2)(t),                 # in_dim range
        lambda m, t, T: m.vmap(lambda a: a, in_dims=[0])(t),               # in_dims type
        lambda m, t, T: m.vmap(lambda a: a, in_dims=0)(3.0),               # non-tensor input
        lambda m, t, T: m.vmap(lambda a: a, in_dims=(0.5,))(t),            # in_dim type
        lambda m, t, T: m.vmap(lambda a: a, out_dims=None)(t),             # batched, out None
        lambda m, t, T: m.vmap(lambda a: a, out_dims="a")(t),
        lambda m, t, T: m.vmap(lambda a: a)(),                             # no inputs
        lambda m, t, T: m.vmap(lambda a: a, in_dims=(None,))(t),           # nothing mapped
        lambda m, t, T: m.vmap(lambda a, c: c.add_(a), in_dims=(0, None))(t, t[0].clone()),
        lambda m, t, T: m.vmap(lambda a: a + T.rand(3, dtype=a.dtype))(t),
        lambda m, t, T: m.vmap(lambda a: a.sum().item())(t),
        lambda m, t, T: m.vmap(lambda a: 1 if a.sum() > 3 else 0)(t),     # samples disagree
        lambda m, t, T: m.vmap(lambda a: a, randomness="bad")(t),
    ]


def test_misuse_errors_match_torch():
    torch = load_torch()
    x = llgrad.tensor([[1.0, -2.0, 3.0], [-1.0, 2.0, 3.0]], dtype=llgrad.float64)
    tx = to_torch(x, torch)
    for i, case in enumerate(_misuse_cases()):
        ours = error_of(lambda: case(F, x, llgrad))
        theirs = error_of(lambda: case(torch.func, tx, torch))
        assert ours[0] == theirs[0], (i, ours, theirs)
        assert same_message(ours[1], theirs[1]), (i, ours, theirs)


def test_misuse_errors_without_torch():
    x = llgrad.tensor([[1.0, -2.0, 3.0], [-1.0, 2.0, 3.0]], dtype=llgrad.float64)
    expected = ["in_dims is not compatible with the structure of `inputs`",
                "Expected all tensors to have the same size in the mapped dimension, got sizes "
                "[2, 1]", "must only return Tensors, got type <class 'int'>",
                "out_dims is not compatible with the structure of `outputs`",
                "so expected in_dim to satisfy -2 <= in_dim < 2",
                "expected `in_dims` to be int or a (potentially nested) tuple",
                "We cannot vmap over non-Tensor arguments",
                "in_dim must be either an integer dimension or None",
                "can not return a BatchedTensor when out_dim is None",
                "`out_dims` must be an int, None or a python collection of ints",
                "got no inputs", "Expected at least one Tensor to vmap over",
                "output with shape [3] doesn't match the broadcast shape [2, 3]",
                "randomness error mode", "calling .item() on a Tensor",
                "data-dependent control flow", "Only allowed values for randomness"]
    for case, text in zip(_misuse_cases(), expected):
        _, message = error_of(lambda: case(F, x, llgrad))
        assert text in message, (text, message)


def test_views_alias_as_per_sample():
    x = rand(3, 2, 4, seed=1)
    before = x.numpy().copy()
    F.vmap(lambda a: a.view(8)[:3].mul_(2))(x)      # a write through views reaches x
    expect = before.copy()
    expect.reshape(3, 8)[:, :3] *= 2
    np.testing.assert_allclose(x.numpy(), expect)
    # a sample that cannot be viewed so refuses, as one sample alone would
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        F.vmap(lambda a: a.t().view(8))(x)
    close(F.vmap(lambda a: a.t().reshape(8))(x), loop(lambda a: a.t().reshape(8), (0,), (x,), 3))
    # in_dims=1: each sample is strided in memory; strides and contiguity are a sample's
    y = rand(2, 3, 4, seed=2)
    got = F.vmap(lambda a: (a.is_contiguous(), a.stride()), out_dims=None, in_dims=1)
    assert got(y) == (False, (12, 1))
    close(F.vmap(lambda a: a.contiguous().view(8), in_dims=1)(y),
          loop(lambda a: a.contiguous().view(8), (1,), (y,), 3))


def test_compiled_function_under_vmap_runs_eagerly():
    f = llgrad.compile(lambda a: (a.sin() * 2).sum())
    x = rand(4, 3, seed=3)
    close(F.vmap(f)(x), (x.sin() * 2).sum(1))
    close(F.vmap(f)(x), (x.sin() * 2).sum(1))
    close(f(x[0]), (x[0].sin() * 2).sum())          # its cache is not the batched trace
