"""Differential probes of the compile contract, fourth round: the same program run eagerly
and under llgrad.compile for several calls, with state changed between calls (an input's
storage offset and version, warnings and their filters, attributes set on tensors); every
observation must match eager's (or the call runs eagerly with a warning naming why).
Each test failed before its fix."""
import functools
import types
import warnings

import numpy as np

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


def _seen(v):
    """An observation that later writes cannot change."""
    if isinstance(v, llgrad.Tensor):
        return ("tensor", v.detach().numpy().copy(), str(v.dtype), v.requires_grad)
    if isinstance(v, BaseException):
        return ("raised", type(v).__name__, str(v).splitlines()[0])
    if isinstance(v, (list, tuple)):
        return [_seen(x) for x in v]
    return v


def _both(scenario, **compile_kw):
    """scenario(wrap, seen) with seen(value) recording an observation, run eagerly and
    compiled (after llgrad.manual_seed(0) each); the observations must be equal. Returns
    the compiled run's warnings that are compile's own. The backend is the interpreter
    unless given: what these probe is decided before any kernel runs (and a first LLVM
    build costs a second)."""
    compile_kw.setdefault("backend", "interpret")
    logs, own = [], []
    for wrap in (lambda f: f, lambda f: llgrad.compile(f, **compile_kw)):
        llgrad.manual_seed(0)
        log = []
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            scenario(wrap, lambda *vs: log.extend(_seen(v) for v in vs))
        own = [str(x.message) for x in w if str(x.message).startswith("llgrad.compile(")]
        logs.append(log)
    eager, compiled = logs
    assert len(eager) == len(compiled)
    for k, (a, b) in enumerate(zip(eager, compiled)):
        _same(a, b, f"observation {k}")
    return own


def _same(a, b, where):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[0] == "tensor", f"{where}: {a!r} vs {b!r}"
        np.testing.assert_allclose(b[1], a[1], rtol=1e-5, atol=1e-6, err_msg=where)
        assert a[2:] == b[2:], f"{where}: dtype/requires_grad {a[2:]} vs {b[2:]}"
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    else:
        assert a == b, f"{where}: eager {a!r}, compiled {b!r}"


# ---- an input's layout read as a number --------------------------------------------------------
def test_an_inputs_storage_offset_and_version_are_not_baked_into_the_trace():
    """Before: x.storage_offset(), x._version and x.as_strided(size, stride, offset) were
    traced with the first call's numbers (offsets and versions are not guards: a slice of
    a dataset at each batch shares one trace), so later calls returned the first call's
    answer (x * 0 for every slice; as_strided read the first slice's elements)."""
    def offsets(wrap, seen):
        g = wrap(lambda x: x * x.storage_offset())
        h = wrap(lambda x: x.as_strided((2,), (1,), 1) * 1)
        base = llgrad.arange(6.)
        for i in range(3):
            seen(g(base[i:i + 2]), h(base[i:i + 2]))

    def versions(wrap, seen):
        g = wrap(lambda x: x * x._version)
        x = llgrad.ones(2)
        for i in range(3):
            seen(g(x))
            x.add_(1)

    def strided_write(wrap, seen):
        def f(x):
            x.as_strided((2,), (1,), 0).mul_(10)
            return x * 1
        g = wrap(f)
        for i in range(3):
            base = llgrad.arange(6.)
            seen(g(base[i:i + 3]), base)

    for scenario in (offsets, versions, strided_write):
        own = _both(scenario)
        assert any("of an input (its value differs from call to call)" in w for w in own)


def test_a_layout_read_of_a_tensor_made_inside_still_compiles():
    def scenario(wrap, seen):
        def f(x):
            y = llgrad.zeros(8)[2:]
            return x * y.storage_offset() + y._version
        g = wrap(f)
        for i in range(3):
            seen(g(llgrad.full((6,), float(i))))
    assert _both(scenario) == []


