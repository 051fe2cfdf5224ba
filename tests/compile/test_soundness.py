"""Soundness of llgrad.compile: a compiled call's observable behaviour (results, gradients,
.grad, writes to inputs and captured objects, hooks run, RNG state, exceptions) equals eager's
(where compile cannot guarantee that, it runs the call eagerly, warning "running eagerly").
Each test runs the same calls in two identical worlds, one eager, one compiled, and compares
results and state after every call (run_both)."""
import types
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
import llgrad.optim as optim

BACKENDS = ["llvm", "interpret"]
RTOL, ATOL = 1e-5, 1e-6
EAGERLY = "running eagerly"


# ---- helpers ---------------------------------------------------------------------------------
def snap(x):
    """A copy of x that later writes cannot change, for comparison (tensors with their
    requires_grad; modules as state_dict and .grad; optimisers as state_dict)."""
    if isinstance(x, llgrad.Tensor):
        return ("tensor", x.detach().numpy().copy(), x.requires_grad)
    if isinstance(x, np.ndarray):
        return ("array", x.copy())
    if isinstance(x, nn.Module):
        return snap({"state": dict(x.state_dict()),
                     "grad": {n: p.grad for n, p in x.named_parameters()}})
    if isinstance(x, optim.Optimizer):
        return snap(x.state_dict())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [snap(v) for v in x])
    if isinstance(x, dict):
        return ("dict", {k: snap(v) for k, v in x.items()})
    if isinstance(x, BaseException):
        return ("raised", type(x).__name__, str(x).splitlines()[0] if str(x) else "")
    return (type(x).__name__, x)


def same(e, c, where):
    """Compare two snaps: eager's e, compiled c."""
    assert e[0] == c[0], f"{where}: eager gave {e[0]} {e[1:]!r}, compiled {c[0]} {c[1:]!r}"
    kind = e[0]
    if kind in ("tensor", "array"):
        a, b = e[1], c[1]
        assert (a.shape, a.dtype) == (b.shape, b.dtype), \
            f"{where}: eager {a.dtype}{list(a.shape)}, compiled {b.dtype}{list(b.shape)}"
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL, err_msg=where)
        if kind == "tensor":
            assert e[2] == c[2], f"{where}: requires_grad eager {e[2]}, compiled {c[2]}"
    elif kind in ("list", "tuple"):
        assert len(e[1]) == len(c[1]), f"{where}: lengths {len(e[1])} vs {len(c[1])}"
        for k, (x, y) in enumerate(zip(e[1], c[1])):
            same(x, y, f"{where}[{k}]")
    elif kind == "dict":
        assert e[1].keys() == c[1].keys(), f"{where}: keys {list(e[1])} vs {list(c[1])}"
        for k in e[1]:
            same(e[1][k], c[1][k], f"{where}[{k!r}]")
    elif kind == "float":       # (a number read out of a float32 result: its rounding)
        np.testing.assert_allclose(c[1], e[1], rtol=RTOL, atol=ATOL, err_msg=where)
    else:       # numbers (of the same type), None, strings, exceptions (their type)
        assert e[1] == c[1], f"{where}: eager {e[1:]!r}, compiled {c[1:]!r}"


class World(types.SimpleNamespace):
    """What one run works on; watch() -> what to compare after each call."""
    def watch(self):
        return None


def catching(call):
    """The call, an exception it raises observed as its type (BaseException snaps so)."""
    def run(w):
        try:
            return call(w)
        except Exception as e:      # noqa: BLE001 - compared with eager's
            return e
    return run


def run_both(make_world, calls, backend, fallback=True, **compile_kw):
    """Build make_world(wrap) twice (after llgrad.manual_seed(0)): wrap is the identity in
    the eager world, llgrad.compile(.., backend=backend) in the other; run every call(world)
    in each and compare results and world.watch() after each call. fallback=False: no
    "running eagerly" warning may appear. -> (eager log, compiled world, compiled log)."""
    logs, worlds = {}, {}
    for mode in ("eager", "compiled"):
        llgrad.manual_seed(0)
        wrap = (lambda fn: fn) if mode == "eager" else \
            (lambda fn: llgrad.compile(fn, backend=backend, **compile_kw))
        worlds[mode] = world = make_world(wrap)
        log = []
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            for call in calls:
                out = call(world)
                log.append((snap(out), snap(world.watch())))
        logs[mode] = log
        if mode == "compiled" and not fallback:
            eagerly = [str(r.message) for r in rec if EAGERLY in str(r.message)]
            assert not eagerly, eagerly[0]
    for k, (e, c) in enumerate(zip(logs["eager"], logs["compiled"])):
        same(e[0], c[0], f"call {k}: result")
        same(e[1], c[1], f"call {k}: state")
    return logs["eager"], worlds["compiled"], logs["compiled"]


