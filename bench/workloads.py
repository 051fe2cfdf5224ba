"""Workloads W1-W6: llgrad (eager, llvm, llvm value_and_grad) beside NumPy's hand-written
forward + backward and, when installed, torch eager, torch.compile and
jax.jit(value_and_grad); every loss and gradient checked against the NumPy reference
(float64), every system pinned to the same number of threads, one table per run.

    python bench/workloads.py [--workloads W1,W3,W5] [--threads 1] [--quick] [--skip-slow]
                              [--skip-peers] [--no-mem] [--json out.json]

W1-W5 report the median microseconds per call (loss + all gradients) over interleaved
blocks, the spread (interquartile range / median of the blocks), the ratio to the best
peer (NumPy, torch, jax), the peak memory (MiB) of a step above the warmed-up steady state
(measured in a subprocess per system; W2-W4), the largest error relative to max|ref| and
OK/FAIL. W6 reports seconds from process start (a fresh `python -c`, imports included)
to the first gradient of W1, cold (empty on-disk caches: LLGRAD_CACHE_DIR,
JAX_COMPILATION_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR) and warm (a second process on the
same caches). Exits 1 if any check fails or a system raises.

--quick: few, short blocks, no memory column, one W6 run per system without
torch.compile (under a minute). --skip-slow: W6 without torch.compile (its cold start
takes tens of seconds). --skip-peers: NumPy and llgrad only.
"""
import os
import sys


def _threads(argv):
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


# every library reads these when it is imported (or when its first thread pool starts)
THREADS = _threads(sys.argv[1:])
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(THREADS)
os.environ["XLA_FLAGS"] = " ".join(filter(None, [
    os.environ.get("XLA_FLAGS"),
    f"--xla_cpu_multi_thread_eigen={'false' if THREADS == 1 else 'true'}",
    f"intra_op_parallelism_threads={THREADS}"]))
os.environ["PJRT_NPROC"] = "1"
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(THREADS))

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import measure  # noqa: E402
import peers  # noqa: E402
from workload_defs import WORKLOADS, max_rel_err, reference64  # noqa: E402

STARTUP_KEY = "W6"
ALL_KEYS = list(WORKLOADS) + [STARTUP_KEY]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Row:
    def __init__(self, workload, system, **kw):
        self.workload, self.system = workload, system
        self.time = kw.get("time")          # us (W1-W5) or s (W6)
        self.unit = kw.get("unit", "us")
        self.spread = kw.get("spread")
        self.ratio = None
        self.mem = kw.get("mem")
        self.err = kw.get("err")
        self.error = kw.get("error")        # a traceback: the system raised
        self.note = kw.get("note", "")
        self.samples = kw.get("samples", [])
        self.extra = kw.get("extra", {})
        self.rtol = kw.get("rtol", 1e-4)

    @property
    def ok(self):
        return self.error is None and self.err is not None and self.err <= self.rtol

    def as_dict(self):
        return {"workload": self.workload, "system": self.system, "time": self.time,
                "unit": self.unit, "spread": self.spread, "ratio_to_best_peer": self.ratio,
                "peak_mib": self.mem, "max_rel_err": self.err, "ok": self.ok,
                "error": self.error, "note": self.note, "samples": self.samples, **self.extra}


def set_ratios(rows, group=lambda r: r.workload, frameworks_only=False):
    """Each row's time over the best peer's (NumPy, torch, jax; with frameworks_only
    torch and jax when there are any) in its group."""
    best = {}
    for r in rows:
        system = r.system.split(" (")[0]
        if r.time is not None and not peers.is_llgrad(system):
            if frameworks_only and system == peers.NUMPY and any(
                    x.system.split(" (")[0] in peers.PEER_SYSTEMS for x in rows):
                continue
            k = group(r)
            best[k] = min(best.get(k, math.inf), r.time)
    for r in rows:
        b = best.get(group(r))
        if r.time is not None and b:
            r.ratio = r.time / b


