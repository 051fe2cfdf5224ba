"""Hooks of a leaf's AccumulateGrad node, as in PyTorch: `acc.register_prehook(fn)`
(fn(grad_outputs) before the accumulation, may replace the gradient), `acc.register_hook(fn)`
(fn((), grad_outputs) after it), `Tensor.register_post_accumulate_grad_hook(fn)` (fn(leaf)
once .grad is updated; leaves only), their order relative to the leaf's tensor hooks, and
when they run: backward, retain_graph, create_graph, backward(inputs=...), autograd.grad (never:
that does not accumulate), a leaf as the root, no gradient reaching the node.

Most tests run twice: as they come, and with the engine's short path (engine._run_single)
switched off; where the short path applies (one node whose edges all end at leaves: a
compiled function's output, or one eager op with an explicit gradient) it must have been
taken. Expected values are derived by hand; the tests at the end compare with PyTorch
when it is installed."""
import numpy as np
import pytest

import llgrad
from llgrad.runtime import engine

# torch warns about backward(create_graph=True) on leaves (a reference cycle)
pytestmark = pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")

ACC_NAME = "llgrad::autograd::AccumulateGrad"


def vals(t):
    return None if t is None else np.asarray(t.detach()._data, dtype=np.float64).tolist()


def leaves():
    x = llgrad.tensor([1.0, 2.0], requires_grad=True)
    w = llgrad.tensor([3.0, 4.0], requires_grad=True)
    return x, w


def acc_of(t):
    """The AccumulateGrad node of leaf t, reached as PyTorch users reach it."""
    return (t * 1.0).grad_fn.next_functions[0][0]


@llgrad.compile
def _cmul(x, w):
    return x * w


def _warm(fn, *args):
    """Call fn until it runs compiled (its first calls run eagerly while it is traced), on
    leaves of the tests' shapes but not the tests' own: the trace's autograd.grad runs its
    inputs' tensor hooks (not this file's subject), and the tests' hooks must see only
    their own backward."""
    for _ in range(5):
        if type(fn(*args).grad_fn).__name__ == "CompiledFunctionBackward":
            return
        fn.wait()       # (built in the background: compiled from the next call on)
    raise AssertionError("not compiled")


_warm(_cmul, *leaves())


def _root(kind, x, w):
    """x * w (gradient [1, 1]: dx = w, dw = x) as a graph of the given kind, and the kind's
    eligibility for the short path."""
    if kind == "eager":                 # one node, edges to the leaves' nodes: short path
        return x * w, True
    if kind == "compiled":              # one CompiledFunctionBackward node: short path
        root = _cmul(x, w)
        assert type(root.grad_fn).__name__ == "CompiledFunctionBackward"
        return root, True
    return (x * w) * 1.0, False         # two nodes: the general loop


KINDS = ["eager", "compiled", "deep"]


@pytest.fixture(params=["short", "general"])
def path(request, monkeypatch):
    """Runs the test with the short path as it comes, or switched off; `path.check(eligible)`
    asserts which path the engine runs since the last check took."""
    taken = []
    orig = engine._run_single

    def spy(*args):
        if request.param == "general":
            taken.append(False)
            return engine._GENERAL
        try:
            res = orig(*args)
        except Exception:
            taken.append(True)      # (it raises only for a graph it runs)
            raise
        taken.append(res is not engine._GENERAL)
        return res

    monkeypatch.setattr(engine, "_run_single", spy)

    class P:
        name = request.param

        def check(self, eligible):
            """Every engine run so far took the short path iff it applied."""
            want = eligible and request.param == "short"
            assert taken and all(t == want for t in taken), taken
            taken.clear()
    return P()


def hook_all(t, log, tag, scale=None):
    """Register on leaf t: a tensor hook, a node pre-hook (multiplying by `scale` when
    given), a post-accumulate-grad hook and a node post hook, each logging what it sees."""
    acc = acc_of(t)

    def pre(go):
        log.append((tag, "pre", [vals(g) for g in go]))
        return None if scale is None else (go[0] * scale,)

    hs = [t.register_hook(lambda g: log.append((tag, "tensor", vals(g)))),
          acc.register_prehook(pre),
          t.register_post_accumulate_grad_hook(
              lambda leaf: log.append((tag, "post_acc", leaf is t, vals(leaf.grad)))),
          acc.register_hook(lambda gi, go: log.append(
              (tag, "post", gi, [vals(g) for g in go], vals(t.grad))))]
    return hs


