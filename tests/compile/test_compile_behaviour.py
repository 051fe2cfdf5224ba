"""llgrad.compile behaviour: caching and guards, the recompile limit, grad modes, autograd
semantics of compiled outputs (retain_graph, hooks, autograd.grad, version checks), dumps."""
import inspect
import os
import re
import sys
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F

RTOL, ATOL = 2e-5, 1e-5


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("LLGRAD_BACKEND", raising=False)
    monkeypatch.delenv("LLGRAD_DUMP", raising=False)


def rnd(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def counted(fn):
    """fn with a .calls counter of how many times its Python body ran, kept by a profile
    hook while the test runs (_counting): a counter the function kept itself (`wrapper.calls
    += 1`) would be Python state that every compiled call must update as eager does."""
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    wrapper.calls = 0
    wrapper.__name__ = fn.__name__
    wrapper.__signature__ = inspect.signature(fn)
    _COUNTED[id(fn)] = wrapper
    return wrapper


_COUNTED = {}       # id(fn) -> counted(fn)
_WRAPPER_CODE = counted(lambda: None).__code__


def _count(frame, event, arg):
    if event == "call" and frame.f_code is _WRAPPER_CODE:
        w = _COUNTED.get(id(frame.f_locals.get("fn")))
        if w is not None:
            w.calls += 1


@pytest.fixture(autouse=True)
def _counting():
    before = sys.getprofile()
    sys.setprofile(_count)
    yield
    sys.setprofile(before)
    _COUNTED.clear()


def _exp_loss(x):
    return (x.exp() * 2).sum()


# ---- caching and guards -----------------------------------------------------------------------

def test_cache_hit_does_not_run_the_python_function_again():
    f = counted(_exp_loss)
    cf = llgrad.compile(f)
    for _ in range(4):
        x = llgrad.tensor(rnd(0, 3, 4), requires_grad=True)
        cf(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(rnd(0, 3, 4)), rtol=RTOL)
        cf.wait()       # (background builds: calls run fn eagerly until the code is ready)
    assert f.calls == 1 and cf.n_traces == 1


def test_first_call_is_eager_later_calls_run_the_compiled_graphs():
    cf = llgrad.compile(_exp_loss)
    first = cf(llgrad.ones(3, requires_grad=True))
    cf.wait()
    second = cf(llgrad.ones(3, requires_grad=True))
    assert type(first.grad_fn).__name__ == "SumBackward0"
    assert type(second.grad_fn).__name__ == "CompiledFunctionBackward"


def _make_input(what, seed):
    """A fresh (3, 4) input differing from the base key (f32, contiguous, requires_grad) in
    one guard."""
    a = rnd(seed, 3, 4)
    if what == "base":
        return llgrad.tensor(a, requires_grad=True)
    if what == "shape":
        return llgrad.tensor(rnd(seed, 5, 4), requires_grad=True)
    if what == "dtype":
        return llgrad.tensor(a.astype(np.float64), requires_grad=True)
    if what == "strides":                    # a transposed (non-contiguous) leaf
        return llgrad.tensor(np.ascontiguousarray(a.T)).t().requires_grad_()
    if what == "requires_grad":
        return llgrad.tensor(a)
    raise AssertionError(what)


def _guarded(x):
    return (x.exp() * x).sum(1)


@pytest.mark.parametrize("what", ["shape", "dtype", "strides", "requires_grad"])
def test_guard_change_retraces_and_stays_correct(what):
    f = counted(_guarded)
    cf = llgrad.compile(f)
    cf(_make_input("base", 1))
    cf.wait()
    cf(_make_input("base", 1))
    assert cf.n_traces == 1 and f.calls == 1
    if what == "strides":
        x = _make_input(what, 1)
        assert x.is_leaf and not x.is_contiguous() and x.shape == (3, 4)
    for _ in range(3):
        x, ex = _make_input(what, 1), _make_input(what, 1)
        out, want = cf(x), _guarded(ex)
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=RTOL)
        assert out.dtype == want.dtype and out.requires_grad == want.requires_grad
        if want.requires_grad:
            g = llgrad.tensor(rnd(2, *want.shape).astype(want.detach().numpy().dtype))
            out.backward(g)
            want.backward(g)
            np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), rtol=RTOL)
        cf.wait()
    assert cf.n_traces == 2 and f.calls == 2
    cf(_make_input("base", 1))               # the first key is still cached
    assert cf.n_traces == 2 and f.calls == 2


