"""torch names llgrad lacked (fifth sweep), against torch: Tensor.storage() / storage_type()
and the legacy typed storages, set_ in its CPU forms, is_set_to, is_storage, and the Python
callbacks apply_ / map_ / map2_."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from sweep5_harness import same  # noqa: E402


def _quiet(fn):
    def run(t, *a):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(t, *a)
    return run


X = np.arange(6.0, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("fn", [
    lambda t, x: (lambda s: (s.size(), len(s), s.nbytes(), s.element_size(), s.tolist(),
                             s[1], s.data_ptr() == x.data_ptr()))(x.storage()),
    lambda t, x: x[1:].storage().size(),
    lambda t, x: (lambda s: (s.__setitem__(0, 7.0), x)[1])(x.clone().storage()) is not None,
    lambda t, x: (lambda y: (y.storage().__setitem__(0, 7.0), y)[1])(x.clone()),
    lambda t, x: [x.to(d).storage_type().__name__ for d in (
        t.float32, t.float64, t.float16, t.int64, t.int32, t.int16, t.int8, t.uint8, t.bool)],
    lambda t, x: (t.FloatStorage(3).size(), t.FloatStorage([1, 2]).tolist(),
                  str(t.LongStorage([1, 2]).dtype).split(".")[-1]),
    lambda t, x: (t.is_storage(x.storage()), t.is_storage(x.untyped_storage()),
                  t.is_storage(x)),
])
def test_storage(fn):
    same(_quiet(fn), X, grad=False)


def test_storage_warns_as_torch():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        llgrad.ones(2).storage()
    assert not rec or str(rec[0].message).startswith("TypedStorage is deprecated.")


@pytest.mark.parametrize("fn", [
    lambda t, x: t.zeros(3).set_(x), lambda t, x: t.zeros(3).set_(),
    lambda t, x: t.zeros(3).set_(x.untyped_storage()),
    lambda t, x: t.zeros(3).set_(x.storage(), 2, (2,)),
    lambda t, x: t.zeros(3).set_(x.storage(), 1, (2, 2), (1, 2)),
    lambda t, x: t.zeros(3).set_(x.untyped_storage(), 1, (2, 2), (1, 2)),
    lambda t, x: t.zeros(3, dtype=t.int64).set_(x),
    lambda t, x: t.zeros(3, requires_grad=True).set_(x),
    lambda t, x: (lambda z: (z.set_(x), z.is_set_to(x), x.is_set_to(x), x.is_set_to(x[0]))[1:])(
        t.zeros(3)),
    lambda t, x: (lambda z: (z.set_(x), z.add_(1), x)[2])(t.zeros(3)),
])
def test_set_(fn):
    same(_quiet(fn), X.copy(), grad=False)


@pytest.mark.parametrize("fn", [
    lambda t, x: x.clone().apply_(lambda v: v * 2 + 1),
    lambda t, x: x.long().apply_(lambda v: v * 2.7),
    lambda t, x: x.clone().map_(x[0], lambda a, b: a * b + 1),
    lambda t, x: x.clone().map2_(x, x * 2, lambda a, b, c: a + b - c),
    lambda t, x: x.clone().requires_grad_().apply_(lambda v: v),
    lambda t, x: x.clone().requires_grad_().map_(x, lambda a, b: a),
    lambda t, x: x.clone().map_(t.ones(4), lambda a, b: a),
    lambda t, x: (lambda y: (y.apply_(lambda v: type(v).__name__ == "float" and v), y)[1])(
        x.clone()),
])
def test_callbacks(fn):
    same(fn, X, grad=False)


def test_map_other_dtype():
    x = llgrad.ones(2)
    with pytest.raises(TypeError, match=r"map_: expected llgrad.FloatTensor for 'other' \(got "
                                        r"llgrad.DoubleTensor\)"):
        x.map_(x.double(), lambda a, b: a)


def test_set_out_of_bounds_raises():
    # (torch 2.13 reads past the storage's end here: llgrad raises setStorage's error)
    with pytest.raises(RuntimeError, match="setStorage: sizes \\[2, 2\\], strides \\[1, 2\\], "
                                           "storage offset 4"):
        llgrad.zeros(3).set_(llgrad.ones(6).untyped_storage(), 4, (2, 2), (1, 2))


@pytest.mark.parametrize("fn", [
    lambda t, x: (lambda y: (y.as_strided_((3,), (2,), 1), y)[1])(x.clone()),
    lambda t, x: t.as_strided_(x.clone(), (2,), (1,)),
    lambda t, x: x.clone().requires_grad_().as_strided_((2,), (1,)),
    lambda t, x: (x.const_data_ptr() == x.data_ptr(), x.is_distributed(), t.is_distributed(x)),
    lambda t, x: (x + 2).mvlgamma_(2),
    lambda t, x: t.init_num_threads(),
])
def test_small_names(fn):
    same(fn, X, grad=False)


def test_dim_order():
    # (torch's dim_order imports its prims on first use: seconds; these are its answers)
    x = llgrad.ones(2, 3)
    assert (x.dim_order(), x.t().dim_order(), x[None].dim_order()) == ((0, 1), (1, 0), (0, 1, 2))
    assert llgrad.ones(2, 3, 4).permute(2, 0, 1).dim_order() == (1, 2, 0)


def test_volatile_warns():
    with pytest.warns(UserWarning, match=r"volatile was removed \(Variable.volatile is always "
                                         r"False\)"):
        assert llgrad.ones(1).volatile is False


def test_autocast_device_forms_and_nesting():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = (llgrad.get_autocast_gpu_dtype(), llgrad.get_autocast_ipu_dtype(),
               llgrad.is_autocast_xla_enabled())
    assert got == (llgrad.float16, llgrad.float16, False)
    assert str(rec[0].message) == ("torch.get_autocast_gpu_dtype() is deprecated. Please use "
                                   "torch.get_autocast_dtype('cuda') instead.")
    for d in ("cpu", "cuda", "xpu", "hpu", "xla", "ipu", "maia"):
        assert str(llgrad.get_autocast_dtype(d)).split(".")[-1] == \
            str(torch.get_autocast_dtype(d)).split(".")[-1]
    want = [torch.autocast_increment_nesting(), torch.autocast_increment_nesting(),
            torch.autocast_decrement_nesting(), torch.autocast_decrement_nesting()]
    got = [llgrad.autocast_increment_nesting(), llgrad.autocast_increment_nesting(),
           llgrad.autocast_decrement_nesting(), llgrad.autocast_decrement_nesting()]
    assert got == want


@pytest.mark.parametrize("fn", [
    lambda t, x: x.solve(x), lambda t, x: x.lstsq(x), lambda t, x: x.eig(),
    lambda t, x: x.symeig(), lambda t, x: x.reinforce(1),
    lambda t, x: (x.dense_dim(), x.sparse_dim(), x.to_dense() is x, x.name),
    lambda t, x: x.to_dense(t.float64), lambda t, x: x.is_coalesced(),
    lambda t, x: x.coalesce(), lambda t, x: x.indices(), lambda t, x: x.values(),
    lambda t, x: x.module_load(t.zeros(2, 3)), lambda t, x: x.as_subclass(int),
    lambda t, x: type(x.as_subclass(t.nn.Parameter)).__name__,
    lambda t, x: x.clone().requires_grad_().as_subclass(t.Tensor) * 2,
    lambda t, x: x.xpu(), lambda t, x: x.ipu(), lambda t, x: x.mtia(),
])
def test_legacy_names(fn):
    same(fn, X, grad=False)


def test_as_subclass_shares_memory_and_graph():
    y = llgrad.ones(2, requires_grad=True)
    z = y.as_subclass(llgrad.Tensor)
    assert type(z.grad_fn).__name__ == "AliasBackward0" and z.data_ptr() == y.data_ptr()
    (z * 3).sum().backward()
    assert y.grad.tolist() == [3.0, 3.0]


def test_cond():
    # (torch.cond runs through torch.compile: seconds; eager, it is the branch pred picks)
    x = llgrad.arange(3.0)
    assert llgrad.cond(llgrad.tensor(True), lambda a: a + 1, lambda a: a - 1, (x,)).tolist() \
        == [1.0, 2.0, 3.0]
    assert llgrad.cond(False, lambda a: a + 1, lambda a: a - 1, [x]).tolist() == [-1.0, 0, 1]
    assert llgrad.cond(x[0], lambda: 1, lambda: 2) == 2
    with pytest.raises(RuntimeError, match="Expected pred to be bool or single-element tensor"):
        llgrad.cond(x, lambda: 1, lambda: 2)


def test_warnings_name_the_users_line():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        llgrad.ones(2).index_reduce(0, llgrad.tensor([0]), llgrad.ones(1), "prod")
        llgrad.frobenius_norm(llgrad.ones(2, 2), [0])
        llgrad.nuclear_norm(llgrad.ones(2, 2))
        llgrad.ones(2).storage()
        llgrad.ones(2).volatile
        llgrad.get_autocast_cpu_dtype()
    assert rec and all(w.filename == __file__ for w in rec), [w.filename for w in rec]
