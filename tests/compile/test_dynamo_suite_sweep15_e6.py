"""Sweep 15 (helper E), part 6: programs in the manner of PyTorch's Dynamo tests
(test/dynamo: test_functions, test_misc, test_repros, test_modules, test_hooks,
test_autograd_function), each run with torch (the oracle), llgrad eagerly and llgrad.compile
over several calls with the state it reads changed between calls.
This part: what calls read from other modules, objects, the environment,
enums, sets and dicts; data-dependent values; random generators.
Every observation must match (or the call runs eagerly with a warning)."""
import contextlib
import enum
import functools
import itertools
import operator
import os
import types

import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")

E = (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError,
     ZeroDivisionError)


def _attempt(see, fn, *args):
    """fn(*args) seen, or the error it raised: its type and first line up to a hint, the
    library's name left out."""
    try:
        r = fn(*args)
    except E as e:
        see((type(e).__name__, str(e).splitlines()[0].split(" Hint")[0]
             .replace("torch.", "").replace("llgrad.", "")))
    else:
        see(r)


HELPER_SRC = '''
CFG = {"scale": 2.0}
COUNT = [0]
def helper(x):
    COUNT[0] += 1
    return x * CFG["scale"]
'''


def _helper_in_other_module_reads_its_global(lib, wrap, see):
    mod = types.ModuleType("helper_mod_e15")
    exec(HELPER_SRC, mod.__dict__)
    cf = wrap(lambda x: mod.helper(x) + 1)
    for k in range(3):
        see(cf(lib.ones(2)), mod.COUNT[0])
        mod.CFG["scale"] = k + 3.0


def _globals_dict_lookup(lib, wrap, see):
    ns = {"lib": lib, "SCALE": 1.0}
    exec("def f(x):\n    return x * globals()['SCALE']", ns)
    cf = wrap(ns["f"])
    for k in range(3):
        see(cf(lib.ones(2)))
        ns["SCALE"] = k + 5.0


def _getattr_string_name(lib, wrap, see):
    class C: pass
    c = C(); c.mode = "relu"
    cf = wrap(lambda x: getattr(lib, c.mode)(x))
    for m in ("relu", "sigmoid", "tanh", "relu"):
        c.mode = m
        see(cf(lib.arange(-1., 2.)))


def _obj_dict_access(lib, wrap, see):
    class C: pass
    c = C(); c.w = 2.0
    cf = wrap(lambda x: x * vars(c)["w"] + c.__dict__.get("b", 0.0))
    for k in range(3):
        see(cf(lib.ones(2)))
        c.w += 1; c.b = float(k)


def _len_of_global_list(lib, wrap, see):
    items = []
    cf = wrap(lambda x: x * len(items) + sum(items))
    for k in range(3):
        see(cf(lib.ones(2)))
        items.append(k + 1)


def _set_membership(lib, wrap, see):
    enabled = {"a"}
    def f(x):
        if "b" in enabled:
            x = x * 2
        if "a" in enabled:
            x = x + 1
        return x
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2)))
        enabled.add("b") if k == 0 else enabled.discard("a")


def _hasattr_changes(lib, wrap, see):
    class C: pass
    c = C()
    cf = wrap(lambda x: x * c.s if hasattr(c, "s") else x - 1)
    see(cf(lib.ones(2)))
    c.s = 4.0
    see(cf(lib.ones(2)))
    del c.s
    see(cf(lib.ones(2)))


def _environ_read(lib, wrap, see):
    def f(x):
        return x * float(os.environ.get("E15_SCALE", "1"))
    cf = wrap(f)
    try:
        for k in range(3):
            see(cf(lib.ones(2)))
            os.environ["E15_SCALE"] = str(k + 2)
    finally:
        os.environ.pop("E15_SCALE", None)


def _dispatch_table(lib, wrap, see):
    acts = {"a": lib.relu}
    cf = wrap(lambda x: acts["a"](x))
    see(cf(lib.arange(-1., 2.)))
    acts["a"] = lib.exp
    see(cf(lib.arange(-1., 2.)))


def _enum_config(lib, wrap, see):
    class Mode(enum.Enum):
        A = 1
        B = 2
    st = {"m": Mode.A}
    cf = wrap(lambda x: x * 2 if st["m"] is Mode.A else x * st["m"].value * 10)
    for m in (Mode.A, Mode.B, Mode.A):
        st["m"] = m
        see(cf(lib.ones(2)))


def _grad_enabled_query(lib, wrap, see):
    def f(x):
        if lib.is_grad_enabled():
            return x * 2
        return x - 2
    cf = wrap(f)
    see(cf(lib.ones(2)))
    with lib.no_grad():
        see(cf(lib.ones(2)))
    see(cf(lib.ones(2)))


def _contextmanager_state(lib, wrap, see):
    depth = [0]
    @contextlib.contextmanager
    def ctx():
        depth[0] += 1
        try:
            yield depth[0]
        finally:
            depth[0] -= 1
    def f(x):
        with ctx() as d:
            return x * d
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2)), depth[0])
        depth[0] += 1


