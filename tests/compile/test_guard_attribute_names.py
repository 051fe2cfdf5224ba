"""An object walked whole (the function reads it in ways the walk cannot narrow: hasattr,
getattr with a default, vars) is guarded by its attributes' names and their order, not only
their values: cfg.scale = 2. replaced by cfg.factor = 2. must re-trace, not replay the
branch the first trace took. Eager is the oracle; each case runs the compiled function
several times first, so the generated guard walker (guard_walker.py) is the one checking."""
import llgrad
import pytest


class Cfg:
    pass


def _run(f, change, x):
    g = llgrad.compile(f)
    for _ in range(3):
        assert g(x).tolist() == f(x).tolist()
    change()
    for _ in range(2):
        assert g(x).tolist() == f(x).tolist()
    return g


def test_captured_attribute_renamed_same_value():
    cfg = Cfg()
    cfg.scale = 2.0

    def f(x):
        if hasattr(cfg, "scale"):
            return x * cfg.scale
        return x * getattr(cfg, "factor", 1.0) + 1

    def change():
        del cfg.scale
        cfg.factor = 2.0
    _run(f, change, llgrad.ones(3))


def test_argument_attribute_renamed_same_value():
    def f(x, c):
        return x * getattr(c, "a", 0.0) + getattr(c, "b", 5.0)

    g = llgrad.compile(f)
    c, x = Cfg(), llgrad.ones(2)
    c.a = 1.0
    for _ in range(3):
        assert g(x, c).tolist() == f(x, c).tolist()
    del c.a
    c.b = 1.0
    for _ in range(2):
        assert g(x, c).tolist() == f(x, c).tolist() == [1.0, 1.0]


def test_attribute_order_read_through_vars():
    cfg = Cfg()
    cfg.a, cfg.b = 1.0, 3.0

    def f(x):
        return x * list(vars(cfg)).index("b")

    def change():           # (same names and values, another order)
        del cfg.a
        cfg.a = 1.0
    _run(f, change, llgrad.ones(3))


@pytest.mark.parametrize("n", [1, 2])
def test_same_names_values_hit(n):
    """Another object of the same class, same attributes in the same order: no new trace."""
    def f(x, c):
        return x * getattr(c, "k", 1.0)

    g = llgrad.compile(f)
    objs = []
    for _ in range(n + 2):
        c = Cfg()
        c.k = 2.0
        objs.append(c)
    for c in objs:
        assert g(llgrad.ones(2), c).tolist() == [2.0, 2.0]
    assert g.n_traces == 1
