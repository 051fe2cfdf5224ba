"""bfloat16 numbers and values against PyTorch, bit for bit: a Python int beside a bfloat16
tensor is cast to bfloat16 as a float is (mul / div excepted), mul / div keep a one-element
second operand of any dtype in float32 but cast a 0-d tensor given first, nextafter steps
bfloat16's own neighbours, igamma casts its operands, and every write into bfloat16 memory
outside the dispatcher (gradient accumulation, map_ / apply_) holds bfloat16 values."""
import itertools

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

VALS = [1.0, 3.0, 1.5, 257.0, -0.0, 3.3895313892515355e38]


def _both(fn):
    got, want = fn(llgrad), fn(torch)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    g, w = got.detach().float().numpy(), want.detach().float().numpy()
    np.testing.assert_array_equal(g, w)
    return got


def _is_bfloat16_memory(t):
    """Every value in t's memory is a bfloat16 (its low 16 bits zero) or a NaN."""
    f = np.ascontiguousarray(np.asarray(t._data, np.float32))
    return bool((((f.view(np.uint32) & 0xFFFF) == 0) | np.isnan(f)).all())


@pytest.mark.parametrize("fn", [
    lambda M, a: a + 257, lambda M, a: 257 + a, lambda M, a: a - 257, lambda M, a: a == 257,
    lambda M, a: a < 257, lambda M, a: M.fmod(a, 257), lambda M, a: M.remainder(a, 2 ** 40 + 1),
    lambda M, a: M.maximum(a, M.tensor(257)), lambda M, a: a * 257, lambda M, a: a / 257,
], ids=["add", "radd", "sub", "eq", "lt", "fmod", "remainder", "maximum", "mul", "div"])
def test_python_ints_beside_bfloat16(fn):
    _both(lambda M: fn(M, M.tensor(VALS).bfloat16()))


@pytest.mark.parametrize("op", ["mul", "div"])
@pytest.mark.parametrize("other", [
    lambda M: M.tensor(257), lambda M: M.tensor([257]), lambda M: M.tensor([[257]]),
    lambda M: M.tensor(1.0039, dtype=M.float64), lambda M: M.tensor(1.0039),
    lambda M: M.tensor([257, 257, 257, 257, 257, 257]),
], ids=["int0d", "int1", "int11", "f64_0d", "f32_0d", "int_many"])
def test_mul_div_read_a_one_element_second_operand_in_float32(op, other):
    _both(lambda M: getattr(M, op)(M.tensor(VALS).bfloat16(), other(M)))
    _both(lambda M: getattr(M, op)(other(M), M.tensor(VALS).bfloat16()))
    if other(torch).dim() <= 1:         # (in place: the result keeps self's shape)
        _both(lambda M: getattr(M.tensor(VALS).bfloat16(), op + "_")(other(M)))


_SPECIAL = [0.0, -0.0, 1.0, -1.0, 1.0078125, 3.3895313892515355e38, float("inf"),
            float("-inf"), float("nan"), 9.183549615799121e-41, 1.1754943508222875e-38]


def test_nextafter_steps_bfloat16_neighbours():
    a, b = zip(*itertools.product(_SPECIAL, _SPECIAL))
    _both(lambda M: M.nextafter(M.tensor(a).bfloat16(), M.tensor(b).bfloat16()))
    _both(lambda M: M.nextafter(M.tensor(a).bfloat16(), M.tensor(1.001, dtype=M.float64)))


def test_igamma_casts_a_double_operand_to_bfloat16():
    a = [0.5, 1.3, 2.7, 10.0]
    _both(lambda M: M.igamma(M.tensor(a).bfloat16(), M.tensor(1.1001, dtype=M.float64)))
    _both(lambda M: M.igammac(M.tensor(1.1001, dtype=M.float64), M.tensor(a).bfloat16()))


def test_gradient_accumulated_across_backward_calls_is_rounded():
    x = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)

    def grads(M):
        y = M.tensor(x).bfloat16().requires_grad_()
        (y * 1.1).sum().backward()
        (y * 1.3).sum().backward()
        (y.float() * 1.7).sum().backward()
        return y.grad

    assert _is_bfloat16_memory(_both(grads))


def test_map_and_apply_write_bfloat16_values():
    def mapped(M):
        x = M.tensor([1.0, 2.0, 3.0]).bfloat16()
        return x.map_(M.tensor([0.5, 0.5, 0.5]).bfloat16(), lambda a, b: a / 3 + b)

    def applied(M):
        return M.tensor([1.0, 2.0, 3.0]).bfloat16().apply_(lambda a: a / 3)

    assert _is_bfloat16_memory(_both(mapped)) and _is_bfloat16_memory(_both(applied))


def test_checkpoint_recomputes_bfloat16_as_the_forward_did():
    x = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)

    def grads(M):
        t = M.tensor(x).bfloat16().requires_grad_()
        y = M.utils.checkpoint.checkpoint(lambda u: u.sin().exp() @ u.T, t, use_reentrant=False)
        y.sum().backward()
        return t.grad

    assert _is_bfloat16_memory(_both(grads))


def test_unpack_hook_sees_bfloat16_ops_round():
    seen = []

    def unpack(t):
        u = t * 1.001               # (an eager bfloat16 op inside the hook)
        seen.append((u.dtype, _is_bfloat16_memory(u)))
        return t

    x = llgrad.ones(3).bfloat16().requires_grad_()
    with llgrad.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        y = (x * x).sum()
    y.backward()
    assert seen and all(s == (llgrad.bfloat16, True) for s in seen)


def test_init_of_bfloat16_parameters():
    def sparse(M):
        M.manual_seed(0)
        w = M.nn.Linear(6, 4).bfloat16().weight
        M.nn.init.sparse_(w, 0.5)
        return w

    _both(sparse)
    for M in (llgrad, torch):
        with pytest.raises(NotImplementedError, match="BFloat16"):
            M.nn.init.orthogonal_(M.empty(3, 3, dtype=M.bfloat16))


_X = np.concatenate([np.random.default_rng(3).standard_normal(200) * 3,
                     np.arange(-8, 8, 0.25), [0.0, -0.0, 1e-3, 257.3]]).astype(np.float32)


@pytest.mark.parametrize("fn", [
    lambda M, x: M.sinc(x),
    lambda M, x: M.nn.functional.softshrink(x, 0.5113),
    lambda M, x: M.logaddexp(x, x.flip(0)),
    lambda M, x: M.logaddexp2(x, M.tensor(2.0019, dtype=M.float64)),
    lambda M, x: x.sub(257, alpha=3),
    lambda M, x: x.add(257, alpha=-3),
], ids=["sinc", "softshrink", "logaddexp", "logaddexp2", "sub_alpha", "add_alpha"])
def test_functions_of_several_ops_round_once_as_torch_s_kernel(fn):
    _both(lambda M: fn(M, M.tensor(_X).bfloat16()))


@pytest.mark.parametrize("fn", [
    lambda M, x: M.isin(x, 0.7019), lambda M, x: M.isin(0.7019, x),
    lambda M, x: M.isin(x, 0.7019, invert=True),
], ids=["test_number", "element_number", "invert"])
def test_isin_casts_a_number_to_bfloat16(fn):
    _both(lambda M: fn(M, M.tensor([0.1, 0.7019, 0.703125, 0.7, 257.0]).bfloat16()))