# ---- W1-W5 -------------------------------------------------------------------------------------
def run_workload(wl, systems, opts):
    arrays = wl.data(0)
    ref = reference64(wl, arrays)
    rows, runners, per_call = {}, [], {}
    for system in systems:
        log(f"  {wl.key}: {system}: build + warm-up")
        try:
            r = peers.build(system, wl, arrays)
            first, last, t = measure.warm_up(r, opts.warm_calls, opts.warm_seconds)
            err = max(max_rel_err(*r.fetch(first), ref), max_rel_err(*r.fetch(last), ref))
        except Exception:
            rows[system] = Row(wl.key, system, error=traceback.format_exc())
            continue
        rows[system] = Row(wl.key, system, err=err, rtol=wl.rtol)
        runners.append(r)
        per_call[system] = t
    log(f"  {wl.key}: timing {len(runners)} systems, {opts.blocks} interleaved blocks")
    times, errors = measure.interleaved(runners, per_call, opts.blocks, opts.block_seconds)
    for r in runners:
        row = rows[r.system]
        if r.system in errors:
            row.error = errors[r.system]
            continue
        row.time, row.spread = measure.summary(times[r.system])
        row.samples = times[r.system]
        row.note = r.note()
    del runners
    if wl.mem and opts.mem:
        for system in systems:
            if rows[system].error is None:
                log(f"  {wl.key}: {system}: peak memory (subprocess)")
                mb, why = measure.mem_subprocess(system, wl.key, opts.threads)
                rows[system].mem = mb
                if why:
                    rows[system].note = "; ".join(filter(None, [rows[system].note,
                                                                f"memory: {why}"]))
    return [rows[s] for s in systems]


# ---- W6 ----------------------------------------------------------------------------------------
def run_startup(systems, opts):
    wl = WORKLOADS["W1"]
    arrays = wl.data(0)
    ref = reference64(wl, arrays)
    root = tempfile.mkdtemp(prefix="llgrad_bench_w6_")
    results = {(s, m): [] for s in systems for m in ("cold", "warm")}
    # an installed package has its bytecode compiled (pip does it, as for torch and jax);
    # an editable checkout may not yet: compile it once so no system pays for that
    import llgrad
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    os.path.dirname(llgrad.__file__)], check=False, env=measure.child_env())
    try:
        data = measure.save_arrays(arrays, root)
        for rep in range(opts.startup_reps):
            # torch.compile's cold start takes tens of seconds: one run of it
            for system in [s for s in systems if rep == 0 or s != peers.TORCH_COMPILE]:
                cache = measure.new_cache_dir(root)
                for mode in ("cold", "warm"):
                    log(f"  W6: {system} {mode} (run {rep + 1})")
                    results[(system, mode)].append(
                        measure.startup_run(system, "W1", opts.threads, data, cache))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for (system, mode), runs in results.items():
        name = f"{system} ({mode})"
        bad = next((x["error"] for x in runs if "error" in x), None)
        if bad is not None:
            rows.append(Row(STARTUP_KEY, name, unit="s", error=bad))
            continue
        firsts = [x["first"] for x in runs]
        med = statistics.median(firsts)
        err = max(max_rel_err(x["loss"], x["grads"], ref) for x in runs)
        imp = statistics.median(x["import"] for x in runs)
        second = statistics.median(x["second"] for x in runs)
        note = f"import {imp:.3f} s, 2nd grad at {second:.3f} s"
        if runs[-1]["note"]:
            note += f"; {runs[-1]['note']}"
        rows.append(Row(STARTUP_KEY, name, unit="s", time=med, err=err, note=note,
                        spread=(max(firsts) - min(firsts)) / med if len(firsts) > 1 else None,
                        samples=firsts, rtol=wl.rtol,
                        extra={"import_s": imp, "second_grad_s": second}))
    set_ratios(rows, group=lambda r: r.system.rsplit("(", 1)[1], frameworks_only=True)
    return rows


# ---- the table ---------------------------------------------------------------------------------
def _fmt_time(r):
    if r.time is None:
        return "-"
    if r.unit == "s":
        return f"{r.time:.3f} s"
    return f"{r.time:,.1f} us" if r.time < 1e4 else f"{r.time:,.0f} us"