# ---- warnings --------------------------------------------------------------------------------
def test_warnings_given_inside_are_given_by_every_compiled_call():
    """Before: a compiled call ran no Python, so warnings.warn(...) in the function and an
    op's own warning (mse_loss of mismatched sizes) were given only by the traced call."""
    def scenario(wrap, seen):
        def f(x, y):
            warnings.warn("careful", RuntimeWarning)
            return F.mse_loss(x, y) * 2
        g = wrap(f)
        for i in range(4):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always" if i % 2 else "default")
                out = g(llgrad.ones(2, 1) * i, llgrad.ones(2))
            seen(out, [(type(x.message).__name__, str(x.message)[:40], x.lineno) for x in w])
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            try:
                g(llgrad.ones(2, 1), llgrad.ones(2))
            except RuntimeWarning as e:
                seen(e)
    assert _both(scenario) == []


def test_a_warning_inside_tensor_control_flow_follows_the_branch_taken():
    def scenario(wrap, seen):
        def f(x):
            if x.sum() > 3:
                warnings.warn("big")
                x = x + 1
            return x * 2
        g = wrap(f)
        for i in (0, 3, 1, 4):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                out = g(llgrad.full((2,), float(i)))
            seen(out, [str(x.message) for x in w if "llgrad.compile" not in str(x.message)])
    _both(scenario)


# ---- attributes set on tensors -----------------------------------------------------------------
def test_attributes_set_on_tensors_are_guarded_and_their_tensors_read_afresh():
    """Before: the guards never looked into a tensor's own attributes (x.scale = 2.0, a
    parameter's lr_scale), so a compiled call used the traced call's values."""
    def scenario(wrap, seen):
        def f(x, y):
            return x * x.scale + y.other.sum() * getattr(x, "extra", 1.0)
        g = wrap(f)
        a, b = llgrad.ones(2), llgrad.ones(2)
        a.scale, b.other = 2.0, llgrad.ones(3)
        for i in range(6):
            if i == 1:
                a.scale = 3.0
            if i == 2:
                b.other.add_(1)
            if i == 3:
                b.other = llgrad.zeros(3) + 5
            if i == 4:
                a.partner, b.partner = b, a         # (a cycle through attributes)
            if i == 5:
                a.extra = 4.0
            seen(g(a, b))
    assert _both(scenario) == []


# ---- printed output ------------------------------------------------------------------------
def _printing(wrap, out):
    def f(x, n):
        print("step", n, x.shape[0])
        if x.sum() > 0:             # (a tensor `if`: its print follows the data)
            print("positive")
            x = x + 1
        return x * 2
    g = wrap(f)

    def broken(x):
        print("before the break")
        return llgrad.tensor(x.numpy() * 2)        # (a graph break: runs eagerly)
    b = wrap(broken)
    for i, v in enumerate((1.0, -1.0, 2.0, 1.0)):
        out.append(g(llgrad.full((2,), v), i % 2).tolist())
        b(llgrad.ones(2))


def test_prints_inside_are_written_by_every_compiled_call(capsys):
    """Before: a compiled call wrote nothing (its Python does not run), a print inside a
    tensor `if` was never written by compiled calls and the branch eager does not take
    printed while it was traced, and a trace given up at a graph break printed what the
    eager run after it printed again."""
    outs, texts = [], []
    for wrap in (lambda f: f, lambda f: llgrad.compile(f, backend="interpret")):
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _printing(wrap, out)
        outs.append(out)
        texts.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
    assert texts[0] == texts[1]


# ---- the random generator between calls ---------------------------------------------------------
def test_a_compiled_draw_keeps_the_half_draw_randint_left():
    """randint and randperm between compiled calls that draw give eager's numbers: the
    compiled call writes back the whole generator state."""
    def scenario(wrap, seen):
        f = wrap(lambda x: F.dropout(x, 0.5))
        for i in range(5):
            seen(llgrad.randint(0, 2, (5,)), f(llgrad.ones(8)))
        for i in range(3):
            seen(llgrad.randperm(5), f(llgrad.ones(8)))
    assert _both(scenario) == []


# ---- the user's classes read as values ---------------------------------------------------------
class _Config:
    scale = 2.0
    sizes = [1.0]


