"""Adversarial programs for values printed inside compiled functions, round 5 (sweep 25, H1):
each compiled program must print, warn, return and trace as the same function run eagerly
over calls whose values change. Diverged when written, now equal eager: a value's text
(`s = f"{loss:.2f}"`, `str(loss.item())`) that went out other than at its place (printed
as a variable, through a walrus, as a separator, inside another f-string, in a warning) or
was copied (`",".join`, `f"<{s}>"`) and was also returned: the return made each call's
text of it, while the write, the warning or the copy kept the traced call's
(runtime/rendered_text.py: such a piece is given up); an input's grad_fn (made by the
caller, not guarded) named in its repr (such a call runs eagerly); a forward hook's print
given twice by a step traced again for its parameters' hooks (compile/replayed_output.py:
that retry is compile's, not the function's error); type() of a value's text (a str
subclass in the traced run: code naming type gets plain texts). Strict xfail: a write that
raises after the kernels wrote. The other tests are classes that held."""
import contextlib
import io
import warnings

import pytest

import llgrad

# (sync_builds: an autouse fixture, the native code built before the second call)
from printed_values_harness_sweep24 import (VALUES, outputs, same_as_eager, sums,  # noqa: F401
                                            sync_builds, traces as _traces, vec)



# ---- divergences found: a returned text whose text also went out or was copied ----

def _printed_variable(x):
    s = f"{x.sum():.2f}"
    print(s)
    return x, s


def _walrus(x):
    print(s := f"{x.sum():.2f}")
    return s


def _inside_another_write(x):
    s = f"{x.sum():.2f}"
    print(f"{s} {x.mean():.1f}")
    return x, s


def _as_separator(x):
    s = f"{x.sum():.2f}"
    print("a", "b", sep=s)
    return x, s


def _str_of_the_number(x):
    s = str(x.sum().item())
    print(s)
    return {"loss": s}


def _joined_copy(x):
    s = format(x.sum().item(), ".2f")
    return s, ",".join([s, "a"])


def _f_string_copy(x):
    s = f"{x.sum():.2f}"
    return s, f"<{s}>"


_RETURNED = [_printed_variable, _walrus, _inside_another_write, _as_separator,
             _str_of_the_number, _joined_copy, _f_string_copy]


@pytest.mark.parametrize("fn", _RETURNED, ids=[f.__name__[1:] for f in _RETURNED])
def test_a_returned_text_also_written_or_copied(fn):
    same_as_eager(fn, sums())


def _warned(x):
    s = f"{x.sum():.2f}"
    warnings.warn(s)
    return x, s


def test_a_returned_text_also_warned():
    def run(fn):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            results = outputs(fn, sums(), False)
        return [str(w.message) for w in got
                if not str(w.message).startswith("llgrad.compile(")], results
    assert run(llgrad.compile(_warned)) == run(_warned)


def _shows_input(x):
    print(x)
    return x.detach() * 2


def test_an_inputs_grad_fn_named_in_its_repr():
    # (made by the caller: AddBackward0 for one call, MulBackward0 for another, with no
    # guard on which; compiled calls named the traced call's)
    def leaf(v):
        return vec(v, 1).requires_grad_()
    calls = [(leaf(v) * 2 if v % 2 else leaf(v) + 1,) for v in VALUES]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_as_eager(_shows_input, calls)


def test_a_forward_hook_and_leaf_hooks_printing_in_a_compiled_step():
    # (diverged: the step's backward reached the parameters' hooks, which the first trace's
    # guard walk left out; that trace, traced again with them, wrote what it had printed,
    # the forward hook's line, as if the function had raised: twice in that call)
    def run(compiled):
        llgrad.manual_seed(0)
        m = llgrad.nn.Sequential(llgrad.nn.Linear(3, 4), llgrad.nn.ReLU(), llgrad.nn.Linear(4, 1))
        opt = llgrad.optim.SGD(m.parameters(), lr=0.1)
        m[0].register_forward_hook(lambda mod, i, o: print(f"fwd {o.sum():.3f}", o.shape))
        m[0].weight.register_hook(lambda g: print(f"g {g.norm():.3f}"))
        m[2].bias.register_post_accumulate_grad_hook(lambda p: print(f"acc {p.grad.sum():.3f}"))
        opt.register_step_post_hook(lambda o, a, k: print("stepped", f"{m[0].bias.sum():.4f}"))

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        f = llgrad.compile(step) if compiled else step
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            losses = [f(vec(v, 1, 2).reshape(1, 3)).item() for v in VALUES[:6]]
        return out.getvalue(), losses, getattr(f, "n_traces", 0)
    compiled = run(True)
    assert compiled[2] <= 2
    eager = run(False)
    assert compiled[0] == eager[0]
    assert compiled[1] == pytest.approx(eager[1], rel=1e-5)