def print_table(rows, header):
    cols = ["workload", "system", "time", "spread", "x best peer", "peak MiB", "max err",
            "check", "note"]
    body = []
    for r in rows:
        body.append([r.workload, r.system, _fmt_time(r),
                     "-" if r.spread is None else f"{100 * r.spread:.0f}%",
                     "-" if r.ratio is None else f"{r.ratio:.2f}",
                     "-" if r.mem is None else f"{r.mem:.1f}",
                     "-" if r.err is None else f"{r.err:.1e}",
                     "OK" if r.ok else ("ERROR" if r.error else "FAIL"), r.note])
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]
    right = {2, 3, 4, 5, 6}

    def line(vals):
        return "  ".join(v.rjust(w) if i in right else v.ljust(w)
                         for i, (v, w) in enumerate(zip(vals, widths))).rstrip()
    print("\n".join(header))
    print(line(cols))
    print(line(["-" * w for w in widths]))
    prev = None
    for b in body:
        if prev is not None and b[0] != prev:
            print()
        prev = b[0]
        print(line(b))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--workloads", default=",".join(ALL_KEYS),
                   help="comma-separated, of " + ",".join(ALL_KEYS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--skip-slow", action="store_true")
    p.add_argument("--skip-peers", action="store_true")
    p.add_argument("--no-mem", action="store_true")
    p.add_argument("--json")
    p.add_argument("--_mem", nargs=2, metavar=("WORKLOAD", "SYSTEM"), help=argparse.SUPPRESS)
    opts = p.parse_args(argv)

    if opts._mem:                       # child mode: one (workload, system), peak memory
        wkey, system = opts._mem
        peers.import_system(system, opts.threads)
        runner = peers.build(system, WORKLOADS[wkey], WORKLOADS[wkey].data(0))
        print(f"MEM {measure.mem_child(runner):.3f}")
        return 0

    keys = [k.strip().upper() for k in opts.workloads.split(",") if k.strip()]
    unknown = [k for k in keys if k not in ALL_KEYS]
    if unknown:
        p.error(f"unknown workloads {unknown}; choose from {ALL_KEYS}")
    opts.mem = not (opts.no_mem or opts.quick)
    opts.blocks, opts.block_seconds = (3, 0.02) if opts.quick else (15, 0.1)
    opts.warm_calls, opts.warm_seconds = (3, 0.05) if opts.quick else (5, 0.5)
    opts.startup_reps = 1 if opts.quick else 3

    systems, versions, missing = [], {"python": platform.python_version()}, []
    for s in peers.ALL_SYSTEMS:
        if opts.skip_peers and s in peers.PEER_SYSTEMS:
            continue
        try:
            if not peers.available(s):
                raise ImportError("not installed")
            versions[peers.LIBRARY[s]] = peers.import_system(s, opts.threads)
        except Exception as e:      # a broken install counts as missing, with the reason
            missing.append(s if isinstance(e, ImportError) and str(e) == "not installed"
                           else f"{s} ({type(e).__name__}: {e})")
            continue
        systems.append(s)

    rows = []
    for k in keys:
        if k == STARTUP_KEY:
            continue
        log(f"{k}: {WORKLOADS[k].title}")
        wrows = run_workload(WORKLOADS[k], systems, opts)
        set_ratios(wrows)
        rows += wrows
    if STARTUP_KEY in keys:
        log("W6: process start to first gradient of W1")
        slow = opts.skip_slow or opts.quick
        rows += run_startup([s for s in systems if not (slow and s == peers.TORCH_COMPILE)],
                            opts)

    header = [
        f"# llgrad workloads: {opts.threads} thread(s); W1-W5 median per call (loss + all "
        f"grads) over {opts.blocks} interleaved blocks of ~{opts.block_seconds * 1e3:.0f} ms; "
        "spread = IQR/median; x best peer = time / fastest of NumPy, torch, jax"]
    if STARTUP_KEY in keys:
        header.append(
            "# W6: seconds from process start to the first W1 gradient (median of "
            f"{opts.startup_reps} runs, torch.compile 1); cold = empty on-disk caches, warm = "
            "a second process on them; spread = range/median; x best peer = time / fastest "
            "of torch, jax")
    header += [
        "# check: max |got - ref| / max|ref| over loss and grads, ref = hand-written NumPy "
        "in float64; OK if <= 1e-4; peak MiB = a step's peak RSS above the warmed-up steady "
        "state (one subprocess per system)",
        "# " + ", ".join(f"{k} {v}" for k, v in versions.items())
        + (f"; not available: {', '.join(missing)}" if missing else ""),
        *[f"# {k}: {WORKLOADS[k].title}" for k in keys if k in WORKLOADS],
    ]
    print_table(rows, header)
    failed = [r for r in rows if not r.ok]
    for r in failed:
        if r.error:
            print(f"\n== {r.workload} {r.system} raised ==\n{r.error.rstrip()}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"threads": opts.threads, "quick": opts.quick, "versions": versions,
                       "missing": missing, "rows": [r.as_dict() for r in rows]}, f, indent=1,
                      default=float)
    if failed:
        print(f"\n{len(failed)} FAIL/ERROR row(s): "
              + ", ".join(f"{r.workload} {r.system}" for r in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
