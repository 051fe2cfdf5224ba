"""The utilities tutorial scripts call at the top, against torch 2.13: the float32 matmul
precision, deterministic algorithms and their debug mode, warn-always, inter-op threads,
flush-denormal, typename, is_storage; where memory comes from: asarray, frombuffer,
empty_strided, Tensor.new_empty_strided, share_memory_ / is_shared (across a fork),
pin_memory / is_pinned, output_nr, the deprecated resize / resize_as; compiled == eager."""
import array
import os
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime import functions_settings


def _torch():
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _defaults():
    """Every test starts and ends with llgrad's (and, where used, torch's) defaults."""
    functions_settings._reset()
    yield
    functions_settings._reset()
    try:
        import torch
    except ImportError:
        return
    torch.use_deterministic_algorithms(False)
    torch.set_float32_matmul_precision("highest")
    torch.set_warn_always(False)


def _outcome(fn, lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = fn(lib)
        except Exception as e:      # noqa: BLE001 (the outcome is compared)
            return ("raises", type(e).__name__, str(e)), [str(w.message) for w in caught]
    return ("returns", value), [str(w.message) for w in caught]


def _same(fn):
    torch = _torch()
    a, b = _outcome(fn, llgrad), _outcome(fn, torch)
    assert a[0] == b[0]
    return a, b


# ---- global settings ------------------------------------------------------------------------

def test_matmul_precision_matches_torch():
    torch = _torch()
    for lib in (llgrad, torch):
        assert lib.get_float32_matmul_precision() == "highest"
    for value in ("high", "medium", "low", "highest", 3, None):
        def step(lib):
            lib.set_float32_matmul_precision(value)
            return lib.get_float32_matmul_precision()
        (a, wa), (b, wb) = _same(step)
        assert len(wa) == len(wb)
        if wa:              # (torch's message names the C++ line it came from)
            assert wb[0].startswith(wa[0])


def test_matmul_precision_changes_no_number():
    a = llgrad.tensor(np.random.default_rng(0).standard_normal((8, 8)), dtype=llgrad.float32)
    want = (a @ a).numpy()
    llgrad.set_float32_matmul_precision("medium")
    np.testing.assert_array_equal((a @ a).numpy(), want)


@pytest.mark.parametrize("steps", [
    [("use", True, {}), ("use", False, {"warn_only": True})],
    [("mode", "warn"), ("mode", 2), ("mode", "default")],
    [("use", True, {"warn_only": True}), ("mode", 0)],
    [("mode", "bad")], [("mode", 5)], [("mode", 1.0)], [("use", "x", {})], [("use", 1, {})],
    [("use", True, {"warn_only": 1})],
])
def test_deterministic_settings_match_torch(steps):
    def run(lib):
        seen = []
        for step in steps:
            if step[0] == "use":
                lib.use_deterministic_algorithms(step[1], **step[2])
            else:
                lib.set_deterministic_debug_mode(step[1])
            seen.append((lib.are_deterministic_algorithms_enabled(),
                         lib.is_deterministic_algorithms_warn_only_enabled(),
                         lib.get_deterministic_debug_mode()))
        return seen
    _same(run)


def test_warn_always_matches_torch_and_repeats_once_warnings():
    for value in (True, False, "x"):
        _same(lambda lib: (lib.set_warn_always(value), lib.is_warn_always_enabled()))
    x = llgrad.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        llgrad.asarray(x)
        llgrad.asarray(x)                       # (a once-per-process warning)
        llgrad.set_warn_always(True)
        llgrad.asarray(x)
    assert len(caught) == 2


def test_interop_threads():
    torch = _torch()
    assert llgrad.get_num_interop_threads() >= 1
    for bad, kind in ((0, "positive integer"), (-1, "positive integer"), ("a", "an int")):
        for lib in (llgrad, torch):
            with pytest.raises(RuntimeError, match=kind):
                lib.set_num_interop_threads(bad)
    llgrad.set_num_interop_threads(3)
    assert llgrad.get_num_interop_threads() == 3
    with pytest.raises(RuntimeError, match="cannot set number of interop threads after "
                                           "parallel work has started or "
                                           "set_num_interop_threads called"):
        llgrad.set_num_interop_threads(2)
    functions_settings._reset()
    llgrad.set_num_interop_threads(2)           # (the reset forgets the first call)


def test_flush_denormal_is_checked():
    torch = _torch()                # (what it does: tests/runtime/test_flush_denormal.py)
    for lib in (llgrad, torch):
        with pytest.raises(RuntimeError, match="flush_denormal expects a bool, but got str"):
            lib.set_flush_denormal("x")


def test_typename_and_is_storage():
    torch = _torch()
    for make in (lambda L: L.tensor([1.0]), lambda L: L.tensor([1]),
                 lambda L: L.tensor([1.0], dtype=L.float64), lambda L: L.tensor([True]),
                 lambda L: L.tensor([1], dtype=L.uint8), lambda L: L.tensor([1], dtype=L.int8)):
        assert llgrad.typename(make(llgrad)).split(".")[1] == \
            torch.typename(make(torch)).split(".")[1]
    for obj in (1, 2.5, "s", None, [1], np.float32(1), int, warnings.warn, np.ndarray):
        assert llgrad.typename(obj) == torch.typename(obj)
    assert llgrad.typename(llgrad.nn.Linear(1, 1)) == "llgrad.nn.layers.Linear"
    t = llgrad.ones(2)
    assert llgrad.is_storage(t.untyped_storage()) and not llgrad.is_storage(t)
    assert not llgrad.is_storage(np.ones(2))


# ---- asarray, frombuffer --------------------------------------------------------------------

def _describe(t, lib, src=None):
    """What asarray gave, comparably: dtype, shape, values, requires_grad, is_leaf, node,
    strides, and whether it is the source object / shares its memory."""
    same = src is not None and t is src
    shares = src is not None and t.data_ptr() == (
        src.__array_interface__["data"][0] if isinstance(src, np.ndarray) else src.data_ptr())
    return (str(t.dtype).split(".")[1], tuple(t.shape), t.detach().numpy().tolist(),
            t.requires_grad, t.is_leaf, type(t.grad_fn).__name__, t.stride(), same, shares)


ARRAY = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("make,kw", [
    (lambda L: ARRAY, {}), (lambda L: ARRAY, {"copy": True}), (lambda L: ARRAY.T, {}),
    (lambda L: ARRAY, {"dtype": "float32"}), (lambda L: ARRAY, {"dtype": "float32", "copy": False}),
    (lambda L: ARRAY, {"requires_grad": True}), (lambda L: np.arange(3), {"requires_grad": True}),
    (lambda L: ARRAY[:, ::-1], {}), (lambda L: np.float32(2), {}),
    (lambda L: np.float32(2), {"copy": False}),
    (lambda L: [1, 2, 3], {}), (lambda L: [1.0, 2.0], {}),
    (lambda L: [1.5, 2.5], {"dtype": "int64"}),
    (lambda L: [1.0], {"copy": False}), (lambda L: 3.5, {}), (lambda L: True, {}),
    (lambda L: "abc", {}), (lambda L: None, {}),
    (lambda L: L.arange(4), {}), (lambda L: L.arange(4), {"requires_grad": True}),
    (lambda L: L.arange(4.0), {"copy": True}), (lambda L: L.arange(4.0), {"dtype": "float64"}),
    (lambda L: L.arange(4.0), {"dtype": "float64", "copy": False}),
    (lambda L: L.arange(4.0), {"requires_grad": True}),
    (lambda L: L.arange(6.0).reshape(2, 3).t(), {}),
])
def test_asarray_matches_torch(make, kw):
    def run(lib):
        src = make(lib)
        opts = {k: (getattr(lib, v) if k == "dtype" else v) for k, v in kw.items()}
        out = lib.asarray(src, **opts)
        return _describe(out, lib, src if isinstance(src, (np.ndarray, lib.Tensor)) else None)
    _same(run)


def test_asarray_of_tensors_with_history_matches_torch():
    def run(lib, **kw):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        out = []
        for src in (x, y):
            r = lib.asarray(src, **kw)
            out.append(_describe(r, lib, src) + (src.requires_grad,))
        return out
    for kw in ({}, {"requires_grad": True}, {"requires_grad": False}, {"copy": True},
               {"copy": True, "requires_grad": False}, {"dtype": "float64"}):
        _same(lambda lib: run(lib, **{k: (getattr(lib, v) if k == "dtype" else v)
                                      for k, v in kw.items()}))


def test_asarray_shares_memory_both_ways():
    a = np.zeros(4)
    t = llgrad.asarray(a)
    t[1] = 5
    a[2] = 7
    assert a[1] == 5 and t[2].item() == 7
    ba = bytearray(8)
    f = llgrad.asarray(ba)                      # (buffer protocol: raw default-dtype values)
    assert f.dtype == llgrad.float32 and tuple(f.shape) == (2,)
    f[0] = 1.0
    assert bytes(ba[:4]) == np.float32(1).tobytes()
    arr = array.array("d", [1.0, 2.0])
    d = llgrad.asarray(arr, dtype=llgrad.float64)
    d[1] = 9
    assert arr[1] == 9.0


@pytest.mark.parametrize("make", [
    lambda L: L.frombuffer(bytearray(range(16)), dtype=L.float32),
    lambda L: L.frombuffer(bytearray(range(16)), dtype=L.uint8, count=4, offset=2),
    lambda L: L.frombuffer(bytearray(range(16)), dtype=L.int16, count=3, offset=4),
    lambda L: L.frombuffer(bytearray(range(16)), dtype=L.uint8, count=-2),
    lambda L: L.frombuffer(bytearray(range(16)), dtype=L.uint8, count=20),
    lambda L: L.frombuffer(bytearray(range(16)), dtype=L.uint8, offset=20),
    lambda L: L.frombuffer(bytearray(range(16)), dtype=L.uint8, offset=-1),
    lambda L: L.frombuffer(bytearray(range(16)), dtype=L.uint8, count=0),
    lambda L: L.frombuffer(bytearray(), dtype=L.uint8),
    lambda L: L.frombuffer(bytearray(6), dtype=L.float32),
    lambda L: L.frombuffer(bytearray(8), dtype=L.float32, offset=2),
    lambda L: L.frombuffer([1, 2], dtype=L.uint8),
    lambda L: L.frombuffer(bytearray(8), dtype=L.float32, requires_grad=True),
    lambda L: L.frombuffer(bytearray(8), dtype=L.int32, requires_grad=True),
    lambda L: L.frombuffer(np.arange(8.0)[::2], dtype=L.float64),
])
def test_frombuffer_matches_torch(make):
    _same(lambda lib: _describe(make(lib), lib))


# ---- empty_strided, memory placement ----------------------------------------------------------

@pytest.mark.parametrize("size,stride", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((4,), (0,)),
                                         ((), ()), ((2, 2), (5, 1))])
