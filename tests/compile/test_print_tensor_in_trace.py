"""Printing a traced tensor inside a compiled function shows that call's values: compiled
calls print them formatted from their own outputs (runtime/rendered_text.py, more in
test_printed_values.py); printing what no traced value holds (a shape) compiles, the text
given again by every call."""
import warnings


import llgrad


def test_printed_values_are_each_calls(capsys):
    def f(x):
        y = x * 2
        print("sum", y.sum())
        return y
    compiled = llgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for v in (1.0, 2.0, 3.0):
            compiled(llgrad.full((3,), v))
    assert capsys.readouterr().out.split("\n")[:3] == ["sum tensor(6.)", "sum tensor(12.)",
                                                      "sum tensor(18.)"]
    assert compiled.n_traces == 1


def test_printing_what_is_not_a_traced_value_compiles(capsys):
    def f(x):
        print("shape", tuple(x.shape), x.dtype)
        return x + 1
    compiled = llgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            compiled(llgrad.ones(3))
    assert capsys.readouterr().out.count("shape (3,) llgrad.float32") == 3
    assert compiled.n_traces == 1