def of(log, tag):
    return [e[1:] for e in log if e[0] == tag]


# ---- the node itself -------------------------------------------------------------------------

def test_node_attributes():
    x, w = leaves()
    y = x * w
    acc = y.grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad"
    assert acc.name() == ACC_NAME
    assert y.grad_fn.name() == "MulBackward0"      # other nodes: their class name, as in torch
    assert acc.variable is x
    assert acc.next_functions == ()
    assert y.grad_fn.next_functions[1][0].variable is w
    assert acc_of(x) is acc                         # one node per leaf
    assert repr(acc).startswith("<AccumulateGrad object at 0x")
    assert x.grad_fn is None and x.is_leaf


def test_no_hook_leaves_the_node_unhooked():
    x, w = leaves()
    acc = acc_of(x)
    (x * w).sum().backward()
    assert acc._hooked is False and acc._pre_hooks is None and acc._post_hooks is None
    acc.register_hook(lambda gi, go: None)
    assert acc._hooked is True


# ---- order and values ------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_order_and_values(kind, path):
    """tensor hook -> pre-hook (x10) -> accumulation -> post-accumulate hook -> post hook,
    per leaf; the tensor hook's result (+1) reaches the pre-hook."""
    x, w = leaves()
    log = []
    x.register_hook(lambda g: g + 1.0)          # registered before the logging hooks
    hook_all(x, log, "x", scale=10.0)
    hook_all(w, log, "w")
    root, eligible = _root(kind, x, w)
    llgrad.autograd.backward(root, llgrad.ones(2))
    path.check(eligible)
    # dx = w = [3, 4], +1 by the first tensor hook, x10 by the pre-hook
    assert of(log, "x") == [("tensor", [4.0, 5.0]),
                            ("pre", [[4.0, 5.0]]),
                            ("post_acc", True, [40.0, 50.0]),
                            ("post", (), [[40.0, 50.0]], [40.0, 50.0])]
    assert of(log, "w") == [("tensor", [1.0, 2.0]),
                            ("pre", [[1.0, 2.0]]),
                            ("post_acc", True, [1.0, 2.0]),
                            ("post", (), [[1.0, 2.0]], [1.0, 2.0])]
    assert vals(x.grad) == [40.0, 50.0] and vals(w.grad) == [1.0, 2.0]
    # each leaf's five steps run together (one node runs at a time)
    tags = [e[0] for e in log]
    assert tags in (["x"] * 4 + ["w"] * 4, ["w"] * 4 + ["x"] * 4)


@pytest.mark.parametrize("kind", KINDS)
def test_several_hooks_run_in_registration_order(kind, path):
    x, w = leaves()
    log = []
    acc = acc_of(x)
    for i in range(2):
        acc.register_prehook(lambda go, i=i: log.append(("pre", i)) or (go[0] * 2.0,))
        x.register_post_accumulate_grad_hook(lambda t, i=i: log.append(("post_acc", i)))
        acc.register_hook(lambda gi, go, i=i: log.append(("post", i)))
    root, eligible = _root(kind, x, w)
    llgrad.autograd.backward(root, llgrad.ones(2))
    path.check(eligible)
    assert log == [("pre", 0), ("pre", 1), ("post_acc", 0), ("post_acc", 1),
                   ("post", 0), ("post", 1)]
    assert vals(x.grad) == [12.0, 16.0]         # w * 2 * 2


@pytest.mark.parametrize("kind", KINDS)
def test_retain_graph_runs_the_hooks_each_time(kind, path):
    x, w = leaves()
    log = []
    hook_all(x, log, "x")
    root, eligible = _root(kind, x, w)
    llgrad.autograd.backward(root, llgrad.ones(2), retain_graph=True)
    llgrad.autograd.backward(root, llgrad.ones(2))
    path.check(eligible)
    assert [e[:2] for e in of(log, "x") if e[0] in ("post_acc", "post")] == [
        ("post_acc", True), ("post", ()), ("post_acc", True), ("post", ())]
    assert of(log, "x")[2] == ("post_acc", True, [3.0, 4.0])
    assert of(log, "x")[6] == ("post_acc", True, [6.0, 8.0])      # accumulated
    assert of(log, "x")[7] == ("post", (), [[3.0, 4.0]], [6.0, 8.0])


