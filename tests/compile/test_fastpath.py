"""The lean call path (compile/fastpath.py) must select exactly the specialisation the full
guard walk selects: every guard that the walk would change must change the flat key."""
import numpy as np
import pytest

import llgrad
from llgrad.compile.fastpath import fast_key


def _counted():
    def f(x, s):
        return (x * s).tanh().sum()
    return f, None


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_each_guard_change_retraces_and_repeats_do_not(backend):
    f, calls = _counted()
    cf = llgrad.compile(f, backend=backend)
    base = np.linspace(-0.5, 1, 12).reshape(3, 4)
    variants = [
        ("float64", lambda: llgrad.tensor(base), 2.0),
        ("float32", lambda: llgrad.tensor(base.astype(np.float32)), 2.0),
        ("shape", lambda: llgrad.tensor(base[:2]), 2.0),
        ("strides", lambda: llgrad.tensor(base).t(), 2.0),
        ("requires_grad", lambda: llgrad.tensor(base, requires_grad=True), 2.0),
        ("scalar", lambda: llgrad.tensor(base), 3.0),
        ("int scalar", lambda: llgrad.tensor(base), 3),
    ]
    for k, (what, make, s) in enumerate(variants):
        for repeat in range(3):
            x = make()
            out = cf(x, s)
            want = np.tanh(x.detach().numpy() * s).sum()
            np.testing.assert_allclose(out.item(), want, rtol=1e-6, err_msg=what)
            assert cf.n_traces == k + 1, (what, repeat)


def test_grad_mode_and_existing_grad_are_part_of_the_key():
    f, _ = _counted()
    cf = llgrad.compile(f)
    x = llgrad.tensor(np.arange(4.0), requires_grad=True)
    cf(x, 1.0).backward()
    cf(x, 1.0).backward()                    # .grad now exists: a new specialisation
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh(np.arange(4.0)) ** 2))
    n = cf.n_traces
    with llgrad.no_grad():
        out = cf(x, 1.0)
    assert not out.requires_grad and cf.n_traces == n + 1


def test_calls_the_flat_key_cannot_describe_take_the_full_walk():
    x = llgrad.ones(3)
    assert fast_key((x, x)) is None                  # one tensor twice
    assert fast_key(([x],)) is None                  # a container
    assert fast_key((x, "a string")) is None
    key, tensors = fast_key((x, 2.0))
    assert tensors == [x] and key[-3:] == (True, False, "float32")   # (and default dtype)
    cf = llgrad.compile(lambda a, b: a * b)
    np.testing.assert_array_equal(cf(x, x).numpy(), np.ones(3))
    np.testing.assert_array_equal(cf(x, x).numpy(), np.ones(3))
    assert cf.n_traces == 1


# ---- the runner of a simple entry (fastpath.quick_runner) -----------------------------------
def _walks(monkeypatch):
    """Count the full guard walks (guards.collect) of compiled functions."""
    from llgrad.compile import compiled_function as compiled
    calls, real = [], compiled.collect

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(compiled, "collect", counting)
    return calls


def _quick(cf, grad):
    """Whether cf's only entry runs through fastpath.quick_runner in this grad mode."""
    import functools
    (entry,) = cf.entries
    run = entry._runners[grad]
    return not isinstance(run, functools.partial)


def _loss(x, w):
    return ((x * w).tanh() * x).sum()


def _eager_grads(x, w):
    x, w = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
    loss = _loss(x, w)
    return [loss.item()] + [g.numpy() for g in llgrad.autograd.grad(loss, [x, w])]


def test_value_and_grad_repeats_take_the_quick_runner(monkeypatch):
    vg = llgrad.value_and_grad(_loss, argnums=(0, 1))
    x, w = llgrad.tensor(np.linspace(-1, 1, 6)), llgrad.tensor(np.linspace(0.5, 2, 6))
    want = _eager_grads(x, w)
    vg(x, w)
    vg.wait()           # (background builds: native from the next call on)
    vg(x, w)
    walks = _walks(monkeypatch)
    for _ in range(3):
        value, (gx, gw) = vg(x, w)
        np.testing.assert_allclose(value.item(), want[0], rtol=1e-12)
        np.testing.assert_allclose(gx.numpy(), want[1], rtol=1e-12)
        np.testing.assert_allclose(gw.numpy(), want[2], rtol=1e-12)
        for t in (value, gx, gw):
            assert t.is_leaf and not t.requires_grad and t.grad_fn is None
            assert t._version == 0 and not t.is_inference()
    assert not walks and _quick(vg, False) and vg.n_traces == 1


