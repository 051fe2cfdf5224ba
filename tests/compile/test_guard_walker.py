"""Guard walkers (compile/guard_walker.py): the guard walk of a call with objects compiled
to straight-line code. The oracle is guards.collect, the generic walk: a walker that
accepts a call must return collect's tensors, in collect's order, and two calls with equal
walker keys must have equal collect keys."""
import random

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.compile.guard_walker import make_walker
from llgrad.compile.guards import collect


class Box:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def _leaf(rng, pool):
    k = rng.randrange(11)
    if k < 3:
        return rng.choice(pool)
    return [1, 2.5, True, "tanh", None, np.float32, len, {"a", 1}][k - 3]


def _build(rng, pool, depth=0):
    """A random structure of objects, containers, tensors (shared from pool) and scalars."""
    k = rng.randrange(5) if depth < 3 else 4
    n = rng.randrange(4)
    if k == 0:
        return Box(**{f"a{i}": _build(rng, pool, depth + 1) for i in range(n)})
    if k == 1:
        return [_build(rng, pool, depth + 1) for _ in range(n)]
    if k == 2:
        return tuple(_build(rng, pool, depth + 1) for _ in range(n))
    if k == 3:
        keys = [f"k{i}" for i in range(n)] if rng.random() < 0.7 else rng.sample(pool, n)
        return {key: _build(rng, pool, depth + 1) for key in keys}
    return _leaf(rng, pool)


def _slots(root):
    """(container, key) of every place in root's structure that holds a value."""
    out, stack = [], [root]
    while stack:
        v = stack.pop()
        if isinstance(v, Box):
            items = list(vars(v).items())
            out += [(vars(v), k) for k, _ in items]
        elif isinstance(v, (list, dict)):
            items = list(v.items()) if isinstance(v, dict) else list(enumerate(v))
            out += [(v, k) for k, _ in items]
        elif isinstance(v, tuple):
            items = list(enumerate(v))
        else:
            continue
        stack += [x for _, x in items]
    return out


def _mutate(rng, args, pool):
    """Change one thing in place: a value, a type, an alias, a .grad, an attribute."""
    slots = _slots(args)
    k = rng.randrange(6)
    if k == 0 and slots:
        where, key = rng.choice(slots)
        where[key] = _build(rng, pool, 2)
    elif k == 1:
        t = rng.choice(pool)
        t.grad = None if t.grad is not None else llgrad.zeros(t.shape)
    elif k == 2 and slots:
        where, key = rng.choice(slots)
        old = where[key]
        where[key] = type(old)(old) if isinstance(old, (int, float)) and \
            not isinstance(old, bool) else old
        if isinstance(old, int) and not isinstance(old, bool):
            where[key] = float(old)
    elif k == 3:
        boxes = [v for v in _values(args) if isinstance(v, Box)]
        if boxes:
            rng.choice(boxes).extra = 1
    elif k == 4:
        boxes = [where for where, _ in slots if isinstance(where, dict)]
        if boxes:
            d = rng.choice(boxes)
            if d:
                d.pop(next(iter(d)))
    else:
        i = rng.randrange(len(pool))
        pool[i] = llgrad.randn(*([2] * rng.randrange(1, 3)), requires_grad=rng.random() < .5)


def _values(root):
    out, stack = [], [root]
    while stack:
        v = stack.pop()
        out.append(v)
        if isinstance(v, Box):
            stack += list(vars(v).values())
        elif isinstance(v, (list, tuple)):
            stack += list(v)
        elif isinstance(v, dict):
            stack += list(v.values())
    return out


def _fn(a, b, c=None):
    return a


_CAPTURED = [None]


def _fn_capturing(a, b, c=None):
    return a, _CAPTURED


