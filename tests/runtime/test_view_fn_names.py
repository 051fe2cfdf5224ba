"""The grad_fn name in PyTorch's error for writing an output of a multi-view function in
place: "Backward" dropped, and the overload number only where it is 0 (Split, Squeeze1)."""
import pytest

import llgrad
from llgrad.runtime.inplace import view_fn_name

CASES = {
    "split": lambda a: a.split(1, 0)[1].mul_(2),
    "unbind": lambda a: a.unbind(0)[1].mul_(2),
    "chunk_squeeze": lambda a: a.chunk(2, 0)[1].squeeze(0).mul_(2),
    "unbind_unsqueeze": lambda a: a.unbind(0)[0].unsqueeze(0).mul_(2),
    "split_t": lambda a: a.split(1, 0)[0].t().mul_(2),
}


def _message(lib, case):
    a = lib.ones(2, 3, requires_grad=True) * 1
    with pytest.raises(RuntimeError) as e:
        CASES[case](a)
    return str(e.value)


@pytest.mark.parametrize("case", sorted(CASES))
def test_names_as_torch(case):
    torch = pytest.importorskip("torch")
    assert _message(llgrad, case) == _message(torch, case)


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_calls_name_as_eager(case):
    def make(a):
        return a.split(1, 0) if case.startswith(("split", "chunk")) else a.unbind(0)
    f = llgrad.compile(make)
    a = llgrad.ones(2, 3, requires_grad=True) * 1
    outs = f(a)
    rest = {"split": lambda o: o[1].mul_(2), "unbind": lambda o: o[1].mul_(2),
            "chunk_squeeze": lambda o: o[1].squeeze(0).mul_(2),
            "unbind_unsqueeze": lambda o: o[0].unsqueeze(0).mul_(2),
            "split_t": lambda o: o[0].t().mul_(2)}[case]
    with pytest.raises(RuntimeError) as e:
        rest(outs)
    assert str(e.value) == _message(llgrad, case)


def test_rule():
    assert [view_fn_name(n) for n in ("SplitBackward0", "SqueezeBackward1", "TBackward0",
                                      "UnbindBackward0", "Other")] == \
        ["Split", "Squeeze1", "T", "Unbind", "Other"]
