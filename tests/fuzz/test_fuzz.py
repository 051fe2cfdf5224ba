"""Differential fuzzing: random programs over the op table (tests/fuzz/programs.py) run
eagerly and through llgrad.compile on the interpret, python and llvm backends must agree on
outputs, gradients and in-place writes to inputs (tests/fuzz/differential.py), and the
eager gradients of smooth float64 programs must pass gradcheck.

The "ci" hypothesis profile (tests/conftest.py, the default) runs a few hundred derandomized
programs; for a long run: `python -m pytest -m fuzz --hypothesis-profile=long`. A failing
case shrinks to a minimal program, printed as `Listing('''...''')`: its Python source, which
pasted into tests/fuzz/test_fuzz_regressions.py is a regression test.
"""

import pytest

pytest.importorskip("hypothesis")

from hypothesis import event, given, strategies as st  # noqa: E402

from llgrad.ir import OPS  # noqa: E402

from differential import check_program, gradcheck_program  # noqa: E402
from programs import NOT_DRAWN, covered_ops, programs  # noqa: E402

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("throwaway_kernels")]


def test_every_op_is_fuzzed():
    """Every op of the table is drawn by some recipe (or listed in NOT_DRAWN with why)."""
    # (complex-valued ops run eagerly only: tests/runtime/test_complex.py, test_fft.py)
    complex_only = {n for n, op in OPS.items() if op.complex == "only"}
    missing = set(OPS) - covered_ops() - set(NOT_DRAWN) - complex_only
    assert not missing, f"ops no fuzz recipe draws: {sorted(missing)}"
    assert covered_ops() <= set(OPS), sorted(covered_ops() - set(OPS))


# LLVM compiles a module per graph (tens of ms): about half the programs run on it
_BACKENDS = st.sampled_from([("interpret", "python", "llvm"), ("interpret", "python")])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")    # nan/inf from var of 1, mean of 0
@given(prog=programs(), backends=_BACKENDS)
def test_backends_agree(prog, backends):
    for op in prog.ops:
        event(f"op: {op}")
    event(f"backends: {', '.join(backends)}")
    check_program(prog, backends)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore:Input #")
@given(prog=programs(smooth=True))
def test_eager_gradcheck(prog):
    checked = gradcheck_program(prog)
    event("gradchecked" if checked else "nothing to gradcheck")
