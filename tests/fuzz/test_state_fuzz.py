"""State fuzzing: random scenarios (tests/fuzz/state_programs.py and state_events.py) -- a
world of tensors, a model, an optimiser and scheduler, a plain object, globals, NumPy buffers
and hooks, with one to three functions over it and 4-12 events of calls and state changes --
run eagerly and through llgrad.compile must leave the same observable world after every event
(tests/fuzz/state_differential.py): results, exceptions, parameters and buffers, .grad,
optimiser state, inputs and NumPy buffers, attributes, hook counts, the generator state.

Scenario k is generate(k): seeds 0-399 run in every `python -m pytest` (~16 s on 2 cores;
three in four on the interpret backend, one in four on llvm, where each new trace costs an
LLVM compile).
The long run, `python -m pytest -m fuzz --hypothesis-profile=long` (the profile of
tests/conftest.py that tests/fuzz/test_fuzz.py's long run uses), runs 10,000 seeds; or set
LLGRAD_STATE_FUZZ_SCENARIOS=n (and LLGRAD_STATE_FUZZ_START=first seed). A failure prints the
scenario as Python (world and events, the mismatching event flagged) and the diffs; replay
and shrink one with `python tests/fuzz/state_differential.py SEED --shrink --script`
(LLGRAD_STATE_FUZZ_SHRINK=1 shrinks in the test run too)."""
import os

import pytest

pytest.importorskip("hypothesis")

from hypothesis import settings  # noqa: E402

from state_differential import backend_for, check_scenario  # noqa: E402

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("throwaway_kernels")]

CI_SCENARIOS, LONG_SCENARIOS = 400, 10_000


def _scenarios():
    """The seeds to run: 200, or 10,000 under a long hypothesis profile (more examples than
    the default "ci" profile's 200), or what LLGRAD_STATE_FUZZ_SCENARIOS says."""
    n = os.environ.get("LLGRAD_STATE_FUZZ_SCENARIOS")
    if n:
        n = int(n)
    else:
        n = LONG_SCENARIOS if settings().max_examples > CI_SCENARIOS else CI_SCENARIOS
    start = int(os.environ.get("LLGRAD_STATE_FUZZ_START", "0"))
    return range(start, start + n)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
# (the default run: the first 200 scenarios; the slow run all of them, for the suite's time)
@pytest.mark.parametrize("seed", [s if s < 200 else pytest.param(s, marks=pytest.mark.slow)
                                  for s in _scenarios()], ids=lambda s: f"{backend_for(s)}-{s}")
def test_compiled_world_matches_eager(seed):
    check_scenario(seed, backend_for(seed),
                   shrink_it=bool(os.environ.get("LLGRAD_STATE_FUZZ_SHRINK")))
