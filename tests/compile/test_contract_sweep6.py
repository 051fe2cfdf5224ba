"""Differential probes of the compile contract, sixth round: one program run with torch (the
oracle, where it is one), with llgrad eagerly and with llgrad.compile, for several calls with
state changed between them; every observation must match (or the call runs eagerly with a
warning naming the user's line). Aimed at compiled functions that share state or call each
other, Python control flow inside, optimisers stepped inside, backward and autograd.grad
inside, and what a call returns."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(0)
A = _rng.standard_normal((4, 3)).astype(np.float32)
B = _rng.standard_normal((3,)).astype(np.float32)
W1 = _rng.standard_normal((5, 4)).astype(np.float32)
B1 = _rng.standard_normal((5,)).astype(np.float32)
W2 = _rng.standard_normal((2, 5)).astype(np.float32)
B2 = _rng.standard_normal((2,)).astype(np.float32)
X = _rng.standard_normal((6, 4)).astype(np.float32)
Y = _rng.standard_normal((6, 2)).astype(np.float32)


def _seen(v):
    """An observation that later writes cannot change (torch's tensors too)."""
    if isinstance(v, (llgrad.Tensor, torch.Tensor)):
        return ("tensor", v.detach().numpy().copy(), str(v.dtype).split(".")[-1],
                v.requires_grad, tuple(v.shape))
    if isinstance(v, BaseException):
        return ("raised", type(v).__name__, str(v).splitlines()[0])
    if isinstance(v, (list, tuple)):
        return [_seen(x) for x in v]
    if isinstance(v, dict):
        return {k: _seen(x) for k, x in v.items()}
    return v


def _runs(scenario, with_torch=True, **compile_kw):
    """scenario(lib, wrap, seen) run with torch, llgrad eagerly and llgrad compiled (after
    manual_seed(0) each); every run's observations must equal the first's. Returns the
    compiled run's own warnings (llgrad.compile(...): ...)."""
    compile_kw.setdefault("backend", "interpret")
    runs = [("llgrad eager", llgrad, lambda f: f),
            ("llgrad compiled", llgrad, lambda f: llgrad.compile(f, **compile_kw))]
    if with_torch:
        runs.insert(0, ("torch", torch, lambda f: f))
    logs, own = [], []
    for _, lib, wrap in runs:
        lib.manual_seed(0)
        log = []
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            scenario(lib, wrap, lambda *vs: log.extend(_seen(v) for v in vs))
        own = [str(x.message) for x in w if str(x.message).startswith("llgrad.compile(")]
        logs.append(log)
    for (name, _, _), log in zip(runs[1:], logs[1:]):
        assert len(log) == len(logs[0]), name
        for k, (a, b) in enumerate(zip(logs[0], log)):
            _same(a, b, f"{name} vs {runs[0][0]}: observation {k}")
    return own


def _same(a, b, where):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[0] == "tensor", f"{where}: {a!r} vs {b!r}"
        assert a[4] == b[4], f"{where}: shape {a[4]} vs {b[4]}"
        np.testing.assert_allclose(b[1], a[1], rtol=1e-5, atol=1e-5, err_msg=where)
        assert a[2:4] == b[2:4], f"{where}: dtype/requires_grad {a[2:4]} vs {b[2:4]}"
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: {a!r} vs {b!r}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k}]")
    else:
        assert a == b, f"{where}: first {a!r}, other {b!r}"


def _mlp(lib):
    m = lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.Tanh(), lib.nn.Linear(5, 2))
    m.load_state_dict({"0.weight": lib.tensor(W1), "0.bias": lib.tensor(B1),
                       "2.weight": lib.tensor(W2), "2.bias": lib.tensor(B2)})
    return m


