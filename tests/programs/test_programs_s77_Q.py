"""Programs (s77, Q) that combine the library's APIs as PyTorch users do (programs_s77_Q*.py),
each run with torch, with llgrad eagerly and with its training step compiled: the same
losses, parameters and records, each compiled step with native code and no fallback (one
strict xfail: vector_to_parameters inside a compiled step runs eagerly)."""
import pytest

torch = pytest.importorskip("torch")

import programs_s77_Q  # noqa: E402
import programs_s77_Q_b  # noqa: E402
import programs_s77_Q_c  # noqa: E402
import programs_s77_Q_d  # noqa: E402
from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (0.1-4 s a program: the slow set)

PROGRAMS = {**programs_s77_Q.PROGRAMS, **programs_s77_Q_b.PROGRAMS, **programs_s77_Q_c.PROGRAMS,
            **programs_s77_Q_d.PROGRAMS}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
