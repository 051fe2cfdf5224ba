"""llgrad with 1 thread beside llgrad with N threads, in one process, blocks interleaved
(the machine's noise hits both alike): the speed-up of W3 and W4 from splitting native
loops over the cores (`llgrad.set_num_threads`). Every result is checked against the
float64 NumPy reference.

    python bench/threads.py [--workloads W3,W4] [--threads 2] [--blocks 15]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # (W3/W4 have no matmul)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import llgrad  # noqa: E402
import peers  # noqa: E402
from workload_defs import WORKLOADS, max_rel_err, reference64  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="W3,W4")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--blocks", type=int, default=15)
    p.add_argument("--block-seconds", type=float, default=0.1)
    args = p.parse_args(argv)
    counts = (1, args.threads)
    print(f"# llgrad {llgrad.__version__}: median us per call (loss + all grads) over "
          f"{args.blocks} interleaved blocks of ~{args.block_seconds * 1000:.0f} ms per "
          f"thread count; speed-up = 1 thread / {args.threads} threads")
    print(f"{'workload':8}  {'system':28}  {'1 thread':>10}  {f'{args.threads} threads':>10}"
          f"  {'speed-up':>8}  check")
    bad = 0
    for key in args.workloads.split(","):
        wl = WORKLOADS[key]
        arrays = wl.data(0)
        ref = reference64(wl, arrays)
        for system in (peers.LLGRAD_LLVM, peers.LLGRAD_VG):
            r = peers.build(system, wl, arrays)
            times = {t: [] for t in counts}
            errs = []
            for t in counts:                    # warm up (and compile) at each count
                llgrad.set_num_threads(t)
                for _ in range(3):
                    loss, grads = r.fetch(r.step())
                errs.append(max_rel_err(loss, grads, ref))
            per_block = {}
            for t in counts:
                llgrad.set_num_threads(t)
                t0, n = time.perf_counter(), 0
                while time.perf_counter() - t0 < args.block_seconds:
                    r.step()
                    n += 1
                per_block[t] = n
            for _ in range(args.blocks):
                for t in counts:
                    llgrad.set_num_threads(t)
                    t0 = time.perf_counter()
                    for _ in range(per_block[t]):
                        r.step()
                    times[t].append((time.perf_counter() - t0) / per_block[t] * 1e6)
            med = {t: statistics.median(v) for t, v in times.items()}
            ok = max(errs) <= wl.rtol
            bad += not ok
            print(f"{key:8}  {system:28}  {med[1]:10,.1f}  {med[args.threads]:10,.1f}  "
                  f"{med[1] / med[args.threads]:7.2f}x  {'OK' if ok else 'FAIL'}")
    llgrad.set_num_threads(1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