# ---- views of an input the caller writes after the call --------------------------------------
def test_a_returned_view_written_after_the_call_leaves_backward_as_eagers():
    """A view of an input that requires grad returned (x[1]) and written in place by the
    caller, then a backward through the input and another result: eager's graph saved
    nothing the write changed (x * 2 saves x but its backward never reads it), so no error
    (compiled calls version-checked every tensor eager's nodes saved, read or not, and
    raised "modified by an inplace operation")."""
    def scenario(lib, wrap, seen):
        g = wrap(lambda x: (x[1], x.t(), x * 2))
        for k in range(3):
            x = lib.tensor(A * (k + 1), requires_grad=True)
            h = x * 1
            outs = g(h)
            seen([o._base is h for o in outs])
            outs[0].mul_(3)
            seen(h, outs[1])
            (h.sum() + outs[1].sum() * 2 + outs[2].sum()).backward()
            seen(x.grad)
    assert not _runs(scenario)


def test_a_saved_input_written_after_the_call_still_raises_as_eager():
    """The other side of the test above: x * x reads x in its backward, so the write after
    the call makes every compiled call's backward raise eager's error; exp(x) * 2 reads
    exp's result and x[0] nothing, so they do not."""
    def scenario(lib, wrap, seen):
        fs = [wrap(f) for f in (lambda x: x * x, lambda x: x.exp() * 2, lambda x: x[0])]
        for k in range(3):
            for g in fs:
                h = lib.tensor(B * (k + 1), requires_grad=True) * 1
                out = g(h)
                h.add_(1)
                try:
                    out.sum().backward()
                    seen("no error")
                except RuntimeError as e:
                    seen(str(e).split(":")[0])
    assert not _runs(scenario)


# ---- a backward from some of the outputs -----------------------------------------------------
def test_a_backward_from_one_output_ignores_the_others_infinite_derivatives():
    """A backward from x * 2 alone, where another output (sqrt(x), 1 / x) has an infinite
    derivative at x = 0: eager runs none of the other outputs' graph and gives 2; compiled
    calls gave their backward zeros for the other outputs, and 0 * inf made NaN. With
    create_graph too (autograd.grad of one output, then backward through the gradient)."""
    def scenario(lib, wrap, seen):
        g = wrap(lambda x: (x.sqrt(), x * x * 2, (1 / x).sum()))
        for k in range(3):
            x = lib.tensor([0., 1. + k], requires_grad=True)
            out = g(x)
            out[1].sum().backward()
            seen(x.grad)
            x = lib.tensor([0., 1. + k], requires_grad=True)
            out = g(x)
            gx, = lib.autograd.grad(out[1].sum(), x, create_graph=True)
            gx.sum().backward()
            seen(gx, x.grad)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert not _runs(scenario)


def test_outputs_with_graphs_apart_are_backpropagated_through_one_at_a_time():
    """Two outputs whose eager graphs share no saved values: a backward from one (without
    retain_graph) leaves the other's backward possible, as eager's separate graphs do; a
    second backward from the first raises eager's error, and so does one from an output
    whose graph shares a node the first backward freed (compiled calls freed everything
    at the first backward)."""
    def scenario(lib, wrap, seen):
        apart = wrap(lambda x, w: ((w * x).sum(), (w - x).exp().sum(), x + 1))
        shared = wrap(lambda x: (lambda h: ((h + 1).sum(), (h * 2).sum()))(x * x))
        for k in range(3):
            x = lib.tensor(B * (k + 1), requires_grad=True)
            w = lib.tensor(B, requires_grad=True)
            outs = apart(x, w)
            outs[0].backward()
            seen(x.grad, w.grad)
            for o in (outs[1], outs[0], outs[2].sum(), outs[2].sum()):
                try:
                    o.backward()
                    seen(x.grad, w.grad)
                except RuntimeError as e:
                    seen(e)
            outs = shared(x)
            outs[0].backward()
            try:
                outs[1].backward()
                seen(x.grad)
            except RuntimeError as e:
                seen(e)
    assert not _runs(scenario)


def test_a_double_backward_replays_the_forward_on_the_values_it_read():
    """create_graph through a compiled call that writes a buffer it read (buf.add_(1) after
    exp(x + buf)): the gradient is exp(x + buf) of the buffer's value before the write
    (the compiled replay of the forward read the written value)."""
    def scenario(lib, wrap, seen):
        def f(x, buf):
            out = (x + buf).exp()
            buf.add_(1)
            return out
        g = wrap(f)
        for k in range(3):
            x = lib.tensor(B * (k + 1), requires_grad=True)
            buf = lib.ones(3) * k
            out = g(x, buf)
            gx, = lib.autograd.grad(out.sum(), x, create_graph=True)
            gx.sum().backward()
            seen(out, gx, x.grad, buf)
    assert not _runs(scenario)


