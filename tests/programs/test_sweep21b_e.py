"""Sweep 21b (E): the official "Introduction to torch.compile" tutorial and the YouTube
series' "Building models", run with PyTorch (torch.compile's eager backend), with llgrad
eagerly and with llgrad compiling their training steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21b_e as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "torch_compile_intro": a.torch_compile_intro,
    "building_models": a.building_models,
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))


def test_dynamo_explain_curried_form():
    """torch._dynamo.explain(fn)(*args), the form torch documents (explain(fn, *args) is
    deprecated there), with ExplainOutput's graph_count and graph_break_count."""
    import llgrad

    def bar(a, b):
        x = a / (llgrad.abs(a) + 1)
        return x * b

    a, b = llgrad.randn(10), llgrad.randn(10)
    e = llgrad._dynamo.explain(bar)(a, b)
    assert (e.graph_count, e.graph_break_count) == (1, 0)
    assert llgrad._dynamo.explain(bar, a, b).graph_count == 1     # (the older form)
    t = torch._dynamo.explain(lambda a, b: a * b)(torch.ones(2), torch.ones(2))
    assert (t.graph_count, t.graph_break_count) == (1, 0)