@pytest.mark.parametrize("kind", KINDS)
def test_autograd_grad_runs_only_the_inputs_tensor_hooks(kind, path):
    """autograd.grad does not accumulate: the leaves' nodes do not run, so neither their
    pre/post hooks nor the post-accumulate hooks; an input's tensor hooks do run (and change
    the captured gradient); a leaf that is not an input runs nothing at all."""
    x, w = leaves()
    log = []
    hook_all(x, log, "x", scale=10.0)
    hook_all(w, log, "w", scale=10.0)
    x.register_hook(lambda g: g * 2.0)
    root, eligible = _root(kind, x, w)
    gx, gw = llgrad.autograd.grad(root, [x, w], llgrad.ones(2), retain_graph=True)
    assert vals(gx) == [6.0, 8.0] and vals(gw) == [1.0, 2.0]
    assert sorted(log) == [("w", "tensor", [1.0, 2.0]), ("x", "tensor", [3.0, 4.0])]
    log.clear()
    (gw,) = llgrad.autograd.grad(root, [w], llgrad.ones(2))
    path.check(eligible)
    assert vals(gw) == [1.0, 2.0]
    assert log == [("w", "tensor", [1.0, 2.0])]      # x is not an input: nothing of x runs
    assert x.grad is None and w.grad is None


@pytest.mark.parametrize("kind", KINDS)
def test_backward_inputs_runs_only_the_inputs_nodes(kind, path):
    x, w = leaves()
    log = []
    hook_all(x, log, "x")
    hook_all(w, log, "w", scale=10.0)
    root, eligible = _root(kind, x, w)
    llgrad.autograd.backward(root, llgrad.ones(2), inputs=[w])
    path.check(eligible)
    assert of(log, "x") == []
    assert of(log, "w") == [("tensor", [1.0, 2.0]),
                            ("pre", [[1.0, 2.0]]),
                            ("post_acc", True, [10.0, 20.0]),
                            ("post", (), [[10.0, 20.0]], [10.0, 20.0])]
    assert x.grad is None and vals(w.grad) == [10.0, 20.0]


def test_backward_inputs_non_leaf_runs_no_leaf_node():
    x, w = leaves()
    log = []
    hook_all(x, log, "x")
    z = x * 2.0
    (z * w).sum().backward(inputs=[z])
    assert log == [] and x.grad is None
    assert vals(z.grad) == [3.0, 4.0]


@pytest.mark.parametrize("kind", KINDS)
def test_create_graph(kind, path):
    x, w = leaves()
    log = []
    hook_all(x, log, "x")
    root, eligible = _root(kind, x, w)
    llgrad.autograd.backward(root, llgrad.ones(2), create_graph=True)
    path.check(eligible)
    assert [e[0] for e in of(log, "x")] == ["tensor", "pre", "post_acc", "post"]
    assert vals(x.grad) == [3.0, 4.0]
    assert x.grad.requires_grad            # a gradient with history: w's, through x * w
    x.grad.sum().backward(inputs=[w])
    assert vals(w.grad) == [2.0, 3.0]      # d/dw sum(w) = 1, added to dw = x = [1, 2]


def test_leaf_as_the_root():
    x, _ = leaves()
    log = []
    hook_all(x, log, "x", scale=3.0)
    x.backward(llgrad.tensor([1.0, -1.0]))
    assert of(log, "x") == [("tensor", [1.0, -1.0]),
                            ("pre", [[1.0, -1.0]]),
                            ("post_acc", True, [3.0, -3.0]),
                            ("post", (), [[3.0, -3.0]], [3.0, -3.0])]
    log.clear()
    (g,) = llgrad.autograd.grad(x, [x], llgrad.tensor([1.0, 1.0]))
    assert vals(g) == [1.0, 1.0] and [e[1] for e in log] == ["tensor"]
    assert vals(x.grad) == [3.0, -3.0]


def _only_first(lib):
    """lib's (llgrad's or torch's) Function p + q whose backward gives q no gradient."""
    class OnlyFirst(lib.autograd.Function):
        @staticmethod
        def forward(ctx, p, q):
            return p + q

        @staticmethod
        def backward(ctx, g):
            return g, None
    return OnlyFirst


_OnlyFirst = _only_first(llgrad)