def test_a_config_class_read_through_the_class_is_guarded():
    """Before: a class of the user's read from the globals (`Config.scale`, not through an
    object) was guarded by its identity only, so a compiled call kept the traced value
    of an attribute set or a list appended to between calls."""
    def scenario(wrap, seen):
        _Config.scale, _Config.sizes = 2.0, [1.0]
        f = wrap(lambda x: x * _Config.scale + sum(_Config.sizes))
        for i in range(5):
            if i == 1:
                _Config.scale = 3.0
            if i == 2:
                _Config.sizes.append(5.0)
            if i == 3:
                _Config.sizes = [0.5]
            seen(f(llgrad.ones(2)))
    assert _both(scenario) == []


_CALLS = []


class _Counted(llgrad.autograd.Function):
    n = 0

    @staticmethod
    def forward(ctx, x):
        _Counted.n += 1
        return x * 2

    @staticmethod
    def backward(ctx, g):
        _CALLS.append(1)
        return g * 2


class _Pure(llgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0)


def test_a_custom_functions_python_effects_are_eagers():
    """Before: the trace ran the Function's backward (to differentiate it) at the call,
    so a count kept by backward was one ahead of eager's, and compiled calls ran neither
    forward's nor backward's Python (their counts stopped)."""
    def scenario(wrap, seen):
        _Counted.n, _CALLS[:] = 0, []
        f = wrap(lambda x: _Counted.apply(x).sum())
        for i in range(4):
            x = llgrad.ones(2, requires_grad=True)
            y = f(x)
            seen(_Counted.n, len(_CALLS))
            y.backward()
            seen(y, x.grad, _Counted.n, len(_CALLS))
    _both(scenario)


def test_a_pure_custom_function_still_compiles():
    def scenario(wrap, seen):
        f = wrap(lambda x: _Pure.apply(x).sum())
        for i in range(3):
            x = llgrad.tensor([1.0, -1.0], requires_grad=True)
            y = f(x * (i + 1))
            y.backward()
            seen(y, x.grad)
        if hasattr(f, "n_traces"):
            seen(f.n_traces)
        else:
            seen(1)
    assert _both(scenario) == []


# ---- the checks of a library function on its arguments' values -------------------------------
def test_value_checks_of_losses_hold_for_every_compiled_call():
    """Before: cross_entropy's target check (a negative class), one_hot's class check,
    binary_cross_entropy's [0, 1] check and multilabel_margin_loss's target check read the
    traced call's values, so a compiled call given bad values returned a number where eager
    raises."""
    cases = [
        (lambda x, t: F.cross_entropy(x, t), (llgrad.ones(2, 3), llgrad.tensor([0, 2])),
         [(llgrad.ones(2, 3), llgrad.tensor([-1, 0])), (llgrad.ones(2, 3), llgrad.tensor([0, 3]))]),
        (lambda t: F.one_hot(t, 3).float(), (llgrad.tensor([0, 2]),),
         [(llgrad.tensor([0, 3]),), (llgrad.tensor([-1, 0]),)]),
        (lambda x, y: F.binary_cross_entropy(x, y), (llgrad.full((2,), 0.5), llgrad.ones(2)),
         [(llgrad.full((2,), 1.5), llgrad.ones(2)), (llgrad.full((2,), 0.5), -llgrad.ones(2))]),
        (lambda x, t: F.multilabel_margin_loss(x, t),
         (llgrad.ones(2, 3), llgrad.tensor([[0, 2, -1], [1, -1, 0]])),
         [(llgrad.ones(2, 3), llgrad.tensor([[0, -2, -1], [1, -1, 0]]))]),
        (lambda x, t: F.nll_loss(x, t), (llgrad.ones(3), llgrad.tensor(1)),
         [(llgrad.ones(3), llgrad.tensor(-1)), (llgrad.ones(3), llgrad.tensor(-100))]),
    ]
    for fn, good, bads in cases:
        def scenario(wrap, seen):
            g = wrap(fn)
            for args in [good, good] + bads + [good]:
                try:
                    seen(g(*args))
                except (RuntimeError, IndexError) as e:
                    seen(e)
        _both(scenario)