# ---- the eager fallback names the user's line ------------------------------------------------
def test_a_write_through_data_that_makes_the_call_eager_names_its_line():
    """`p.data[0] = ...` / `p.data.clamp_()` on a captured parameter the result is computed
    from: the call runs eagerly, and the warning names the line of the write (it named
    none: the write went to the alias's own version counter)."""
    def scenario(lib, wrap, seen):
        p = lib.nn.Parameter(lib.tensor(B))

        def f(x):
            y = (p * x).sum()
            p.data[0] = y.item()
            p.data.clamp_(-1, 1)
            return y
        g = wrap(f)
        for k in range(3):
            y = g(lib.tensor(B) * k)
            y.backward()
            seen(y, p, p.grad, p._version)
    own = _runs(scenario)
    assert len(own) == 1 and "(written at test_contract_sweep6.py:" in own[0], own


SCALE6 = 2.0


def test_eager_fallbacks_for_reads_and_kept_graphs_name_the_users_line():
    """globals() and os.environ read inside, and a result whose graph a backward inside
    kept: the call runs eagerly and the warning names the line (they named none)."""
    def scenario(lib, wrap, seen):
        by_globals = wrap(lambda x: x * globals()["SCALE6"])

        def kept(x, w):
            loss = (x * w).sum()
            loss.backward(retain_graph=True)
            return loss
        g = wrap(kept)
        for k in range(3):
            w = lib.tensor(B, requires_grad=True)
            seen(by_globals(lib.ones(2) * k), g(lib.tensor(B) * k, w), w.grad)
    own = _runs(scenario)
    assert len(own) == 2 and all("test_contract_sweep6.py:" in w for w in own), own


# ---- compiled functions sharing state, calling each other ------------------------------------
def test_two_compiled_functions_sharing_a_dict_and_a_buffer():
    """One compiled function rebinds a tensor in a dict and bumps a counter, another writes
    that tensor in place and reads a captured buffer the first writes: each sees the
    other's writes, call after call."""
    def scenario(lib, wrap, seen):
        state = {"n": 0, "acc": lib.zeros(3)}
        buf = lib.zeros(3)

        def first(x):
            state["n"] += 1
            state["acc"] = state["acc"] + x
            buf.add_(x)
            return x * state["n"]

        def second(x):
            state["acc"].mul_(2)
            return state["acc"] + x * buf
        f1, f2 = wrap(first), wrap(second)
        for k in range(4):
            x = lib.tensor(B) * k
            seen(f1(x), f2(x), state["n"], state["acc"], buf, buf._version)
    assert not _runs(scenario)


def test_a_compiled_step_calling_a_compiled_loss_with_a_shared_optimizer():
    """A compiled training step calls a compiled loss (also called on its own), the Adam
    optimiser they share has its lr changed between calls."""
    def scenario(lib, wrap, seen):
        w = lib.tensor(B.copy(), requires_grad=True)
        opt = lib.optim.Adam([w], lr=0.1)

        @wrap
        def loss_fn(x):
            return ((w * x).sum() - 1) ** 2

        @wrap
        def step(x):
            opt.zero_grad()
            loss = loss_fn(x)
            loss.backward()
            opt.step()
            return loss
        for k in range(5):
            opt.param_groups[0]["lr"] = 0.1 / (k + 1)
            seen(step(lib.tensor(B) * (k + 1)), w, w.grad, loss_fn(lib.tensor(B)))
        seen(len(getattr(step, "entries", [0])) > 0, len(getattr(loss_fn, "entries", [0])) > 0)
    assert not _runs(scenario, with_torch=False)    # (torch's first optimiser step: 3+ s)