@pytest.mark.parametrize("run", ["backward", "general"])
def test_no_gradient_reaching_the_node(run, monkeypatch):
    """The node runs with None: its pre-hooks see (None,), nothing is accumulated, the
    post-accumulate hook still runs (with .grad None), the post hook sees (None,)."""
    if run == "general":
        monkeypatch.setattr(engine, "_run_single", lambda *a: engine._GENERAL)
    p, q = leaves()
    log = []
    hook_all(q, log, "q")
    _OnlyFirst.apply(p, q).sum().backward()
    assert of(log, "q") == [("pre", [None]), ("post_acc", True, None),
                            ("post", (), [None], None)]
    assert q.grad is None and vals(p.grad) == [1.0, 1.0]


@pytest.mark.parametrize("kind", KINDS)
def test_pre_hook_returning_none_gradient_skips_the_accumulation(kind, path):
    x, w = leaves()
    log = []
    acc = acc_of(x)
    acc.register_prehook(lambda go: (None,))
    x.register_post_accumulate_grad_hook(lambda t: log.append(("post_acc", vals(t.grad))))
    acc.register_hook(lambda gi, go: log.append(("post", gi, go)))
    root, eligible = _root(kind, x, w)
    llgrad.autograd.backward(root, llgrad.ones(2))
    path.check(eligible)
    assert log == [("post_acc", None), ("post", (), (None,))]
    assert x.grad is None and vals(w.grad) == [1.0, 2.0]


# ---- removal ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_handles_remove_the_hooks(kind, path):
    x, w = leaves()
    log = []
    hs = hook_all(x, log, "x", scale=10.0)
    root, eligible = _root(kind, x, w)
    llgrad.autograd.backward(root, llgrad.ones(2), retain_graph=True)
    assert len(log) == 4 and vals(x.grad) == [30.0, 40.0]
    for h in hs[1:]:
        h.remove()
        h.remove()                      # a second remove does nothing
    log.clear()
    llgrad.autograd.backward(root, llgrad.ones(2))
    path.check(eligible)
    assert log == [("x", "tensor", [3.0, 4.0])]
    assert vals(x.grad) == [33.0, 44.0]     # no longer x10


def test_a_handle_removes_only_its_own_registration():
    x, w = leaves()
    log = []
    acc = acc_of(x)

    def f(go):
        log.append("f")

    def g(go):
        log.append("g")

    def F(gi, go):
        log.append("F")

    def P(t):
        log.append("P")

    h = acc.register_prehook(f)
    acc.register_prehook(g)
    acc.register_prehook(f)
    h.remove()
    k = acc.register_hook(F)
    acc.register_hook(F)
    k.remove()
    m = x.register_post_accumulate_grad_hook(P)
    x.register_post_accumulate_grad_hook(P)
    m.remove()
    (x * w).sum().backward()
    assert log == ["g", "f", "P", "F"]


def test_a_leaf_tensor_hook_handle_removes_only_its_own_registration():
    # the same function registered twice: removing the second keeps the first, in place
    x, w = leaves()
    log = []

    def f(g):
        log.append("f")

    def g(grad):
        log.append("g")
    x.register_hook(f)
    x.register_hook(g)
    x.register_hook(f).remove()
    (x * w).sum().backward()
    assert log == ["f", "g"]


def test_handle_as_context_manager():
    x, w = leaves()
    log = []
    with x.register_post_accumulate_grad_hook(lambda t: log.append("in")) as h:
        (x * w).sum().backward()
    assert log == ["in"] and hasattr(h, "remove")
    (x * w).sum().backward()
    assert log == ["in"]


def test_hook_removed_by_an_earlier_hook_still_runs_this_time():
    x, w = leaves()
    log = []
    acc = acc_of(x)
    hs = []
    hs.append(acc.register_prehook(lambda go: log.append(1) or hs[1].remove()))
    hs.append(acc.register_prehook(lambda go: log.append(2)))
    (x * w).sum().backward()
    (x * w).sum().backward()
    assert log == [1, 2, 1]


# ---- errors ----------------------------------------------------------------------------------