# ---- divergences left (strict xfails: the fix is outside this round's files) ----

def _type_of_the_text(x):
    s = f"{x.sum():.1f}"
    print(type(s).__name__, type(s) is str)
    return x, {str: "text"}.get(type(s), "other")


def test_the_type_of_a_values_text():
    # (type(s) was RenderedText in every traced run: code naming `type` now gets plain texts,
    # the values read as before, as its .item() numbers are: symbolic_slots.standing_in)
    same_as_eager(_type_of_the_text, sums())


class _Pipe:
    """A stream whose write raises for a text holding '9' (a reader that went away)."""

    def __init__(self):
        self.text = []

    def write(self, s):
        if "9" in s:
            raise BrokenPipeError("the reader went away")
        self.text.append(s)
        return len(s)

    def flush(self):
        pass


def _print_then_write(x, w):
    print(f"{x.sum():.1f}")
    w.add_(1)
    return x * 2


@pytest.mark.xfail(strict=True, reason="compiled calls write their texts after the kernels "
                   "(compile/run.py _replaying: the texts are outputs of the graph), so a "
                   "write that raises leaves the input written that eager's print left as it was")
def test_a_write_that_raises_leaves_the_state_as_eager(monkeypatch):
    def run(fn):
        w, pipe, got = llgrad.zeros(1), _Pipe(), []
        monkeypatch.setattr("sys.stdout", pipe)
        for v in [1, 1, 2, 9, 3]:
            try:
                got.append(fn(vec(v), w).tolist())
            except BrokenPipeError:
                got.append("BrokenPipeError")
        monkeypatch.undo()
        return got, w.tolist(), pipe.text
    assert run(llgrad.compile(_print_then_write)) == run(_print_then_write)


# ---- classes that held ----

def test_returned_texts_of_their_own_still_trace_once():
    def f(x):
        s = f"{x.sum():.2f}"
        print(f"loss {x.sum():.3f}")
        return s, str(x.mean().item())
    assert _traces(f, sums()) == 1
    same_as_eager(f, sums())


def test_constant_separators_and_texts_holding_a_values_text_trace_once():
    # (a constant sep or end is known text: a value's text inside it is no copy of it)
    def f(x, tag):
        print(f"{x[0]:.0f}", f"{x[1]:.0f}", sep="1", end="1\n")
        print(tag, f"{x[0]:.0f}", sep=None, end=None)
        return x
    calls = [(vec(v, 1), "gpu 0 1 2 3 10 12 100") for v in VALUES]
    assert _traces(f, calls) == 1
    same_as_eager(f, calls)


def _walrus_number(x):
    print(f"{(v := x.sum().item()):.3f}", f"{x[0]:{6}.{2}f}|")
    return x * v


def _readers_edge(x):
    print(f"{f'{x.sum():.2f}':>10}|", f"{x[0] if x.shape[0] > 1 else x[1]:.1f}")
    [print(f"c {v:.1f}") for v in x]
    print(*[f"{v:.1f}" for v in x])
    return x


def _shadowed(x):
    import builtins
    print = builtins.print      # noqa: A001 (a local print: no write site)
    print(f"{x.sum():.1f}")
    getattr(builtins, "print")(f"g {x.sum():.1f}")

    class Body:
        print(f"class body {x.sum():.1f}")    # (LOAD_NAME print)
    return x


def _numbers(x, total):
    n, b = x.long().sum().item(), (x.sum() > 2).item()
    print(f"{n:d} {n:,} {b} {n / total:.2%} {100 * n / total:.1f}% {x.sum().item() * 100:.2f}")
    print(f"{x.sum()=} {n=} {x.sum().item()=:.4f}", x.sum().reshape(1), float(x.sum()) > -1)
    return x


def _control(x, step):
    if step % 3 == 0:
        print(f"[{step}] {x.sum():.2f}")
    with llgrad.no_grad():
        print(x * 2)
    if step > 5:
        return x
    print(f"b {x.mean():.1f}")
    return x * 2


_HELD = [(_walrus_number, lambda v: (vec(v, v + 1),)),
         (_readers_edge, lambda v: (vec(v, v + 1),)),
         (_shadowed, lambda v: (vec(v),)),
         (_numbers, lambda v: (vec(v, 1), 7)),
         (_control, lambda v: (vec(v).requires_grad_(), v))]


@pytest.mark.parametrize("fn, make", _HELD, ids=[f.__name__[1:] for f, _ in _HELD])
def test_bytecode_values_and_control_that_held(fn, make):
    same_as_eager(fn, [make(v) for v in VALUES])
