"""Who uses the CPUs of llgrad's process (issue 20), in figures a busy machine does not
spoil: llgrad compiled on the real models (real_model_defs.py) at 1 and 2 threads, blocks
interleaved, and per call the wall time and each thread's on-CPU time from
/proc/self/task/*/schedstat (nanoseconds: the time the thread ran, not the time it waited
for a CPU), split by owner: the main thread, NumPy's OpenBLAS threads (those that exist
right after `import numpy`), torch's, and llgrad's (its pool workers and CPU sampler,
started later); `queue` is the main thread's wait for a CPU (other processes' load).

    python bench/thread_cpu.py [--workloads block,cnn] [--blocks 9] [--no-spin]
    python bench/thread_cpu.py --kernels 15 --no-spin [--workloads cnn_bn]

--kernels N prints, per kernel group (llgrad.profile, the N costliest), its CPU time per
call at 1 thread, all threads' at 2 (`all2`: over `cpu1`, the cost of splitting) and the
caller's own at 2 (`main2`: `cpu1 / main2` is what 2 threads could gain on an idle machine,
`share` the part of the work another thread took): a kernel the threads do not divide
shows share ~0, one whose split costs more than it saves all2 well over cpu1.

On a quiet machine wall = main; on a shared one the main thread's on-CPU time still
approximates the 2-thread call's critical path. --no-spin runs the pool with no spinning
(pool_spin.set_spin_us(0): waiting threads sleep at once), so the workers' CPU time is the
work they took over, not the waiting: llgrad's CPU at 2 threads less that at 1 is then the cost of
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


def without_spin():
    """Waiting pool threads sleep at once (--no-spin). The spin is a length the pool's
    code reads at run time (pool_spin.py): an attribute set on the pool module is read by
    nothing, and the workers' column would count their ~1 ms spin after every job as work."""
    from llgrad.codegen.lowerings import pool_spin
    pool_spin.set_spin_us(0)


def kernel_split(runners, blocks, calls):
    """{kernel: {(threads, clock): [CPU us per call, one a block]}}: each runner (its
    .threads) profiled by group, `calls` calls a block, blocks interleaved, timed once by
    the process's CPU clock (all threads) and once by the caller thread's."""
    import importlib

    import llgrad
    instrument = importlib.import_module("llgrad.compile.instrument")
    clocks = {"all": time.process_time_ns, "main": time.thread_time_ns}
    out = {}
    wall = instrument.ns
    try:
        for b in range(blocks):
            for r in runners[b % 2:] + runners[:b % 2]:
                for name, clock in clocks.items():
                    r.block(1)                              # (sets its thread count)
                    instrument.ns = clock
                    with llgrad.profile(groups=True) as p:
                        for _ in range(calls):
                            r.step()
                    instrument.ns = wall
                    for row in p.kernel_rows():
                        out.setdefault(row.name, {}).setdefault(
                            (r.threads, name), []).append(row.mean_ns / 1e3)
    finally:
        instrument.ns = wall
    return out


def print_kernel_split(key, split, rows):
    med = statistics.median

    def at(k, t, c):
        return med(split[k].get((t, c), [float("nan")]))
    print(f"\n{key}: CPU us per call (median of blocks)")
    print("| kernel | cpu1 | all2 | main2 | all2/cpu1 | cpu1/main2 | share |")
    print("|---|---|---|---|---|---|---|")
    total = [0.0, 0.0, 0.0]
    names = sorted(split, key=lambda k: -at(k, 1, "all"))
    for k in names:
        a, b, c = at(k, 1, "all"), at(k, 2, "all"), at(k, 2, "main")
        total = [total[0] + a, total[1] + b, total[2] + c]
        if k in names[:rows]:
            print(f"| {k[-60:]} | {a:.1f} | {b:.1f} | {c:.1f} | {b / a:.2f} | {a / c:.2f} | "
                  f"{max(0.0, 1 - c / b):.0%} |")
    a, b, c = total
    print(f"| all kernels | {a:.1f} | {b:.1f} | {c:.1f} | {b / a:.2f} | {a / c:.2f} | "
          f"{max(0.0, 1 - c / b):.0%} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="block,cnn")
    p.add_argument("--blocks", type=int, default=9)
    p.add_argument("--block-seconds", type=float, default=0.3)
    p.add_argument("--step", action="store_true", help="a whole AdamW training step")
    p.add_argument("--no-spin", action="store_true", help="build the pool without spinning")
    p.add_argument("--kernels", type=int, default=0,
                   help="per kernel group: CPU at 1 thread and at 2 (the N costliest)")
    args = p.parse_args(argv)
    import torch
    torch.set_num_interop_threads(1)
    torch_tids = set(sched()) - BLAS_TIDS
    import real_model_defs as defs
    if args.no_spin:
        without_spin()
    me = os.getpid()

    def owner(tid):
        return ("main" if tid == me else "openblas" if tid in BLAS_TIDS else
                "torch" if tid in torch_tids else "llgrad")

    if not args.kernels:
        print(f"# ms per call (median of {args.blocks} interleaved blocks); threads' on-CPU "
              f"time per call{' (pool built without spinning)' if args.no_spin else ''}")
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
        if args.kernels:
            print_kernel_split(key, kernel_split(runners, args.blocks, 4), args.kernels)
            continue
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
