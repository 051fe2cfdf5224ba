"""A deep entry's call table calls each shared function directly, one call instruction per
arity (codegen/entry_table.py: no adapter function per shared function), and a kernel with
many arrays launches through the bulk launch (codegen/launch.py: no generated source); both
compute what the interpreter computes, and the bulk launch checks its inputs as the
general launch does."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen import launch
from llgrad.codegen.entry_table import uses_table
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate


def _deep(x, w, b):
    h = x
    for k in range(24):
        # (groups of several arities: a product (3 buffers), a bias add, a cat of four)
        h = (h @ w).tanh() + b * (1.0 + k % 2)
        h = llgrad.cat([h[:, :4], h[:, 4:8] * 2.0, h[:, 8:12], h[:, 12:] + 1.0], 1) * 0.5
    return h.sum(0)


def test_a_table_entry_calls_functions_of_every_arity_without_adapters():
    x, w, b = llgrad.randn(6, 16), llgrad.randn(16, 16) * 0.2, llgrad.randn(16)
    g = llgrad.trace(_deep, x, w, b)
    k = lower(g)
    assert uses_table(k.plan)
    defines = [line for line in k.ir_before.split("\n") if line.startswith("define")]
    assert not any('.row"(' in line for line in defines)
    arities = {line.count("ptr noalias") for line in defines}
    assert len(arities) >= 3, arities
    arrays = [x.numpy(), w.numpy(), b.numpy()]
    want, _ = evaluate(g, arrays)
    for got, ref in zip(k(arrays), want):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def _many_inputs(n):
    return _many_inputs_of(n, (2, 4))


def _many_inputs_of(n, shape):
    bld = Builder("bulk_launch")
    xs = [bld.input(TensorType("float32", shape)) for _ in range(n)]
    acc = xs[0]
    for k, x in enumerate(xs[1:]):
        acc = bld.add("add", [acc, bld.add("mul", [x, float(k % 3 + 1)])], {"alpha": 1})
    return bld.ret(acc, bld.add("t", [acc], {}, view_of=acc))


def test_a_kernel_with_many_arrays_launches_in_bulk_and_checks_its_inputs():
    n = launch.LEAN_SOURCE_ARRAYS + 4
    g = _many_inputs(n)
    k = lower(g)
    assert not k._launch.__code__.co_filename.startswith("<launch of")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(n)]
    want, _ = evaluate(g, arrays)
    for _ in range(2):                      # (the second call reuses the context)
        a, b = k(arrays)
        np.testing.assert_allclose(a, want[0], rtol=1e-5)
        np.testing.assert_array_equal(b, a.T)
    good = arrays[0]
    misaligned = np.frombuffer(b"\0" * 33, np.uint8)[1:].view(np.float32).reshape(2, 4)
    for k_bad, bad, msg in ((1, np.ones((2, 4)), "dtype"), (2, np.ones((8,), "f4"), "shape"),
                            (3, np.ones((2, 8), np.float32)[:, ::2], "strides"),
                            (n - 1, misaligned, "aligned")):
        with pytest.raises(ValueError, match=msg):
            k(arrays[:k_bad] + [bad] + arrays[k_bad + 1:])
    with pytest.raises(ValueError, match="inputs"):
        k(arrays[:-1])

    class Sub(np.ndarray):
        pass
    # (what the general launch accepts runs: a subclass, a size-1 dim's odd stride, a tuple)
    odd = np.lib.stride_tricks.as_strided(np.ones((1, 4), np.float32), (1, 4), (999 * 4, 4))
    rows = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(n)]
    g1 = _many_inputs_of(n, (1, 4))
    k1 = lower(g1)
    a, _ = k1([odd] + rows[1:])
    np.testing.assert_allclose(a, evaluate(g1, [np.ascontiguousarray(odd)] + rows[1:])[0][0],
                               rtol=1e-5)
    for given in (arrays[:1] + [good.view(Sub)] + arrays[2:], tuple(arrays)):
        a, _ = k(given)
        ref, _ = evaluate(g, [np.asarray(x, np.float32) for x in given])
        np.testing.assert_allclose(a, ref[0], rtol=1e-5)
