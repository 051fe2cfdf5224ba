"""Time to the first results: seconds from the first training step of the char-transformer
example to its fifth loss, eager, compiled with background builds (the default) and
compiled with LLGRAD_COMPILE=sync, each in a fresh process (cold kernel cache, then warm:
eager builds native kernels for its ops too, so it has a warm row of its own).

    python bench/first_steps.py [--steps 5] [--repeat 3]
    python bench/first_steps.py --warm [--repeat 5] [--llgrad PATH]   # first_steps_warm.py

One thread (LLGRAD_NUM_THREADS=1); medians of --repeat runs."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
EXAMPLE = os.path.join(ROOT, "examples", "char_transformer.py")


def _seconds_to(step, mode, cache, compile_mode="background"):
    env = dict(os.environ, LLGRAD_NUM_THREADS="1", LLGRAD_CACHE_DIR=cache, LLGRAD_QUIET="1",
               LLGRAD_COMPILE=compile_mode, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, EXAMPLE, "--steps", str(step), "--sample-len", "1",
                          mode], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{out.stderr}")
    m = re.search(rf"step\s+{step}\s+loss\s+(\S+)\s+\((\S+) s\)", out.stdout)
    if m is None:
        raise SystemExit(f"no step {step} line in:\n{out.stdout}")
    return float(m.group(2)), float(m.group(1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warm", action="store_true",
                   help="a warm process's time to its first native result, with its parts")
    p.add_argument("--llgrad", default=None, help="(--warm) the llgrad tree to measure")
    args = p.parse_args(argv)
    if args.warm:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import first_steps_warm
        return first_steps_warm.warm(args.repeat, args.llgrad)
    rows = {}
    for name, mode, cmode, warm in (("eager", "--eager", "sync", False),
                                    ("eager, warm", "--eager", "sync", True),
                                    ("compiled, background builds, cold", "--compile",
                                     "background", False),
                                    ("compiled, sync builds, cold", "--compile", "sync", False),
                                    ("compiled, background builds, warm", "--compile",
                                     "background", True),
                                    ("compiled, sync builds, warm", "--compile", "sync", True)):
        times = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as cache:
                if warm:
                    _seconds_to(args.steps, mode, cache, "sync")
                times.append(_seconds_to(args.steps, mode, cache, cmode))
        rows[name] = (statistics.median(t for t, _ in times), times[0][1])
    base = {False: rows["eager"][0], True: rows["eager, warm"][0]}
    print(f"char-transformer example: seconds from the first step to the result of step "
          f"{args.steps} (median of {args.repeat}, 1 thread; python bytecode "
          f"{'not ' if os.environ.get('PYTHONDONTWRITEBYTECODE') else ''}cached)")
    print("  (warm: the kernel cache filled by a run before, which eager's native kernels use "
          "too; each row's ratio is to eager with the same cache)")
    for name, (t, loss) in rows.items():
        print(f"  {name:<36} {t:6.2f} s  {t / base['warm' in name]:5.2f}x eager   "
              f"(loss {loss})")


if __name__ == "__main__":
    main()
