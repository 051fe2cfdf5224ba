"""Session-wide test settings.

Build mode (llgrad/compile/background.py): the suite runs with LLGRAD_COMPILE=sync (native
code built before the call that needs it) unless LLGRAD_COMPILE is set, so

    python -m pytest -q                                 # sync builds
    LLGRAD_COMPILE=background python -m pytest -q       # background builds, the default
                                                        # of llgrad outside the tests

run it in either mode. Tests that look at the native path right after a call (kernels,
CompiledFunctionBackward nodes, trace counts, logs, profiles) call fn.wait() after the call
that traced, which waits for a background build and does nothing in sync mode; no build
outlives the test that queued it (_builds_end_with_their_test).

Compiled kernels go to a disk cache private to this test session, signed with a key of the
session's own (unless the developer points LLGRAD_CACHE_DIR somewhere on purpose): tests
never write to the user's cache or make the user's key, and tests that study the cache
itself set their own directory."""
import atexit
import os
import shutil
import tempfile
import threading

import pytest

# every kernel the suite builds checks that groups sharing code (codegen/schedule/dedupe.py) emit
# the same code
os.environ.setdefault("LLGRAD_CHECK_DEDUPE", "1")
# and every plan a test finds in the disk cache (codegen/prepared.py) is prepared afresh as well
# and compared with it
os.environ.setdefault("LLGRAD_CHECK_PREPARED", "1")
# native code is built before the call that needs it (tests inspect kernels and count builds
# right after a call); tests/compile/test_background.py covers the background builds, and
# LLGRAD_COMPILE=background runs the whole suite with them
os.environ.setdefault("LLGRAD_COMPILE", "sync")
# no progress line after a slow compile: on a loaded machine a step's compile passes 1 s and the
# line reached tests comparing a compiled run's stderr with eager's (test_printed_values);
# the tests of the line itself unset it (tests/observe/test_observe_logs.py)
os.environ.setdefault("LLGRAD_QUIET", "1")
if not os.environ.get("LLGRAD_CACHE_DIR"):
    os.environ["LLGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="llgrad-test-cache-")
    atexit.register(shutil.rmtree, os.environ["LLGRAD_CACHE_DIR"], ignore_errors=True)
    if not os.environ.get("LLGRAD_CACHE_KEY_FILE"):     # (outside the cache directory)
        _key_dir = tempfile.mkdtemp(prefix="llgrad-test-key-")
        os.environ["LLGRAD_CACHE_KEY_FILE"] = os.path.join(_key_dir, "cache-key")
        atexit.register(shutil.rmtree, _key_dir, ignore_errors=True)

# Hypothesis profiles (tests/fuzz): "ci", the default, is the fast reproducible profile every
# `python -m pytest` runs; "long" is for manual runs: `pytest -m fuzz --hypothesis-profile=long`.
# No example database: a failure prints its program as Python (tests/fuzz/programs.py).
try:
    from hypothesis import HealthCheck, Phase, settings
except ImportError:      # pragma: no cover - the [test] extra installs it; the fuzz tests skip
    settings = None
if settings is not None:
    _FUZZ = dict(deadline=None, database=None, print_blob=False,
                 phases=[p for p in Phase if p is not Phase.explain],   # no patch files
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much])
    settings.register_profile("ci", max_examples=120, derandomize=True, **_FUZZ)
    settings.register_profile("long", max_examples=5000, **_FUZZ)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


_SLOW_BY_TIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slow_by_time.txt")


def _listed(path):
    with open(path) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)     # (before -m's deselection reads the markers)
def pytest_collection_modifyitems(items):
    """The tests tests/slow_by_time.txt lists (by their measured time) are marked slow."""
    slow = _listed(_SLOW_BY_TIME)
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _builds_end_with_their_test():
    """Wait, after each test, for the background builds it queued: one still under way
    would write into the next test's cache directory, count in its compile statistics or
    run under its monkeypatches. torch._dynamo.config goes back to its defaults (a program
    that raised the recompile limit raises it for its own compiled functions only)."""
    yield
    from llgrad.compile import background, dynamo_config, eager_native   # (after the settings)
    background.wait_all()
    eager_native.wait()
    dynamo_config.config.reset()


@pytest.fixture
def run_on_threads():
    """run(work, n): work(k) on n threads at once (started together at a barrier); fails
    if one hangs or raises (a thread's exception is reported here, in the test)."""
    def run(work, n):
        errors, barrier = [], threading.Barrier(n)

        def main(k):
            try:
                barrier.wait()
                work(k)
            except BaseException as e:            # reported in the main thread
                errors.append((k, e))

        threads = [threading.Thread(target=main, args=(k,)) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in threads), "a thread hung"
        assert not errors, errors
    return run


@pytest.fixture
def cold_kernels(monkeypatch, tmp_path):
    """The default build mode (background) on empty kernel caches, memory and disk: a kernel
    the caches hold is loaded at its first call (tests/runtime/test_eager_warm_load.py), so a
    test of the builder thread's hand-over needs kernels nothing has built yet."""
    from llgrad.codegen.native import cache, jit   # (after the settings, as above)
    from llgrad.compile import eager_native, eager_optim
    from llgrad.compile.eager_builds import wait
    monkeypatch.setenv("LLGRAD_COMPILE", "background")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    wait()
    eager_native.reset()
    eager_optim.reset()
    jit._reset()
    cache._reset()
    yield
    wait()
    eager_native.reset()
    eager_optim.reset()
    monkeypatch.undo()
    jit._reset()
    cache._reset()
