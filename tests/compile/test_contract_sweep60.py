"""Compile contract, sweep 60 (helper H3): state a compiled function reads that the guard walk
did not see change, so compiled calls replayed the first call's numbers, silently.

- A NumPy array of more than 256 elements the function reads with NumPy (X.mean(), X[idx],
  float(X[i]), a write `counts[k] += 1`) was an input nothing read; what NumPy computed was
  baked into the trace (compile/numpy_reads.py: such an array is guarded by its contents once
  a trace reaches it without reading it as a tensor).
- from_numpy of a slice of an input array that is itself a view (X = a.reshape(500, 4)) was
  a constant, not a view of the input (tracer/bindings.array_storage).
- An array from_numpy refuses (negative strides, byte-swapped, str, object items) or of a
  subclass (np.matrix, a masked array, np.memmap) was guarded by identity alone.
- A ContextVar, a ctypes value, a StringIO read: by identity alone (eager now); a
  mappingproxy and d.keys() / values() / items(): by identity (the dict they show is walked
  now).
The expected numbers are NumPy's and Python's own."""
import contextvars
import ctypes
import io
import types
import warnings

import numpy as np
import pytest

import llgrad


def _compiled(fn, **kw):
    return llgrad.compile(fn, backend="interpret", **kw)


@pytest.mark.parametrize("read, want", [
    (lambda a: float(a.sum()), lambda a: float(a.sum())),
    (lambda a: a[0], lambda a: float(a[0])),
    (lambda a: 2.0 if a[3] > 1 else 1.0, lambda a: 2.0 if a[3] > 1 else 1.0),
    (lambda a: a.tolist()[0], lambda a: float(a[0])),
    (lambda a: float(np.max(a)), lambda a: float(np.max(a))),
    (lambda a: float(a[:10].sum()), lambda a: float(a[:10].sum())),
])
def test_large_captured_array_read_with_numpy(read, want):
    a = np.ones(1000)
    f = _compiled(lambda x: x * read(a))
    for i in range(4):
        assert f(llgrad.ones(2)).tolist() == [want(a)] * 2
        a[:4] = i + 5.0


def test_a_batch_converted_with_numpy_inside_the_step():
    # (from_numpy(b.astype(np.float32)) of a new float64 batch each call: the copy astype
    # makes was baked into the trace, and every call trained on the first batch)
    w = llgrad.ones(4, requires_grad=True)
    f = _compiled(lambda b: (llgrad.from_numpy(b.astype(np.float32)) * w).sum())
    rng = np.random.default_rng(0)
    for i in range(4):
        b = rng.random((100, 4))
        assert f(b).item() == pytest.approx(float(b.astype(np.float32).sum()), rel=1e-5)


def test_large_array_written_inside_is_written_by_each_call():
    counts = np.zeros(1000)

    def fn(x):
        k = int(x.argmax())
        counts[k] += 1
        return x * counts[k]
    f = _compiled(fn)
    for i in range(4):
        assert f(llgrad.tensor([0.0, 1.0, 0.5])).tolist() == [0.0, i + 1.0, (i + 1) * 0.5]
        assert counts[1] == i + 1


def test_large_array_argument_indexed_by_numpy_and_a_learning_rate_table():
    lrs = np.linspace(1.0, 0.0, 1000)
    w = llgrad.ones(3, requires_grad=True)

    def step(x, idx):
        loss = (x[llgrad.from_numpy(idx)] * w).sum()
        loss.backward()
        with llgrad.no_grad():
            w.sub_(w.grad * float(lrs[0]))
            w.grad.zero_()
        return loss
    f = _compiled(step)
    want = np.ones(3)
    for i in range(4):
        f(llgrad.arange(5.0), np.array([0, 1, 2]))
        want -= np.arange(3.0) * lrs[0]
        np.testing.assert_allclose(w.detach().numpy(), want, rtol=1e-6)
        lrs *= 0.5          # (the schedule rescaled in place)