def test_empty_strided_matches_torch(size, stride):
    def run(lib):
        t = lib.empty_strided(size, stride, dtype=lib.float64)
        n = t.new_empty_strided(size, stride)
        return (tuple(t.shape), t.stride(), t.storage_offset(), t.is_contiguous(),
                t._base is None, str(n.dtype).split(".")[1], n.stride())
    _same(run)
    r = llgrad.empty_strided(size, stride, requires_grad=True)
    assert r.requires_grad and r.is_leaf


def test_empty_strided_errors_match_torch():
    for fn in (lambda L: L.empty_strided((2, 3), (1,)), lambda L: L.empty_strided((-1,), (1,)),
               lambda L: L.empty_strided((2,), (1,), pin_memory=True)):
        _same(lambda lib: fn(lib))


def test_pinned_memory_matches_torch():
    _same(lambda lib: lib.ones(2).is_pinned())
    _same(lambda lib: lib.ones(2).pin_memory())


def test_share_memory_is_seen_across_fork():
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    t = llgrad.zeros(2, 3)
    assert not t.is_shared()
    assert t.share_memory_() is t and t.is_shared()
    t.share_memory_()                       # (a no-op the second time)
    before = t.data_ptr()
    pid = os.fork()
    if pid == 0:                            # child: write, exit without running pytest's exit
        try:
            t[1, 2] = 7.0
            t.add_(1)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    np.testing.assert_array_equal(t.numpy(), [[1, 1, 1], [1, 1, 8]])
    assert t.data_ptr() == before and t._version >= 0