def test_recursion_through_python_helpers_on_numbers_and_on_items():
    """A helper recursing on a Python int argument, and one recursing while a .item() read
    inside is above a bound: the depth follows each call's values."""
    def scenario(lib, wrap, seen):
        def halve(x, n):
            return x if n == 0 else halve(x * 0.5 + 1, n - 1)

        def shrink(x):
            return shrink(x * 0.5) if x.sum().item() > 1 else x
        by_int = wrap(lambda x, n: halve(x, n).sum())
        by_item = wrap(shrink)
        for n, k in [(1, 1.), (3, 10.), (3, 100.), (0, 0.1), (2, 10.)]:
            x = lib.tensor(np.abs(B) * k, requires_grad=True)
            y = by_int(x, n)
            z = by_item(x)
            (y + z.sum()).backward()
            seen(y, z, x.grad)
    assert not _runs(scenario)


def test_generators_consumed_inside():
    """A generator function, a generator expression and zip/enumerate over a tensor's rows,
    all made and consumed inside."""
    def scenario(lib, wrap, seen):
        def f(x):
            def scaled():
                for i in range(3):
                    yield x[i] * i
            acc = sum(scaled())
            for i, (a, b) in enumerate(zip(x, x.flip(0))):
                acc = acc + a * b * i
            return acc, [t.sum() for t in (x + j for j in range(2))], max(r.max() for r in x)
        g = wrap(f)
        for k in range(3):
            x = lib.tensor(A * (k + 1), requires_grad=True)
            out = g(x)
            out[0].sum().backward()
            seen(out, x.grad)
    assert not _runs(scenario)


# ---- exceptions caught inside ----------------------------------------------------------------
def test_try_except_around_ops_that_raise_for_some_calls():
    """try/except inside around ops that raise for some calls only: a shape mismatch (decided
    by the guards), an index out of range in an index tensor and in cross_entropy's targets
    (decided by values); the except branch, the Python effects before the raise and the
    in-place write before it are eager's."""
    def scenario(lib, wrap, seen):
        log = []

        def by_shape(x, y):
            try:
                x.add_(1)
                log.append("before")
                z = x @ y
                log.append("after")
            except RuntimeError as e:
                log.append(str(e).split(":")[0][:30])
                z = x.sum() + 100
            return z

        def by_index(x, i):
            try:
                return x[i].sum(0)
            except IndexError:
                return x[:2].sum(0) * 0

        def by_target(x, t):
            try:
                return lib.nn.functional.cross_entropy(x, t)
            except (IndexError, RuntimeError):
                return x.sum() * 0
        fs = wrap(by_shape), wrap(by_index), wrap(by_target)
        for n, idx, t in [(3, [0, 1], [0, 1, 2, 0]), (4, [5, 1], [3, 1, 0, 0]),
                          (3, [2, 3], [2, 2, 2, 2]), (4, [-7, 0], [-1, 0, 0, 0])]:
            x = lib.tensor(A)
            seen(fs[0](x, lib.ones(n)), x, list(log))
            seen(fs[1](lib.tensor(A), lib.tensor(idx)), fs[2](lib.tensor(A), lib.tensor(t)))
    assert not _runs(scenario)


def test_an_error_after_a_write_leaves_eagers_write_and_effects():
    """A call that raises after writing an input and appending to a list: the write and the
    append happened once, as eager's, and the error is eager's."""
    def scenario(lib, wrap, seen):
        lst = []

        def f(x, y):
            x.mul_(2)
            lst.append(1)
            return x + y
        g = wrap(f)
        for n in [3, 4, 3, 4]:
            x = lib.tensor(B)
            try:
                seen(g(x, lib.ones(n)))
            except RuntimeError as e:
                seen(e)
            seen(x, len(lst), x._version)
    assert not _runs(scenario)


