"""Sweep 22 (H2, B): the official recipes "Skipping Module Parameter Initialization", the
load_state_dict / state_dict hooks, "Reducing torch.compile cold start with regional
compilation" and the compiled-optimizer recipes (with an LR scheduler), run with PyTorch,
with llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_b as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "skip_init_meta": a.skip_init_meta,
    "state_dict_hooks": a.state_dict_hooks,
    "regional_compilation": a.regional_compilation,
    "compiled_optimizer": a.compiled_optimizer,
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