def test_share_memory_keeps_values_views_and_refuses_growth():
    base = llgrad.arange(12.0).reshape(3, 4)
    col = base.clone().t()
    col.share_memory_()
    np.testing.assert_array_equal(col.numpy(), np.arange(12.0).reshape(3, 4).T)
    assert col.stride() == (1, 4) and col.is_shared()
    view = col[1]                           # (views made after the move share it)
    assert view.is_shared()
    row, flat = base[1], base.reshape(-1)   # (views made before: they move with it)
    old = flat.data_ptr()
    base.share_memory_()
    assert row.is_shared() and flat.is_shared() and flat.data_ptr() != old
    row[0] = -1
    assert base[1, 0].item() == -1 and flat[4].item() == -1
    with pytest.raises(RuntimeError, match="not resizable"):
        llgrad.zeros(2).share_memory_().resize_(10)


def test_output_nr_matches_torch():
    def run(lib):
        x = lib.ones(3, 2, requires_grad=True)
        a, b, c = x.unbind()
        p, q = (x * 2).split([1, 2])
        v, i = x.max(0)
        return [t.output_nr for t in (x, a, b, c, p, q, v, x * 2)]
    _same(run)


def test_deprecated_resize_matches_torch():
    def run(lib, f):
        x = lib.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        y = f(x)
        (y * lib.arange(6.0).reshape(y.shape)).sum().backward()
        return (tuple(y.shape), y.detach().numpy().tolist(), type(y.grad_fn).__name__,
                x.grad.numpy().tolist())
    for f in (lambda x: x.resize(3, 2), lambda x: x.t().resize(6),
              lambda x: x.resize_as(x.new_zeros(6, 1)), lambda x: x.resize(4)):
        (a, wa), (b, wb) = _same(lambda lib: run(lib, f))
        assert wa == wb


