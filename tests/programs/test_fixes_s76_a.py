"""Fixes found by the s76 (a) official-tutorial programs (test_tutorials_official_s76_a*.py),
each checked against torch."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def _greedy_next(lib, probs):
    """The chatbot tutorial's decoding without teacher forcing: the next input batch is
    `torch.LongTensor([[topi[i][0] for i in range(batch_size)]])`."""
    _, topi = probs.topk(1)
    return lib.LongTensor([[topi[i][0] for i in range(probs.shape[0])]]) * 2


def test_legacy_constructor_of_traced_tensors_compiles():
    """LongTensor(...) of a list of a traced step's 0-d tensors went through np.asarray,
    which read the values out of the trace: the whole step ran eagerly with a warning."""
    probs = [[0.1, 0.7, 0.2], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]
    want = _greedy_next(torch, torch.tensor(probs)).numpy()
    # (the trace is the subject: the reference interpreter spares an LLVM build)
    cf = llgrad.compile(lambda p: _greedy_next(llgrad, p), backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for scale in (1.0, 2.0):
            got = cf(llgrad.tensor(probs) * scale)
            np.testing.assert_array_equal(got.numpy(), want)
            assert got.dtype == llgrad.int64
    assert cf.entries and not cf.graph_breaks, cf.graph_breaks


def test_legacy_constructors_of_data_as_torch():
    """BoolTensor([0.5, 0]) is [True, False] (the float data was truncated first, as for
    LongTensor); a list mixing tensors and numbers is taken as torch.tensor takes it."""
    for name, data in (("BoolTensor", [0.5, 0.0, -0.25]), ("LongTensor", [1.7, -1.7]),
                       ("FloatTensor", [2, 3]), ("ByteTensor", [3.9, 0.2])):
        want = getattr(torch, name)(data)
        got = getattr(llgrad, name)(data)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
    want = torch.LongTensor([[torch.tensor(3), 4], [5, torch.tensor(-6)]])
    got = llgrad.LongTensor([[llgrad.tensor(3), 4], [5, llgrad.tensor(-6)]])
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]


def test_explain_has_torchs_break_reasons_and_op_count():
    """torch._dynamo.explain(fn)(*args).break_reasons (each with .reason) and .op_count, as
    the torch.compile troubleshooting docs read them, were missing (AttributeError)."""
    def bar(a, b):
        x = a / (llgrad.abs(a) + 1)
        n = a.numpy()                   # (reads the values out of the graph: a break)
        return x * b + float(n[0])

    a, b = llgrad.tensor([1.0, -2.0]), llgrad.tensor([3.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = llgrad._dynamo.explain(bar)(a, b)
    assert e.graph_break_count == len(e.break_reasons) >= 1
    assert "reads a traced tensor's values out of the graph" in e.break_reasons[0].reason
    assert e.break_reasons[0].graph_break is True

    def foo(x):
        return llgrad.sin(x) + llgrad.cos(x)

    e = llgrad._dynamo.explain(llgrad.compile(foo, backend="interpret"))(a)
    assert (e.graph_count, e.graph_break_count, e.break_reasons) == (1, 0, [])
    assert e.op_count == sum(e.ops_per_graph.values()) >= 3