def data(seed, *shape):
    return llgrad.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def labels(seed, n, classes):
    return llgrad.tensor(np.random.default_rng(seed).integers(0, classes, n))


# ---- 1. writes applied twice when a value guard fails ----------------------------------------
def _scale_by_item(buf, n):
    buf.mul_(n.item())


def _read_after_write(buf, n):
    buf.add_(n)
    return buf * buf.sum().item()      # a value guard on a value the write made


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_scale_by_item, _read_after_write])
def test_value_guard_miss_applies_writes_once(backend, fn):
    def call(n):
        def run(w):
            buf = llgrad.ones(2)
            return w.f(buf, llgrad.tensor(n)), buf
        return run
    run_both(lambda wrap: World(f=wrap(fn)),
             [call(n) for n in (2.0, 3.0, 3.0, 2.0, 5.0, 3.0)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["model", "function"])
def test_batchnorm_cumulative_statistics(backend, how):
    def make(wrap):
        # (no bias before the batch norm: its gradient is zero, rounding noise that compiled
        # code, now kept across calls, sums in another order than NumPy)
        model = nn.Sequential(nn.Linear(3, 4, bias=False), nn.BatchNorm1d(4, momentum=None))
        fwd = wrap(model) if how == "model" else wrap(lambda x: model(x).tanh().sum())
        return World(model=model, fwd=fwd, watch=lambda: model)

    def call(k):
        def run(w):
            out = w.fwd(data(k, 5, 3))
            if how == "function":
                out.backward()
            return out
        return run
    run_both(make, [call(k) for k in range(5)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_taken_on_a_value_guard(backend):
    def make(wrap):
        model = nn.Linear(3, 2)
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            if loss.item() < 10:
                opt.step()
            return loss.detach()
        return World(step=wrap(step), watch=lambda: (model, opt))

    def call(k, scale):
        return lambda w: w.step(data(k, 4, 3), data(k + 50, 4, 2) * scale)
    run_both(make, [call(k, s) for k, s in enumerate((1, 10, 1, 1, 10, 10, 1))], backend)


# ---- 2. writes applied before an error -------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss_kind", ["embedding", "cross_entropy"])
@pytest.mark.parametrize("zero_grad", [True, False])
def test_failing_step_leaves_state_untouched(backend, loss_kind, zero_grad):
    def make(wrap):
        if loss_kind == "embedding":
            model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 2))
        else:
            model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))
        opt = optim.Adam(model.parameters(), lr=0.1)

        def step(x, y):
            if zero_grad:
                opt.zero_grad()
            out = model(x)
            loss = F.mse_loss(out, y) if loss_kind == "embedding" else F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            return loss.detach()
        return World(step=wrap(step), model=model, opt=opt, watch=lambda: (model, opt))

    def call(k, bad=False):
        index = llgrad.tensor([0, 2, 7 if bad else 1, 1])       # 7: out of range
        if loss_kind == "embedding":
            return catching(lambda w: w.step(index, data(k, 4, 2)))
        return catching(lambda w: w.step(data(k, 4, 3), index))

    calls = [call(0), call(1), call(2), call(3, bad=True), call(4, bad=True), call(5),
             call(6, bad=True), call(7)]
    eager, _, _ = run_both(make, calls, backend)
    # (eager's zero_grad, if any, ran before the error and left .grad None; the parameters
    # and Adam's state stay as they were: run_both compared all of it with the compiled world)
    assert eager[3][0][:2] == eager[4][0][:2] == ("raised", "IndexError")


# ---- 3. hooks are not baked into the trace ---------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("first", ["hooked", "plain"])
@pytest.mark.parametrize("logging", [False, True])
def test_hooks_present_at_call_time_run_and_absent_ones_do_not(backend, first, logging):
    def make(wrap):
        return World(f=wrap(lambda x: (x * 2).sum()), log=[])

    def call(hook, when="before"):
        def run(w):
            x = llgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)

            def h(g):
                if logging:
                    w.log.append(len(w.log))        # a side effect the trace cannot hold
                return g * 10
            handle = x.register_hook(h) if hook and when == "before" else None
            out = w.f(x)
            if hook and when == "after":
                handle = x.register_hook(h)
            out.backward()
            if handle is not None:
                handle.remove()
            return out, x.grad, list(w.log)
        return run
    calls = [call(True), call(False), call(False), call(True), call(True, "after"),
             call(False), call(True)]
    run_both(make, calls if first == "hooked" else calls[1:], backend)