def test_python_scalars_are_guarded_by_value():
    """A number argument is guarded by value until it changes; then one used only in
    arithmetic (alpha) becomes an input (one more trace), while one whose value steers the
    trace (n, a loop count) is tried as an input once, then guarded by value for good."""
    def f(x, alpha, n):
        for _ in range(n):
            x = x * alpha
        return x.sum()
    cf = llgrad.compile(counted(f))
    x = llgrad.ones(3)
    assert cf(x, 2.0, 2).item() == 12.0
    assert cf(x, 2.0, 2).item() == 12.0 and cf.n_traces == 1
    assert cf(x, 3.0, 2).item() == 27.0 and cf.n_traces == 2
    assert cf(x, 5.0, 2).item() == 75.0 and cf.n_traces == 2
    assert cf(x, 2.0, 3).item() == 24.0 and cf.n_traces == 4
    assert cf(x, 2.0, 2).item() == 12.0 and cf.n_traces == 4
    assert cf(x, 3.0, 3).item() == 81.0 and cf.n_traces == 4
    assert cf(x, 2.0, 4).item() == 48.0 and cf.n_traces == 5


def test_data_dependent_branch_is_a_value_guard():
    """Without the control-flow conversion (transform=False) a Python decision on a traced
    value is a guard: a new outcome retraces. (With it, the if becomes a `cond` node:
    tests/tracer/test_control_flow.py.)"""
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x * 3
    cf = llgrad.compile(f, transform=False)
    for v, want, traces in [(1., 2., 1), (1., 2., 1), (-1., -3., 2), (-1., -3., 2), (1., 2., 2)]:
        assert cf(llgrad.tensor([v])).item() == want
        assert cf.n_traces == traces
        cf.wait()       # (built: the next call checks the value guard)


def test_recompile_limit_warns_once_naming_the_guard_then_runs_eagerly():
    f = counted(_exp_loss)
    cf = llgrad.compile(f, recompile_limit=2)
    cf(llgrad.ones(1, requires_grad=True))
    cf(llgrad.ones(2, requires_grad=True))
    cf.wait()
    assert cf.n_traces == 2 and f.calls == 2
    with pytest.warns(RuntimeWarning, match="recompile limit") as rec:
        out = cf(llgrad.ones(3, requires_grad=True))
    msgs = [str(r.message) for r in rec if "recompile limit" in str(r.message)]
    assert len(msgs) == 1 and "x:" in msgs[0], msgs
    assert type(out.grad_fn).__name__ == "SumBackward0"          # ran eagerly
    assert cf.n_traces == 2 and f.calls == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")                           # warns once only
        x = llgrad.ones(4, requires_grad=True)
        out = cf(x)
        out.backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.e * np.ones(4), rtol=RTOL)
        cf(llgrad.ones(5, requires_grad=True))
        assert type(cf(llgrad.ones(2, requires_grad=True)).grad_fn).__name__ == \
            "CompiledFunctionBackward"                           # cached keys still compiled
    assert cf.n_traces == 2 and f.calls == 5


def test_no_grad_uses_a_forward_only_entry():
    cf = llgrad.compile(_exp_loss)
    for _ in range(3):
        x = llgrad.ones(3, requires_grad=True)
        with llgrad.no_grad():
            out = cf(x)
        assert out.grad_fn is None and not out.requires_grad
        np.testing.assert_allclose(out.item(), 6 * np.e, rtol=RTOL)
    assert cf.n_traces == 1
    assert cf.entries[-1].backward is None
    out = cf(llgrad.ones(3, requires_grad=True))                 # grad mode is a guard
    assert out.requires_grad and cf.n_traces == 2