def test_post_accumulate_hook_only_on_leaves_that_require_grad():
    x, _ = leaves()
    with pytest.raises(RuntimeError, match="^post accumulate grad hooks cannot be registered "
                                           "on non-leaf tensors$"):
        (x * 2.0).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="^post accumulate grad hooks cannot be registered"):
        x[:1].register_post_accumulate_grad_hook(lambda t: None)     # a view: not a leaf
    with pytest.raises(RuntimeError, match="^cannot register a hook on a tensor that doesn't "
                                           "require gradient$"):
        llgrad.ones(2).register_post_accumulate_grad_hook(lambda t: None)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("result, error, message", [
    (lambda t: t.grad * 2.0, RuntimeError, "Tensor post accumulate grad hooks should return None."),
    (lambda t: 1, TypeError, "expected Variable, but hook returned 'int'"),
    (lambda t: (t,), TypeError, "expected Variable, but hook returned 'tuple'"),
])
def test_post_accumulate_hook_must_return_none(kind, result, error, message, path):
    x, w = leaves()
    x.register_post_accumulate_grad_hook(result)
    root, eligible = _root(kind, x, w)
    with pytest.raises(error) as e:
        llgrad.autograd.backward(root, llgrad.ones(2))
    assert str(e.value) == message
    assert vals(x.grad) == [3.0, 4.0]           # the accumulation happened before
    path.check(eligible)


@pytest.mark.parametrize("result, error, message", [
    (lambda go: [go[0]], TypeError, "expected tuple, but hook returned 'list'"),
    (lambda go: go[0], TypeError, "expected tuple, but hook returned 'Tensor'"),
    (lambda go: (go[0], go[0]), RuntimeError,
     "hook '<lambda>' has returned an incorrect number of values (got 2, but expected 1)"),
    (lambda go: (), RuntimeError,
     "hook '<lambda>' has returned an incorrect number of values (got 0, but expected 1)"),
])
def test_pre_hook_result_is_checked(result, error, message, path):
    x, w = leaves()
    acc_of(x).register_prehook(result)
    with pytest.raises(error) as e:
        llgrad.autograd.backward(x * w, llgrad.ones(2))
    assert str(e.value) == message
    path.check(True)


def test_post_hook_result_is_checked():
    x, w = leaves()
    acc = acc_of(x)
    h = acc.register_hook(lambda gi, go: go[0])
    with pytest.raises(TypeError, match="^expected tuple, but hook returned 'Tensor'$"):
        (x * w).sum().backward()
    h.remove()

    class Hook:
        def __call__(self, gi, go):
            return go
    acc.register_hook(Hook())
    with pytest.raises(RuntimeError, match=r"^hook '<unknown>' has returned an incorrect "
                                           r"number of values \(got 1, but expected 0\)$"):
        (x * w).sum().backward()


def test_post_hook_returning_empty_tuple_is_fine():
    x, w = leaves()
    acc_of(x).register_hook(lambda gi, go: ())
    (x * w).sum().backward()
    assert vals(x.grad) == [3.0, 4.0]


# ---- uses ------------------------------------------------------------------------------------

@llgrad.compile
def _loss(x, w):
    return ((x * w).tanh() * x).sum()


_warm(_loss, *leaves())
_warm(_loss, *[llgrad.tensor(np.zeros(4, np.float32), requires_grad=True) for _ in "xw"])


def test_optimizer_step_in_post_accumulate_hook_of_compiled_step(path):
    """The 'optimizer in backward' pattern: each parameter is updated and its .grad dropped
    as soon as its gradient is accumulated (the compiled step's node is the short path's)."""
    rng = np.random.default_rng(0)
    xa, wa = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    x = llgrad.tensor(xa, requires_grad=True)
    w = llgrad.tensor(wa, requires_grad=True)
    seen = []

    def step(p):
        seen.append(vals(p.grad))
        with llgrad.no_grad():
            p.sub_(0.5 * p.grad)
        p.grad = None
    for p in (x, w):
        p.register_post_accumulate_grad_hook(step)
    _loss(x, w).backward()
    path.check(True)
    t = np.tanh(xa * wa)
    dx = (1 - t * t) * wa * xa + t
    dw = (1 - t * t) * xa * xa
    assert len(seen) == 2 and x.grad is None and w.grad is None
    np.testing.assert_allclose(sorted(seen), sorted([dx.tolist(), dw.tolist()]), rtol=1e-5)
    np.testing.assert_allclose(vals(x), xa - 0.5 * dx, rtol=1e-5)
    np.testing.assert_allclose(vals(w), wa - 0.5 * dw, rtol=1e-5)


def test_hooks_do_not_send_compiled_steps_to_the_general_loop(monkeypatch):
    taken = []
    orig = engine._run_single

    def spy(*args):
        res = orig(*args)
        taken.append(res is not engine._GENERAL)
        return res
    monkeypatch.setattr(engine, "_run_single", spy)
    x, w = leaves()
    log = []
    hook_all(x, log, "x")
    _loss(x, w).backward()
    assert [e[1] for e in log] == ["tensor", "pre", "post_acc", "post"]
    x.grad = w.grad = None              # (a .grad set is part of the compiled call's guards)
    llgrad.autograd.grad(_loss(x, w), [w])
    assert taken == [True, True]