_INDEXED = {
    "index_select": lambda lib, x, i: x.index_select(0, i),
    "gather": lambda lib, x, i: x.gather(0, i.unsqueeze(1).expand(-1, 3)),
    "embedding": lambda lib, x, i: lib.nn.functional.embedding(i, x),
    "scatter_add": lambda lib, x, i: lib.zeros(4, 3).scatter_add(
        0, i.unsqueeze(1).expand(-1, 3), x[:2]),
    "index_add": lambda lib, x, i: lib.zeros(4, 3).index_add(0, i, x[:2]),
    "scatter": lambda lib, x, i: lib.zeros(4, 3).scatter(0, i.unsqueeze(1).expand(-1, 3), x[:2]),
    "scatter_reduce": lambda lib, x, i: lib.zeros(4, 3).scatter_reduce(
        0, i.unsqueeze(1).expand(-1, 3), x[:2], "amax"),
}


@pytest.mark.parametrize("backend", ["interpret", pytest.param("llvm", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(_INDEXED))
def test_a_negative_index_raises_in_compiled_calls_as_eager(name, backend):
    """A negative index given to index_select, gather, embedding, scatter(_add, _reduce) or
    index_add after the trace: eager raises PyTorch's error; compiled calls (NumPy's impls
    in the interpreter and the LLVM kernels alike) wrapped it to the last row and returned
    a number."""
    def scenario(lib, wrap, seen):
        g = wrap(lambda x, i: _INDEXED[name](lib, x, i) * 2)
        for idx in ([0, 1], [1, 2], [-1, 0], [2, 3], [0, -4], [4, 0]):
            try:
                seen(g(lib.tensor(A), lib.tensor(idx)))
            except (IndexError, RuntimeError) as e:
                seen(e)
    _runs(scenario, backend=backend)


# ---- optimisers stepped inside ---------------------------------------------------------------
@pytest.mark.parametrize("name,kw,clip", [
    ("SGD", dict(lr=0.1, momentum=0.9), "norm"),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), None),
    ("Adam", dict(lr=0.01), "value"),
    ("Adam", dict(lr=0.01, amsgrad=True), None),
    ("AdamW", dict(lr=0.01, weight_decay=0.1), "norm"),
    ("RMSprop", dict(lr=0.01), None),
    ("RMSprop", dict(lr=0.01, momentum=0.9), "value"),
])
def test_an_optimizer_stepped_inside_with_lr_changed_between_calls(name, kw, clip):
    """zero_grad, loss, backward, gradient clipping and step inside, five calls, the lr of
    every param group changed before each: parameters, grads and the optimiser's state are
    eager's (tests/optim compares eager's with PyTorch's)."""
    def scenario(lib, wrap, seen):
        m = _mlp(lib)
        opt = getattr(lib.optim, name)(m.parameters(), **kw)

        def step(x, y):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(m(x), y)
            loss.backward()
            norm = None
            if clip == "norm":
                norm = lib.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            elif clip == "value":
                lib.nn.utils.clip_grad_value_(m.parameters(), 0.1)
            opt.step()
            return loss, norm
        g = wrap(step)
        for k in range(5):
            for group in opt.param_groups:
                group["lr"] = kw["lr"] * (k + 1) / 2
            seen(g(lib.tensor(X) * (1 + 0.1 * k), lib.tensor(Y)), list(m.parameters()),
                 [p.grad for p in m.parameters()])
        seen([[v for _, v in sorted(st.items())] for st in opt.state.values()])
    assert not _runs(scenario, with_torch=False)    # (torch's first optimiser step: 3+ s)


# ---- backward and autograd.grad inside -------------------------------------------------------
def test_backward_with_retain_graph_twice_inside_then_once_outside():
    """loss.backward(retain_graph=True) twice inside, the loss returned and backpropagated
    again by the caller: .grad accumulates three times (the call runs eagerly: compile does
    not keep a graph a backward inside retained)."""
    def scenario(lib, wrap, seen):
        w = lib.tensor(A, requires_grad=True)

        def f(x):
            loss = (w @ x).sin().sum()
            loss.backward(retain_graph=True)
            first = w.grad.clone()
            loss.backward(retain_graph=True)
            return loss, first
        g = wrap(f)
        for k in range(3):
            out = g(lib.tensor(B) * (k + 1))
            seen(out, w.grad)
            out[0].backward()
            seen(w.grad)
    own = _runs(scenario)
    assert own and "retain_graph" in own[0], own


