"""The engine's short path (engine._run_single): one root node whose edges all end at
leaves, the graph of a compiled function's output. Every scenario runs twice, once as it
comes and once with the short path switched off, and must give the same values, errors,
hook calls and .grad fields; where the short path applies, it must have been taken."""
import numpy as np
import pytest

import llgrad
from llgrad.runtime import engine


def rnd(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@llgrad.compile
def _loss(x, w):
    return ((x * w).tanh() * x).sum()


@llgrad.compile
def _vec(x):
    return (x * 2.0).sin()


@llgrad.compile
def _two(x):
    return (x * 3.0).sum(), x.exp()


@llgrad.compile
def _one_elem(x):
    return (x * x).sum().reshape(1)


def _plain(v):
    """Values made comparable with ==: arrays as nested lists, tensors with their flags."""
    if isinstance(v, llgrad.Tensor):
        return ("tensor", str(v.dtype), tuple(v.shape), v.requires_grad,
                v.detach().numpy().tolist())
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


class Recorder:
    def __init__(self):
        self.log = []

    def __call__(self, fn, *args, **kwargs):
        """Run fn; log its result or the error it raised."""
        try:
            self.log.append(("ok", _plain(fn(*args, **kwargs))))
        except Exception as e:         # noqa: BLE001 - the error itself is what is compared
            self.log.append(("error", type(e).__name__, str(e)))

    def note(self, *what):
        self.log.append(_plain(what))


def _run(scenario, general):
    """scenario(rec) run with the short path on or off -> (log, [short path taken?])."""
    taken = []
    orig = engine._run_single

    def spy(*args):
        if general:
            return engine._GENERAL
        try:
            res = orig(*args)
        except Exception:
            taken.append("raised")
            raise
        taken.append(res is not engine._GENERAL)
        return res

    engine._run_single = spy
    try:
        rec = Recorder()
        scenario(rec)
    finally:
        engine._run_single = orig
    return rec.log, taken


def _same(scenario):
    """The scenario's log with the short path equals its log without; -> what was taken."""
    _run(scenario, general=True)        # a compiled function's first call traces (eagerly)
    _wait()
    short, taken = _run(scenario, general=False)
    general, none = _run(scenario, general=True)
    assert not none
    assert short == general
    return taken


def _wait():
    """Wait for the compiled functions' builds (background: native from the next call)."""
    for f in (_loss, _vec, _two, _one_elem):
        f.wait()


def _leaves(seed=0, n=8):
    x = llgrad.tensor(rnd(seed, n), requires_grad=True)
    w = llgrad.tensor(rnd(seed + 1, n), requires_grad=True)
    return x, w


# ---- scenarios ---------------------------------------------------------------------------
def sc_grad(rec):
    x, w = _leaves()
    loss = _loss(x, w)
    rec(llgrad.autograd.grad, loss, [x, w])
    rec(llgrad.autograd.grad, _loss(x, w), [w])
    rec(llgrad.autograd.grad, _loss(x, w), x)
    rec(llgrad.autograd.grad, _loss(x, w), (w, x, w))     # an input twice


def sc_freed(rec):
    x, w = _leaves()
    loss = _loss(x, w)
    rec(llgrad.autograd.grad, loss, [x])
    rec(llgrad.autograd.grad, loss, [x])                 # backward a second time
    rec(loss.backward)
    loss = _loss(x, w)
    rec(llgrad.autograd.grad, loss, [x], retain_graph=True)
    rec(llgrad.autograd.grad, loss, [w], retain_graph=True)
    rec(llgrad.autograd.grad, loss, [x, w])
    rec(llgrad.autograd.grad, loss, [w])


def sc_unused(rec):
    x, w = _leaves()
    y = llgrad.tensor(rnd(5, 3), requires_grad=True)
    loss = _loss(x, w)
    rec(llgrad.autograd.grad, loss, [x, y])             # error, after the graph ran
    rec(llgrad.autograd.grad, loss, [x])                # so it is freed now
    rec(llgrad.autograd.grad, _loss(x, w), [y, x], allow_unused=True)
    rec(llgrad.autograd.grad, _loss(x, w), [x, y], materialize_grads=True)


def sc_not_needed(rec):
    """No input is behind the root: nothing runs and nothing is freed."""
    x, w = _leaves()
    y = llgrad.tensor(rnd(5, 3), requires_grad=True)
    loss = _loss(x, w)
    rec(llgrad.autograd.grad, loss, [y])
    rec(llgrad.autograd.grad, loss, [y], allow_unused=True)
    rec(llgrad.autograd.grad, loss, [x])                # the graph is still there
    rec(loss.backward, inputs=[y])
    rec(lambda: (x.grad, w.grad, y.grad))


def sc_bad_arguments(rec):
    x, w = _leaves()
    z = llgrad.tensor(rnd(3, 8))
    rec(llgrad.autograd.grad, _loss(x, w), [z])
    rec(llgrad.autograd.grad, _loss(x, w), [x, z])
    rec(llgrad.autograd.grad, llgrad.tensor(1.0), [x])
    rec(llgrad.autograd.grad, _loss(x, w), [x, 3.0])
    out = _vec(x)
    rec(llgrad.autograd.grad, out, [x])                 # non-scalar: grad_outputs needed
    rec(llgrad.autograd.grad, out, [x], llgrad.ones(3))
    rec(llgrad.autograd.grad, out, [x], llgrad.tensor(rnd(7, 8)))
    rec(llgrad.autograd.grad, _vec(x), [x], [rnd(8, 8)])     # an array as grad_output
    rec(llgrad.autograd.backward, _vec(x), [llgrad.ones(8), llgrad.ones(8)])
    rec(llgrad.autograd.backward, _loss(x, w), inputs=[])


def sc_create_graph(rec):
    x, w = _leaves()
    loss = _loss(x, w)
    res = llgrad.autograd.grad(loss, [x, w], create_graph=True)
    rec.note("first", res, [type(g.grad_fn).__name__ for g in res])
    rec(llgrad.autograd.grad, res[0].sum(), [x, w])
    rec(llgrad.autograd.grad, loss, [x])                # retained by create_graph
    loss = _loss(x, w)
    rec(loss.backward, create_graph=True)
    rec(lambda: (x.grad, w.grad, x.grad.grad_fn is not None))


def sc_backward(rec):
    x, w = _leaves()
    rec(_loss(x, w).backward)
    rec(lambda: (x.grad, w.grad))
    rec(_loss(x, w).backward)                           # accumulates
    rec(lambda: (x.grad, w.grad))
    x.grad = w.grad = None
    rec(_loss(x, w).backward, inputs=[w])               # only w
    rec(lambda: (x.grad, w.grad))
    loss = _loss(x, w)
    rec(loss.backward, retain_graph=True)
    rec(loss.backward)
    rec(loss.backward)
    rec(lambda: (x.grad, w.grad))
    rec(llgrad.autograd.backward, [_loss(x, w)], [llgrad.tensor(2.0)])
    rec(lambda: (x.grad, w.grad))


def sc_hooks(rec):
    """Leaf hooks: called once per leaf with the summed gradient, newest leaf node first."""
    w = llgrad.tensor(rnd(1, 8), requires_grad=True)
    x = llgrad.tensor(rnd(0, 8), requires_grad=True)
    x.register_hook(lambda g: rec.note("x", g) or g * 2)
    w.register_hook(lambda g: rec.note("w", g))
    h = w.register_hook(lambda g: rec.note("w2", g) or g + 1)
    rec(llgrad.autograd.grad, _loss(w, x), [x, w])      # w's node is made first here
    rec(llgrad.autograd.grad, x * w, [x, w], llgrad.ones(8))
    rec(llgrad.autograd.grad, x * x, [x], llgrad.ones(8))   # one leaf on both edges
    rec(llgrad.autograd.grad, x * w, [w], llgrad.ones(8))   # x is not an input: no hook of it runs
    h.remove()
    rec((w * x * 1.0).sum().backward)
    rec(lambda: (x.grad, w.grad))
    rec((x * w).sum().backward)                         # general path; hooks again
    rec(lambda: (x.grad, w.grad))


def sc_root_is_input(rec):
    x, w = _leaves()
    loss = _loss(x, w)
    res = llgrad.autograd.grad(loss, [loss, x], retain_graph=True)
    rec.note(res)
    res[0]._data[...] = 7.0                            # the implicit grad is a fresh array
    rec(llgrad.autograd.grad, loss, [loss, x])
    rec(llgrad.autograd.grad, x, [x])                   # a leaf as the output


def sc_version(rec):
    x, w = _leaves()
    loss = _loss(x, w)
    with llgrad.no_grad():
        x.add_(1.0)
    rec(llgrad.autograd.grad, loss, [w])
    loss = _loss(x, w)
    with llgrad.no_grad():
        w.mul_(2.0)
    rec(loss.backward)
    rec(lambda: (x.grad, w.grad))


def sc_outputs(rec):
    x, w = _leaves()
    a, b = _two(x)
    rec(llgrad.autograd.grad, b, [x], llgrad.ones(8), retain_graph=True)   # output 1
    rec(llgrad.autograd.grad, a, [x])
    rec(llgrad.autograd.grad, [a, b], [x], [None, llgrad.ones(8)])        # two roots
    r = _one_elem(x)
    rec(llgrad.autograd.grad, r, [x])                   # implicit grad of shape (1,)
    rec(llgrad.autograd.grad, _one_elem(x.double()), [x])
    rec(llgrad.autograd.grad, (x * 2).sum(), [x])      # two nodes: general


SCENARIOS = {name[3:]: fn for name, fn in list(globals().items()) if name.startswith("sc_")}

# per scenario, for each engine run with one root: True where the short path ran, False where
# it handed the graph to the general loop, "raised" where it raised (the same error as that)
TAKEN = {
    "grad": [True] * 4,
    "freed": [True, "raised", "raised", True, True, True, "raised"],
    "unused": ["raised", "raised", True, True],
    "not_needed": ["raised", True, True, True],
    "bad_arguments": ["raised", "raised", False, True],   # (an array grad_output: TypeError
                                                          # before the engine runs)
    "create_graph": [True, False, True, True],
    "backward": [True, True, True, True, True, "raised", True],
    "hooks": [True, True, True, True, False, False],
    "root_is_input": [False, False],
    "version": ["raised", "raised"],
    "outputs": [True, True, True, False, False],
}


def test_every_scenario_is_listed():
    assert sorted(TAKEN) == sorted(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_short_path_equals_general(name):
    assert _same(SCENARIOS[name]) == TAKEN[name]


def test_short_path_is_taken_for_a_compiled_step():
    x, w = _leaves()
    _loss(x, w)
    _wait()
    _, taken = _run(lambda rec: llgrad.autograd.grad(_loss(x, w), [x, w]), general=False)
    assert taken == [True]
    _, taken = _run(lambda rec: _loss(x, w).backward(), general=False)
    assert taken == [True]


def test_not_taken_for_hooked_or_deeper_graphs():
    x, w = _leaves()
    loss = _loss(x, w)
    loss.register_hook(lambda g: g)
    y = (x * 2).tanh()
    y.retain_grad()
    z = x * w
    z.grad_fn.register_hook(lambda gi, go: None)
    for root, grad_out in ((loss, None), (y, llgrad.ones(8)), (z, llgrad.ones(8)),
                           ((x * 2).tanh(), llgrad.ones(8))):
        _, taken = _run(lambda rec: llgrad.autograd.grad(root, [x], grad_out, allow_unused=True),
                        general=False)
        assert taken == [False]


# ---- the general loop's reachability search ---------------------------------------------------
def _needed_reference(node, targets, memo):
    if node not in memo:
        memo[node] = any(c is not None and (c in targets or _needed_reference(c, targets, memo))
                         for c, _ in node.next_functions)
    return memo[node]


def test_needed_matches_its_definition():
    """engine._needed (which settles leaf nodes without visiting them) on a graph with shared
    subgraphs, edges to nowhere, and targets that are leaves and non-leaves."""
    a = llgrad.tensor(rnd(0, 4), requires_grad=True)
    b = llgrad.tensor(rnd(1, 4), requires_grad=True)
    c = llgrad.tensor(rnd(2, 4))
    h = (a * c).tanh()
    k = h * b + h.exp()
    out = (k * 2.0 + (b * c).sin()).sum()
    nodes, stack = [], [out.grad_fn]
    while stack:
        n = stack.pop()
        if n is not None and n not in nodes:
            nodes.append(n)
            stack.extend(child for child, _ in n.next_functions)
    leaf_nodes = [n for n in nodes if not n.next_functions]
    assert len(leaf_nodes) == 2
    for targets in ([h.grad_fn], [b._acc], [a._acc], [h.grad_fn, b._acc], [k.grad_fn], []):
        targets = {t: [] for t in targets}
        got = engine._needed([out.grad_fn], targets)
        memo = {}
        assert set(got) == set(nodes)
        for n in nodes:
            assert got[n] == _needed_reference(n, targets, memo), (n, targets)


def test_grad_outputs_must_be_tensors_as_in_pytorch():
    x = llgrad.ones(3, requires_grad=True)
    for bad, name in ((np.ones(3), "float64"), ([2.0, 1.0, 0.5], "float")):
        with pytest.raises(TypeError, match=f"gradients can be either Tensors or None, "
                                            f"but got {name}$"):
            llgrad.autograd.grad(x * 2, x, grad_outputs=bad)