def test_backend_eager_by_env_runs_the_function_each_call(monkeypatch):
    monkeypatch.setenv("LLGRAD_BACKEND", "eager")
    f = counted(_exp_loss)
    cf = llgrad.compile(f)
    for _ in range(3):
        assert type(cf(llgrad.ones(2, requires_grad=True)).grad_fn).__name__ == "SumBackward0"
    assert f.calls == 3 and cf.n_traces == 0


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="unknown llgrad backend"):
        llgrad.compile(_exp_loss, backend="cuda")


def test_decorator_without_arguments_and_inlining_into_another_compiled_function():
    @llgrad.compile
    def inner(x):
        return x.exp()

    @llgrad.compile
    def outer(x):
        return inner(x).sum() * 2

    for _ in range(3):
        x = llgrad.ones(2, requires_grad=True)
        outer(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), [2 * np.e] * 2, rtol=RTOL)
        outer.wait()    # (while it builds, outer runs eagerly: calling inner)
    assert outer.n_traces == 1 and inner.n_traces == 0           # inlined into outer's trace


# ---- autograd semantics of compiled outputs -----------------------------------------------------

def _compiled_twice(cf, *make):
    """Call cf twice (the second runs the compiled graphs); return the 2nd inputs and output."""
    cf(*[m() for m in make])
    cf.wait()
    args = [m() for m in make]
    out = cf(*args)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    return args, out


def test_retain_graph_semantics():
    cf = llgrad.compile(_exp_loss)
    (x,), out = _compiled_twice(cf, lambda: llgrad.ones(3, requires_grad=True))
    out.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        out.backward()
    (x,), out = _compiled_twice(cf, lambda: llgrad.ones(3, requires_grad=True))
    out.backward(retain_graph=True)
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4 * np.e] * 3, rtol=RTOL)   # accumulated


def test_hooks_on_compiled_outputs():
    # (the loss is computed from y outside the compiled function: inside one compiled graph
    # a gradient from one output to another does not pass through the outputs' hooks)
    def f(x, w):
        return x * w, (x * x).sum()

    def run(fn):
        x = llgrad.tensor(rnd(3, 2, 3), requires_grad=True)
        w = llgrad.tensor(rnd(4, 3), requires_grad=True)
        seen = []
        y, z = fn(x, w)
        y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
        z.register_hook(lambda g: g * 0.5)
        w.register_hook(lambda g: g + 1)
        y.retain_grad()
        ((y * y).sum() + y.sum() + z).backward()
        return seen, x.grad.numpy(), w.grad.numpy(), y.grad.numpy(), y.grad_fn

    want = run(f)
    cf = llgrad.compile(f)
    for call in range(3):
        got = run(cf)
        cf.wait()
        assert len(got[0]) == len(want[0]) == 1
        for g, w in zip([got[0][0], *got[1:4]], [want[0][0], *want[1:4]]):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"call {call + 1}")
        if call:
            assert type(got[4]).__name__ == "CompiledFunctionBackward"


def test_autograd_grad_on_compiled_outputs():
    def f(x, w):
        return (x @ w).tanh().sum(), x * 2

    def run(fn):
        x = llgrad.tensor(rnd(5, 2, 3), requires_grad=True)
        w = llgrad.tensor(rnd(6, 3, 4), requires_grad=True)
        loss, y = fn(x, w)
        gx, gw = llgrad.autograd.grad(loss, [x, w], retain_graph=True)
        (gy,) = llgrad.autograd.grad([loss, y], [x], [None, llgrad.ones(2, 3)])
        assert x.grad is None and w.grad is None
        return gx.numpy(), gw.numpy(), gy.numpy()

    want = run(f)
    cf = llgrad.compile(f)
    for _ in range(3):
        for g, w in zip(run(cf), want):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    assert cf.n_traces == 1