def test_autograd_grad_inside_with_and_without_create_graph():
    """autograd.grad inside: with create_graph the gradient's own gradient reaches the
    inputs' .grad through the caller's backward; without it the gradients come back as
    values without history (the call runs eagerly where the result's graph was freed)."""
    def scenario(lib, wrap, seen):
        def penalty(x, w):
            y = (x * w).sin().sum()
            gx, = lib.autograd.grad(y, x, create_graph=True)
            return (gx ** 2).sum(), gx

        def plain(x, w):
            y = (x * w).sin().sum()
            gx, gw = lib.autograd.grad(y, [x, w])
            return gx, gw, y.detach()
        f, h = wrap(penalty), wrap(plain)
        for k in range(3):
            x = lib.tensor(B * (k + 1), requires_grad=True)
            w = lib.tensor(B, requires_grad=True)
            out = f(x, w)
            out[0].backward()
            seen(out, x.grad, w.grad, h(x, w))
    assert not _runs(scenario)


def test_detach_and_requires_grad_inside():
    """detach_() of an intermediate, detach().requires_grad_() of an input (a new leaf,
    returned: the call runs eagerly) and a .grad read, zeroed and set to None inside."""
    def scenario(lib, wrap, seen):
        p = lib.tensor(B, requires_grad=True)

        def f(x, w):
            h = x * w
            h.detach_()
            z = (h * w).sum()
            w2 = w.detach().requires_grad_()
            return z, w2, (w2 * 2).sum()

        def g(x, k):
            if p.grad is not None and k % 2:
                p.grad.zero_()
            loss = (p * x).sum()
            loss.backward()
            grad = p.grad
            if k == 2:
                p.grad = None
            return loss, grad
        cf, cg = wrap(f), wrap(g)
        for k in range(4):
            x = lib.tensor(B * (k + 1), requires_grad=True)
            w = lib.tensor(B, requires_grad=True)
            out = cf(x, w)
            out[0].backward()
            out[2].backward()
            seen(out, x.grad, w.grad, out[1].grad, out[1].is_leaf)
            seen(cg(lib.tensor(B) * (k + 1), k), p.grad)
    _runs(scenario)


# ---- what a call returns ---------------------------------------------------------------------
def test_views_of_inputs_and_one_tensor_returned_twice():
    """Views of an input returned (select, t, view, expand, a stepped slice, diagonal) alias
    it: strides, offsets, bases and writes through them are eager's; a tensor returned
    twice (and in a dict and a list) is one tensor."""
    def scenario(lib, wrap, seen):
        g = wrap(lambda x: (x[1], x.t(), x.view(-1), x.unsqueeze(0), x[:, ::2], x.diagonal(),
                            x.expand(2, 4, 3), x.contiguous(), x, x))
        h = wrap(lambda x: (lambda y: (y, y, {"a": y, "b": [y]}))(x.exp()))
        for k in range(3):
            x = lib.tensor(A) * (k + 1)
            outs = g(x)
            seen(outs, [o._base is x for o in outs], [o.stride() for o in outs],
                 [o.storage_offset() for o in outs], outs[-1] is outs[-2], outs[-1] is x,
                 outs[-3] is x)
            outs[0].add_(100)
            outs[1][0, 0] = -5
            seen(x, x._version)
            leaf = lib.tensor(B * k, requires_grad=True)
            a, b, d = h(leaf)
            seen(a is b, d["a"] is a, d["b"][0] is a)
            (a.sum() + b.sum()).backward()
            seen(leaf.grad)
    assert not _runs(scenario)


def test_python_values_computed_from_tensors_are_returned():
    """item(), tolist(), bool(), int(), float(), shape, numel and len returned: each call's
    own values (guards on them where the trace depends on them)."""
    def scenario(lib, wrap, seen):
        def f(x):
            return (x.max().item(), list(x.shape), x.tolist(), bool(x.max() > 0),
                    int(x.argmax()), x.numel(), float(x.min()), str(x.dtype).split(".")[-1],
                    len(x))
        g = wrap(f)
        for k in [1., -1., 2., 1.]:
            seen(g(lib.tensor(A * k)))
    _runs(scenario)


