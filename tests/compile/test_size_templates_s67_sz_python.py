"""A batch size used by the user's Python inside a compiled function (compile/size_templates.py
serves new sizes from two traces): at each size the compiled call must equal eager's
(values, returned numbers and their types, Python side effects). Each case's sizes are
chosen so that a template fitted at the first two sizes would be WRONG at a later one: the
template must see the use (a comparison re-checked, a refusal, a size decision) and trace.

Uses CPython makes of an int without calling a method of it (a list index, range(), math.*,
NumPy, `0.5 * B`) were not seen while SymInt was an int subclass (session 67, tag sz); a
SymInt is not an int, so each of them calls it (UNSEEN below)."""
import math

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")        # (the oracle of the eager numbers: see _eager)


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    # (the sizes the user's code reads handed out as SymInts, the default these cases
    # probe; with the reads compared, every size traces: test_..._reads_compared below)
    monkeypatch.delenv("LLGRAD_DYNAMIC_SIZES", raising=False)


def _x(T, b):
    return T.tensor(np.arange(b * 3, dtype=np.float32).reshape(b, 3) / 10)


def _plain(out, T):
    outs = out if isinstance(out, tuple) else (out,)
    return [(np.array(o.detach().numpy()), "tensor") if isinstance(o, T.Tensor)
            else (o, type(o).__name__) for o in outs]


def _run(make, T, sizes, compiled):
    T.manual_seed(0)
    fn, log = make(T)
    if compiled:
        fn = T.compile(fn)
    return [_plain(fn(_x(T, b)), T) for b in sizes], log, fn


def _check(make, sizes):
    """make(T) -> (fn, side-effect log): torch eagerly, llgrad eagerly and compiled agree at
    every size; -> the compiled function."""
    want, want_log, _ = _run(make, torch, sizes, False)
    eager, eager_log, _ = _run(make, llgrad, sizes, False)
    got, got_log, fn = _run(make, llgrad, sizes, True)
    for b, w, e, g in zip(sizes, want, eager, got):
        for (wv, wt), (ev, et), (gv, gt) in zip(w, e, g):
            assert wt == et == gt, (b, wt, et, gt)
            if wt == "tensor":
                np.testing.assert_allclose(ev, wv, rtol=1e-6, err_msg=f"eager at {b}")
                np.testing.assert_allclose(gv, wv, rtol=1e-6, err_msg=f"compiled at {b}")
            else:
                assert wv == ev == gv, (b, wv, ev, gv)
    assert want_log == eager_log == got_log
    return fn


def _branch(cond):
    """A step that doubles x where cond(x, T) holds, else triples it."""
    def make(T):
        return (lambda x: x * 2 if cond(x, T) else x * 3), None
    return make


def _scaled(k):
    def make(T):
        return (lambda x: x * k(x, T)), None
    return make


