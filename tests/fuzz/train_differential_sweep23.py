"""Run a training program of tests/fuzz/train_programs_sweep23.py with torch, llgrad eager and
its step under llgrad.compile, and compare as tests/fuzz/train_differential_sweep22.py does
(the same run and compare, the same tolerances), except under autocast(bfloat16): there torch
and llgrad may round a bfloat16 matmul's float32 sum differently by one unit (2**-8), so only
the losses are compared with torch, at rtol/atol 3e-2, and compiled against eager at 2e-3.
A graph break fails unless the program drew a feature in ALLOWED_BREAKS (which can't trace).

    python tests/fuzz/train_differential_sweep23.py SEED [--script] [--backend interpret]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_differential_sweep22 import COMPILED_TOL, PRELUDE, TORCH_TOL, compare, run  # noqa
from train_programs_sweep23 import generate  # noqa: E402

AUTOCAST_TOL = ((3e-2, 3e-2), (2e-3, 2e-3))
# features whose step legitimately runs eagerly, with the reason it can't trace
ALLOWED_BREAKS = {
    "autocast_bf16": "compiled code has no bfloat16 values: the step runs eagerly, warned",
    "flip_mask": "x[mask] with a drawn mask: its count of Trues is a value guard (a shape), "
                 "new each call, so after a few traces the step runs eagerly (README)",
    "ckpt_fresh_rng": "checkpoint(preserve_rng_state=False) around a dropout: its backward "
                      "draws a new mask, which one trace cannot replay",
    "ckpt_writes_buffers": "a BatchNorm inside checkpoint: backward's recomputation updates its "
                           "running stats a second time, which one trace cannot replay",
}


def check(seed, modes=("torch", "eager", "compiled"), backend=None):
    """The mismatches of seed's program ([] when torch, eager and compiled agree)."""
    prog = generate(seed)
    runs, problems = {}, []
    may_break = any(f in prog.features for f in ALLOWED_BREAKS)
    for mode in modes:
        try:
            runs[mode], broke = run(prog, mode, backend)
        except Exception as e:  # noqa: BLE001 - an error is a finding, named with its mode
            problems.append(f"{mode} raised {type(e).__name__}: {e}")
            continue
        if not may_break:
            problems += [f"{mode}: graph break: {m}" for m in broke]
    autocast = "autocast_bf16" in prog.features
    torch_tol, compiled_tol = AUTOCAST_TOL if autocast else (TORCH_TOL, COMPILED_TOL)
    if "torch" in runs and "eager" in runs:
        ref, got = runs["torch"], runs["eager"]
        if autocast:    # (the losses only: bfloat16 rounding makes a gradient of rounding
            #              noise (a bias a norm removes) ~1e-3, which Adagrad or Adam with
            #              eps=1e-3 turns into steps of lr in either direction)
            ref, got = ({k: v for k, v in d.items() if k.startswith("loss[")}
                        for d in (ref, got))
        problems += ["eager vs torch: " + d for d in compare(ref, got, *torch_tol)]
    if "eager" in runs and "compiled" in runs:
        problems += ["compiled vs eager: " + d for d in compare(
            runs["eager"], runs["compiled"], *compiled_tol, runs.get("torch"))]
    return problems


def script(seed):
    """The program as a standalone script: `python script.py torch|llgrad [compile]`."""
    head = ("import sys\nimport importlib\n\nlib = importlib.import_module(sys.argv[1] "
            "if len(sys.argv) > 1 else 'llgrad')\nCOMPILE = lib.compile if 'compile' in "
            "sys.argv else (lambda f: f)\n")
    return head + PRELUDE + generate(seed).source + "\nprint('losses', losses)\n"


def report(seed, problems, backend=None):
    prog = generate(seed)
    on = f" --backend {backend}" if backend else ""
    return (f"train program {seed} ({', '.join(sorted(prog.features))}):\n" +
            "\n".join("  " + p for p in problems[:20]) +
            f"\n--- replay: python tests/fuzz/train_differential_sweep23.py {seed}{on} "
            f"(--script > t.py; python t.py torch; python t.py llgrad compile) ---\n" +
            prog.source)


if __name__ == "__main__":
    s = int(sys.argv[1])
    if "--script" in sys.argv:
        print(script(s))
    else:
        found = check(s, backend=sys.argv[sys.argv.index("--backend") + 1]
                      if "--backend" in sys.argv else None)
        print(report(s, found) if found else f"train program {s}: torch, eager and compiled agree")