def test_compiled_backward_repeats_take_the_quick_runner(monkeypatch):
    cf = llgrad.compile(_loss)
    base = np.linspace(-1, 1, 6)

    def args():
        return llgrad.tensor(base), llgrad.tensor(base + 2, requires_grad=True)
    cf(*args())
    cf.wait()
    cf(*args())
    walks = _walks(monkeypatch)
    for _ in range(3):
        x, w = args()
        loss = cf(x, w)
        assert type(loss.grad_fn).__name__ == "CompiledFunctionBackward"
        assert loss.grad_fn.next_functions == ((w._acc, 0),)
        loss.backward()
        np.testing.assert_allclose(w.grad.numpy(), _eager_grads(x, w)[2], rtol=1e-12)
        assert x.grad is None
    assert not walks and _quick(cf, True)
    x, w = args()                       # the saved input, modified: eager's error
    loss = cf(x, w)
    with llgrad.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match=r"is at version 1; expected version 0 instead. "
                                           "Hint: the tensor was saved for backward by "
                                           "CompiledFunctionBackward at test_fastpath.py:"):
        loss.backward()
    loss = cf(*args())
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    assert not walks and cf.n_traces == 1


@pytest.mark.parametrize("mode", ["value_and_grad", "backward"])
def test_quick_runners_fall_back_when_a_guard_changes(mode):
    cf = llgrad.value_and_grad(_loss, argnums=1) if mode == "value_and_grad" else \
        llgrad.compile(_loss)
    base = np.linspace(-1, 1, 12).reshape(3, 4)
    variants = [
        ("float64", lambda: llgrad.tensor(base), None),
        ("float32", lambda: llgrad.tensor(base.astype(np.float32)), None),
        ("shape", lambda: llgrad.tensor(base[:2]), None),
        ("strides", lambda: llgrad.tensor(base).t(), None),
        ("requires_grad", lambda: llgrad.tensor(base, requires_grad=True), None),
        ("no_grad", lambda: llgrad.tensor(base), llgrad.no_grad),
    ]
    if mode == "backward":          # (value_and_grad cannot save tensors made in inference mode)
        variants.append(("inference_mode", lambda: llgrad.tensor(base), llgrad.inference_mode))
    for k, (what, make, context) in enumerate(variants):
        for repeat in range(3):
            x = make()
            w = (x.detach() * 0.5 + 1).requires_grad_(True)
            want = _eager_grads(x, w)
            if context is None:
                out = cf(x, w)
            else:
                with context():
                    out = cf(x, w)
            if mode == "value_and_grad":
                value, gw = out             # (x requiring grad: a nested transform's history)
                np.testing.assert_allclose(gw.detach().numpy(), want[2], rtol=1e-5,
                                           err_msg=what)
            else:
                value = out
                assert out.requires_grad == (context is None), what
                if context is None:
                    (gw,) = llgrad.autograd.grad(out, [w])
                    np.testing.assert_allclose(gw.numpy(), want[2], rtol=1e-5, err_msg=what)
            np.testing.assert_allclose(value.item(), want[0], rtol=1e-5, err_msg=what)
            assert value.is_inference() == (context is llgrad.inference_mode), what
            assert cf.n_traces == k + 1, (what, repeat)


def test_entries_told_apart_by_value_guards_share_one_flat_key(monkeypatch):
    def f(x):
        if x.sum() > 0:                 # transform=False: a value guard, not IR control flow
            return x * 2
        return x * 3

    cf = llgrad.compile(f, transform=False)
    pos, neg = llgrad.tensor([1.0, 2.0]), llgrad.tensor([-1.0, -2.0])
    for _ in range(2):
        for x in (pos, neg):
            cf(x)
            cf.wait()   # (built: the next call checks the value guard)
    walks = _walks(monkeypatch)
    for _ in range(3):
        np.testing.assert_array_equal(cf(pos).numpy(), [2.0, 4.0])
        np.testing.assert_array_equal(cf(neg).numpy(), [-3.0, -6.0])
    assert cf.n_traces == 2 and not walks


