"""Training-program fuzzing against torch: program k is generate(k) of
tests/fuzz/train_programs_sweep22.py, a small model, loss, optimiser (maybe a scheduler) and
training extras, written once against `lib`; it runs 5-8 steps with torch, with llgrad
eagerly and with its step under llgrad.compile (tests/fuzz/train_differential_sweep22.py),
and the losses, learning rates, final parameters, buffers, .grad, optimiser state and EMA
copies must agree (llgrad with torch at rtol 1e-4, compiled with eager at rtol 1e-5), with
no graph break. Seeds 0-47 run in every `python -m pytest`, one in four with the step on
llvm and the others on the IR interpreter (each new trace on llvm costs an LLVM build:
~3 s a program); seeds 48-399, marked slow, all on llvm (LLGRAD_TRAIN_FUZZ=first:count
picks others). A failure prints the program; replay it with
`python tests/fuzz/train_differential_sweep22.py SEED` (--script: a standalone script)."""
import os

import pytest

torch = pytest.importorskip("torch")

from train_differential_sweep22 import check, report  # noqa: E402

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("throwaway_kernels")]

FAST, ALL = 48, 400


def backend_for(seed):
    return "llvm" if seed >= FAST or seed % 4 == 3 else "interpret"


def _seeds():
    spec = os.environ.get("LLGRAD_TRAIN_FUZZ")
    if spec:
        first, count = (int(x) for x in spec.split(":"))
        return range(first, first + count)
    return range(ALL)


@pytest.mark.parametrize("seed", [s if s < FAST else pytest.param(s, marks=pytest.mark.slow)
                                  for s in _seeds()], ids=lambda s: f"{backend_for(s)}-{s}")
def test_training_program_matches_torch(seed):
    problems = check(seed, backend=backend_for(seed))
    assert not problems, report(seed, problems, backend_for(seed))


def test_script_form_reproduces_the_torch_run():
    """`train_differential_sweep22.py SEED --script` (what a failure's report points to)
    prints a standalone program whose torch run gives the losses the fuzzer compared."""
    import subprocess
    import sys

    from train_differential_sweep22 import run, script
    from train_programs_sweep22 import generate

    seed = 3
    done = subprocess.run([sys.executable, "-", "torch"], input=script(seed), text=True,
                          capture_output=True, check=True)
    losses = [v for k, v in sorted(run(generate(seed), "torch")[0].items())
              if k.startswith("loss[")]
    assert done.stdout.startswith(f"losses {losses}\n"), done.stdout
