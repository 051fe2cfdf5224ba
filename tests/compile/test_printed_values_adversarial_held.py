"""Adversarial programs for values printed inside compiled functions (runtime/rendered_text.py,
compile/replayed_output.py) that held: each compiled program prints, returns and leaves in its
state what the same function run eagerly does, over calls whose values change (the
divergences found are in test_printed_values_adversarial.py)."""
import contextlib
import io
import sys

import llgrad

# (sync_builds: an autouse fixture, the native code built before the second call)
from printed_values_harness_sweep24 import (VALUES, outputs, same_as_eager, sums,  # noqa: F401
                                            sync_builds, vec)


def test_print_options_changed_between_calls():
    def f(x):
        print(x * 1.123456)
        return x

    def run(compiled):
        g = llgrad.compile(f) if compiled else f
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for k, v in enumerate(VALUES):
                llgrad.set_printoptions(precision=2 if k % 2 else 4)
                g(vec(v, 1))
        return out.getvalue()
    try:
        assert run(True) == run(False)
    finally:
        llgrad.set_printoptions(precision=4)


def test_grad_mode_at_the_call_shows_in_the_repr():
    def f(x):
        y = x * 2
        print(y)
        return y.detach()

    def run(compiled):
        g = llgrad.compile(f) if compiled else f
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for k, v in enumerate(VALUES):
                with llgrad.set_grad_enabled(k % 2 == 0):
                    g(vec(v, 1).requires_grad_())
        return out.getvalue()
    assert run(True) == run(False)


def test_reprs_of_several_dtypes_and_shapes():
    def f(x):
        print(x.long(), x.bool(), x.double().sum(), x[:0], (x > 1).any(), x.long().sum())
        print([x.sum(), x.max()], {"m": x.mean()}, (x.min(),))
        return x
    same_as_eager(f, [(vec(v, v / 3),) for v in VALUES])


def test_a_large_summarised_tensor():
    def f(x):
        print(x * 1000)
        return x
    same_as_eager(f, [(llgrad.arange(2000, dtype=llgrad.float32) * v,)
                       for v in [0, 0, 1, 0.001, 1e-7, 3]])


def test_zero_d_formats_of_several_dtypes():
    def f(x):
        s = x.sum()
        print(f"{s} {(s > 2)} {s.long()} {s.double()} {s:.3e} {s.item()!r} {s.long().item():>4d}")
        print("{:.3f} {}".format(s.item(), s.long().item()), str(s.item()), repr(s))
        return x
    same_as_eager(f, [(vec(v, v / 3),) for v in VALUES])


def test_returned_texts():
    def f(x):
        s = x.sum()
        return f"{s:.3f}", str(s.item()), [format(s.item(), ".1f")]
    same_as_eager(f, sums())


def test_end_and_file_arguments_holding_values():
    def f(x):
        print(f"{x[0]:.0f}", end=f"|{x[1]:.0f}\n")
        print(f"{x[1]:.1f}", x[0], file=sys.stderr, sep=", ")
        sys.stdout.write(f"w {x.sum():.2f}\n")
        return x
    same_as_eager(f, [(vec(v, v + 1),) for v in VALUES])


def test_texts_made_in_comprehensions_and_lambdas():
    def f(x):
        print(*(f"{v:.1f}" for v in x))
        print([f"{v:.1f}" for v in x])
        (lambda: print(f"{x.sum():.1f}"))()
        return x
    same_as_eager(f, [(vec(v, v + 1),) for v in VALUES[:5]])


def test_a_dynamic_number_printed_with_a_value():
    def f(x, i):
        print(i, f"{x.sum():.0f}", i * 2)
        return x
    same_as_eager(f, [(vec(v), v) for v in VALUES])


def test_a_print_in_a_gradient_hook():
    def f(x, w):
        y = (w * x).sum()
        w.register_hook(lambda g: print(f"grad {g.sum():.1f}"))
        y.backward()
        return y.detach()

    def run(compiled):
        w = llgrad.ones(2, requires_grad=True)
        return outputs(f, [(vec(v, v), w) for v in VALUES], compiled), w.grad.tolist()
    assert run(True) == run(False)


def test_an_error_after_the_print():
    def f(x, idx):
        print(f"sum {x.sum():.1f}")
        return x[idx]
    same_as_eager(f, [(vec(1, 2), llgrad.tensor(0)), (vec(1, 2), llgrad.tensor(1)),
                       (vec(3, 4), llgrad.tensor(5))])


def test_a_value_changed_in_place_after_its_text():
    def f(x):
        y = x * 2
        print(f"{y.sum():.1f}", y.add_(1), y.sum().item())
        return y
    same_as_eager(f, [(vec(v, 1),) for v in VALUES])


def test_texts_read_or_kept_give_the_value_up():
    state = {}

    def f(x):
        s = f"{x.sum():.1f}"
        state["s"] = s
        print(s, s == "1.0", len(f"{x.sum():.2f}"), f"{x.sum():.1f}".rjust(8))
        return x
    compiled = outputs(f, sums(), True), dict(state)
    assert compiled == (outputs(f, sums(), False), state)


def test_a_warning_holding_a_value_and_a_print_in_a_tensor_if():
    import warnings

    def f(x):
        warnings.warn(f"loss {x.sum():.1f}")
        if x.sum() > 2:
            print(f"big {x.sum():.1f}")
        try:
            print(f"{x.sum():.1f}", 1 / 0)
        except ZeroDivisionError:
            print("caught")
        return x * 2
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        same_as_eager(f, sums())


def test_a_compiled_function_printing_inside_another():
    inner = llgrad.compile(lambda x: print(f"inner {x.sum():.1f}") or x + 1)

    def f(x):
        y = inner(x)
        print(f"outer {y.sum():.1f}", y)
        return y
    same_as_eager(f, sums())


def test_streams_held_by_the_users_objects():
    import logging

    class Writer:
        def __init__(self, stream):
            self.stream = stream

    def f(x, w, buf):
        w.stream.write("step\n")
        with contextlib.redirect_stdout(buf):
            print("inside")
        log.info("a step")
        return x * 2
    log = logging.getLogger("test_printed_values_adversarial")
    log.propagate, held = False, io.StringIO()
    handler = logging.StreamHandler(held)
    log.addHandler(handler)
    log.setLevel(logging.INFO)

    def run(compiled):
        w, buf = Writer(io.StringIO()), io.StringIO()
        held.seek(0)
        held.truncate()
        outputs(f, [(vec(v), w, buf) for v in VALUES], compiled)
        return w.stream.getvalue(), buf.getvalue(), held.getvalue()
    try:
        assert run(True) == run(False)
    finally:
        log.removeHandler(handler)


def test_calls_from_two_threads():
    import threading

    def f(x, k):
        print(f"t{k} {x.sum():.1f}")
        return x * 2

    def run(fn):
        out = io.StringIO()

        def worker(k):
            for v in range(10):
                fn(llgrad.full((3,), float(v + 100 * k)), k)
        with contextlib.redirect_stdout(out):
            threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return sorted(out.getvalue().splitlines())
    assert run(llgrad.compile(f)) == run(f)
