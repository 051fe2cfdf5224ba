"""Sweep 60 (H5), an adversary of the day's commits. A compiled function's changing int as an
index (runtime/symbolic_uses.py) gives a copy standing for PyTorch's view: a copy the call
puts into an object, a global or a captured dict (not only one it returns) must end the
trace, since eager's there is a view of x that later writes into x reach. And a view of an
input put into an object is rebuilt against a root input, not against another input that
shares its memory (output_notes.py: `o.v = x[1]` traced while o.v was x[0], then called
with o.v elsewhere); `w.grad = x[1]` and `y.data = x[1]` (y over x) run eagerly. Eager
products and backward across thread counts against torch; full(..., bool) of a big int."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


class _O:
    pass


def _keep_attr(T, o, d):
    def f(x, i):
        o.v = x[i]
        return x.sum() * 1
    return f


def _keep_dict(T, o, d):
    def f(x, i):
        d["v"] = x[i]
        return x.sum() * 1
    return f


def _keep_list_slot(T, o, d):
    def f(x, i):
        d["l"][:] = [x[i]]
        return x.sum() * 1
    return f


KEEPS = {"attribute": (_keep_attr, lambda o, d: o.v),
         "captured dict": (_keep_dict, lambda o, d: d["v"]),
         "list slot": (_keep_list_slot, lambda o, d: d["l"][0])}


@pytest.mark.parametrize("name", list(KEEPS))
def test_kept_index_copy_is_a_view(name):
    """x[i] kept by the call, x written after it: the kept tensor sees the write (a view),
    call by call as torch's."""
    make, kept = KEEPS[name]
    X = np.arange(60, dtype=np.float32).reshape(5, 3, 4) / 7
    seen = {}
    for mode in ("torch", "compiled"):
        T = torch if mode == "torch" else llgrad
        o, d = _O(), {"l": []}
        f = make(T, o, d)
        f = llgrad.compile(f) if mode == "compiled" else f
        x, log = T.tensor(X), []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (the recompile limit's, both ways)
            for i in (0, 1, 2, 3, -1, 4, 2, 1, 0):
                f(x, i)
                x.add_(1)
                log.append(np.asarray(kept(o, d).tolist()))
        seen[mode] = log
    for k, (w, g) in enumerate(zip(seen["torch"], seen["compiled"])):
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=f"call {k}")


def test_view_kept_is_rebuilt_on_the_root_input():
    """`o.v = x[1]` traced while o.v was a view of x at its start (two inputs over one
    memory): later calls with o.v elsewhere (in x, or in another tensor) still get x[1]."""
    o = _O()

    @llgrad.compile
    def f(x):
        o.v = x[1]
        return x.sum() * 1

    x = llgrad.tensor(np.arange(60, dtype=np.float32).reshape(5, 3, 4))
    y = llgrad.tensor(np.zeros((5, 3, 4), np.float32))
    for before in (x[0], x[2], x[3], y[3]):
        o.v = before
        f(x)
        assert o.v.storage_offset() == 12
        x.add_(1)
        np.testing.assert_array_equal(o.v.numpy(), x[1].numpy())


@pytest.mark.parametrize("how", ["grad", "data"])
def test_grad_or_data_set_to_a_view(how):
    """`w.grad = x[i]` and `y.data = x[i]` (y already over x): eager's are views of x, which
    compiled calls gave as copies, or as views against the slot's old place (the call now
    runs eagerly: compile/moved_data.check_given, creation_checks.check_moved_in_place)."""
    w = llgrad.zeros(3, 4, requires_grad=True)
    y = llgrad.zeros(3, 4)

    def f(x, i):
        if how == "grad":
            w.grad = x[i]
        else:
            y.data = x[i]
        return x.sum() * 1
    cf = llgrad.compile(f)
    x = llgrad.tensor(np.arange(60, dtype=np.float32).reshape(5, 3, 4))
    y.data = x[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in (0, 1, 2, 3, -1, 4, -5, 2):
            cf(x, i)
            x.add_(1)               # (eager's is a view of x: it sees the write)
            got = w.grad if how == "grad" else y
            np.testing.assert_array_equal(got.numpy(), x[i].numpy(), err_msg=str(i))


@pytest.mark.parametrize("count", [1, 2, 3])
def test_mm_double_backward_threads(count):
    """mm / addmm / matmul's gradients (both at once on the pool at 2 threads) and their
    double backward, a non-contiguous incoming gradient, against torch."""
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(count)
    try:
        rng = np.random.default_rng(count)
        A, B = rng.standard_normal((128, 256)), rng.standard_normal((256, 192))
        G = rng.standard_normal((128, 384))[:, ::2]
        bias = rng.standard_normal(192)
        for op, need in (("mm", (True, True)), ("addmm", (True, False)),
                         ("matmul", (False, True)), ("addmm", (True, True))):
            got = []
            for T in (llgrad, torch):
                a = T.tensor(A, requires_grad=need[0])
                b = T.tensor(np.ascontiguousarray(B.T).T, requires_grad=need[1])
                y = T.addmm(T.tensor(bias), a, b) if op == "addmm" else getattr(T, op)(a, b)
                ins = [t for t in (a, b) if t.requires_grad]
                gs = T.autograd.grad(y, ins, T.tensor(G), create_graph=True)
                s = sum((g * g * t).sum() for g, t in zip(gs, ins))
                ggs = T.autograd.grad(s, ins)
                got.append([t.detach().numpy() for t in (y, *gs, *ggs)])
            for g, w in zip(*got):
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9, err_msg=op)
    finally:
        llgrad.set_num_threads(old)


@pytest.mark.parametrize("value", [2 ** 63 + 1, 2 ** 64 - 1, -2 ** 63, 0, 5])
def test_full_bool_from_an_int_past_int64(value):
    """torch.full(..., bool) of an int past int64 (below 2**64) is all True; NumPy's cast of
    the int raised OverflowError (creation_checks.fill_value_fits)."""
    want = torch.full((2,), value, dtype=torch.bool).tolist()
    assert llgrad.full((2,), value, dtype=llgrad.bool).tolist() == want
    assert llgrad.zeros(2, dtype=llgrad.bool).fill_(value).tolist() == want