def test_runtime_version_error_on_a_saved_input():
    def f(x, w):
        return (x * w).sum()          # x is saved to compute w's gradient

    cf = llgrad.compile(f)
    (x, w), loss = _compiled_twice(cf, lambda: llgrad.tensor(rnd(7, 3)),
                                   lambda: llgrad.tensor(rnd(8, 3), requires_grad=True))
    with llgrad.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_runtime_version_error_on_a_saved_output():
    def f(a, b):
        return (a @ b).tanh()         # tanh's result (the output) is saved for backward

    cf = llgrad.compile(f)
    _, y = _compiled_twice(cf, lambda: llgrad.ones(3, 4, requires_grad=True),
                           lambda: llgrad.ones(4, 5, requires_grad=True))
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_a_saved_value_modified_later_runs_eagerly_and_backward_raises_as_eager():
    """A value the backward needs, modified in place later in the function: the forward
    succeeds as in eager (the call runs eagerly, a warning naming both lines), and the
    caller's backward raises eager's error; fullgraph=True refuses it at once."""
    def f(w):
        y = w.exp()
        y.add_(1)
        return y.sum()

    first = inspect.getsourcelines(f)[1]
    with pytest.raises(RuntimeError, match="fullgraph=True.*modified in place later"):
        llgrad.compile(f, fullgraph=True)(llgrad.ones(3, requires_grad=True))
    cf = llgrad.compile(f)
    with pytest.warns(UserWarning, match=f"ExpBackward0 at test_compile_behaviour.py:"
                                         f"{first + 1} and modified in place at "
                                         f"test_compile_behaviour.py:{first + 2}"):
        out = cf(llgrad.ones(3, requires_grad=True))
    for _ in range(2):
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as ei:
            out.backward()
        msg = str(ei.value)
        assert f"ExpBackward0 at test_compile_behaviour.py:{first + 1}" in msg
        assert f"modified in place at test_compile_behaviour.py:{first + 2}" in msg
        out = cf(llgrad.ones(3, requires_grad=True))


def test_requires_grad_input_modified_in_place_runs_eagerly_with_a_warning():
    """An input that requires grad, written in place by a function whose result requires
    grad: compile cannot give it eager's history, so the call runs eagerly (a warning
    naming the input), and fullgraph=True refuses it."""
    def f(x):
        x.mul_(2)
        return x.sum()

    cf = llgrad.compile(f)
    base = llgrad.ones(3, requires_grad=True)
    for k in range(2):
        x = base * 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = cf(x)
        texts = [str(w.message) for w in caught]
        assert len(texts) == (1 if k == 0 else 0), texts      # once per function and reason
        assert all(re.search("running eagerly.*'x' requires grad and is modified in place", t)
                   for t in texts), texts
        out.backward()
        np.testing.assert_allclose(base.grad.numpy(), [2, 2, 2])
        base.grad = None
    with pytest.raises(RuntimeError, match="fullgraph=True.*modified in place"):
        llgrad.compile(f, fullgraph=True)(base * 1)


# ---- dumps ----------------------------------------------------------------------------------

def _mlp_loss(x, w1, b1, w2, target):
    return F.cross_entropy((x @ w1 + b1).relu() @ w2, target)


def _mlp_args():
    return (llgrad.tensor(rnd(9, 4, 5)), llgrad.tensor(rnd(10, 5, 6), requires_grad=True),
            llgrad.tensor(rnd(11, 6), requires_grad=True),
            llgrad.tensor(rnd(12, 6, 3), requires_grad=True), llgrad.tensor([0, 2, 1, 1]))


def test_dump_of_an_mlp_loss():
    cf = llgrad.compile(_mlp_loss)
    text = cf.dump(*_mlp_args())
    for part in ("== guards ==", "== forward ==", "== backward ==", "== saved values ==",
                 "bytes"):
        assert part in text, part
    assert re.search(r"^\s+x: \('float32', \(4, 5\)", text, re.M), text
    assert re.search(r"^\s+w1: \('float32', \(5, 6\), \(6, 1\), True\b", text, re.M), text
    assert re.search(r"^\s+target: \('int64'", text, re.M), text
    assert "grad mode" in text
    assert cf.n_traces == 1
    assert cf.dump(*_mlp_args()) == text and cf.n_traces == 1     # same key: no retrace