# ---- 4. attributes of plain objects read through globals and closures ------------------------
class Holder:
    pass


H_GLOBAL = Holder()


def _times_global_factor(x):
    return x * H_GLOBAL.factor


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["closure", "global"])
def test_plain_object_attribute_is_read_afresh(backend, where):
    def make(wrap):
        h = H_GLOBAL if where == "global" else Holder()
        h.factor = 3.0
        f = wrap(_times_global_factor if where == "global" else (lambda x: x * h.factor))
        return World(f=f, h=h)

    def call(w):
        return w.f(llgrad.ones(2))

    def set_to(v):
        return lambda w: setattr(w.h, "factor", v)
    run_both(make, [call, call, set_to(5.0), call, call, set_to(-1.5), call], backend)


# ---- 5. tensors held by objects --------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_learning_rate_with_a_scheduler(backend):
    def make(wrap):
        w = llgrad.tensor([1.0, -2.0, 3.0], requires_grad=True)
        opt = optim.SGD([w], lr=llgrad.tensor(0.1))
        sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)

        def step(x):
            opt.zero_grad()
            loss = (w * x).pow(2).sum()
            loss.backward()
            opt.step()
            return loss.detach()
        return World(step=wrap(step), sched=sched, watch=lambda: (w, w.grad))

    def call(k):
        return lambda w: (w.step(data(k, 3)), w.sched.step())[0]
    run_both(make, [call(k) for k in range(5)], backend)


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("scale", llgrad.ones(2))

    def forward(self, x):
        return self.lin(x) * self.scale


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["model", "function"])
def test_module_buffer_changed_between_calls(backend, how):
    def make(wrap):
        model = Scaled()
        return World(model=model, f=wrap(model) if how == "model" else wrap(lambda x: model(x)),
                     watch=lambda: model)

    def call(w):
        return w.f(data(0, 4, 3))

    def fill(w):
        w.model.scale.fill_(2.5)

    def reassign(w):
        w.model.scale = llgrad.tensor([-1.0, 4.0])
    run_both(make, [call, call, fill, call, call, reassign, call, call], backend)