def test_compiled_equals_eager():
    def f(x):
        buf = x.new_empty_strided((3, 2), (1, 3))
        buf.copy_(x.t() * 2)
        y = llgrad.asarray(x, dtype=llgrad.float64, requires_grad=True)
        z = llgrad.empty_strided((2, 3), (3, 1), dtype=llgrad.float64).fill_(1.5)
        return buf + 1, (y * z).sum()
    x = llgrad.tensor(np.arange(6.0).reshape(2, 3), dtype=llgrad.float32, requires_grad=True)
    eager = f(x)
    cf = llgrad.compile(f)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = cf(x)
    for a, b in zip(eager, got):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    got[1].backward()
    g1 = x.grad.numpy().copy()
    x.grad = None
    eager[1].backward()
    np.testing.assert_array_equal(g1, x.grad.numpy())


def test_module_share_memory_trains_across_fork():
    """Hogwild's pattern: model.share_memory(), a forked worker steps the optimiser, the
    parent sees the new weights."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    llgrad.manual_seed(0)
    model = llgrad.nn.Linear(3, 2)
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters())
    want = [p.detach().numpy().copy() for p in model.parameters()]
    pid = os.fork()
    if pid == 0:
        try:
            opt = llgrad.optim.SGD(model.parameters(), lr=0.5)
            model(llgrad.ones(4, 3)).sum().backward()
            opt.step()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    grads = [np.full((2, 3), 4.0), np.full(2, 4.0)]      # d/dp of sum(W x + b) over 4 rows
    for p, w, g in zip(model.parameters(), want, grads):
        np.testing.assert_allclose(p.detach().numpy(), w - 0.5 * g, rtol=1e-6)


def test_asarray_of_a_dlpack_capsule_shares_memory():
    torch = _torch()
    t = torch.arange(4.0)
    a = llgrad.asarray(torch.utils.dlpack.to_dlpack(t))
    a[0] = 9
    assert t[0].item() == 9.0 and a.dtype == llgrad.float32