def test_llgrad_dump_env_writes_a_dump_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LLGRAD_DUMP", str(tmp_path))
    cf = llgrad.compile(_mlp_loss)
    cf(*_mlp_args())
    cf(*_mlp_args())
    files = os.listdir(tmp_path)
    assert len(files) == 1, files
    text = (tmp_path / files[0]).read_text()
    assert "_mlp_loss" in files[0]
    assert "== forward ==" in text and "== backward ==" in text and "== saved values ==" in text
    # on llvm (the default) the kernels are built for the dump: LLVM IR and Python too
    for part in ("== forward LLVM IR (before optimisation) ==",
                 "== backward LLVM IR (after optimisation) ==", "== backward as Python =="):
        assert part in text
    assert "define void @llgrad_" in text


def test_dump_shows_llvm_ir_and_assembly():
    cf = llgrad.compile(_mlp_loss, backend="llvm")
    text = cf.dump(*_mlp_args(), llvm=True, asm=True)
    before = text.index("== forward LLVM IR (before optimisation) ==")
    after = text.index("== forward LLVM IR (after optimisation) ==")
    asm = text.index("== forward assembly ==")
    assert before < after < asm and "== backward assembly ==" in text
    assert "noalias" in text[before:after]              # the group functions' parameters
    assert "\tret" in text[asm:] and ".section" in text[asm:]   # host assembly, not IR


def test_recompile_limit_names_the_value_guards_line():
    # the count of a data mask is a value guard: the warning says where it was read
    def f(x):
        return x[x > 0].sum()

    cf = llgrad.compile(f, backend="interpret", recompile_limit=2)
    with pytest.warns(RuntimeWarning, match="recompile limit") as rec:
        for k in range(4):
            cf(llgrad.tensor([1.0] * k + [-1.0] * (4 - k)))
    msg = next(str(r.message) for r in rec if "recompile limit" in str(r.message))
    assert "a value guard (the traced values: 1 at " in msg
    assert "test_compile_behaviour.py:" in msg, msg


# ---- None and Python numbers returned beside the tensors ------------------------------------
@pytest.mark.parametrize("backend", ["llvm", "interpret", "python"])
def test_constants_in_the_result_come_back_on_every_call(backend):
    f = llgrad.compile(lambda x: (x * 2, None, {"n": 3, "y": x.sum()}, "tag"), backend=backend)
    x = llgrad.tensor([1.0, 2.0])
    for _ in range(3):
        a, none, d, tag = f(x)
        np.testing.assert_array_equal(a.numpy(), [2.0, 4.0])
        assert none is None and tag == "tag" and d["n"] == 3 and d["y"].item() == 3.0
    assert f.n_traces == 1


def test_a_training_step_that_returns_nothing_compiles():
    w = llgrad.ones(3, requires_grad=True)
    opt = llgrad.optim.SGD([w], lr=0.1)

    def step():
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()

    cstep = llgrad.compile(step)
    for k in range(4):
        assert cstep() is None
        np.testing.assert_allclose(w.detach().numpy(), np.full(3, 0.8 ** (k + 1)), rtol=1e-6)
    assert cstep.n_traces <= 2


def test_a_number_read_from_a_tensor_and_returned_is_an_output():
    # (the user's .item() is a stand-in, returned as an output: tracer/item_reads.py)
    f = llgrad.compile(lambda x: (x * 2, x.sum().item()), transform=False)
    for v in [1.0, 1.0, 2.0, 2.0, 1.0]:
        out, total = f(llgrad.full((2,), v))
        assert total == 2 * v and type(total) is float and out.numpy().tolist() == [2 * v, 2 * v]
        f.wait()
    assert f.n_traces == 1