# ---- other nodes' hooks (the same engine code) -----------------------------------------------

def test_node_post_hook_result_replaces_grad_inputs():
    x = llgrad.ones(2, requires_grad=True)
    z = (x * 2.0) * 3.0
    z.grad_fn.register_hook(lambda gi, go: (gi[0] * 100.0, None))
    z.sum().backward()
    assert vals(x.grad) == [600.0, 600.0]


def test_node_hook_results_are_checked_against_torch():
    torch = pytest.importorskip("torch")

    def run(lib):
        out = []
        for how, fn in (("post", lambda gi, go: (1, None)), ("post", lambda gi, go: [gi[0]]),
                        ("post", lambda gi, go: (gi[0],)), ("pre", lambda go: ("a",)),
                        ("pre", lambda go: (go[0], go[0])), ("pre", lambda go: (go[0] * 2,))):
            x = lib.ones(2, requires_grad=True)
            z = (x * 2.0) * 3.0
            getattr(z.grad_fn, "register_hook" if how == "post" else "register_prehook")(fn)
            try:
                z.sum().backward()
                out.append(x.grad.tolist())
            except Exception as e:      # noqa: BLE001 - the error is what is compared
                out.append((type(e).__name__, str(e)))
        return out
    assert run(llgrad) == run(torch)


def test_retained_grad_is_taken_before_the_node_pre_hooks():
    x = llgrad.ones(2, requires_grad=True)
    y = x * 2.0
    y.retain_grad()
    y.grad_fn.register_prehook(lambda go: (go[0] * 10.0,))
    (y * 3.0).sum().backward()
    assert vals(y.grad) == [3.0, 3.0] and vals(x.grad) == [60.0, 60.0]


# ---- against PyTorch -------------------------------------------------------------------------

def _scenario(lib, kind):
    """One program, run with torch or llgrad; returns a log of plain values per leaf.
    kind: "eager" (one node: llgrad's short path) or "deep"."""
    OnlyFirst = _only_first(lib)

    def v(t):
        return None if t is None else t.detach().numpy().astype(np.float64).round(5).tolist()

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([3.0, -4.0], requires_grad=True)
    q = lib.tensor([0.5, 0.5], requires_grad=True)
    logs = {"x": [], "w": [], "q": []}

    def hook(t, tag, scale):
        log = logs[tag]
        acc = (t * 1.0).grad_fn.next_functions[0][0]
        handles = [
            # (torch also calls a tensor hook with None when no gradient reaches the leaf;
            # llgrad does not, before and after this change: not compared here)
            t.register_hook(lambda g: None if g is None else
                            log.append(("tensor", v(g))) or g + 1.0),
            acc.register_prehook(lambda go: log.append(("pre", [v(g) for g in go])) or
                                 (None if go[0] is None else (go[0] * scale,))),
            t.register_post_accumulate_grad_hook(
                lambda p: log.append(("post_acc", p is t, v(p.grad), lib.is_grad_enabled()))),
            acc.register_hook(lambda gi, go: log.append(("post", gi, [v(g) for g in go]))),
        ]
        return acc, handles

    # the nodes are kept: torch's leaf holds its AccumulateGrad weakly, and a node nothing
    # holds is gone with its hooks (llgrad's leaf holds its node)
    (ax, hx), (aw, hw), (aq, _) = hook(x, "x", 10.0), hook(w, "w", -1.0), hook(q, "q", 2.0)
    logs["x"].append(("node", type(ax).__name__, ax.name().split("::")[-1],
                      ax.next_functions, ax.variable is x))

    def root():
        if kind == "eager":
            return x * w
        return (x * w).sin() * 2.0
    g = lib.tensor([1.0, 0.5])
    lib.autograd.backward(root(), g, retain_graph=False)
    r = root()
    lib.autograd.backward(r, g, retain_graph=True)
    lib.autograd.backward(r, g, inputs=[w])
    res = lib.autograd.grad(root(), [x], g)
    logs["x"].append(("grad", v(res[0])))
    lib.autograd.backward(root(), g, create_graph=True)
    for tag, t in (("x", x), ("w", w)):
        logs[tag].append(("create_graph", t.grad.requires_grad))
        t.grad = None
    hx[1].remove()
    hw[2].remove()
    hw[3].remove()
    lib.autograd.backward(root(), g)
    OnlyFirst.apply(q, x).sum().backward()          # x gets no gradient
    OnlyFirst.apply(x, q).sum().backward()
    for tag, t in (("x", x), ("w", w), ("q", q)):
        logs[tag].append(("grad_field", v(t.grad)))
    # a post-accumulate hook's result: an error raised after x's accumulation (w's node may
    # or may not have run by then: the two engines order different leaves' nodes differently)
    for h in hw:
        h.remove()
    x.grad = None
    for bad in (lambda t: 1, lambda t: t.grad):
        h = x.register_post_accumulate_grad_hook(bad)
        try:
            lib.autograd.backward(root(), g)
        except (RuntimeError, TypeError) as e:
            logs["x"].append(("error", type(e).__name__, str(e), v(x.grad)))
        h.remove()
    assert aw.variable is w and aq.variable is q
    return logs


