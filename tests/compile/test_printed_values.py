"""Values printed inside a compiled function (`print(loss)`, `print(f"step {i}: loss
{loss.item():.4f}")`, `print("acc", acc)`): each compiled call prints its own, formatted as
eager formats them (runtime/rendered_text.py), with no trace per value; where the text is
kept, inspected or written elsewhere than where it was made, the value is read as before
(a value guard, or eager), and every program prints and computes what eager does."""
import io
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


def _setup():
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
    return model, opt, llgrad.randn(64, 4), llgrad.randint(0, 3, (64,))


def _run(body, calls=12, compiled=True, state=None):
    """(what the program printed, its parameters, the compiled function) for `calls` steps of
    a training step that ends in body(i, loss, model, x, y, state)."""
    model, opt, x, y = _setup()
    state = {} if state is None else state

    def step(x, y, i):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        body(i, loss, model, x, y, state)
        return loss

    f = llgrad.compile(step) if compiled else step
    out = io.StringIO()
    import contextlib
    with contextlib.redirect_stdout(out):
        for i in range(calls):
            f(x, y, i)
    return out.getvalue(), [p.detach().numpy().copy() for p in model.parameters()], f, state


def _same_as_eager(body, max_traces=None, calls=12, quiet=True):
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("error")
        text, params, f, state = _run(body, calls)
    e_text, e_params, _, e_state = _run(body, calls, compiled=False)
    assert text == e_text
    assert all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(params, e_params))
    assert state == e_state
    if max_traces is not None:
        assert f.n_traces <= max_traces
    return text, f


def test_an_f_string_of_the_step_and_the_loss_each_call():
    def body(i, loss, model, x, y, state):
        print(f"step {i}: loss {loss.item():.4f}")
    text, f = _same_as_eager(body, max_traces=3)
    assert text.count("\n") == 12 and "step 11: loss" in text


def test_printed_every_tenth_step():
    def body(i, loss, model, x, y, state):
        if i % 5 == 0:
            print(f"[{i:>3}] loss={loss.item():.6f}")
    _same_as_eager(body, max_traces=4)


def test_a_tensor_printed_as_its_repr():
    def body(i, loss, model, x, y, state):
        print("loss", loss)
        print(model[0].bias[:3])
    text, f = _same_as_eager(body, max_traces=2)
    assert "grad_fn=<NllLossBackward0>" in text


def test_a_zero_d_tensor_formatted_with_a_spec_and_a_format_call():
    def body(i, loss, model, x, y, state):
        acc = (model(x).argmax(1) == y).float().mean()
        print(f"acc {acc:.3f} | {loss:.5f}", "{:.2e}".format(loss.item()), end=";\n")
    _same_as_eager(body, max_traces=2)


def test_several_arguments_and_sep():
    def body(i, loss, model, x, y, state):
        # (a loss printed to all its digits would show compiled code's last-bit rounding)
        print(f"{loss.item():.3f}", f"{loss.item() * 2:.3f}", i, sep=" | ")
    _same_as_eager(body, max_traces=3)


def test_texts_that_hold_one_another():
    # (the step number's text also appears inside the loss's: the f-string's own constant
    # stretches tell which is which)
    def body(i, loss, model, x, y, state):
        print(f"{i}{i}:{loss.item():.1f}1")
    _same_as_eager(body, max_traces=3)


def test_a_value_printed_before_the_tensor_changes_in_place():
    def body(i, loss, model, x, y, state):
        w = model[2].bias
        print(w)
        with llgrad.no_grad():
            w.add_(1.0)
        print(w)
    _same_as_eager(body, max_traces=2)


def test_text_kept_in_the_state_is_the_calls_own():
    def body(i, loss, model, x, y, state):
        line = f"{loss.item():.4f}"
        print(line)
        state.setdefault("log", []).append(line)
    _same_as_eager(body, quiet=False)


def test_text_inspected_is_the_calls_own():
    def body(i, loss, model, x, y, state):
        text = f"{loss.item():.2f}"
        if text.endswith("1"):
            print("ends in 1:", text)
        print(f"{loss.item():.2f}".rjust(8), len(f"{loss}"))
    _same_as_eager(body, quiet=False)