# ---- hooks, modules and RNG ------------------------------------------------------------------
def test_module_and_tensor_hooks_registered_before_the_calls():
    """Forward pre-, forward and full backward hooks of a module and a tensor hook of its
    weight, registered before the calls (one removed, one added between them): each runs
    once per call, in eager's order, with eager's values."""
    def scenario(lib, wrap, seen):
        m = lib.nn.Linear(4, 2)
        m.load_state_dict({"weight": lib.tensor(W2[:, :4]), "bias": lib.tensor(B2)})
        log = []
        m.register_forward_pre_hook(lambda mod, i: log.append(("pre", round(float(
            i[0].abs().sum()), 3))))
        m.register_full_backward_hook(lambda mod, gi, go: log.append(("bwd", round(float(
            go[0].abs().sum()), 3))))
        m.weight.register_hook(lambda g: log.append(("w", round(float(g.abs().sum()), 3))))
        tripled = m.register_forward_hook(lambda mod, i, o: o * 3)
        g = wrap(lambda x: m(x).pow(2).sum())
        for k in range(4):
            if k == 2:
                tripled.remove()
                m.bias.register_hook(lambda g: g * 2)
            x = lib.tensor(X * (k + 1), requires_grad=True)
            out = g(x)
            out.backward()
            seen(out, x.grad, m.weight.grad, m.bias.grad, list(log))
    own = _runs(scenario)
    # (a full backward hook hooks the module's inputs and outputs inside each call)
    assert all("the full backward hooks of a Linear module the function calls (at "
               "test_contract_sweep6.py:" in w for w in own), own


def test_a_leafs_hook_runs_as_soon_as_its_gradient_is_ready():
    """A module's full backward hook and its parameters' tensor hooks, in a second
    backward: PyTorch runs a leaf's AccumulateGrad (and its hooks) before any other ready
    node; llgrad's engine ran nodes newest first, and the leaf's node, made in the first
    backward, ran after the backward hook's newer node."""
    def scenario(lib, wrap, seen):
        m = lib.nn.Linear(4, 2)
        log = []
        m.register_full_backward_hook(lambda mod, gi, go: log.append("module"))
        m.weight.register_hook(lambda g: log.append("weight"))
        m.bias.register_hook(lambda g: log.append("bias"))
        g = wrap(lambda x: m(x).pow(2).sum())
        for k in range(3):
            g(lib.tensor(X, requires_grad=True)).backward()
            seen(list(log))
    _runs(scenario)


def test_a_compiled_module_with_a_buffer_and_an_attribute_changed_between_calls():
    """A module compiled whole, which bumps a buffer and reads a float attribute set between
    calls, switched to eval and back, trained by plain updates outside."""
    def scenario(lib, wrap, seen):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = _mlp(lib)
                self.register_buffer("count", lib.zeros(()))
                self.scale = 1.0

            def forward(self, x):
                self.count += 1
                y = self.body(x) * self.scale
                return y if self.training else y.detach() * 0 + y.sum()
        m = M()
        cm = wrap(m)
        for k in range(5):
            m.scale = k + 1.0
            if k == 2:
                cm.eval()
            if k == 3:
                cm.train()
            out = cm(lib.tensor(X))
            out.sum().backward()
            with lib.no_grad():
                for p in m.parameters():
                    p -= 0.01 * p.grad
                    p.grad = None
            seen(out, m.count, list(m.parameters()), m.training)
    assert not _runs(scenario)


def test_a_compiled_call_draws_as_many_random_numbers_as_eager():
    """Dropout and rand inside, then rand outside: the numbers outside after a compiled call
    are those after an eager one (llgrad against llgrad: no claim about torch's stream)."""
    def scenario(lib, wrap, seen):
        m = lib.nn.Dropout(0.5)
        g = wrap(lambda x: (m(x), lib.rand(3), lib.randn(2, 2) * x[0]))
        for k in range(4):
            if k == 2:
                m.eval()
            seen(g(lib.ones(8)), lib.rand(2))
    assert not _runs(scenario, with_torch=False)