# ---- 6. NumPy data ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_array_read_through_from_numpy_is_read_afresh(backend):
    def make(wrap):
        G = np.ones(2, np.float32)
        return World(G=G, f=wrap(lambda x: x * llgrad.from_numpy(G)), watch=lambda: G)

    def call(w):
        return w.f(llgrad.tensor([1.0, 2.0]))

    def write(v):
        return lambda w: np.copyto(w.G, v)
    run_both(make, [call, call, write(9.0), call, call, write(-2.0), call], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_round_trip_follows_the_input(backend):
    def make(wrap):
        return World(f=wrap(lambda x: llgrad.from_numpy(np.tril(x.detach().numpy())) * 1))
    run_both(make, [(lambda w, k=k: w.f(data(k, 3, 3))) for k in range(4)], backend)


# ---- 7. aliasing -----------------------------------------------------------------------------
def _mul_add(a, b):
    return a.mul_(2).add_(b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_sharing_one_numpy_buffer(backend):
    def make(wrap):
        return World(f=wrap(_mul_add))

    def separate(w):
        p, q = np.arange(4, dtype=np.float32), np.full(4, 0.5, np.float32)
        return w.f(llgrad.from_numpy(p), llgrad.from_numpy(q)), p, q

    def shared(w):
        p = np.arange(4, dtype=np.float32)
        return w.f(llgrad.from_numpy(p), llgrad.from_numpy(p)), p
    run_both(make, [separate, separate, shared, shared, separate, shared], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_of_one_base(backend):
    def make(wrap):
        return World(f=wrap(_mul_add))

    def views(a, b):        # base[a:a+3], base[b:b+3] of a fresh base of 6
        def run(w):
            base = llgrad.arange(6, dtype=llgrad.float32)
            try:
                return w.f(base[a:a + 3], base[b:b + 3]), base
            except RuntimeError as e:   # (partly overlapping: PyTorch's error, in both)
                return str(e).split("\n")[0], base
        return run
    run_both(make, [views(a, b) for a, b in ((0, 3), (0, 3), (0, 2), (0, 2), (2, 0), (1, 1),
                                             (0, 3))], backend)


# ---- 8. retain_grad inside a compiled function -----------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_grad_inside(backend):
    def f(x):
        y = x * 2
        y.retain_grad()
        return (y * y).sum(), y

    def call(k):
        def run(w):
            x = data(k, 3).requires_grad_()
            z, y = w.f(x)
            z.backward()
            return z, y, y.grad, x.grad
        return run
    run_both(lambda wrap: World(f=wrap(f)), [call(k) for k in range(4)], backend)


# ---- 9. outputs and inputs modified in place before backward ---------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_output_modified_in_place_then_backward_raises(backend):
    def call(k):
        def run(w):
            x = data(k, 3).requires_grad_()
            o = w.f(x)
            o.mul_(3)
            try:
                o.sum().backward()
            except RuntimeError as e:
                return "raised", "modified by an inplace operation" in str(e), x.grad
            return "no error", x.grad
        return run
    run_both(lambda wrap: World(f=wrap(lambda x: x.exp())), [call(k) for k in range(4)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("leaf", [True, False])
def test_input_modified_in_place_after_the_call(backend, leaf):
    # exp saves its result, not its input: eager's backward does not mind the input's write
    def call(k):
        def run(w):
            a = data(k, 3).requires_grad_()
            x = a if leaf else a * 1
            o = w.f(x)
            with llgrad.no_grad():
                x.mul_(2)
            (o * 2).sum().backward()
            return o, x, a.grad
        return catching(run)
    run_both(lambda wrap: World(f=wrap(lambda x: x.exp())), [call(k) for k in range(4)], backend)


# ---- 10. a Python int counter in a tensor while ----------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_python_counter_in_a_tensor_while(backend):
    def f(x):
        n = 0
        while x.sum() < 10:
            x = x * 2
            n += 1
        return x, n

    def call(v):
        return lambda w: w.f(llgrad.tensor([v, v]))
    run_both(lambda wrap: World(f=wrap(f)), [call(v) for v in (1.0, 4.0, 0.5, 1.0, 8.0)],
             backend)


# ---- 11. dump does not change user state -----------------------------------------------------
W_DUMP = llgrad.zeros(2)


def _adds_to_global(x):
    W_DUMP.add_(x)
    return W_DUMP * 1


def _dump(name, args):
    """Dump the compiled function w.<name> on args(w) (nothing in the eager world)."""
    def run(w):
        getattr(getattr(w, name), "dump", lambda *a: None)(*args(w))
    return run


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("first", ["dump", "call"])
def test_dump_leaves_a_global_alone(backend, first):
    def make(wrap):
        with llgrad.no_grad():
            W_DUMP.zero_()
        return World(f=wrap(_adds_to_global), watch=lambda: W_DUMP)

    x = llgrad.tensor([1.0, 2.0])
    dump = _dump("f", lambda w: (x,))
    calls = [dump, dump, lambda w: w.f(x), dump, lambda w: w.f(x), dump, lambda w: w.f(x * 3)]
    run_both(make, calls if first == "dump" else calls[2:], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("first", ["dump", "call"])
def test_dump_leaves_a_training_step_alone(backend, first):
    def make(wrap):
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        opt = optim.Adam(model.parameters(), lr=0.05)

        def step(model, opt, x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        return World(step=wrap(step), model=model, opt=opt, watch=lambda: (model, opt))

    x, y = data(0, 6, 3), labels(0, 6, 2)
    dump = _dump("step", lambda w: (w.model, w.opt, x, y))

    def call(w):
        return w.step(w.model, w.opt, x, y)
    calls = [dump, dump, call, dump, dump, call, call, dump, call]
    run_both(make, calls if first == "dump" else calls[2:], backend)


# ---- 12. the tutorial training-step orders compile and match eager ---------------------------
OPTIMIZERS = {"sgd": lambda ps: optim.SGD(ps, lr=0.1),
              "momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
              "adam": lambda ps: optim.Adam(ps, lr=0.01),
              "adamw": lambda ps: optim.AdamW(ps, lr=0.01)}


def _order(kind, model, opt, x, y):
    """A training step in the order `kind` ("<zero_grad where>/<what it returns>")."""
    order, ret = kind.split("/")
    if order == "zero_first":
        opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if order == "zero_last":
        opt.zero_grad()
    if ret == "item":
        return loss.item()
    return {"loss": loss, "detach": loss.detach(), "none": None}[ret]


ORDERS = ["zero_last/loss", "zero_last/item", "zero_last/detach", "zero_last/none",
          "accumulate/none", "accumulate/detach", "zero_first/detach"]


def _order_params():
    """Every order with every optimizer on both backends; the slow run's share (for the
    suite's time): on llvm, every second optimizer of each order, by turns (each order
    meets two optimizers natively by default, each optimizer every second order; the
    interpreter runs them all)."""
    out = []
    for i, kind in enumerate(ORDERS):
        for j, opt_name in enumerate(OPTIMIZERS):
            for backend in BACKENDS:
                slow = backend == "llvm" and (i + j) % 2
                out.append(pytest.param(kind, opt_name, backend,
                                        id=f"{kind}-{opt_name}-{backend}",
                                        marks=(pytest.mark.slow,) if slow else ()))
    return out


@pytest.mark.parametrize("kind,opt_name,backend", _order_params())
def test_tutorial_training_step_orders(backend, opt_name, kind):
    def make(wrap):
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        opt = OPTIMIZERS[opt_name](model.parameters())

        def step(x, y):     # (`return loss.item()` written in the compiled function itself:
            loss = F.cross_entropy(model(x), y)     # a number only returned is an output)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.item()
        if kind != "zero_last/item":
            step = lambda x, y: _order(kind, model, opt, x, y)  # noqa: E731
        return World(step=wrap(step), watch=lambda: (model, opt))

    x, y = data(0, 8, 4), labels(0, 8, 3)
    _, world, _ = run_both(make, [lambda w: w.step(x, y)] * 6, backend, fallback=False)
    assert world.step.n_traces <= 3


# ---- 13. programs eager accepts --------------------------------------------------------------
def _manual_sgd_step(w, x):
    loss = (w * x).tanh().sum()
    loss.backward()
    with llgrad.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
    return loss.detach()


def _manual_sgd_update(w):
    with llgrad.no_grad():
        w -= 0.1 * w.grad


def _branch_shapes(x):
    if x.sum() > 0:
        y = x[:2]
    else:
        y = x * 3
    return y * 2


def _break_in_if(x):
    for _ in range(4):
        if x.sum() > 5:
            break
        x = x * 2
    return x


def _none_in_a_branch(x):
    if x.sum() > 0:
        m = None
    else:
        m = x * 2
    return x + (1 if m is None else m)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("which", ["with_backward", "update_alone"])
def test_manual_sgd_under_no_grad(backend, which):
    def make(wrap):
        w = llgrad.tensor([0.5, -1.0, 2.0], requires_grad=True)
        return World(w=w, step=wrap(_manual_sgd_step), update=wrap(_manual_sgd_update),
                     watch=lambda: (w, w.grad))

    def step(k):
        return lambda w: w.step(w.w, data(k, 3))

    def update(k):
        def run(w):
            w.w.grad = data(k, 3)
            return w.update(w.w)
        return run
    calls = [step(k) for k in range(4)] if which == "with_backward" else \
        [update(k) for k in range(4)]
    run_both(make, calls, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_branch_shapes, _break_in_if, _none_in_a_branch])
def test_control_flow_eager_accepts(backend, fn):
    def call(v):
        return catching(lambda w: w.f(llgrad.tensor([v, 0.5, 1.0])))
    eager, _, _ = run_both(lambda wrap: World(f=wrap(fn)),
                           [call(v) for v in (1.0, -4.0, 2.0, -3.0, 0.25)], backend)
    assert not any(r[0] == "raised" for r, _ in eager)


# ---- 14. compile(model) is module-like -------------------------------------------------------
def _bn_dropout_model():
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Dropout(0.5), nn.Linear(6, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_model_follows_train_and_eval(backend):
    def make(wrap):
        model = _bn_dropout_model()
        return World(model=model, cm=wrap(model), watch=lambda: model)

    def call(k):
        return lambda w: w.cm(data(k, 5, 4))
    def mode(name):
        return lambda w: getattr(w.cm, name)() and None
    calls = [call(0), call(1), mode("eval"), call(2), call(3), mode("train"), call(4), call(5)]
    run_both(make, calls, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_model_has_the_module_api(backend):
    model = _bn_dropout_model()
    cm = llgrad.compile(model, backend=backend)
    assert [p is q for p, q in zip(cm.parameters(), model.parameters())] == [True] * 6
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in model.named_parameters()]
    assert list(cm.state_dict()) == list(model.state_dict())
    assert cm[0] is model[0] and cm[1].num_features == 6
    scaled = Scaled()
    assert llgrad.compile(scaled, backend=backend).lin is scaled.lin
    cm.eval()
    assert not model.training and not cm.training
    x = data(0, 5, 4)
    for _ in range(3):
        np.testing.assert_allclose(cm(x).detach().numpy(), model(x).detach().numpy(),
                                   rtol=RTOL, atol=ATOL)
    cm.train()
    assert model.training and model[2].training