def test_slices_of_an_input_array_that_is_a_view_read_each_call():
    rng = np.random.default_rng(0)
    X = np.arange(2000, dtype=np.float32).reshape(500, 4)   # (a view of the arange)

    def step(i):
        return llgrad.from_numpy(X[i * 10:(i + 1) * 10]).sum()
    f = _compiled(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (compiled: no call runs eagerly)
        for epoch in range(3):
            for i in range(3):
                assert f(i).item() == float(X[i * 10:(i + 1) * 10].sum())
            rng.shuffle(X)      # (in place, as an epoch's shuffle)


def test_an_array_read_only_as_a_tensor_is_not_guarded_by_its_contents():
    X = np.ones((600, 4), np.float32)
    f = _compiled(lambda: llgrad.from_numpy(X[:10]).sum() + llgrad.tensor(X[20]).sum())
    for i in range(4):
        assert f().item() == 44.0 * 2 ** i
        X *= 2
    assert f.n_traces == 1


def test_an_array_the_code_never_names_is_not_guarded_by_its_contents():
    """A dataset kept on the object whose step is compiled (the step reads only the model):
    not marked, so its bytes are not copied at every call (numpy_reads._named)."""
    from llgrad.compile import numpy_reads

    class Trainer:
        def __init__(self):
            self.dataset = np.ones((600, 4), np.float32)
            self.w = llgrad.ones(4)

        def step(self, x):
            return (x * self.w).sum()

    t = Trainer()
    f = _compiled(t.step)
    for i in range(3):
        assert f(llgrad.ones(4) * i).item() == 4.0 * i
    assert f.n_traces == 1
    assert not any(p.startswith(numpy_reads.MARK) for p in f._dynamic)


def test_array_read_with_numpy_by_a_called_method():
    """(A strict xfail until numpy_reads._names_read followed the methods a function calls.)"""
    class Scaled:
        def __init__(self):
            self.table = np.ones(600)

        def scale(self):
            return float(self.table.sum())

        def step(self, x):
            return x * self.scale()

    s = Scaled()
    f = _compiled(s.step)
    for i in range(3):
        assert f(llgrad.ones(1)).item() == 600.0 * 2 ** i
        s.table *= 2


@pytest.mark.parametrize("make", [
    lambda: np.arange(10.0)[::-1],                  # negative strides
    lambda: np.arange(10.0).astype(">f8"),          # byte-swapped
    lambda: np.ones(3).view(np.matrix),
    lambda: np.ma.array([1.0, 2.0]),
    lambda: np.ones(3).view(type("Sub", (np.ndarray,), {})),
])
def test_small_arrays_no_input_takes_are_guarded_by_contents(make):
    a = make()
    f = _compiled(lambda x: x * float(a.flat[0]))
    for i in range(3):
        assert f(llgrad.ones(1)).item() == float(a.flat[0])
        a.flat[0] = i + 50.0


def test_a_masked_arrays_mask_is_guarded():
    a = np.ma.array([1.0, 2.0, 3.0])
    f = _compiled(lambda x: x * float(a.sum()))
    for i in range(3):
        assert f(llgrad.ones(1)).item() == [6.0, 5.0, 3.0][i]
        a[i] = np.ma.masked


def test_text_and_object_arrays():
    s, o = np.array(["a", "bb"]), np.array([1.0, "s"], dtype=object)
    f = _compiled(lambda x: x * len(s[0]) * o[0])
    with pytest.warns(UserWarning, match="NumPy array of Python objects"):
        for i in range(3):
            assert f(llgrad.ones(1)).item() == len(s[0]) * o[0]
            s[0], o[0] = "c" * (i + 3), i + 7.0


def test_a_large_array_no_input_takes_runs_eagerly():
    a = np.arange(1000.0)[::-1]
    f = _compiled(lambda x: x * a[0])
    with pytest.warns(UserWarning, match="no input of compiled code"):
        for i in range(3):
            assert f(llgrad.ones(1)).item() == a[0]
            a[0] = i + 5.0


def _context_var():
    v = contextvars.ContextVar("scale", default=1.0)
    return v, v.get, v.set


def _ctypes_value():
    v = ctypes.c_double(1.0)
    return v, lambda: v.value, lambda n: setattr(v, "value", n)


def _string_io():
    v = io.StringIO("1.0")
    return v, lambda: float(v.getvalue()), lambda n: (v.seek(0), v.truncate(), v.write(str(n)))


@pytest.mark.parametrize("make", [_context_var, _ctypes_value, _string_io])
def test_state_no_guard_follows_runs_eagerly(make):
    holder, get, put = make()
    f = _compiled(lambda x: x * (holder.get() if isinstance(holder, contextvars.ContextVar)
                                 else holder.value if isinstance(holder, ctypes.c_double)
                                 else float(holder.getvalue())))
    with pytest.warns(UserWarning, match="neither guards nor replays|would not read again"):
        for i in range(3):
            assert f(llgrad.ones(1)).item() == get()
            put(i + 5.0)


def test_views_of_a_dict_show_its_changes():
    d = {"k": 1.0}
    proxy, keys, values = types.MappingProxyType(d), d.keys(), d.values()
    f = _compiled(lambda x: x * proxy["k"] + len(keys) + sum(values))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(4):
            assert f(llgrad.zeros(1) + 1).item() == d["k"] + len(d) + sum(d.values())
            if i == 1:
                d["extra"] = 2.0
            d["k"] = i + 3.0


def test_array_read_both_ways():
    """(A strict xfail until numpy_reads._numpy_uses marked a linked array read otherwise.)"""
    X = np.ones((500, 4), np.float32)
    f = _compiled(lambda: llgrad.from_numpy(X[:10]).sum() * float(X.mean()))
    got = []
    for i in range(3):
        got.append(f().item())
        X *= 2
    assert got == [40.0, 160.0, 640.0]


def test_training_flag_read_through_dict_before_train():
    """(A strict xfail until guards_blind.dict_readers: a step naming __dict__ keeps its
    flags guarded.)"""
    m = llgrad.nn.Linear(2, 1)

    def step(x):
        was = m.__dict__["training"]
        m.train()
        return m(x).sum() * (2.0 if was else 3.0)
    f = llgrad.compile(step, backend="interpret")
    x = llgrad.ones(1, 2)
    want = m(x).sum().item()
    got = []
    for i in range(4):
        if i % 2:
            m.eval()
        got.append(f(x).item() / want)
    assert got == pytest.approx([2.0, 3.0, 2.0, 3.0])
