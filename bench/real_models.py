"""Real models (issue 20): a pre-LN transformer block and a stack of 4, a small CNN and one
with BatchNorm and average pooling, an LSTM and a GRU sequence model (real_model_defs.py),
as llgrad compiled and llgrad eager beside torch eager, torch.compile and jax.jit (models
written by hand in real_model_jax.py), each pinned to 1 thread and then to 2. Timed: the
loss and all its gradients, or with --step a whole training step (zero_grad, forward,
backward, AdamW lr 1e-3 weight decay 1e-2: torch.optim / llgrad.optim / jax written out).

    python bench/real_models.py [--threads 1,2] [--workloads block,stack4,cnn,cnn_bn,lstm,gru]
                                [--systems ...] [--step] [--quick] [--separate] [--json FILE]
    python bench/real_models.py --profile block [--step] [--threads 2]   # llgrad.profile

Every system starts from the same weights and data (torch's); each is checked against torch
eager: the loss and every gradient after 4 calls (relative to the gradient's largest
entry), or with --step the loss and every parameter after 5 fresh steps (relative to the
farthest the parameter moved; llgrad compiled's first steps trace, by the fifth its
kernels run). A system that raises or disagrees stays in the table as a FAILED / MISMATCH
cell, its traceback printed below.

Every (system, thread count) runs in one process, blocks interleaved (measure.py's scheme:
the order rotates, so the noise of a shared machine falls on all alike), the count set
before each block (llgrad.set_num_threads, which sets NumPy's OpenBLAS too, and
torch.set_num_threads), each block after SETTLE_S seconds idle (the threads the system
before left spinning asleep, as in a process of its own). jax fixes its count when it starts, so jax.jit runs in one worker
process per count (pinned: PJRT_NPROC, XLA_FLAGS), driven over a pipe block by block in the
same rotation. torch.compile compiles the loss function (with --step: backward and AdamW
eager, the usual way); llgrad compiled compiles the loss, or the whole step. `--separate`
runs a process per thread count instead. Times are medians over the blocks; `cpu` is CPU
seconds per wall second during that system's blocks (above the thread count: spinning).

The bound: the workload's GEMM FLOPs (counted analytically: linears, attention products,
convolutions as im2col GEMMs, recurrent gates; real_model_defs.gemm_flops) at this
machine's GEMM rate, measured once (NumPy float32 512^3 matmul, 1 thread, fastest call),
times the thread count: no system can beat it without skipping arithmetic."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import measure  # noqa: E402
import real_model_jax as jax_client  # noqa: E402
import real_model_defs as defs  # noqa: E402

SYSTEMS = ("llgrad compiled", "llgrad eager", "torch eager", "torch.compile", "jax.jit")
PEERS = ("torch eager", "torch.compile", "jax.jit")
CHECK_CALLS = {False: 4, True: 5}       # calls before the check: loss + grads / steps
# float32 against torch: gradients agree to ~1e-6 of their largest entry; parameters after
# 5 AdamW steps to a few 1e-3 of the distance they moved (AdamW divides by sqrt(v), so the
# rounding of small gradients grows: the blocks' key bias has a zero gradient in exact
# arithmetic, softmax ignoring a constant per query, and moves by its rounding alone),
# while a wrong update rule (bias correction, decay) is off by a good part of every step
TOLERANCE = {False: 1e-4, True: 1e-2}
SETTLE_S = 0.3          # idle seconds before each timed block (_interleaved_cpu)


def _pin(threads, env):
    """Pin every library of a process with this environment to `threads` threads. (XLA
    reads PJRT_NPROC; a word of XLA_FLAGS not starting with -- is taken as a flag file's
    name, a fatal error: the flags are only real ones.)"""
    n = str(threads)
    for v in ("LLGRAD_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
              "MKL_NUM_THREADS", "PJRT_NPROC"):
        env[v] = n
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
    else:
        env.pop("XLA_FLAGS", None)
    env.setdefault("LLGRAD_COMPILE", "sync")
    return env


def _check_and_warm(r, step_mode):
    """-> (fetched result of the check, seconds per call)."""
    res = None
    for _ in range(CHECK_CALLS[step_mode]):
        res = r.step()
    check = r.fetch(res)
    return check, measure.warm_up(r, 1, 0.3)[2]


def _err(res, ref, start=None):
    """-> (largest relative error, of which array): the loss's, and each array's relative to
    its largest entry (gradients), or with `start` (parameters after steps) to the farthest
    any entry moved from its start in torch, since AdamW moves each entry ~lr a step
    whatever its size."""
    loss, arrays = res
    rl, ra = ref
    worst = (abs(loss - rl) / max(abs(rl), 1e-30), "loss")
    for n, a in ra.items():
        scale = np.max(np.abs(a - start[n] if start is not None else a))
        worst = max(worst, (float(np.max(np.abs(arrays[n] - a)) / max(float(scale), 1e-30)), n))
    return worst


def available(system):
    import importlib.util
    lib = {"torch eager": "torch", "torch.compile": "torch", "jax.jit": "jax"}.get(system,
                                                                                 "llgrad")
    return importlib.util.find_spec(lib) is not None


# ---- the measurement, in this process ------------------------------------------------------
def _brief(tb):
    """A traceback's last lines, for the table's notes."""
    return "\n".join(tb.strip().splitlines()[-6:])


def run_child(opts):
    """Every (system, thread count) of opts.threads_list: local ones in this process, jax
    in a worker per count; blocks interleaved."""
    counts = [int(v) for v in opts.threads_list.split(",")]
    import torch
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    blocks, seconds = (3, 0.15) if opts.quick else (opts.blocks, opts.block_seconds)
    defs.set_threads(1)
    rate = defs.gemm_rate(0.3 if opts.quick else 1.0)
    out = {"gemm_rate": rate, "step": opts.step,
           "runs": [{"threads": t, "workloads": {}} for t in counts]}
    tmp, workers = tempfile.mkdtemp(prefix="real_models_"), {}
    systems = [s for s in SYSTEMS if s in opts.systems.split(",")]
    try:
        for key in opts.workloads.split(","):
            _run_workload(opts, key, counts, systems, blocks, seconds, out, tmp, workers)
    finally:
        for w in workers.values():
            w.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("RESULT " + json.dumps(out))


def _run_workload(opts, key, counts, systems, blocks, seconds, out, tmp, workers):
    state, names = defs.torch_state(key)
    arrays = defs.data(key)
    state_path = os.path.join(tmp, f"state_{key}.npz")
    np.savez(state_path, **state)
    runners, per_call, errs = [], {}, {}
    failed = {t: {} for t in counts}            # system -> (cell, traceback)
    defs.set_threads(counts[0])
    ref = defs.build_lib("torch eager", key, state, arrays, opts.step)
    for _ in range(CHECK_CALLS[opts.step]):
        res = ref.step()
    ref = ref.fetch(res)
    for system in systems:
        if not available(system):
            for t in counts:
                failed[t][system] = ("not installed", "")
            continue
        for t in counts:
            name = f"{system}@{t}"
            try:
                defs.set_threads(t)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if system == "jax.jit":
                        if t not in workers:
                            workers[t] = jax_client.Worker(_pin(t, dict(os.environ)), tmp, t)
                        check, per = workers[t].build(key, state_path, names, opts.step,
                                                      CHECK_CALLS[opts.step])
                        r = defs.Runner(system, None, None)
                        r.block = workers[t].block
                    else:
                        r = defs.build_lib(system, key, state, arrays, opts.step)
                        check, per = _check_and_warm(r, opts.step)
                errs[name] = _err(check, ref, state if opts.step else None)
            except Exception as e:      # noqa: BLE001 (the table says which failed)
                failed[t][system] = (f"FAILED: {type(e).__name__}: "
                                     f"{str(e).splitlines()[0][:70]}", traceback.format_exc())
                continue
            r.system, r.threads = name, t
            per_call[name] = per
            runners.append(r)
    cpu = {r.system: [] for r in runners}
    times, errors = _interleaved_cpu(runners, per_call, blocks, seconds, cpu)
    for name, tb in errors.items():
        s, t = name.rsplit("@", 1)
        failed[int(t)][s] = ("FAILED (timing): " + tb.strip().splitlines()[-1][:70], tb)
    for k, t in enumerate(counts):
        row = out["runs"][k]["workloads"][key] = {
            "_failed": {s: c for s, (c, _) in failed[t].items()},
            "_tracebacks": {s: _brief(tb) for s, (_, tb) in failed[t].items() if tb}}
        for name, v in times.items():
            s, tt = name.rsplit("@", 1)
            if int(tt) == t and v:
                row[s] = {"us": statistics.median(v), "spread": measure.summary(v)[1],
                          "cpu": statistics.median(cpu[name]), "err": errs[name][0],
                          "worst": errs[name][1]}


def _interleaved_cpu(runners, per_call, blocks, seconds, cpu, settle=SETTLE_S):
    """measure.interleaved, through each runner's block(), plus each block's CPU seconds
    per wall second; each block after `settle` seconds idle, so the threads another system
    left spinning (OpenBLAS's spin 0.1-0.3 s after a product, OpenMP's and XLA's pools a
    while) are asleep when it starts, as they would be in a process of its own (a compiled
    llgrad block at 2 threads right after llgrad eager's took 4.9 ms, alone 4.4)."""
    import gc
    numbers = {r.system: max(1, int(seconds / max(per_call[r.system], 1e-7))) for r in runners}
    times, errors = {r.system: [] for r in runners}, {}
    runners = list(runners)
    for b in range(blocks):
        k = b % len(runners) if runners else 0
        for r in runners[k:] + runners[:k]:
            n = numbers[r.system]
            gc.collect()
            time.sleep(settle)
            try:
                t, c = r.block(n)
            except Exception:       # noqa: BLE001
                errors[r.system] = traceback.format_exc()
                runners.remove(r)
                continue
            times[r.system].append(t / n * 1e6)
            cpu[r.system].append(c / t)
    return times, errors


# ---- the profile of llgrad compiled -----------------------------------------------------------
def run_profile(opts):
    import llgrad
    llgrad.set_num_threads(opts.threads_one)
    key = opts.profile
    state, _ = defs.torch_state(key)
    r = defs.build_lib("llgrad compiled", key, state, defs.data(key), opts.step)
    for _ in range(5):
        r.step()
    with llgrad.profile(groups=not opts.whole) as p:
        for _ in range(opts.steps):
            r.step()
    print(p.table(row_limit=opts.rows) if opts.rows else p.table())


# ---- the parent: the child process(es), then the tables ---------------------------------------
def _fmt(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} us"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", default="1,2")
    p.add_argument("--workloads", default=",".join(defs.WORKLOADS))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--step", action="store_true",
                   help="time a whole AdamW training step instead of loss + gradients")
    p.add_argument("--blocks", type=int, default=9)
    p.add_argument("--block-seconds", type=float, default=0.4)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--profile", choices=defs.WORKLOADS, help="print llgrad.profile's table")
    p.add_argument("--whole", action="store_true", help="(profile) time kernels whole")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rows", type=int, default=0)
    p.add_argument("--separate", action="store_true",
                   help="a process per thread count (else one process, counts interleaved)")
    p.add_argument("--threads-list", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    if opts.profile:
        t = int(opts.threads.split(",")[0])
        _pin(t, os.environ)
        opts.threads_one = t
        return run_profile(opts)
    if opts.threads_list is not None:
        return run_child(opts)
    bad = set(opts.workloads.split(",")) - set(defs.WORKLOADS)
    if bad:
        p.error(f"unknown workloads {sorted(bad)}: choose from {','.join(defs.WORKLOADS)}")
    counts = [int(v) for v in opts.threads.split(",")]
    merged = None
    for group in ([[t] for t in counts] if opts.separate else [counts]):
        cmd = [sys.executable, os.path.abspath(__file__),
               "--threads-list", ",".join(map(str, group)),
               "--workloads", opts.workloads, "--systems", opts.systems,
               "--blocks", str(opts.blocks), "--block-seconds", str(opts.block_seconds)]
        cmd += ["--quick"] * opts.quick + ["--step"] * opts.step
        proc = subprocess.run(cmd, env=_pin(group[-1], dict(os.environ)), capture_output=True,
                              text=True)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            raise SystemExit(f"the run of {group} threads failed")
        res = json.loads(line[len("RESULT "):])
        if merged is None:
            merged = res
        else:
            merged["runs"] += res["runs"]
            merged["gemm_rate"] = max(merged["gemm_rate"], res["gemm_rate"])
    _print(merged)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(merged, f, indent=1)


def _cell(c, tol):
    flag = f"MISMATCH in {c['worst']}: " if c["err"] > tol else ""
    return (f"{_fmt(c['us'])} ({flag}err {c['err']:.0e}, cpu {c['cpu']:.2f}, "
            f"spread {c['spread'] * 100:.0f}%)")


def _print(res):
    step, rate = res["step"], res["gemm_rate"]
    what = ("a whole training step (zero_grad, forward, backward, AdamW), checked: loss and "
            f"parameters after {CHECK_CALLS[True]} fresh steps" if step else
            f"loss + all gradients, checked after {CHECK_CALLS[False]} calls")
    print(f"# median per call of {what}; err = max relative error against torch eager "
          f"(MISMATCH above {TOLERANCE[step]:.0e}); cpu = CPU s per wall s; ratio = llgrad "
          "compiled / the best of torch eager, torch.compile, jax.jit; bound = the GEMM FLOPs "
          f"at {rate / 1e9:.1f} GFLOP/s per thread (NumPy float32 512^3, 1 thread, fastest)")
    for run in res["runs"]:
        t = run["threads"]
        print(f"\n## {t} thread{'s' if t > 1 else ''}")
        print("| workload | " + " | ".join(SYSTEMS) + " | best peer | llgrad compiled / best "
              "peer | GEMM bound | llgrad compiled / bound |")
        print("|---" * (len(SYSTEMS) + 5) + "|")
        for key, row in run["workloads"].items():
            present = [s for s in PEERS if s in row]
            best = min(present, key=lambda s: row[s]["us"]) if present else None
            cells = [_cell(row[s], TOLERANCE[step]) if s in row else
                     row["_failed"].get(s, "-") for s in SYSTEMS]
            ours = row.get("llgrad compiled", {}).get("us")
            flops = defs.gemm_flops(key)
            bound = flops / (rate * t) * 1e6
            ratio = f"{ours / row[best]['us']:.2f}x" if ours and best else "-"
            to_bound = f"{ours / bound:.1f}x" if ours else "-"
            print(f"| {key} | " + " | ".join(cells) + f" | {best or '-'} | {ratio} | "
                  f"{_fmt(bound)} ({flops / 1e9:.2f} GFLOP) | {to_bound} |")
    if len(res["runs"]) > 1:
        print("\n## speed-up of 2 threads over 1 (1-thread median / N-thread median)")
        base = res["runs"][0]["workloads"]
        for run in res["runs"][1:]:
            for key, row in run["workloads"].items():
                parts = [f"{s} {base[key][s]['us'] / row[s]['us']:.2f}x" for s in SYSTEMS
                         if s in row and s in base.get(key, {})]
                print(f"  {key}: " + ", ".join(parts))
    print()
    for key in res["runs"][0]["workloads"]:
        print(f"  {key}: {defs.TITLES[key]}")
    notes = [(run["threads"], key, s, tb) for run in res["runs"]
             for key, row in run["workloads"].items() for s, tb in row["_tracebacks"].items()]
    for t, key, s, tb in notes:
        print(f"\n### {s} failed on {key} ({t} thread{'s' if t > 1 else ''}):\n{tb}")


if __name__ == "__main__":
    main()
