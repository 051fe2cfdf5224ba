"""Helpers of tests/compile/test_contract_hostile*_s78_g.py: a seeded Linear, inputs, and
an observation of a call that may raise."""


def _lin(lib, i, o, k=0.0):
    m = lib.nn.Linear(i, o)
    with lib.no_grad():
        m.weight.copy_(lib.arange(i * o * 1.0).reshape(o, i) / 7 - 0.3 + k)
        m.bias.copy_(lib.arange(o * 1.0) / 3 - 0.2)
    return m


def _xs(lib, i, rows=4, n=3):
    return lib.arange(rows * n * 1.0).reshape(rows, n) / (5 + i) - 0.5


def _catch(see, fn, *a):
    try:
        see(fn(*a))
    except (ValueError, RuntimeError, IndexError, KeyError, ZeroDivisionError) as e:
        see(e)
