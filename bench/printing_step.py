"""A compiled training step that prints its loss every call (the tutorials' `print(f"step {i}:
loss {loss.item():.4f}")`, `print("loss", loss)`, and yunjey's `"...{:.4f}".format(...)`),
against the same step without the print and eagerly: CPU time per step and the traces each
variant took. (The printed numbers are each compiled call's own: after a few hundred Adam
steps a compiled run's loss differs from an eager run's in the 4th digit now and then, as its
parameters do by rounding; tests/compile/test_printed_values*.py check the text itself.)

    python bench/printing_step.py [--steps 500] [--blocks 5]

Each variant is a fresh model (same seed) and its own compiled function, built before timing
(LLGRAD_COMPILE=sync); blocks alternate between variants; medians of the blocks. Output of the
timed calls goes to a StringIO (the printing itself is in the time, as it is eagerly)."""
import argparse
import contextlib
import io
import os
import statistics
import sys
import time

os.environ.setdefault("LLGRAD_COMPILE", "sync")

import llgrad  # noqa: E402
import llgrad.nn as nn  # noqa: E402
import llgrad.nn.functional as F  # noqa: E402

VARIANTS = {
    "no print": None,
    "f-string of .item()": lambda i, loss: print(f"step {i}: loss {loss.item():.4f}"),
    "print(loss)": lambda i, loss: print("loss", loss),
    "str.format": lambda i, loss: print("Step [{}], Loss: {:.4f}".format(i + 1, loss.item())),
}


def make(variant, compiled):
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = llgrad.optim.Adam(model.parameters(), lr=1e-3)
    x, y = llgrad.randn(128, 20), llgrad.randint(0, 10, (128,))
    show = VARIANTS[variant]

    def step(x, y, i):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if show is not None:
            show(i, loss)
        return loss
    f = llgrad.compile(step) if compiled else step
    return f, x, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--blocks", type=int, default=5)
    opts = p.parse_args()
    llgrad.set_num_threads(1)
    runs = {(v, c): make(v, c) for v in VARIANTS for c in (True, False)}
    times, counters = {k: [] for k in runs}, {k: 0 for k in runs}
    for k, (f, x, y) in runs.items():       # (traces and builds before timing)
        with contextlib.redirect_stdout(io.StringIO()):
            for _ in range(20):
                f(x, y, counters[k])
                counters[k] += 1
    for _ in range(opts.blocks):
        for k, (f, x, y) in runs.items():
            with contextlib.redirect_stdout(io.StringIO()):
                t0 = time.process_time()
                for _ in range(opts.steps):
                    f(x, y, counters[k])
                    counters[k] += 1
                times[k].append((time.process_time() - t0) / opts.steps * 1e6)
    print(f"# CPU us per step, median of {opts.blocks} blocks of {opts.steps} (1 thread)")
    print("| step prints | eager | compiled | traces |")
    print("|---|---|---|---|")
    for v in VARIANTS:
        print(f"| {v} | {statistics.median(times[(v, False)]):.0f} | "
              f"{statistics.median(times[(v, True)]):.0f} | {runs[(v, True)][0].n_traces} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
