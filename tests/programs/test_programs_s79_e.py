"""Training programs (s79, E: programs_s79_e*.py) that combine the loop features real code
uses (accumulation, clipping, chained schedulers, checkpoint/resume, EMA/SWA, freezing,
tying, parameter groups, DataLoader samplers, early stopping, metrics), each run with torch,
with llgrad eagerly and with its training step compiled: the same losses, parameters and
records, each compiled step with native code and no fallback (two strict xfails: bfloat16
autocast and ReduceLROnPlateau stepped with the loss tensor inside the compiled step)."""
import pytest

torch = pytest.importorskip("torch")

import programs_s79_e  # noqa: E402
import programs_s79_e_b  # noqa: E402
import programs_s79_e_c  # noqa: E402
import programs_s79_e_d  # noqa: E402
import programs_s79_e_e  # noqa: E402
from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch]

PROGRAMS = {**programs_s79_e.PROGRAMS, **programs_s79_e_b.PROGRAMS,
            **programs_s79_e_c.PROGRAMS, **programs_s79_e_d.PROGRAMS,
            **programs_s79_e_e.PROGRAMS}
# (gaps of the compiled step, each running eagerly with a warning)
PROGRAMS["autocast_bf16"] = pytest.param(
    programs_s79_e_b.autocast_bf16, marks=pytest.mark.xfail(
        strict=True, reason="compiled code has no bfloat16 values: the step runs eagerly"))
PROGRAMS["plateau_in_step"] = pytest.param(
    programs_s79_e_e.plateau_in_step, marks=pytest.mark.xfail(
        strict=False, reason="ReduceLROnPlateau.step(loss) inside the step reads the loss "
                             "into Python control flow: a value guard per call, then (4 "
                             "traces) eager with a warning, as torch.compile breaks there "
                             "(it passes under LLGRAD_COMPILE=background when the calls "
                             "during builds run eagerly before the value guards fail)"))
FAST = {"plateau_early_stop", "weighted_sampler"}


@pytest.mark.parametrize("name, program",
                         program_params(PROGRAMS, slow=set(PROGRAMS) - FAST))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
