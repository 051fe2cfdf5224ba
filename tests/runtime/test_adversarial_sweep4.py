"""Differential checks against PyTorch, fourth sweep: small programs run in torch and in
llgrad whose values, dtypes, shapes, requires_grad, grad_fn names, gradients, exception
types and first lines, or warnings must agree. Each table holds cases that failed before
their fix (and neighbours that pin the rule): NumPy's own warnings from var/std with no
degrees of freedom, var_mean's warning name, unique's NaNs and its failing grad_fn, integer
powers with negative exponents, index tensors' dtypes and masks' shapes, take's bounds,
torch.tensor's dtype from NumPy values in lists and its overflow and ragged-list errors,
arange/linspace of float bounds with an integer dtype, f-strings of 0-d tensors, creation
sizes, products' dtype errors and grad_fn names, //= and %= in place, x.T's warnings,
autograd.Function misuse, anomaly mode's nan check, grad-mode decorators on generators, the
version-counter error's node name, in-place methods' grad_fn names, clamp's integer bounds,
axis= / keepdims= / dims= keywords, out=, 0-d indexing errors, and
autograd.functional's checks."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _tensors(v):
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _tensors(e)]
    return [v]


def _first_line(text):
    return (text.splitlines() or [""])[0].split(" (Triggered internally")[0]


def _observe(lib, fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        # (the filter llgrad sets on its own modules, which "always" replaced)
        warnings.filterwarnings("ignore", category=RuntimeWarning,
                                module=r"llgrad\.(ir|runtime)\.")
        try:
            out = "ok", fn(lib)
        except Exception as e:      # noqa: BLE001 (the exception is what is compared)
            out = "raise", (type(e).__name__, _first_line(str(e)))
    return out, [_first_line(str(w.message)) for w in rec]


def _name(d):
    return str(d).split(".")[-1]


def _check_same(tv, lv):
    for t, x in zip(_tensors(tv), _tensors(lv), strict=True):
        if isinstance(t, torch.Tensor):
            assert isinstance(x, llgrad.Tensor), type(x)
            assert tuple(x.shape) == tuple(t.shape), (x.shape, t.shape)
            assert _name(x.dtype) == _name(t.dtype), (x.dtype, t.dtype)
            assert x.requires_grad == t.requires_grad
            assert type(x.grad_fn).__name__ == type(t.grad_fn).__name__, (x.grad_fn, t.grad_fn)
            np.testing.assert_allclose(x.detach().numpy(), t.detach().numpy(), rtol=1e-5,
                                       atol=1e-6, equal_nan=True)
        elif isinstance(t, torch.dtype):
            assert _name(x) == _name(t)
        else:
            assert type(x) is type(t) and x == t, (x, t)


def same(fn, warns=True):
    """fn(lib) in torch and in llgrad: the same tensors (values, shapes, dtypes,
    requires_grad, grad_fn names) or the same exception (type, first line); with warns, the
    same warnings (first lines)."""
    ((tk, tv), tw), ((lk, lv), lw) = _observe(torch, fn), _observe(llgrad, fn)
    assert tk == lk, (tv, lv)
    if tk == "raise":
        assert tv == lv
    else:
        _check_same(tv, lv)
    if warns:
        assert tw == lw


def _backward(fn):
    def program(L):
        fn(L).sum().backward()
    return program


NAN = float("nan")


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([1.]).var(),
    lambda L: L.tensor([1., 2.]).var(correction=2),
    lambda L: L.tensor([[1., 2.]]).std(0),
    lambda L: L.zeros(0).var(),
    lambda L: L.var_mean(L.tensor([1.])),
    lambda L: L.std_mean(L.tensor([[1.], [2.]]), 1),
    lambda L: L.tensor(3.).var(0),
])
def test_moments_without_degrees_of_freedom(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.unique(L.tensor([1., NAN, 1., NAN]), return_inverse=True, return_counts=True),
    lambda L: L.unique(L.tensor([NAN, 3., 1., NAN, -1.])),
    lambda L: L.unique(L.tensor([1., 2., 1.], requires_grad=True)),
    lambda L: L.unique(L.tensor([1., 2., 1.], requires_grad=True), return_inverse=True,
                       return_counts=True),
    _backward(lambda L: L.unique(L.tensor([1., 2., 1.], requires_grad=True))),
    lambda L: L.unique(L.tensor([[1., 2.], [1., 2.]], requires_grad=True), dim=0),
    _backward(lambda L: L.unique(L.tensor([[1., 2.], [1., 2.]], requires_grad=True), dim=1)),
    lambda L: L.unique_consecutive(L.tensor([1., 1., 2.], requires_grad=True)),
    lambda L: L.unique_consecutive(L.tensor([[1., 1.], [1., 1.]], requires_grad=True), dim=0),
    _backward(lambda L: L.unique_consecutive(L.tensor([1., 1., 2.], requires_grad=True))),
])
def test_unique(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([2, 3]) ** -1,
    lambda L: L.pow(L.tensor([2, 3], dtype=L.uint8), -1),
    lambda L: L.tensor([True]) ** -1,
    lambda L: L.tensor([2]).pow_(-1),
    lambda L: L.tensor([2], dtype=L.int8) ** -2,
    lambda L: L.tensor([2]) ** -1.0,
    lambda L: L.tensor([2]) ** L.tensor(-1),
])
def test_integer_powers(fn):
    same(fn)


def _x(L, *shape):
    return L.tensor(np.arange(float(np.prod(shape)), dtype=np.float32).reshape(shape))


@pytest.mark.parametrize("fn", [
    lambda L: _x(L, 3)[L.tensor([1, 0], dtype=L.int8)],
    lambda L: _x(L, 3)[L.tensor([1, 0], dtype=L.int16)],
    lambda L: _x(L, 3).__setitem__(L.tensor([1, 0], dtype=L.int16), 1.),
    lambda L: _x(L, 3).index_put_((L.tensor([1], dtype=L.int8),), L.tensor(1.)),
    lambda L: _x(L, 2, 3)[L.tensor([True, False, True])],
    lambda L: _x(L, 2, 3, 4)[:, L.tensor([True, False])],
    lambda L: _x(L, 2, 3, 4).__setitem__((slice(None), L.tensor([True, False])), 1.),
    lambda L: _x(L, 2, 3, 4)[L.ones(2, 4, dtype=L.bool)],
    lambda L: _x(L, 2, 3, 4)[None, L.ones(2, 4, dtype=L.bool)],
    lambda L: _x(L, 2, 3, 4)[0, L.ones(2, dtype=L.bool)],
    lambda L: _x(L, 2, 3, 4)[..., L.tensor([True, False, False])],
    lambda L: _x(L, 2, 3, 4)[0, L.ones(3, dtype=L.bool)],
    lambda L: L.take(_x(L, 2, 3), L.tensor([6])),
    lambda L: L.take(_x(L, 2, 3), L.tensor([[1, -7]])),
    lambda L: L.take(_x(L, 2, 3), L.tensor([[1, -6]])),
    lambda L: L.take(L.zeros(0), L.tensor([0])),
])
def test_index_checks(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor(np.int32(3)),
    lambda L: L.tensor([np.float16(1), 2]),
    lambda L: L.tensor([np.float16(1), 2.5]),
    lambda L: L.tensor([np.int32(1), np.int32(2)]),
    lambda L: L.tensor([np.uint8(3), 1]),
    lambda L: L.tensor([[1, 2], [np.int16(3), 4]]),
    lambda L: L.tensor([np.array([1, 2], dtype=np.int32)]),
    lambda L: L.tensor([np.array([1., 2.], dtype=np.float32), np.array([1., 2.])]),
    lambda L: L.tensor([np.array([1]), np.array([2.], dtype=np.float32)]),
    lambda L: L.tensor([np.array([1., 2.])], dtype=L.float32),
    lambda L: L.tensor([np.uint8(3)], dtype=L.int64),
    lambda L: L.tensor([np.array([1, 2], dtype=np.uint8)], dtype=L.float32),
    lambda L: L.tensor([np.int64(2 ** 40)], dtype=L.float32),
    lambda L: L.tensor([[1, 2], [3]]),
    lambda L: L.tensor([[[1, 2]], [[1]]]),
    lambda L: L.tensor([[1, 2], 3]),
    lambda L: L.tensor([2 ** 63]),
    lambda L: L.tensor([2 ** 64]),
    lambda L: L.tensor([-2 ** 63 - 1]),
    lambda L: L.tensor([2 ** 63], dtype=L.float32),
    lambda L: L.tensor([-2 ** 63]),
    lambda L: L.tensor(None),
    lambda L: L.tensor([None]),
    lambda L: L.tensor([{1: 2}]),
    lambda L: L.tensor("a"),
    lambda L: L.tensor([1, "a"]),
])
def test_tensor_from_data(fn):
    same(fn, warns=False)   # (PyTorch warns once per process about lists of arrays)


@pytest.mark.parametrize("fn", [
    lambda L: L.arange(0, 1, 0.3, dtype=L.int64),
    lambda L: L.arange(0, 1, 0.3, dtype=L.uint8),
    lambda L: L.arange(0, 4.5, 1, dtype=L.int64),
    lambda L: L.arange(0, 4.5, 1, dtype=L.uint8),
    lambda L: L.arange(0.7, 4.5, 1.5, dtype=L.int32),
    lambda L: L.arange(0, 5, 1.5, dtype=L.int64),
    lambda L: L.arange(-0.5, 3, dtype=L.int64),
    lambda L: L.arange(0, -4.5, -1, dtype=L.int16),
    lambda L: L.linspace(0.5, 3.7, 3, dtype=L.int64),
    lambda L: L.linspace(-0.5, 3.7, 4, dtype=L.int64),
    lambda L: L.linspace(-7, 7, 4, dtype=L.int64),
])
def test_integer_ranges_of_float_bounds(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: f"{L.tensor(2.5, requires_grad=True) * 1}",
    lambda L: f"{L.tensor(3)}",
    lambda L: f"{L.tensor(0.1)}",
    lambda L: "{}".format(L.tensor(True)),
    lambda L: f"{L.tensor(2.5):.3f}",
    lambda L: f"{L.tensor([1., 2.])}",
    lambda L: f"{L.tensor([2.5]):.2f}",
    lambda L: f"{L.nn.Parameter(L.tensor(1.))}".replace("torch", "llgrad"),
])
def test_format(fn):
    same(fn)


def _nonleaf_grad(L):
    x = L.tensor([1., 2.], requires_grad=True)
    y = x * 2
    y.sum().backward()
    return y.grad


def _inference_saved(L):
    with L.inference_mode():
        y = L.ones(3)
    return L.tensor([1., 2., 3.], requires_grad=True) * y


@pytest.mark.parametrize("fn", [
    _nonleaf_grad,
    _inference_saved,
    lambda L: (L.tensor([1., 2.], requires_grad=True) * 2)[1:].detach_(),
])
def test_autograd_messages(fn):
    same(fn)


def _ones(L, *shape, dtype=None):
    return L.ones(*shape, dtype=dtype)


@pytest.mark.parametrize("fn", [
    lambda L: L.baddbmm(_ones(L, 2, 2, 2), _ones(L, 2, 2, 2), _ones(L, 2, 2, 2, dtype=L.int64)),
    lambda L: L.baddbmm(_ones(L, 2, 2, 2, dtype=L.float64), _ones(L, 2, 2, 2),
                        _ones(L, 2, 2, 2)),
    lambda L: L.mv(_ones(L, 2, 2), _ones(L, 2, dtype=L.int64)),
    lambda L: L.bmm(_ones(L, 1, 2, 2, dtype=L.int64), _ones(L, 1, 2, 2)),
    lambda L: _ones(L, 3, 2, 2) @ _ones(L, 2, 2, dtype=L.int64),
    lambda L: _ones(L, 3, 2, 2) @ _ones(L, 3, 2, 2, dtype=L.int64),
    lambda L: _ones(L, 2) @ _ones(L, 3, 2, 2, dtype=L.int64),
    lambda L: _ones(L, 2, 2) @ _ones(L, 3, 2, 2, dtype=L.int64),
    lambda L: _ones(L, 3, 2, 2) @ _ones(L, 2, dtype=L.int64),
    lambda L: _ones(L, 2) @ _ones(L, 2, 2, dtype=L.int64),
    lambda L: _ones(L, 2) @ _ones(L, 2, dtype=L.int64),
    lambda L: _ones(L, 2, 2, dtype=L.int16) @ _ones(L, 2, 2, dtype=L.int8),
    lambda L: L.addmm(_ones(L, 2, 2), _ones(L, 2, 2, dtype=L.int64), _ones(L, 2, 2)),
    lambda L: L.addmm(_ones(L, 2, 2), _ones(L, 2, 2), _ones(L, 2, 2, dtype=L.float64)),
    lambda L: L.vdot(_ones(L, 2), _ones(L, 2, dtype=L.float64)),
    lambda L: L.einsum("i,i->", L.tensor([1, 2]), L.tensor([3., 4])),
])
def test_product_dtype_errors(fn):
    same(fn)


def _grads(fn, *shapes):
    def program(L):
        xs = [L.tensor(np.arange(float(np.prod(s))).reshape(s) % 5 - 2, dtype=L.float32,
                       requires_grad=True) for s in shapes]
        y = fn(L, *xs)
        y.sum().backward()
        return (y,) + tuple(x.grad for x in xs)
    return program


@pytest.mark.parametrize("fn", [
    _grads(lambda L, c, a, b: L.addmv(c, a, b), (2,), (2, 3), (3,)),
    _grads(lambda L, c, a, b: L.addmv(c, a, b, beta=0), (2,), (2, 3), (3,)),
    _grads(lambda L, c, a, b: L.addr(c, a, b), (2, 3), (2,), (3,)),
    _grads(lambda L, c, a, b: L.addbmm(c, a, b), (2, 4), (3, 2, 3), (3, 3, 4)),
    _grads(lambda L, a: L.linalg.matrix_power(a + 5 * L.eye(2), -3), (2, 2)),
    _grads(lambda L, a: L.matrix_power(a + 5 * L.eye(2), -1), (2, 2)),
    _grads(lambda L, a: L.einsum("ii->i", a), (3, 3)),
    _grads(lambda L, a: L.einsum("ij->ij", a), (2, 3)),
    _grads(lambda L, a: L.einsum("ijk->ijk", a), (2, 3, 1)),
    _grads(lambda L, a: L.einsum("ij", a), (2, 3)),
])
def test_product_grad_fns(fn):
    same(fn)


def _in_place(op):
    def program(L):
        x = L.tensor([[7., -7.], [5., 3.]])
        v = x[0]
        v = op(v)
        return x, v
    return program


def _ifloordiv(v):
    v //= 2
    return v


def _imod(v):
    v %= 3
    return v


def _ifloordiv_grad(L):
    b = L.tensor([3.], requires_grad=True) * 1
    b //= 2
    return b


@pytest.mark.parametrize("fn", [
    _in_place(_ifloordiv),
    _in_place(_imod),
    _ifloordiv_grad,
])
def test_in_place_floor_divide_and_remainder(fn):
    same(fn)


T_WARNING = ("The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
             "deprecated and it will throw an error in a future release. Consider `x.mT` to "
             "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` "
             "to reverse the dimensions of a tensor.")


@pytest.mark.parametrize("shape, warning", [
    ((3,), T_WARNING), ((2, 3, 4), T_WARNING), ((2, 3), None),
    ((), "Tensor.T is deprecated on 0-D tensors. This function is the identity in these "
         "cases."),
])
def test_T_warns_as_pytorch_off_two_dims(shape, warning):
    # (PyTorch warns once per process, so its warning is not observed here each time)
    same(lambda L: L.ones(shape).T, warns=False)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        llgrad.ones(shape).T
    assert [str(w.message) for w in rec] == ([warning] if warning else [])


@pytest.mark.parametrize("fn", [
    lambda L: L.zeros(2, -1),
    lambda L: L.ones(-1),
    lambda L: L.empty(-2),
    lambda L: L.rand(-1),
    lambda L: L.randn(2, -3),
    lambda L: L.full((-1,), 1.),
    lambda L: L.zeros(2.0),
    lambda L: L.zeros((2.0,)),
    lambda L: L.ones(2, 3.0),
    lambda L: L.zeros("a"),
    lambda L: L.randn(2.5),
    lambda L: L.zeros(None),
    lambda L: L.ones(2, None),
    lambda L: L.ones(),
    lambda L: L.zeros(),
    lambda L: L.ones(()),
    lambda L: L.zeros_like(L.tensor(1.)),
    lambda L: L.ones_like(L.tensor(1)),
    lambda L: L.rand_like(L.tensor(1.)).shape,
    lambda L: L.zeros(L.Size([2, 3])),
    lambda L: L.zeros(L.tensor(2)),
])
def test_creation_sizes(fn):
    same(fn)


def _function_saving(value):
    def program(L):
        class F(L.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a, value)
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g
        return F.apply(L.tensor([1., 2.], requires_grad=True))
    return program


def _function_instance_called(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        f = F()
    return f(L.tensor([1.]))


@pytest.mark.parametrize("fn", [
    _function_saving(3),
    _function_saving(None),
    _function_instance_called,
])
def test_autograd_function_misuse(fn):
    same(fn)


def test_autograd_function_instance_warns():
    class F(llgrad.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a

    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        F()


def _anomaly_nan(value):
    def program(L):
        with L.autograd.detect_anomaly():
            x = L.tensor([value], requires_grad=True)
            (x.sqrt() * 0).sum().backward()
            return x.grad
    return program


def _anomaly_clean(L):
    with L.autograd.set_detect_anomaly(True):
        x = L.tensor([1.], requires_grad=True)
        g, = L.autograd.grad(x.exp().sum(), x)
    return g


def _decorated_generator(decorator, L):
    x = L.ones(2, requires_grad=True)

    @decorator(L)
    def steps(n):
        for _ in range(n):
            yield (x * 2).requires_grad, L.is_grad_enabled()
        return "done"

    g = steps(2)
    first = next(g)
    between = (x * 2).requires_grad, L.is_grad_enabled()
    return list(first) + list(between) + [c for s in g for c in s]


def _int_requires_grad(L):
    L.tensor([1]).requires_grad = True


@pytest.mark.parametrize("fn", [
    _anomaly_nan(0.),
    _anomaly_nan(-1.),
    _anomaly_clean,
    lambda L: _decorated_generator(lambda L: L.no_grad(), L),
    lambda L: _decorated_generator(lambda L: L.no_grad, L),
    lambda L: _decorated_generator(lambda L: L.set_grad_enabled(False), L),
    lambda L: _decorated_generator(lambda L: L.inference_mode(), L),
    _int_requires_grad,
])
def test_autograd_modes(fn):
    same(fn)


def _modified_after_save(make, modify, saved_input=True):
    def program(L):
        x = L.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        y = make(L, x)
        z = y * y if saved_input else y
        modify(L, y)
        z.sum().backward()
    return program


def _under_no_grad(op):
    def modify(L, y):
        with L.no_grad():
            op(y)
    return modify


@pytest.mark.parametrize("fn", [
    _modified_after_save(lambda L, x: x.exp(), lambda L, y: y.add_(1), saved_input=False),
    _modified_after_save(lambda L, x: x.sigmoid(), lambda L, y: y.mul_(2), saved_input=False),
    _modified_after_save(lambda L, x: x * 2, lambda L, y: y.add_(1)),
    _modified_after_save(lambda L, x: x * 2, lambda L, y: y[0].mul_(2)),
    _modified_after_save(lambda L, x: x * 2, lambda L, y: y.t_()),
    _modified_after_save(lambda L, x: x / 2, _under_no_grad(lambda y: y.add_(1))),
    _modified_after_save(lambda L, x: x.sum(0), _under_no_grad(lambda y: y.add_(1))),
    _modified_after_save(lambda L, x: x.view(4), _under_no_grad(lambda y: y.add_(1))),
    _modified_after_save(lambda L, x: x @ x, _under_no_grad(lambda y: y.add_(1))),
])
def test_version_counter_error_names_the_node_as_pytorch(fn):
    # (llgrad's hint after the first sentence names the lines instead of anomaly mode)
    ((tk, tv), _), ((lk, lv), _) = _observe(torch, fn), _observe(llgrad, fn)
    assert tk == lk == "raise"
    assert tv[0] == lv[0]
    assert tv[1].split(" Hint:")[0].replace("torch.", "llgrad.") == lv[1].split(" Hint:")[0]


def _m(L):
    return L.tensor([[1., 5., 3.], [4., 2., 6.]])


@pytest.mark.parametrize("fn", [
    lambda L: _m(L).sum(axis=0),
    lambda L: L.sum(_m(L), axis=1),
    lambda L: _m(L).mean(axis=1, keepdim=True),
    lambda L: _m(L).max(axis=1),
    lambda L: _m(L).argmax(axis=1),
    lambda L: _m(L).std(axis=1),
    lambda L: _m(L).cumsum(axis=1),
    lambda L: _m(L).amax(axis=1),
    lambda L: _m(L).any(axis=1),
    lambda L: _m(L).prod(axis=1),
    lambda L: _m(L).sort(axis=1),
    lambda L: L.cat([_m(L), _m(L)], axis=1),
    lambda L: L.stack([_m(L), _m(L)], axis=1),
    lambda L: _m(L)[None].squeeze(axis=0),
    lambda L: _m(L).sum(0, keepdims=True),
    lambda L: L.softmax(_m(L), axis=1),
    lambda L: _m(L).flip(dims=[0]),
    lambda L: L.flip(_m(L), dims=(1,)),
    lambda L: _m(L).permute(dims=(1, 0)),
    lambda L: L.permute(_m(L), dims=(1, 0)),
    lambda L: _m(L).view(size=(6,)),
    lambda L: _m(L).reshape(shape=(3, 2)),
    lambda L: L.reshape(_m(L), shape=(3, 2)),
    lambda L: _m(L)[:1].expand(size=(2, 3)),
    lambda L: _m(L).repeat(repeats=(1, 2)),
])
def test_numpy_style_keywords(fn):
    same(fn)


def test_numpy_style_keyword_with_its_name_is_a_type_error():
    with pytest.raises(TypeError, match="multiple values for argument 'dim'"):
        _m(llgrad).sum(axis=0, dim=1)


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "int64", "int32", "int16",
                                  "int8", "uint8", "bool"])
def test_dtype_flags(name):
    t, lg = getattr(torch, name), getattr(llgrad, name)
    assert (lg.is_signed, lg.is_complex, lg.is_floating_point) == \
        (t.is_signed, t.is_complex, t.is_floating_point)


@pytest.mark.parametrize("fn", [
    lambda L: L.zeros(2).normal_(0., -1.),
    lambda L: L.zeros(2).normal_(0., -1.5),
    lambda L: L.addcdiv(L.tensor([1]), L.tensor([2]), L.tensor([3])),
    lambda L: L.tensor([1], dtype=L.int32).mean(),
    lambda L: L.tensor([True]).mean(),
    lambda L: L.tensor([1.]).mean(dtype=L.int32),
    lambda L: L.tensor([1, 2]).mean(dtype=L.int64),
])
def test_messages(fn):
    same(fn)


def _in_place_method(call):
    def program(L):
        x = L.tensor([[1., -2., 3.], [-4., 5., -6.]], requires_grad=True)
        y = call(L, x * 1)
        y.sum().backward()
        return y, x.grad
    return program


@pytest.mark.parametrize("fn", [
    _in_place_method(lambda L, y: y.index_fill_(1, L.tensor([0]), 2.)),
    _in_place_method(lambda L, y: y.renorm_(2, 0, 1.)),
    _in_place_method(lambda L, y: y.cumsum_(0)),
    _in_place_method(lambda L, y: y.index_copy_(1, L.tensor([0]), L.ones(2, 1))),
    _in_place_method(lambda L, y: y.xlogy_(2.)),
    _in_place_method(lambda L, y: y.log2_()),
    _in_place_method(lambda L, y: y.square_()),
    _in_place_method(lambda L, y: y.hypot_(L.ones(1))),
    _in_place_method(lambda L, y: y.put_(L.tensor([0, 5]), L.tensor([5., 6.]))),
    _in_place_method(lambda L, y: y[0].index_fill_(0, L.tensor([0]), 2.)),
    _in_place_method(lambda L, y: L.kron(y, y)),
])
def test_in_place_method_grad_fns(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([1, 100], dtype=L.int8).clamp(max=300),
    lambda L: L.tensor([1, 100], dtype=L.int8).clamp(min=-300),
    lambda L: L.tensor([1, 100], dtype=L.uint8).clamp(max=300),
    lambda L: L.tensor([1, 100], dtype=L.uint8).clamp(min=-300),
    lambda L: L.tensor([1, 200], dtype=L.uint8).clamp(-5, 100),
    lambda L: L.tensor([1, 100], dtype=L.int8).clamp(max=1.5),
    lambda L: L.tensor([1, 100], dtype=L.int8).clamp_(max=300),
    lambda L: L.tensor([1, 100], dtype=L.int8).clamp_min(300),
    lambda L: L.tensor([1, 100], dtype=L.int8).clamp_max_(-300),
    lambda L: L.tensor([1, 100], dtype=L.int8).clamp_min(min=3),
])
def test_clamp_integer_bounds(fn):
    same(fn)


def _set(L, x, idx, value):
    x[idx] = value
    return x


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor(5.)[0],
    lambda L: L.tensor(5.)[0, 0],
    lambda L: L.tensor(5.)[:],
    lambda L: L.tensor(5.)[()],
    lambda L: _set(L, L.tensor(5.), 0, 1.),
    lambda L: _set(L, L.tensor(5.), (), 1.),
    lambda L: (lambda x: _set(L, x, x > 1, L.tensor([9., 8., 7.])))(L.arange(4.)),
    lambda L: _set(L, L.arange(4.), [0, 1], L.tensor([1., 2., 3.])),
    lambda L: _set(L, L.arange(6.).reshape(2, 3), (L.tensor([0, 1]),), L.ones(2, 2)),
    lambda L: _set(L, L.arange(4.), [0, 1], L.tensor([[1., 2.]])),
    lambda L: L.ones(3).index_select(0, L.tensor([0.])),
    lambda L: L.ones(3).index_select(0, L.tensor([0], dtype=L.int16)),
    lambda L: L.ones(3).index_select(0, L.tensor([2], dtype=L.int32)),
    lambda L: L.ones(3).gather(0, L.tensor([0], dtype=L.uint8)),
    lambda L: L.ones(3).gather(0, L.tensor([0.])),
    lambda L: L.ones(3).scatter(0, L.tensor([0.]), 1.),
    lambda L: L.ones(3).scatter_add(0, L.tensor([0], dtype=L.int8), L.ones(3)),
    lambda L: L.ones(3).scatter_reduce(0, L.tensor([0], dtype=L.int8), L.ones(3), "sum"),
])
def test_indexing_errors(fn):
    same(fn)


def _af(L):
    return L.autograd.functional


def _x2(L):
    return L.tensor([1., 2.])


@pytest.mark.parametrize("fn", [
    lambda L: _af(L).jacobian(lambda x: x.exp(), _x2(L), strategy="forward-mode"),
    lambda L: _af(L).jacobian(lambda x: 3, _x2(L)),
    lambda L: _af(L).jacobian(lambda x: (x, 3), _x2(L)),
    lambda L: _af(L).jacobian(lambda x: x ** 2, _x2(L), create_graph=True),
    lambda L: _af(L).hessian(lambda x: x ** 2, _x2(L)),
    lambda L: _af(L).hessian(lambda x: (x.sum(), x.sum()), _x2(L)),
    lambda L: _af(L).hessian(lambda x: (x ** 3).sum(), _x2(L)),
    lambda L: _af(L).vjp(lambda x: x ** 2, _x2(L)),
    lambda L: _af(L).jvp(lambda x: x ** 2, _x2(L)),
    lambda L: _af(L).hvp(lambda x: x ** 3, _x2(L), L.ones(2)),
    lambda L: _af(L).vhp(lambda x: (x, x), _x2(L), L.ones(2)),
])
def test_autograd_functional(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: _af(L).vjp(lambda x: x ** 2, (_x2(L),), (L.ones(3),)),
    lambda L: _af(L).vjp(lambda x: (x ** 2,), (_x2(L),), (L.ones(3),)),
    lambda L: _af(L).jvp(lambda x: x ** 2, (_x2(L),), (L.ones(3),)),
])
def test_autograd_functional_v_sizes(fn):
    ((tk, tv), _), ((lk, lv), _) = _observe(torch, fn), _observe(llgrad, fn)
    assert tk == lk == "raise"
    assert (tv[0], tv[1].replace("torch.", "llgrad.")) == lv


def _into(L, fn, out=None):
    out = L.empty(0) if out is None else out
    r = fn(out)
    return out, r is out


@pytest.mark.parametrize("fn", [
    lambda L: _into(L, lambda out: L.add(L.ones(2), 1, out=out)),
    lambda L: _into(L, lambda out: L.add(L.ones(2), L.ones(2), alpha=2, out=out)),
    lambda L: _into(L, lambda out: L.mul(L.ones(2), 3, out=out)),
    lambda L: _into(L, lambda out: L.matmul(L.ones(2, 2), L.ones(2, 2), out=out)),
    lambda L: _into(L, lambda out: L.sum(L.ones(2, 2), 0, out=out)),
    lambda L: _into(L, lambda out: L.cat([L.ones(2), L.ones(1)], out=out)),
    lambda L: _into(L, lambda out: L.exp(L.zeros(2), out=out)),
    lambda L: _into(L, lambda out: L.arange(3., out=out)),
    lambda L: _into(L, lambda out: L.zeros(2, out=out)),
    lambda L: _into(L, lambda out: L.zeros(2, out=out), L.empty(0, dtype=L.int64)),
    lambda L: _into(L, lambda out: L.arange(3., out=out), L.empty(0, dtype=L.int64)),
    lambda L: _into(L, lambda out: L.clamp(L.ones(2), 0, 0.5, out=out)),
    lambda L: _into(L, lambda out: L.where(L.tensor([True, False]), L.ones(2), L.zeros(2),
                                           out=out)),
    lambda L: (lambda v, i: (L.max(L.tensor([[1., 3.]]), 1, out=(v, i)), v, i)[1:])(
        L.empty(0), L.empty(0, dtype=L.int64)),
    lambda L: L.add(L.ones(2), 1, out=L.empty(0, dtype=L.int64)),
    lambda L: _into(L, lambda out: L.add(L.ones(2), 1, out=out), L.empty(0, dtype=L.float64)),
    lambda L: L.add(L.ones(2, requires_grad=True), 1, out=L.empty(0)),
    lambda L: _into(L, lambda out: L.add(L.ones(2), 1, out=out), L.ones(3)),
    lambda L: (lambda o: (L.add(L.ones(2), 1, out=o[0]), o)[1])(L.ones(2, 2)),
    lambda L: _into(L, lambda out: L.add(L.ones(2), 1, out=None)),
])
def test_out_argument(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.ones(2, 3).t().clone(memory_format=L.contiguous_format).stride(),
    lambda L: L.ones(2, 3).t().clone(memory_format=L.preserve_format).stride(),
    lambda L: L.zeros_like(L.ones(2, 3), memory_format=L.preserve_format),
    lambda L: L.empty_like(L.ones(2, 3), memory_format=L.contiguous_format).shape,
    lambda L: L.ones(2, 3).contiguous(memory_format=L.contiguous_format),
    lambda L: L.ones(2, 3).is_contiguous(memory_format=L.contiguous_format),
    lambda L: L.ones(2, 3).to(memory_format=L.contiguous_format),
    lambda L: repr(L.channels_last).split(".")[1],
])
def test_memory_formats(fn):
    same(fn)


def test_is_meta():
    assert llgrad.ones(2).is_meta is torch.ones(2).is_meta is False