@pytest.mark.parametrize("seed", range(60))
def test_walker_agrees_with_collect_on_random_structures(seed):
    rng = random.Random(seed)
    pool = [llgrad.randn(2, 3, requires_grad=rng.random() < 0.5) for _ in range(4)]
    args = [_build(rng, pool), _build(rng, pool)]
    kwargs = {"c": _build(rng, pool)} if rng.random() < 0.3 else {}
    fn = _fn
    if seed % 2:                # a structure read from a global too (mutated like the rest)
        fn, _CAPTURED[0] = _fn_capturing, _build(rng, pool)
        args.append(_CAPTURED)
    walk = make_walker(fn, tuple(args[:2]), kwargs)
    if walk is None:
        pytest.skip("a structure the walker does not cover")
    seen = []
    for step in range(12):
        got = walk(tuple(args[:2]), kwargs)
        tensors, guards, _ = collect(fn, tuple(args[:2]), kwargs)
        if got is not None:
            fkey, ftensors = got
            assert [id(t) for t in ftensors] == [id(t) for _, t in tensors], step
            key = tuple(v for _, v in guards)
            for other_fkey, other_key in seen:
                if other_fkey == fkey:
                    assert other_key == key, step
            seen.append((fkey, key))
        elif step == 0:
            raise AssertionError("a walker refused the call it was made for")
        _mutate(rng, args, pool)
    # (the first call is always accepted; most mutations make later ones refused)


def test_walker_refuses_what_collect_tells_apart():
    m = nn.Linear(3, 2)
    x = llgrad.randn(4, 3)
    walk = make_walker(_fn, (m, x), {})
    key, tensors = walk((m, x), {})
    assert [id(t) for t in tensors] == [id(m.weight), id(m.bias), id(x)]
    assert walk((m, x), {})[0] == key
    m.eval()                                    # a scalar attribute: in the key
    assert walk((m, x), {})[0] != key
    m.train()
    m.weight.grad = llgrad.ones(2, 3)           # a .grad: in the key, and an input
    k2, t2 = walk((m, x), {})
    assert k2 != key and t2[-1] is m.weight.grad
    m.scale = 2.0                               # a new attribute: refused
    assert walk((m, x), {}) is None
    del m.scale
    assert walk((m, m.weight), {}) is None      # another type in that place
    assert walk((m, x), {"c": 1}) is None       # another set of keywords
    assert walk((nn.Linear(3, 2), x), {})[0] != walk((m, x), {})[0]     # another object


def test_aliasing_that_differs_is_refused():
    a, b = llgrad.randn(2), llgrad.randn(2)
    box1, box2 = Box(t=a), Box(t=b)
    walk = make_walker(_fn, ([box1, box2], a), {})
    assert walk(([box1, box2], a), {}) is not None
    assert walk(([box1, box2], b), {}) is None          # a is no longer the one in box1
    assert walk(([box1, box1], a), {}) is None          # one object where there were two
    box2.t = a
    assert walk(([box1, box2], a), {}) is None          # one tensor where there were two


def _step(model, opt, loss_fn, x, y):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def _net(seed):
    llgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Dropout(0.0), nn.Linear(8, 2))


def test_compiled_training_step_takes_no_full_walk_once_warm(monkeypatch):
    from test_fastpath import _walks
    llgrad.manual_seed(0)
    x, y = llgrad.randn(16, 3), llgrad.randint(0, 2, (16,))
    nets = [_net(1), _net(1)]
    opts = [llgrad.optim.Adam(n.parameters(), lr=0.05) for n in nets]
    loss_fn = nn.CrossEntropyLoss()
    step = llgrad.compile(_step)
    for _ in range(3):
        _step(nets[0], opts[0], loss_fn, x, y)
        step(nets[1], opts[1], loss_fn, x, y)
        step.wait()     # (calls while a build runs take the full walk: they run eagerly)
    walks = _walks(monkeypatch)
    for k in range(6):
        if k == 3:                  # train -> eval -> train: each mode's own entry
            nets[0].eval(), nets[1].eval()
        want = _step(nets[0], opts[0], loss_fn, x, y)
        got = step(nets[1], opts[1], loss_fn, x, y)
        step.wait()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        for p, q in zip(nets[0].parameters(), nets[1].parameters()):
            np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    # the first eval call: traced (a walk before, one after to see what it changed); its
    # second: a new walker
    assert len(walks) <= 3
    assert len(step._walkers) == 1      # (training is a scalar of the key, not structure)


