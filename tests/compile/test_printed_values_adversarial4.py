"""Adversarial programs for values printed inside compiled functions, round 4 (sweep 24, H8):
each compiled program must print, return, leave in its state and trace as the same function
run eagerly over calls whose values change. Diverged when written, now equal eager: text
written past the recorded streams (sys.__stdout__, a thread the function starts, os.write),
given by the traced run only, and text no guard follows (the calling thread's name, the
process id), replayed as traced: such calls run eagerly (compile/code_reads.py); a
BatchedTensor's repr inside vmap showing a level id new at each call (torch shows the depth);
a format spec valid for the traced value but not for a later one ({i:c}: read by value);
the recorder's stream left in the user's state (such a run is not kept). The other tests
are classes that held:
format specs on unusual numbers, ints past 2**53, bool stand-ins, float16 and float64 0-d
tensors, negative zero, NaN and inf, a template chosen at run time."""
import contextlib
import io
import os
import sys
import threading
import warnings

import pytest

import llgrad

# (sync_builds: an autouse fixture, the native code built before the second call)
from printed_values_harness_sweep24 import (VALUES, outputs, same_as_eager, sums,  # noqa: F401
                                            sync_builds, traces as _traces, vec)



def _quiet(fn, calls, hide=True):
    """fn over calls with the standard streams captured (hide: and compile's warnings)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        if hide:
            warnings.simplefilter("ignore")
        return [fn(*args).tolist() for args in calls]


# ---- divergences found: text written past the recorded streams (replayed_output.py tees
# sys.stdout and sys.stderr only) went out in the traced run only, compiled calls gave
# nothing; such a call now runs eagerly with a warning (compile/code_reads.py) ----

def _to_dunder_stdout(x):
    print(f"loss {x.sum():.1f}", file=sys.__stdout__)      # (past a notebook's capture)
    return x * 2


def _write_dunder_stdout(x):
    sys.__stdout__.write("step\n")
    return x * 2


@pytest.mark.parametrize("fn", [_to_dunder_stdout, _write_dunder_stdout],
                         ids=["print_file", "write"])
def test_text_written_to_sys_dunder_stdout(fn, monkeypatch):
    def run(f):
        terminal = io.StringIO()
        monkeypatch.setattr(sys, "__stdout__", terminal)
        _quiet(f, sums(VALUES[:5]), hide=False)
        return terminal.getvalue()
    with pytest.warns(UserWarning, match=r"running eagerly: it writes to sys.__stdout__"):
        compiled = run(llgrad.compile(fn))
    assert compiled == run(fn)


def _printing_thread(x):
    t = threading.Thread(target=print, args=("from a thread",))
    t.start()
    t.join()
    return x * 2


def test_a_thread_started_inside_prints():
    # (its writes pass the tee as another thread's)
    with pytest.warns(UserWarning, match="from a thread"):
        compiled = outputs(_printing_thread, sums(VALUES[:4]), True)
    assert compiled == outputs(_printing_thread, sums(VALUES[:4]), False)


def test_os_write_to_a_descriptor():
    def run(compiled):
        r, w = os.pipe()

        def f(x):
            os.write(w, b"step\n")
            return x * 2
        try:
            _quiet(llgrad.compile(f) if compiled else f, sums(VALUES[:4]))
        finally:
            os.close(w)
        with os.fdopen(r, "rb") as pipe:
            return pipe.read()
    assert run(True) == run(False)


def test_sys_stdout_cached_in_the_users_state():
    def run(compiled):
        cache = {}

        def f(x):
            if "out" not in cache:
                cache["out"] = sys.stdout
            print(f"{x.sum():.1f}", file=cache["out"])
            return x * 2
        _quiet(llgrad.compile(f) if compiled else f, sums(VALUES[:3]))
        return type(cache["out"]).__name__
    assert run(True) == run(False)


def _a_char_code(x, w):
    print("before", f"{x.sum():.1f}")
    w.add_(1)
    i = x.long().sum().item()
    print(f"char {i:c}")        # (valid for 65, OverflowError for -7)
    w.mul_(2)
    return x * 2


def test_a_format_failing_for_a_later_value():
    def run(compiled):
        w = llgrad.zeros(1)
        got = outputs(_a_char_code, [(vec(v), w) for v in [65, 65, 66, -7, 70]], compiled)
        return got, w.tolist()
    assert run(True) == run(False)


# ---- classes that held ----

def _float_specs(x):
    s = x.sum()
    v = s.item()
    print(f"{v:,} {v:_} {v:%} {v:e} {v:g} {v:=+10.2f} {v:^12} {v:n} {v:#.0f}")
    print(f"{s:,.3f} {s:e} {s:%} {s:>+9.1e}", "{:_.2f}|{:<8g}".format(v, s))
    return x


def _int_specs(x):
    s = x.long().sum()
    i = s.item()
    print(f"{i:,} {i:_} {i:#x} {i:=+10} {i:^9} {i:n} {i:b} {i:%} {i:e} {s:#o}")
    return x


_FLOATS = [1.5, 1.5, 1234567.25, -0.0, float("nan"), float("inf"), -1e30, 3e-8]


@pytest.mark.parametrize("fn, values", [(_float_specs, _FLOATS),
                                        (_int_specs, [65, 65, 66, 1000000, -7, 12345678])],
                         ids=["float", "int"])
def test_format_specs_on_unusual_numbers(fn, values):
    calls = [(vec(v),) for v in values]
    assert _traces(fn, calls) == 1
    # (texts compared: a NaN in the results is unequal to itself)
    assert outputs(fn, calls, True)[:2] == outputs(fn, calls, False)[:2]


def test_ints_past_two_to_the_53():
    def f(x):
        i = x.sum().item()
        print(f"{i} {i:,} {i * 3} {i + 1} {i // 7} {i % 7} {-i // 2}")
        return x
    same_as_eager(f, [(llgrad.tensor([v]),) for v in
                      [2**53 + 1, 2**53 + 1, 2**62 + 3, -(2**61) - 5, 7, -9]])


def test_number_arithmetic_before_the_print():
    def f(x):
        v, i = x.sum().item(), x.long().sum().item()
        print(f"{v * 0.1!r} {v / 3!r} {v - 0.1!r} {v ** 0.5!r}", -v, abs(v), v // 0.3)
        print(i / 3, i // 3, i % 3, -i // 2, i ** 2, i * 0.1)
        return x
    same_as_eager(f, [(vec(v),) for v in [1.0, 1.0, 2.0, 3.3, -7.7, 1e20]])


def test_bool_stand_ins():
    def f(x):
        b = (x.sum() > 2).item()
        print(f"{b} {b:d} {b:>5} {b + 1} {b * 2.5}", b, (x > 1).any())
        return x
    calls = [(vec(v),) for v in [1, 1, 3, 5, 0]]
    assert _traces(f, calls) <= 2
    same_as_eager(f, calls)


def test_float16_and_float64_zero_d():
    def f(x):
        h, d = x.half().sum(), x.double().sum() / 3
        print(f"{h} {h:.5f} {h:e}", h, x.half()[0], f"{h.item()!r}")
        print(f"{d} {d:.17g}", d, d.item())
        return x
    calls = [(vec(v, v / 3),) for v in [1.1, 1.1, 2.7, 1000.3, 65504.0, 1e-4]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (float16 runs on the interpreter: a warning)
        assert _traces(f, calls) == 1
        same_as_eager(f, calls)


def test_negative_zero():
    def f(x):
        s = x.sum()
        print(f"{s:.1f}", s, s.item(), f"{(x * -1).sum():+.0f}", x.max())
        return s
    calls = [(vec(v),) for v in [-0.0, -0.0, 0.0, -0.0, 1.0, -0.0]]
    assert _traces(f, calls) == 1
    same_as_eager(f, calls)


def test_a_template_chosen_at_run_time():
    def f(x, fine):
        template = "{:.3f}" if fine else "{:.1f}"
        print(template.format(x.sum().item()), ("{}|" * 2).format(x[0], x[1]))
        return x
    same_as_eager(f, [(vec(v, v / 3), v % 2 == 0) for v in VALUES])


_TERMINAL = sys.stdout


def test_a_stream_read_at_import_runs_eagerly(monkeypatch):
    # (a stream object held by a global is walked: such a call runs eagerly)
    def f(x):
        print(f"loss {x.sum():.1f}", file=_TERMINAL)
        return x * 2

    def run(fn):
        out = io.StringIO()
        monkeypatch.setattr(sys.modules[__name__], "_TERMINAL", out)
        _quiet(fn, sums(VALUES[:5]))
        return out.getvalue()
    assert run(llgrad.compile(f)) == run(f)


def _print_rows(r):
    print("row", r)
    return r * 2


def test_a_batched_tensor_printed_inside_vmap():
    # (diverged: the repr showed the vmap level's id, new at each call, where torch shows
    # its depth; a compiled call replayed the traced call's id)
    import llgrad.func as F
    torch = pytest.importorskip("torch")

    def f(x):
        return F.vmap(_print_rows)(x)
    calls = [(vec(v, v + 1).reshape(2, 1),) for v in VALUES[:4]]
    text = same_as_eager(f, calls)[0]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        torch.func.vmap(_print_rows)(torch.tensor([[0.0], [1.0]]))
    assert text.split("row ")[1] == out.getvalue().split("row ")[1]


def _named_by_thread(x):
    print(f"{threading.current_thread().name} {x.sum():.1f}")
    return x * 2


def test_the_calling_threads_name_printed():
    # (diverged: the name is no value of the graph and nothing guarded it, so calls from a
    # second thread printed the first thread's name; now such a call runs eagerly)
    def run(fn):
        out = io.StringIO()

        def worker():
            for v in range(3):
                fn(vec(v))
        with contextlib.redirect_stdout(out):
            for k in range(2):
                t = threading.Thread(target=worker, name=f"worker{k}")
                t.start()
                t.join()
        return out.getvalue()
    with pytest.warns(UserWarning, match="current_thread"):
        compiled = run(llgrad.compile(_named_by_thread))
    assert compiled == run(_named_by_thread)


def test_the_process_id_printed():
    # (diverged: a forked worker's compiled calls printed the parent's pid)
    def f(x):
        print(f"pid {os.getpid()} {x.sum():.1f}")
        return x * 2
    with pytest.warns(UserWarning, match="os.getpid"):
        compiled = outputs(f, sums(VALUES[:3]), True)
    assert compiled == outputs(f, sums(VALUES[:3]), False)