# name -> (make, sizes): a template of the first two sizes is wrong at a later one
SEEN = {
    "size_of_dim": (_branch(lambda x, T: x.size(0) > 20), [8, 12, 40, 4]),
    "size_keyword": (_branch(lambda x, T: x.size(dim=0) > 20), [8, 12, 40]),
    "size_tuple": (_branch(lambda x, T: x.size()[0] > 20), [8, 12, 40]),
    "stride": (_branch(lambda x, T: x.t().contiguous().stride()[0] > 20), [8, 12, 40]),
    "numel_function": (_branch(lambda x, T: T.numel(x) > 100), [8, 12, 40]),
    "shape_numel": (_branch(lambda x, T: x.shape.numel() > 100), [8, 12, 40]),
    "list_of_size": (_branch(lambda x, T: list(x.size())[0] * 3 > 100), [8, 12, 40]),
    "shape_in": (_branch(lambda x, T: x.shape[0] in (16, 24)), [16, 24, 40]),
    "size_equal": (_branch(lambda x, T: x.shape != T.Size([40, 3])), [16, 24, 40]),
    "bit_and": (_branch(lambda x, T: x.shape[0] & 8), [8, 24, 16]),
    "modulo": (_branch(lambda x, T: x.shape[0] % 8 == 0), [16, 24, 20]),
    "shifted": (_scaled(lambda x, T: (x.shape[0] >> 4) + 1), [16, 24, 40, 5]),
    "floor_divided": (_scaled(lambda x, T: x.shape[0] // 100 + 1), [16, 24, 120, 2]),
    "min_of": (_scaled(lambda x, T: min(x.shape[0], 20)), [8, 12, 40]),
    "and_or": (_scaled(lambda x, T: (x.shape[0] > 20) or 5), [8, 12, 40]),
}


@pytest.mark.parametrize("name", SEEN)
def test_a_size_the_template_sees_traces_where_it_comes_out_otherwise(name):
    make, sizes = SEEN[name]
    _check(make, sizes)


def _sliced(index):
    def make(T):
        return (lambda x: x[index] * 2), None
    return make


@pytest.mark.parametrize("index, sizes", [
    (slice(None, 20), [32, 48, 8, 12, 40, 20, 2]),
    (slice(-30, None), [40, 48, 8, 12, 64, 30, 31]),
    (slice(5, None), [16, 24, 3, 2, 40, 5, 6]),
    (slice(5, -5), [16, 24, 10, 40, 11]),
    (slice(None, None, 3), [16, 24, 40, 5, 7, 2]),
    (slice(None, -1, 4), [16, 24, 40, 17, 5]),
    (10, [16, 24, 40, 11]),
    (-20, [32, 48, 64, 20]),
], ids=str)
def test_a_slice_along_the_batch_at_sizes_on_both_sides_of_its_bound(index, sizes):
    _check(_sliced(index), sizes)


@pytest.mark.parametrize("split", ["chunk", "split", "unbind", "tensor_split"])
def test_splitting_along_the_batch(split):
    def make(T):
        def f(x):
            parts = (x.chunk(3, 0) if split == "chunk" else x.split(8, 0) if split == "split"
                     else x.unbind(0) if split == "unbind" else x.tensor_split(3, 0))
            return parts[0] * 2, parts[-1] + 1, len(parts)
        return f, None
    _check(make, [16, 24, 40, 5, 9, 2])


def test_a_size_stored_returned_and_counted():
    def make(T):
        class Box:
            seen = None
        box, log = Box(), []

        def f(x):
            B, C = x.shape
            box.seen = B
            log.append(B * C)
            return x.sum(0) / B, B, B * C, box.seen
        return f, log
    _check(make, [16, 24, 40, 5, 2])


def test_a_size_as_a_dict_key_and_in_text():
    def make(T):
        counts, log = {}, []

        def f(x):
            B = x.shape[0]
            counts[B] = counts.get(B, 0) + 1
            log.append(f"batch {B}: {counts[B]}")
            return x * counts[B]
        return f, log
    _check(make, [16, 24, 40, 16, 24])


def test_a_size_value_guarded_op_at_a_served_size_traces():
    # bincount's length is the data's max + 1: 5 at 16 and 24, 3 at 3. The entry made from
    # the template misses on its value guard; it once made the call serve it again forever
    # (RecursionError).
    def make(T):
        return (lambda x: T.arange(x.shape[0]).remainder(5).bincount()), None
    _check(make, [16, 24, 3, 2, 40])


def _unseen_if(cond):
    return _branch(cond)


def _list_index(T):
    table = [1.0] * 30 + [3.0] * 100
    return (lambda x: x * table[x.shape[0]]), None


def _range_flag(T):
    def f(x):
        wide = False
        for i in range(x.shape[0]):
            wide = wide or i == 20
        return x * 2 if wide else x * 3
    return f, None


# uses CPython made of an int subclass without a call: a SymInt (no int) sees them all
UNSEEN = {
    "list_index": (_list_index, [16, 24, 40]),
    "range_loop": (_range_flag, [8, 12, 40]),
    "half_then_if": (_unseen_if(lambda x, T: 0.5 * x.shape[0] > 10), [8, 12, 40]),
    "math_log2": (_scaled(lambda x, T: math.floor(math.log2(x.shape[0]))), [16, 24, 40]),
    "numpy_zeros": (_unseen_if(lambda x, T: np.zeros(x.shape[0]).size > 20), [8, 12, 40]),
}


@pytest.mark.parametrize("name", UNSEEN)
def test_a_size_used_where_cpython_reads_it_directly(name):
    make, sizes = UNSEEN[name]
    _check(make, sizes)


@pytest.mark.parametrize("name", UNSEEN)
def test_a_size_used_where_cpython_reads_it_directly_reads_compared(name, monkeypatch):
    monkeypatch.setenv("LLGRAD_DYNAMIC_SIZES", "same")  # (reads differ: every size traces)
    make, sizes = UNSEEN[name]
    _check(make, sizes)


@pytest.mark.parametrize("read", ["nbytes", "storage"])
def test_a_size_in_bytes(read):
    _check(_branch(lambda x, T: (x.nbytes if read == "nbytes" else
                                 x.untyped_storage().nbytes()) > 300), [8, 12, 40])


def test_arithmetic_that_raises_at_a_new_size_raises_as_eager():
    def f(x):
        k = 64 // (x.shape[0] - 8)          # (True at 16 and 24; 8 divides by zero)
        return x * 2 if k > 2 else x * 3
    compiled = llgrad.compile(f)
    for b in [16, 24, 8, 12, 40]:
        x = _x(llgrad, b)
        if b == 8:
            with pytest.raises(ZeroDivisionError):
                f(x)
            with pytest.raises(ZeroDivisionError):
                compiled(x)
        else:
            want = torch.tensor(x.numpy()) * (2 if 64 // (b - 8) > 2 else 3)
            np.testing.assert_allclose(compiled(x).numpy(), want.numpy(), rtol=1e-6)


# Statements compile converts (control.py runs their tests): a size's uses in them are the
# user's, and were once unwatched there (a chained comparison's template served 40 as 12)
def _chained(x):
    if 4 < x.shape[0] <= 20:
        return x * 2
    return x * 3


def _chained_expression(x):
    B = x.shape[0]
    return x * 2 if 4 < B < 20 else x * 3


def _truth_of_remainder(x):
    B = x.shape[0]
    if B % 8:
        return x * 2
    return x * 3


def _negated_and(x):
    B = x.shape[0]
    if not (B > 20 and B < 100):
        return x * 2
    return x * 3


def _halving_loop(x):
    B = x.shape[0]
    while B > 20:
        B = B // 2
        x = x * 2
    return x


@pytest.mark.parametrize("fn, sizes", [(_chained, [8, 12, 40]),
                                       (_chained_expression, [8, 12, 40]),
                                       (_truth_of_remainder, [12, 20, 16]),
                                       (_negated_and, [8, 12, 40, 200]),
                                       (_halving_loop, [8, 12, 40])], ids=lambda v: getattr(
                                           v, "__name__", str(v)))
def test_a_size_in_converted_control_flow(fn, sizes):
    _check(lambda T: (fn, None), sizes)