# ---- values the guard walk held by their id, or did not enter ---------------------------------
class _Slotted:
    __slots__ = ("scale",)

    def __init__(self, scale):
        self.scale = scale


def test_values_guarded_by_identity_or_held_outside_a_dict_are_guarded():
    """Before: a NumPy number, a range and a function were guarded by id() alone (a new one
    each call, made where the last one was freed, has its id: the trace's value stayed), and
    what a functools.partial calls with and a slotted object's attributes were not walked."""
    def scenario(wrap, seen):
        f = wrap(lambda x, s, r, fn, act, obj: x * float(s) * len(r) + fn(x) + act(-x) * obj.scale)
        for i in range(4):
            seen(f(llgrad.ones(2), np.float32(i), range(i + 1), lambda t, i=i: t * i,
                   functools.partial(F.leaky_relu, negative_slope=0.1 * (i + 1)),
                   _Slotted(float(i))))
        held = _Slotted(1.0)
        g = wrap(lambda x: x * held.scale)
        for i in range(3):
            held.scale = float(i)
            seen(g(llgrad.ones(2)))
    assert _both(scenario) == []


# ---- new leaves among the results ---------------------------------------------------------------
def test_a_new_leaf_that_requires_grad_is_a_leaf_with_its_grad():
    """Before: a result made inside as a leaf requiring grad (requires_grad_() on a detached
    value, zeros(..., requires_grad=True), an nn.Parameter, or one put into an object) came
    out of compiled calls with a backward node: not a leaf, its .grad never set, and not an
    nn.Parameter."""
    class Holder:
        h = None

    held = Holder()

    def state(x):
        held.h = (x * 2).detach().requires_grad_()
        return held.h.sum()

    for fn in (lambda x: (x * 2).detach().requires_grad_(),
               lambda x: (llgrad.zeros(2, requires_grad=True), x * 2)[0],
               lambda x: nn.Parameter(x.detach() * 2),
               lambda x: (state(x), held.h)[1]):
        def scenario(wrap, seen):
            g = wrap(fn)
            for i in range(3):
                x = llgrad.full((2,), float(i + 1), requires_grad=True)
                r = g(x)
                seen(r, r.is_leaf, type(r).__name__)
                (r * 3).sum().backward()
                seen(r.grad, x.grad)
        _both(scenario)


def test_initial_seed_inside_is_not_baked_into_the_trace():
    """Before: llgrad.initial_seed() inside was read once, by the trace."""
    def scenario(wrap, seen):
        g = wrap(lambda x: x * llgrad.initial_seed())
        for i in range(3):
            llgrad.manual_seed(i)
            seen(g(llgrad.ones(2)))
    assert any("initial_seed()" in w for w in _both(scenario))


# ---- attributes of the user's modules -----------------------------------------------------------
_cfg = types.ModuleType("_adversarial_contract4_cfg")     # (a config / helper module of the
_cfg.__file__ = __file__                                   # user's, as `import config` gives)
exec("import llgrad\nscale = 2.0\nW = llgrad.ones(2)\ndef proj(x):\n    return x * W\n",
     _cfg.__dict__)


def test_attributes_of_the_users_modules_are_read_at_each_call():
    """Before: `config.scale` and `utils.proj(x)` (a helper in another file reading that
    file's tensor W) were read through a module, which the guard walk does not enter: the
    number and the tensor were baked into the trace."""
    def scenario(wrap, seen):
        _cfg.scale, _cfg.W = 2.0, llgrad.ones(2)
        f = wrap(lambda x: _cfg.proj(x) * _cfg.scale)
        for i in range(5):
            if i == 1:
                _cfg.scale = 3.0
            if i == 2:
                _cfg.W.mul_(2)
            if i == 3:
                _cfg.W = llgrad.full((2,), 7.0)
            seen(f(llgrad.ones(2)))
    assert _both(scenario) == []