def test_keyword_calls_get_a_walker(monkeypatch):
    from test_fastpath import _walks
    m = nn.Linear(3, 2)
    f = llgrad.compile(lambda x, model: model(x).sum())
    x = llgrad.randn(4, 3)
    for _ in range(2):
        f(x, model=m)
        f.wait()
    walks = _walks(monkeypatch)
    for _ in range(3):
        np.testing.assert_allclose(f(x, model=m).item(), m(x).sum().item(), rtol=1e-6)
    assert not walks and f.n_traces == 1


# ---- objects are guarded by type and contents, not identity -----------------------------------
def test_instances_of_one_module_class_share_a_trace():
    layers = [nn.Linear(4, 4) for _ in range(3)]
    f = llgrad.compile(lambda layer, x: layer(x).tanh().sum())
    x = llgrad.randn(2, 4)
    for _ in range(2):
        for layer in layers:
            # (a sum of eight tanh values, near 0 for some draws: float32 rounding of terms
            # of order 1, the native tanh and sum apart from NumPy's by an ulp or two)
            np.testing.assert_allclose(f(layer, x).item(), layer(x).tanh().sum().item(),
                                       rtol=1e-6, atol=1e-6)
    assert f.n_traces == 1


def test_a_new_loss_module_each_call_does_not_retrace():
    import warnings
    m = nn.Linear(3, 2)
    x, y = llgrad.randn(5, 3), llgrad.randint(0, 2, (5,))
    f = llgrad.compile(lambda model, loss_fn: loss_fn(model(x), y))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (the recompile-limit warning)
        for _ in range(12):
            got = f(m, nn.CrossEntropyLoss())
    np.testing.assert_allclose(got.item(), nn.CrossEntropyLoss()(m(x), y).item(), rtol=1e-6)
    assert f.n_traces == 1


def test_objects_that_differ_in_what_they_hold_are_told_apart():
    x = llgrad.randn(3)
    f = llgrad.compile(lambda box, x: box.act(x * box.scale) + sum(box.shifts))
    boxes = [Box(act=llgrad.tanh, scale=2.0, shifts=[1.0, 2.0]),
             Box(act=llgrad.sigmoid, scale=2.0, shifts=[1.0, 2.0]),   # another function
             Box(act=llgrad.tanh, scale=3.0, shifts=[1.0, 2.0]),      # another scalar
             Box(act=llgrad.tanh, scale=2.0, shifts=(1.0, 2.0)),      # another container
             Box(act=llgrad.tanh, scale=2.0, shifts=[1.0, 2.0, 4.0])]
    for _ in range(2):
        for b in boxes:
            want = b.act(x * b.scale) + sum(b.shifts)
            np.testing.assert_allclose(f(b, x).numpy(), want.numpy(), rtol=1e-6)
    assert f.n_traces == len(boxes)


# ---- tensors read from globals and closures ------------------------------------------------
_MODEL = None
_OPT = None


def _global_step(x, y):
    _OPT.zero_grad()
    loss = nn.functional.cross_entropy(_MODEL(x), y)
    loss.backward()
    _OPT.step()
    return loss.detach()


def test_a_step_reading_its_model_from_globals_takes_no_full_walk(monkeypatch):
    from test_fastpath import _walks
    global _MODEL, _OPT
    llgrad.manual_seed(0)
    x, y = llgrad.randn(16, 3), llgrad.randint(0, 2, (16,))
    nets = [_net(1), _net(1)]
    opts = [llgrad.optim.SGD(n.parameters(), lr=0.1, momentum=0.9) for n in nets]
    step = llgrad.compile(_global_step)
    walks = None
    for k in range(8):
        if k == 3:
            walks = _walks(monkeypatch)
        _MODEL, _OPT = nets[0], opts[0]
        want = _global_step(x, y)
        _MODEL, _OPT = nets[1], opts[1]
        got = step(x, y)
        step.wait()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not walks and len(step._walkers) == 1
    _MODEL, _OPT = None, None