@pytest.mark.parametrize("kind", ["eager", "deep"])
def test_against_torch(kind, path):
    torch = pytest.importorskip("torch")
    want = _scenario(torch, kind)
    got = _scenario(llgrad, kind)
    for tag in want:
        assert got[tag] == want[tag], tag


def test_hook_order_within_a_leaf_against_torch():
    """A leaf's tensor hooks, the node's pre-hooks, the post-accumulate hooks and post hooks,
    several of each, in torch's order, with each one's view of the gradient and .grad."""
    torch = pytest.importorskip("torch")

    def run(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        acc = (x * 1.0).grad_fn.next_functions[0][0]
        for i in range(2):
            x.register_hook(lambda g, i=i: log.append(("tensor", i, g.tolist())) or g * 2.0)
            acc.register_prehook(lambda go, i=i: log.append(("pre", i, go[0].tolist())) or
                                 (go[0] + 1.0,))
            x.register_post_accumulate_grad_hook(
                lambda t, i=i: log.append(("post_acc", i, t.grad.tolist())))
            acc.register_hook(lambda gi, go, i=i: log.append(("post", i, go[0].tolist(),
                                                              x.grad.tolist())))
        (x * x).sum().backward()
        return log, x.grad.tolist()
    assert run(llgrad) == run(torch)


def test_acc_name_against_torch():
    torch = pytest.importorskip("torch")
    t = torch.ones(1, requires_grad=True)
    name = (t * 1).grad_fn.next_functions[0][0].name()
    x = llgrad.ones(1, requires_grad=True)
    assert acc_of(x).name() == name.replace("torch::", "llgrad::") == ACC_NAME


def test_errors_against_torch():
    torch = pytest.importorskip("torch")

    def run(lib):
        out = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        for fn in (lambda: (x * 2).register_post_accumulate_grad_hook(lambda t: None),
                   lambda: lib.ones(2).register_post_accumulate_grad_hook(lambda t: None),
                   lambda: x[:1].register_post_accumulate_grad_hook(lambda t: None)):
            try:
                fn()
                out.append("ok")
            except Exception as e:      # noqa: BLE001 - the error is what is compared
                out.append((type(e).__name__, str(e)))
        # (the node is kept: torch's leaf holds its AccumulateGrad weakly, and a node nothing
        # holds is gone with its hooks; llgrad's leaf holds it)
        for pre in ((lambda go: [go[0]]), (lambda go: (go[0], go[0])), (lambda go: ())):
            y = lib.tensor([1.0, 2.0], requires_grad=True)
            acc = (y * 1).grad_fn.next_functions[0][0]
            acc.register_prehook(pre)
            try:
                (y * 2).sum().backward()
                out.append("ok")
            except Exception as e:      # noqa: BLE001
                out.append((type(e).__name__, str(e)))
        for post in ((lambda gi, go: go[0]), (lambda gi, go: go), (lambda gi, go: ())):
            y = lib.tensor([1.0, 2.0], requires_grad=True)
            acc = (y * 1).grad_fn.next_functions[0][0]
            acc.register_hook(post)
            try:
                (y * 2).sum().backward()
                out.append(("ok", y.grad.tolist()))
            except Exception as e:      # noqa: BLE001
                out.append((type(e).__name__, str(e)))
        return out
    assert run(llgrad) == run(torch)
