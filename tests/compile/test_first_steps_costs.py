"""What keeps a compiled function's first calls close to eager's: the switch interval while
a background build runs (background.quick_switches), and the guard walker's bytecode from
the disk cache (walker_bytecode.compiled_walker)."""
import sys

import numpy as np
import pytest

import llgrad
from llgrad.compile import background
from llgrad.compile import walker_bytecode


@pytest.fixture
def interval():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_builds_shorten_the_switch_interval_and_put_it_back(interval):
    sys.setswitchinterval(0.005)
    background.quick_switches(True)
    assert sys.getswitchinterval() == pytest.approx(background.SWITCH_SECONDS)
    background.quick_switches(True)             # (eager_native's builder, at the same time)
    background.quick_switches(False)
    assert sys.getswitchinterval() == pytest.approx(background.SWITCH_SECONDS)
    background.quick_switches(False)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_an_interval_set_during_a_build_is_kept(interval):
    sys.setswitchinterval(0.005)
    background.quick_switches(True)
    sys.setswitchinterval(0.002)                # (the program's own choice)
    background.quick_switches(False)
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_a_background_build_leaves_the_interval_as_it_was(interval):
    sys.setswitchinterval(0.004)
    cf = llgrad.compile(lambda x: (x * 2 + 1).sum(), backend="llvm")
    x = llgrad.tensor(np.arange(6, dtype=np.float32))
    assert cf(x).item() == 36.0
    cf(x)
    cf.wait()
    background.wait_all()
    assert sys.getswitchinterval() == pytest.approx(0.004)
    assert cf(x).item() == 36.0


def test_walker_bytecode_comes_from_the_disk_cache(monkeypatch):
    code = "def walk(args, kwargs):\n    return ('w', len(args)), []\n"
    first = walker_bytecode.compiled_walker(code, "<guard walker of test_cache>")

    def refuse(*a, **k):
        raise AssertionError("compiled again")
    monkeypatch.setattr(walker_bytecode, "compile", refuse, raising=False)
    again = walker_bytecode.compiled_walker(code, "<guard walker of test_cache>")
    env = {}
    exec(again, env)        # noqa: S102
    assert env["walk"]((1, 2), {}) == (("w", 2), [])
    assert again.co_filename == first.co_filename


def test_walker_without_a_disk_cache_compiles(monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE_DIR", "0")
    code = "def walk(args, kwargs):\n    return None\n"
    env = {}
    exec(walker_bytecode.compiled_walker(code, "<guard walker of no_cache>"), env)   # noqa: S102
    assert env["walk"]((), {}) is None