def test_text_made_in_a_helper_function():
    def log(msg):
        print("log:", msg)

    def body(i, loss, model, x, y, state):
        log(f"{loss.item():.4f}")
        log(str(loss))
    _same_as_eager(body, quiet=False)


def test_text_to_stderr_and_a_width_spec_of_the_text(capsys):
    import sys

    def body(i, loss, model, x, y, state):
        s = f"{loss.item():.3f}"
        print(f"{s:>9}", file=sys.stderr)
        sys.stderr.write(f"loss {loss.item():.3f}\n")
    text, params, f, _ = _run(body, 6)
    compiled_err = capsys.readouterr().err
    _run(body, 6, compiled=False)
    assert compiled_err == capsys.readouterr().err


@pytest.mark.parametrize("sync", [True, False])
def test_before_and_after_the_native_code_is_ready(monkeypatch, sync):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync" if sync else "background")

    def body(i, loss, model, x, y, state):
        print(f"step {i}: {loss.item():.5f}", loss)
    _same_as_eager(body, max_traces=3, calls=20)


def test_a_print_in_a_run_traced_again_is_given_once(capsys):
    # (a dynamic number in a run that changes the state: the call runs again, and only
    # that run's output is given; the traced run's printed twice before)
    log = []

    def step(x, i):
        print("hello", i)
        log.append(i * 2)
        return x * 2
    f = llgrad.compile(step)
    for i in range(4):
        f(llgrad.ones(3), i)
    assert capsys.readouterr().out == "hello 0\nhello 1\nhello 2\nhello 3\n"
    assert log == [0, 2, 4, 6]


def test_text_printed_and_kept_by_a_helper_is_the_calls_own():
    def keep(s, state):
        state["last"] = s
        return s

    def body(i, loss, model, x, y, state):
        print(keep(f"{loss.item():.4f}", state))
    _same_as_eager(body, quiet=False)


def test_text_printed_and_returned_is_the_calls_own(capsys):
    def echo(s):
        return s

    def step(x):
        y = (x * 2).sum()
        print(echo(f"{y:.2f}"))
        return y, echo(f"{y.item():.1f}")

    f = llgrad.compile(step)
    outs = [f(llgrad.full((3,), float(v)))[1] for v in range(5)]
    assert outs == [f"{6.0 * v:.1f}" for v in range(5)]
    assert capsys.readouterr().out == "".join(f"{6.0 * v:.2f}\n" for v in range(5))


def test_returned_formatted_text_is_each_calls():
    def f(x):
        loss = (x * 2).sum()
        return f"{loss:.3f}", {"loss": format(loss.item(), ".2f")}, loss

    compiled = llgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for v in range(5):
            text, d, loss = compiled(llgrad.full((3,), float(v)))
            assert (text, d) == (f"{6.0 * v:.3f}", {"loss": f"{6.0 * v:.2f}"})
    assert compiled.n_traces <= 2


def test_state_changed_between_calls_is_printed_as_eager_prints_it():
    # (the lr halved and a bias written in place outside the step, between calls: each
    # compiled call prints the values of its own call)
    def run(compiled):
        llgrad.manual_seed(0)
        m = nn.Linear(4, 3)
        opt = llgrad.optim.SGD(m.parameters(), lr=0.1)
        x, y = llgrad.randn(8, 4), llgrad.randint(0, 3, (8,))

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            print(f"lr {opt.param_groups[0]['lr']:.4f} loss {loss.item():.4f}", m.bias[:2])
            return loss
        f = llgrad.compile(step) if compiled else step
        out = io.StringIO()
        import contextlib
        with contextlib.redirect_stdout(out):
            for k in range(8):
                opt.param_groups[0]["lr"] *= 0.5
                if k == 4:
                    with llgrad.no_grad():
                        m.bias.add_(1.0)
                f(x, y)
        return out.getvalue(), f
    text, f = run(True)
    assert f.n_traces <= 2
    assert text == run(False)[0]
