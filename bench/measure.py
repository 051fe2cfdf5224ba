"""Measurements for bench/workloads.py: interleaved timing blocks, peak memory of one
(system, workload) in a subprocess, and start-up time to the first gradient (W6)."""
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

# steady-state figures: native code is built before the call that needs it, not in the
# background while calls run eagerly (bench/first_steps.py times the background builds)
os.environ.setdefault("LLGRAD_COMPILE", "sync")
BENCH = os.path.dirname(os.path.abspath(__file__))
WORKLOADS_PY = os.path.join(BENCH, "workloads.py")


# ---- timing ----------------------------------------------------------------------------------
def warm_up(runner, calls, seconds):
    """`calls` calls (the first ones compile), then `seconds` more of them; -> (result of
    the first call, result of the last call, median seconds per call after the first
    `calls`), so a slow compiling call never sets the block size."""
    first = last = runner.step()
    for _ in range(calls - 1):
        last = runner.step()
    recent, t_start = [], time.perf_counter()
    while not recent or time.perf_counter() - t_start < seconds:
        t0 = time.perf_counter()
        last = runner.step()
        recent.append(time.perf_counter() - t0)
    return first, last, statistics.median(recent)


def interleaved(runners, per_call, blocks, block_seconds):
    """`blocks` rounds; in each, every runner runs a block of calls lasting about
    block_seconds (the order rotates from round to round, so drift and noise from the
    other engineers' jobs fall on all systems alike). -> ({system: [us per call, per
    block]}, {system: traceback} for a system that raised, which then drops out)."""
    numbers = {r.system: max(1, int(block_seconds / max(per_call[r.system], 1e-7)))
               for r in runners}
    times, errors = {r.system: [] for r in runners}, {}
    runners = list(runners)
    for b in range(blocks):
        k = b % len(runners) if runners else 0
        for r in runners[k:] + runners[:k]:
            n, step = numbers[r.system], r.step
            gc.collect()
            try:
                t0 = time.perf_counter()
                for _ in range(n):
                    step()
                t = time.perf_counter() - t0
            except Exception:
                errors[r.system] = traceback.format_exc()
                runners.remove(r)
                continue
            times[r.system].append(t / n * 1e6)
    return times, errors


def block_medians(fns, blocks=7, per_block=3):
    """{name: median ms a call} of the callables fns ({name: fn}), timed in blocks of
    per_block calls, the systems' blocks interleaved (the untuned model sets' scheme)."""
    times = {k: [] for k in fns}
    for _ in range(blocks):
        for k, f in fns.items():
            t0 = time.perf_counter()
            for _ in range(per_block):
                f()
            times[k].append((time.perf_counter() - t0) / per_block * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def summary(samples):
    """(median, spread) of per-block times; spread = interquartile range / median."""
    med = statistics.median(samples)
    if len(samples) >= 4:
        q = statistics.quantiles(samples, n=4)
        spread = (q[2] - q[0]) / med
    else:
        spread = (max(samples) - min(samples)) / med
    return med, spread


# ---- peak memory -----------------------------------------------------------------------------
def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def mem_child(runner, steps=3):
    """In a subprocess built for one (system, workload): the peak resident memory of a
    step above the steady state after warm-up (compilation done), in MiB. Linux's peak RSS
    is reset through /proc/self/clear_refs; glibc is asked (by the parent's environment)
    to unmap large blocks on free, so RSS follows live memory."""
    for _ in range(3):
        runner.step()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    base = _status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    res = None
    for _ in range(steps):
        res = None
        res = runner.step()
    del res
    return (_status_kb("VmHWM") - base) / 1024


def mem_subprocess(system, wkey, threads, timeout=600):
    """Run workloads.py in its memory-child mode; -> MiB or None (with the reason)."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    cmd = [sys.executable, WORKLOADS_PY, "--threads", str(threads), "--_mem", wkey, system]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("MEM "):
            return float(line.split()[1]), None
    return None, (p.stderr.strip().splitlines() or ["no output"])[-1]


# ---- start-up: process start to the first gradient (W6) --------------------------------------
_STARTUP = r"""
import time
T = [time.time()]
import json, sys
sys.path.insert(0, {bench!r})
import numpy as np
import peers, workload_defs
peers.import_system({system!r}, {threads})
T.append(time.time())
d = np.load({data!r})
arrays = [d["a%d" % i] for i in range(len(d.files))]
r = peers.build({system!r}, workload_defs.WORKLOADS[{wkey!r}], arrays)
res = r.step()
T.append(time.time())
res2 = r.step()
T.append(time.time())
loss, grads = r.fetch(res)
np.savez({out!r}, np.float64(loss), *grads)
print("STARTUP " + json.dumps({{"T": T, "note": r.note()}}))
"""


def child_env():
    """The environment of a start-up process: as a user's shell has it, so bytecode is
    read from (and written to) __pycache__ even if this process runs without it."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def startup_run(system, wkey, threads, data_path, cache_dir, timeout=900):
    """One fresh `python -c` process: -> dict(import=, first=, second= seconds since the
    parent started it, note=, loss=, grads=) or dict(error=...). The process's on-disk
    caches (llgrad, jax, torch inductor) live in cache_dir."""
    out = os.path.join(cache_dir, f"out_{os.getpid()}_{time.time_ns()}.npz")
    code = _STARTUP.format(bench=BENCH, system=system, threads=threads, data=data_path,
                           wkey=wkey, out=out)
    env = dict(child_env(),
               LLGRAD_CACHE_DIR=os.path.join(cache_dir, "llgrad"),
               JAX_COMPILATION_CACHE_DIR=os.path.join(cache_dir, "jax"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
               TORCHINDUCTOR_COMPILE_THREADS=str(threads))
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("STARTUP ")), None)
    if p.returncode or line is None:
        return {"error": p.stderr.strip() or f"exit {p.returncode}"}
    info = json.loads(line[len("STARTUP "):])
    T = info["T"]
    with np.load(out) as d:
        vals = [d[f"arr_{i}"] for i in range(len(d.files))]
    os.remove(out)
    return {"import": T[1] - t0, "first": T[2] - t0, "second": T[3] - t0,
            "note": info["note"], "loss": float(vals[0]), "grads": vals[1:]}


def save_arrays(arrays, directory):
    path = os.path.join(directory, "data.npz")
    np.savez(path, **{f"a{i}": a for i, a in enumerate(arrays)})
    return path


def new_cache_dir(root):
    return tempfile.mkdtemp(prefix="cache_", dir=root)