def test_walker_follows_rebound_globals_and_closures():
    global _MODEL
    x = llgrad.randn(2, 3)
    a, b, c = nn.Linear(3, 2), nn.Linear(3, 2), nn.Linear(3, 2)
    holder = [a]

    def closure_fn(x):
        return holder[0](x).sum() + _MODEL(x).sum()

    def ids(ts):
        return [id(t) for t in ts]

    _MODEL = c
    walk = make_walker(closure_fn, (x,), {})
    key, tensors = walk((x,), {})
    assert ids(tensors) == [id(x), id(a.weight), id(a.bias), id(c.weight), id(c.bias)]
    _MODEL = b                                  # another instance: its own tensors
    assert ids(walk((x,), {})[1]) == ids(t for _, t in collect(closure_fn, (x,), {})[0])
    holder[0] = b                               # one object where there were two
    assert walk((x,), {}) is None
    holder[0] = a
    _MODEL = nn.Tanh()                          # another type: the full walk decides
    assert walk((x,), {}) is None
    _MODEL = None


def test_numbers_read_through_globals_are_guarded_like_arguments():
    class Holder:
        def __init__(self):
            self.w = llgrad.ones(3)
            self.scale = 2.0
    h = Holder()

    def f(x):
        return (x * h.w * h.scale).sum() + _STEP

    cf = llgrad.compile(f)
    x = llgrad.ones(3)
    for _ in range(3):
        assert cf(x).item() == 6.5
    h.scale = 3.0                   # a number inside a captured object: a new trace
    assert cf(x).item() == 9.5 and cf.n_traces == 2
    h.w = llgrad.ones(3) * 2        # a new tensor there: an input, read afresh
    assert cf(x).item() == 18.5 and cf.n_traces == 2
    _set_step(1.5)                  # a global number itself
    try:
        assert cf(x).item() == 19.5 and cf.n_traces == 3
    finally:
        _set_step(0.5)


_STEP = 0.5


def _set_step(v):
    global _STEP
    _STEP = v


_GLOBAL_NET = None


def _predict(x):
    return _GLOBAL_NET(x)


def test_eval_and_learning_rate_of_captured_objects_take_effect():
    # a model read from globals switched to eval (Dropout off), an optimiser's learning
    # rate changed by a scheduler: a compiled call must see both, as eager does
    global _GLOBAL_NET
    llgrad.manual_seed(0)
    _GLOBAL_NET = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    x = llgrad.ones(2, 4)
    f = llgrad.compile(_predict)
    for _ in range(3):
        f(x)
    _GLOBAL_NET.eval()
    for _ in range(3):
        np.testing.assert_array_equal(f(x).detach().numpy(), _GLOBAL_NET(x).detach().numpy())
    w = llgrad.ones(3, requires_grad=True)
    opt = llgrad.optim.SGD([w], lr=0.1)
    sched = llgrad.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        opt.step()
        return loss.detach()

    cstep = llgrad.compile(step)
    want = np.ones(3)
    for _ in range(4):
        cstep()
        want = want - sched.get_last_lr()[0] * 2 * want
        sched.step()
        np.testing.assert_allclose(w.detach().numpy(), want, rtol=1e-6)
    _GLOBAL_NET = None


def test_dump_says_how_calls_find_their_entry():
    m = nn.Linear(3, 2)
    f = llgrad.compile(lambda model, x: model(x).sum())
    x = llgrad.randn(4, 3)
    f(m, x)
    assert "other calls: the full walk" in f.dump(m, x)
    f(m, x)
    assert "1 compiled walker(s)" in f.dump(m, x)
    assert "def walk(args, kwargs):" in f.dump(m, x, python=True)


def test_a_call_shape_without_a_walker_is_not_retried_on_every_call(monkeypatch):
    from llgrad.compile import compiled_function as compiled
    made = []
    real = compiled.make_walker

    def counting(*a, **k):
        made.append(1)
        return real(*a, **k)
    monkeypatch.setattr(compiled, "make_walker", counting)
    m = nn.Linear(3, 2).double()    # (float64: a float32 sum of the native code's order
    # can be an ulp from eager's, past rtol 1e-6 for some draws of the weights)
    f = llgrad.compile(lambda m, x, **kw: m(x).sum())    # (**kwargs: no walker)
    x = llgrad.randn(4, 3, dtype=llgrad.float64)
    for _ in range(20):
        np.testing.assert_allclose(f(m, x, k=1).item(), m(x).sum().item(), rtol=1e-6)
    assert f.n_traces == 1 and not f._walkers and len(made) <= 2 * compiled.MAX_WALKERS
