"""What a worker script reports for each check: "rank R OK name" or "rank R FAIL name: why",
on stdout and, when MPI_TEST_OUT is set, appended to the file MPI_TEST_OUT.R (the launcher
interleaves the ranks' stdout, so conftest.checks reads the files)."""
import os
import sys

import numpy as np


def _rank():
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def say(line):
    line = f"rank {_rank()} {line}"
    print(line, flush=True)
    out = os.environ.get("MPI_TEST_OUT")
    if out:
        with open(f"{out}.{_rank()}", "a") as f:
            f.write(line + "\n")


def check(name, cond, detail=""):
    say(f"{'OK' if cond else 'FAIL'} {name}" + ("" if cond else f": {detail}"))


def close(name, a, b, tol=0.0):
    a, b = np.asarray(a), np.asarray(b)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    check(name, a.shape == b.shape and err <= tol, f"max |diff| {err:g} > {tol:g} "
          f"(shapes {a.shape} {b.shape})")


sys.stdout.reconfigure(line_buffering=True)
