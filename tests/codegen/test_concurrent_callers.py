"""Python threads calling one compiled function at once share the CPUs instead of
oversubscribing them (lowerings/pool.py, native/blas.py, native/cpus.py): 4 callers with 2
llgrad threads took 3-5x (up to 20x) as long as the same calls made one after the other;
their total time must now stay within 1.5x of it. A 2-core machine shared with other work
is noisy, so the two are timed back to back a few times and the best attempt counts."""
import threading
import time

import numpy as np

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.native import cpus

CALLERS, CALLS, ATTEMPTS = 4, 200, 5


def _problem():
    """An MLP step, forward and backward: BLAS products and loops big enough to thread.
    Returns new_caller(): a call of the one compiled function on tensors of its own
    (callers on several threads must not share .grad); new_caller.wait() waits for the
    function's native code (built in the background: compiled_function.wait)."""
    @llgrad.compile
    def loss(x, w1, w2, w3, y):
        return F.cross_entropy(((x @ w1).tanh() @ w2).relu() @ w3, y)

    def new_caller():
        rng = np.random.default_rng(0)

        def t(*shape, grad=True):
            return llgrad.tensor((rng.standard_normal(shape) * 0.1).astype(np.float32),
                                 requires_grad=grad)

        x, w1, w2, w3 = t(256, 256, grad=False), t(256, 256), t(256, 256), t(256, 10)
        y = llgrad.tensor(rng.integers(0, 10, 256))

        def call():
            for w in (w1, w2, w3):
                w.grad = None
            out = loss(x, w1, w2, w3, y)
            out.backward()
            return float(out), w1.grad.numpy().copy()
        return call
    new_caller.wait = loss.wait
    return new_caller


def _serial(call, n):
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    return time.perf_counter() - t0


def _concurrent(calls, n):
    start = threading.Barrier(len(calls) + 1)
    errors = []

    def work(call):
        try:
            start.wait()
            for _ in range(n // len(calls)):
                call()
        except BaseException as e:         # (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    assert not errors, errors
    return time.perf_counter() - t0


def test_concurrent_callers_take_no_longer_than_serial_calls(two_threads):
    new_caller = _problem()
    calls = [new_caller() for _ in range(CALLERS)]
    call = calls[0]
    for _ in range(5):                  # (traced, compiled, warm)
        want = call()
        new_caller.wait()
    serial, concurrent = [], []
    for _ in range(ATTEMPTS):           # (each attempt: the two back to back, in one noise)
        serial.append(_serial(call, CALLS))
        concurrent.append(_concurrent(calls, CALLS))
        if concurrent[-1] <= 1.2 * serial[-1]:
            break
    assert min(c / s for s, c in zip(serial, concurrent)) <= 1.5, (serial, concurrent)
    got = call()                        # the same results as before, to the bit
    assert got[0] == want[0] and np.array_equal(got[1], want[1])
    assert cpus.active.value == 0       # every caller and worker counted out again


def test_callers_on_every_cpu_run_their_chunks_themselves(two_threads, run_on_threads):
    """With as many callers inside kernels as CPUs, no chunk goes to a worker (the
    callers run them): results are the same as one caller's."""
    new_caller = _problem()
    calls = [new_caller() for _ in range(2 * cpus.cpu_count())]
    for _ in range(3):                  # (the first call is the traced, eager one)
        want = calls[0]()
        new_caller.wait()

    def work(k):
        call = calls[k]
        for _ in range(20):
            got = call()
            assert got[0] == want[0] and np.array_equal(got[1], want[1])
    run_on_threads(work, 2 * cpus.cpu_count())
    assert cpus.active.value == 0