def test_create_graph_through_the_quick_runner_checks_every_input():
    cf = llgrad.compile(lambda x, w: (x.exp() * w).sum())
    x, w = llgrad.tensor([0.5, 1.0], requires_grad=True), llgrad.tensor([2.0, 3.0],
                                                                          requires_grad=True)
    for _ in range(2):
        loss = cf(x, w)
    (gx,) = llgrad.autograd.grad(loss, [x], create_graph=True)
    (gxx,) = llgrad.autograd.grad(gx.sum(), [x])
    np.testing.assert_allclose(gxx.numpy(), np.exp([0.5, 1.0]) * [2.0, 3.0])
    loss = cf(x, w)
    with llgrad.no_grad():
        w.mul_(3)                       # not saved by the compiled backward, but replayed
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        llgrad.autograd.grad(loss, [x], create_graph=True)


def test_an_expanded_cotangent_reaches_the_kernel_dense():
    cf = llgrad.compile(lambda x: x.exp() * 2)
    x = llgrad.ones(3, 4, requires_grad=True)
    for _ in range(2):
        y = cf(x)
    y.backward(llgrad.tensor([1.0, 2.0, 3.0, 4.0]).expand(3, 4))
    np.testing.assert_allclose(x.grad.numpy(), np.tile([1.0, 2.0, 3.0, 4.0], (3, 1)) * 2 * np.e)


def test_reshaped_outputs_are_fresh_buffers_of_a_direct_kernel():
    """A bias gradient is a (1, n) buffer read as (n,): the kernel allocates it as (n,)."""
    def f(x, w, b):
        return ((x @ w + b).tanh() ** 2).mean()

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (3, 5), (5,))]
    vg = llgrad.value_and_grad(f, argnums=(1, 2))
    args = [llgrad.tensor(a) for a in arrays]
    for _ in range(2):
        value, (gw, gb) = vg(*args)
        vg.wait()
    assert vg.entries[0].kernels["forward"].direct and _quick(vg, False)
    assert gb.shape == (5,) and gb.stride() == (1,) and gb.numpy().base is None
    params = [llgrad.tensor(a, requires_grad=True) for a in arrays[1:]]
    loss = f(llgrad.tensor(arrays[0]), *params)
    for got, want in zip((gw, gb), llgrad.autograd.grad(loss, params)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-7)


def test_fresh_tensors_are_what_from_array_makes():
    from llgrad.compile.fastpath import fresh_tensors
    from llgrad.runtime.tensor import Tensor
    arrays = [np.ones(3, np.float32), np.zeros((2, 2)), np.float64(2.5)]
    for mode in (llgrad.enable_grad, llgrad.inference_mode):
        with mode():
            made = fresh_tensors(arrays)
            want = [Tensor._from_array(a) for a in arrays]
        for t, u in zip(made, want):
            for slot in Tensor.__slots__:
                if slot in ("__weakref__", "__dict__"):
                    continue
                a, b = getattr(t, slot), getattr(u, slot)
                if slot == "_storage":
                    assert a is not b and a.base is t._data and a.version == b.version
                elif slot == "_data":
                    assert type(a) is np.ndarray and np.array_equal(a, b)
                else:
                    assert a == b, slot


def test_tree_builder_matches_unflatten():
    from collections import namedtuple
    from llgrad.compile.fastpath import tree_builder
    from llgrad.tracer.pytree import flatten, unflatten

    Pair = namedtuple("Pair", "a b")

    class Items(list):
        pass
    deep = 1
    for _ in range(400):
        deep = (deep,)
    for obj in [1, (1,), (1, (2,)), [1, 2, {"a": 3, 5: (4,)}], Pair(1, [2, 3]),
                Items([1, 2]), (), {}, ([],), {"x": Pair(1, 2)}, deep]:
        leaves, tree = flatten(obj)
        values = [v for _, v in leaves]
        got, want = tree_builder(tree)(values), unflatten(tree, values)
        assert got == want and type(got) is type(want)