def _sorted_by_value(lib, wrap, see):
    def f(xs):
        ys = sorted(xs, key=lambda t: t.sum().item())
        return lib.stack(ys) * lib.arange(len(ys)).view(-1, 1)
    cf = wrap(f)
    for k in range(3):
        xs = [lib.ones(2) * ((k + j) % 3) for j in range(3)]
        see(cf(xs))


def _max_of_tensor_list(lib, wrap, see):
    def f(a, b):
        return max(a, b) * 2
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.tensor(1.0 * k), lib.tensor(1.0)))


def _any_all(lib, wrap, see):
    def f(x):
        if (x < 0).any():
            x = x.abs()
        if (x > 1).all():
            x = x - 1
        return x
    cf = wrap(f)
    for v in ([1., -2.], [3., 4.], [0.5, 2.], [-5., -6.]):
        see(cf(lib.tensor(v)))


def _tensor_as_slice_bound(lib, wrap, see):
    def f(x, n):
        return x[:n] * 2, x[n]
    cf = wrap(f)
    for n in (1, 3, 2):
        see(*cf(lib.arange(5.), lib.tensor(n)))


def _iterate_tensor_rows(lib, wrap, see):
    def f(x):
        out = []
        for row in x:
            out.append(row.sum())
        return lib.stack(out)
    cf = wrap(f)
    for s in ((2, 3), (4, 1), (2, 3)):
        see(cf(lib.ones(*s)))


def _split_sizes_from_item(lib, wrap, see):
    def f(x, k):
        n = int(k.item())
        return [p.sum() for p in x.split([n, x.shape[0] - n])]
    cf = wrap(f)
    for n in (1, 3, 2):
        see(cf(lib.arange(5.), lib.tensor(n)))


def _where_one_arg(lib, wrap, see):
    def f(x):
        i, = lib.where(x > 0)
        return i, x.unique(), x.masked_select(x > 0)
    cf = wrap(f)
    for v in ([1., -1., 1.], [-1., 2., 3.], [1., -1., 1.]):
        see(*cf(lib.tensor(v)))


def _generator_object_arg(lib, wrap, see):
    g = lib.Generator().manual_seed(3)
    def f(x, gen):
        return x + lib.rand(3, generator=gen) + lib.randn(2, generator=gen).sum()
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.zeros(3), g))
    see(lib.rand(2, generator=g), lib.rand(1))


def _randperm_multinomial(lib, wrap, see):
    def f(x):
        p = lib.randperm(x.shape[0])
        idx = lib.multinomial(x.softmax(0), 2)
        return x[p], idx
    cf = wrap(f)
    for k in range(3):
        see(*cf(lib.arange(4.)))


def _dropout_training_flag(lib, wrap, see):
    class M(lib.nn.Module):
        def forward(self, x):
            return lib.nn.functional.dropout(x, 0.5, training=self.training)
    m = M()
    cm = wrap(m)
    for k in range(4):
        if k == 2: m.eval()
        if k == 3: m.train()
        see(cm(lib.ones(6)))


def _randint_high_from_item(lib, wrap, see):
    def f(x):
        return lib.randint(0, int(x.sum()) + 1, (3,))
    cf = wrap(f)
    for k in (2, 5, 2):
        see(cf(lib.ones(k)))


def _inner_fn_capture_loop(lib, wrap, see):
    def f(x, n):
        fns = []
        for i in range(n):
            def g(t, i=i):
                return t * i
            fns.append(g)
        return sum(g(x) for g in fns)
    cf = wrap(f)
    for n in (2, 3, 2):
        see(cf(lib.ones(2), n))


def _reduce_accumulate(lib, wrap, see):
    def f(xs):
        a = functools.reduce(operator.mul, xs)
        b = list(itertools.accumulate(xs))
        return a, b[-1], len(b)
    cf = wrap(f)
    for n in (2, 3):
        see(*cf([lib.arange(1., 3.) + i for i in range(n)]))


def _float_int_bool_of_tensor(lib, wrap, see):
    def f(x):
        return float(x) * 2, int(x), bool(x), x * float(x)
    cf = wrap(f)
    for v in (1.5, -2.7, 0.0):
        see(*cf(lib.tensor(v)))


def _error_after_object_write(lib, wrap, see):
    class C: pass
    c = C(); c.t = lib.zeros(2)
    def f(x):
        c.t = x * 2
        if x.shape[0] > 2:
            raise ValueError("big")
        return c.t + 1
    cf = wrap(f)
    for n in (2, 2, 3, 2):
        _attempt(see, cf, lib.ones(n) * n)
        see(c.t)


def _type_self_class_attr(lib, wrap, see):
    class M(lib.nn.Module):
        GAIN = 2.0
        def forward(self, x):
            return x * type(self).GAIN
    m = M()
    cm = wrap(m)
    for k in range(3):
        see(cm(lib.ones(2)))
        M.GAIN = k + 4.0


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3
            and v.__code__.co_varnames[:3] == ("lib", "wrap", "see")]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)
