"""Who uses the CPUs of llgrad's process (issue 20), in figures a busy machine does not
spoil: llgrad compiled on the real models (real_model_defs.py) at 1 and 2 threads, blocks
interleaved, and per call the wall time and each thread's on-CPU time from
/proc/self/task/*/schedstat (nanoseconds: the time the thread ran, not the time it waited
for a CPU), split by owner: the main thread, NumPy's OpenBLAS threads (those that exist
right after `import numpy`), torch's, and llgrad's (its pool workers and CPU sampler,
started later); `queue` is the main thread's wait for a CPU (other processes' load).

    python bench/thread_cpu.py [--workloads block,cnn] [--blocks 9] [--no-spin]

On a quiet machine wall = main; on a shared one the main thread's on-CPU time still
approximates the 2-thread call's critical path. --no-spin builds the pool with no spinning
(pool.SPINS = 0: waiting threads sleep at once), so the workers' CPU time is the work they
took over, not the waiting: llgrad's CPU at 2 threads less that at 1 is then the cost of
splitting, and main at 2 threads over main at 1 the most 2 threads can gain. Run with
LLGRAD_CPU_WATCH=0 on a busy machine (else the pool, rightly, runs nothing on a second
thread while other processes hold the CPUs)."""
import argparse
import os
import statistics
import sys
import time

import numpy  # noqa: F401 (first: OpenBLAS's threads start here)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def sched():
    """{tid: (ns on a CPU, ns waiting for one)} of this process's threads."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run, wait, _ = f.read().split()
            out[int(tid)] = (int(run), int(wait))
        except (OSError, ValueError):
            pass
    return out


BLAS_TIDS = set(sched())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="block,cnn")
    p.add_argument("--blocks", type=int, default=9)
    p.add_argument("--block-seconds", type=float, default=0.3)
    p.add_argument("--step", action="store_true", help="a whole AdamW training step")
    p.add_argument("--no-spin", action="store_true", help="build the pool without spinning")
    args = p.parse_args(argv)
    import torch
    torch.set_num_interop_threads(1)
    torch_tids = set(sched()) - BLAS_TIDS
    import real_model_defs as defs
    if args.no_spin:
        from llgrad.codegen.lowerings import pool
        pool.SPINS = 0
    me = os.getpid()

    def owner(tid):
        return ("main" if tid == me else "openblas" if tid in BLAS_TIDS else
                "torch" if tid in torch_tids else "llgrad")

    print(f"# ms per call (median of {args.blocks} interleaved blocks); threads' on-CPU time "
          f"per call{' (pool built without spinning)' if args.no_spin else ''}")
    print("| workload | threads | wall | main | llgrad threads | openblas | torch | queue |")
    print("|---|---|---|---|---|---|---|---|")
    for key in args.workloads.split(","):
        state, _ = defs.torch_state(key)
        runners = []
        for t in (1, 2):
            defs.set_threads(t)
            r = defs.build_lib("llgrad compiled", key, state, defs.data(key), args.step)
            r.threads = t
            for _ in range(5):
                r.step()
            t0 = time.perf_counter()
            r.step()
            r.n = max(1, int(args.block_seconds / (time.perf_counter() - t0)))
            runners.append(r)
        acc = {r.threads: [] for r in runners}
        for b in range(args.blocks):
            for r in runners[b % 2:] + runners[:b % 2]:
                s0 = sched()
                wall, _ = r.block(r.n)
                s1 = sched()
                row = {"wall": wall, "queue": (s1[me][1] - s0[me][1]) / 1e9}
                for tid, (run, _) in s1.items():
                    k = owner(tid)
                    row[k] = row.get(k, 0) + (run - s0.get(tid, (0, 0))[0]) / 1e9
                acc[r.threads].append({k: v / r.n * 1e3 for k, v in row.items()})
        for t, rows in acc.items():
            med = {k: statistics.median(x.get(k, 0.0) for x in rows)
                   for k in ("wall", "main", "llgrad", "openblas", "torch", "queue")}
            print(f"| {key} | {t} | " + " | ".join(f"{med[k]:.2f}" for k in
                  ("wall", "main", "llgrad", "openblas", "torch", "queue")) + " |")


if __name__ == "__main__":
    main()
