"""Resident memory of issue 20's real models (real_model_defs.py) as whole AdamW training
steps: llgrad compiled against llgrad eager (the target: compiled at most 1.3x eager), torch
eager beside them. One fresh process per (workload, system), 1 thread, so no process carries
another's pages (the weights, torch's initialisation, come from a file: an llgrad process
does not import torch).

    python bench/real_models_memory.py [--workloads block,cnn,...] [--steps 8] [--json FILE]

Each process imports its library, builds the model, optimiser and data, and reads VmRSS
(`base`); then runs `--steps` training steps (llgrad compiled: its first call traces, the
second builds or loads its kernels, LLGRAD_COMPILE=sync) and reads VmHWM, the peak resident
set of the whole run (`peak`), and VmRSS once the steps are done (`after`). `peak - base`
is what the training run itself needed (the trace, the compile, the arena, the optimiser's
moments, every step's activations); the ratios compare compiled's to eager's, and the peaks. Each library keeps
its own heap policy, as its users get it (llgrad keeps a step's freed memory for the next
one, runtime/heap.py). The kernel cache is warm unless `--cold` (a fresh
LLGRAD_CACHE_DIR: the builds run in the compile worker, a process of its own, which is not
counted: llgrad's own process never loads LLVM)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
SYSTEMS = ("llgrad compiled", "llgrad eager", "torch eager")

_CHILD = r"""
import sys, json, warnings
sys.path.insert(0, {bench!r})
import real_model_defs as defs

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0

import numpy as np
with np.load({state!r}) as z:           # (torch's weights, saved by the parent: an llgrad
    state = dict(z)                     # process does not import torch)
arrays = defs.data({key!r})
r = defs.build_lib({system!r}, {key!r}, state, arrays, True)
import gc; gc.collect()
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                        # (VmHWM from here: the imports' peak is not the run's)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for _ in range({steps}):
        res = r.step()
loss = r.fetch(res)[0]
del res
gc.collect()
print("MEM " + json.dumps({{"base": base, "peak": status("VmHWM"), "after": status("VmRSS"),
                            "loss": loss}}))
"""


def _child(key, system, steps, cache_dir, state_path):
    env = dict(os.environ, LLGRAD_COMPILE="sync")
    for v in ("LLGRAD_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
              "MKL_NUM_THREADS"):
        env[v] = "1"
    if cache_dir:
        env["LLGRAD_CACHE_DIR"] = cache_dir
    code = _CHILD.format(bench=BENCH, key=key, system=system, steps=steps, state=state_path)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=900)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("MEM "):
            return json.loads(line[4:]), None
    return None, (p.stderr.strip().splitlines() or ["no output"])[-1]


def main(argv=None):
    sys.path.insert(0, BENCH)
    import real_model_defs as defs
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default=",".join(defs.WORKLOADS))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--cold", action="store_true", help="a fresh kernel cache per process")
    p.add_argument("--json", help="also write the results here")
    opts = p.parse_args(argv)
    out = {}
    print("| workload | " + " | ".join(f"{s}: base / peak / after (MiB)" for s in SYSTEMS)
          + " | peak - base, compiled / eager | peak, compiled / eager |")
    print("|---" * (len(SYSTEMS) + 3) + "|")
    import numpy as np
    for key in opts.workloads.split(","):
        row, cells = out.setdefault(key, {}), []
        for system in SYSTEMS:
            with tempfile.TemporaryDirectory(prefix="llgrad_mem_") as d:
                state_path = os.path.join(d, "state.npz")
                np.savez(state_path, **defs.torch_state(key)[0])
                m, why = _child(key, system, opts.steps, d if opts.cold else None, state_path)
            row[system] = m if m is not None else {"failed": why}
            cells.append(f"{m['base']:.0f} / {m['peak']:.0f} / {m['after']:.0f}"
                         if m else f"FAILED: {why[:60]}")
        c, e = row.get("llgrad compiled", {}), row.get("llgrad eager", {})
        ratios = ("-", "-")
        if "peak" in c and "peak" in e:
            ratios = (f"{(c['peak'] - c['base']) / max(e['peak'] - e['base'], 1e-9):.2f}x",
                      f"{c['peak'] / e['peak']:.2f}x")
        print(f"| {key} | " + " | ".join(cells) + f" | {ratios[0]} | {ratios[1]} |",
              flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
