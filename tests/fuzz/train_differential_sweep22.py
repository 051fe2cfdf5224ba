"""Run a training program (tests/fuzz/train_programs_sweep22.py) three times from its seed:
with `lib = torch`, with `lib = llgrad` eagerly, and with `lib = llgrad` and its step under
llgrad.compile; compare the losses and what else the step returned, the learning rates after
each step, the final parameters, buffers and .grad, the optimiser's state and the EMA and
AveragedModel copies. llgrad (eager) against torch: rtol 1e-4, atol 1e-5; compiled against
eager: rtol 1e-5, atol 2e-6, and elementwise up to four times what torch differs from eager
by (an ill-conditioned spot, a norm over few values, amplifies rounding alike in all three);
each atol is scaled by the tensor's largest magnitude when over 1. (float32 summation orders
differ, and Adam divides by small square roots: the programs run 5-8 steps.) A compiled step
that ran eagerly (a graph break: the warning "running eagerly", or a break it noted) fails.

    python tests/fuzz/train_differential_sweep22.py SEED [--script] [--backend interpret]

replays one program and prints the mismatches (--script: print it as a standalone script
that runs it with torch and llgrad)"""
import linecache
import itertools
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_programs_sweep22 import generate  # noqa: E402

TORCH_TOL, COMPILED_TOL = (1e-4, 1e-5), (1e-5, 2e-6)
_RUNS = itertools.count()
TRACES = {}     # (seed, mode) -> how many times the compiled step traced (a figure, not a check)

PRELUDE = '''\
import numpy as np

nn, F = lib.nn, lib.nn.functional


def data(shape, seed):
    """float32 normal values drawn from seed (the same numbers for torch and llgrad)."""
    return lib.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def ints(hi, shape, seed):
    return lib.tensor(np.random.default_rng(seed).integers(0, hi, shape))


def bits(shape, seed):
    return lib.tensor((np.random.default_rng(seed).random(shape) < 0.5).astype(np.float32))


def probs(shape, seed):
    e = np.exp(np.random.default_rng(seed).standard_normal(shape))
    return lib.tensor((e / e.sum(-1, keepdims=True)).astype(np.float32))
'''


def _np(t):
    if hasattr(t, "detach"):
        return np.array(t.detach().numpy(), copy=True)
    return np.asarray(t, dtype=np.float64)


def run(prog, mode, backend=None):
    """{what: value} after the program (mode: 'torch', 'eager' or 'compiled', on backend:
    None for llgrad's default, llvm), and the graph breaks: the messages of the llgrad
    warnings saying a compiled call ran eagerly, and the breaks the step noted."""
    if mode == "torch":
        import torch as lib
        compile_ = None
    else:
        import llgrad as lib
        compile_ = (lambda f: lib.compile(f, backend=backend)) if mode == "compiled" else None
    source = PRELUDE + prog.source
    filename = f"<train program {prog.seed} {mode} #{next(_RUNS)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": "train_program", "lib": lib,
          "COMPILE": compile_ or (lambda f: f)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(source, filename, "exec"), ns)
    broke = [str(w.message) for w in caught if "running eagerly" in str(w.message)
             or "left as Python" in str(w.message)]
    step = ns["step"]
    broke += [f"(noted, no warning) {r}" for r in getattr(step, "graph_breaks", ())
              if not any(r in m for m in broke)]
    TRACES[(prog.seed, mode)] = getattr(step, "n_traces", None)
    out = {f"loss[{i}]": v for i, v in enumerate(ns["losses"])}
    out.update({f"lr[{i}]": np.asarray(v) for i, v in enumerate(ns["lrs"])})
    out.update({f"returned[{i}]": np.asarray(v) for i, v in enumerate(ns["extras"])})
    if "swa" in ns:
        out.update({"swa." + k: _np(v) for k, v in ns["swa"].state_dict().items()})
    for name, t in ns["model"].state_dict().items():
        out[name] = _np(t)
    for i, p in enumerate(ns["model"].parameters()):
        out[f"param{i}.grad"] = None if p.grad is None else _np(p.grad)
    for i, e in enumerate(ns.get("ema", ())):
        out[f"ema[{i}]"] = _np(e)
    for i, st in ns["opt"].state_dict()["state"].items():
        for k, v in st.items():
            out[f"opt.state[{i}][{k!r}]"] = _np(v)
    return out, broke


def compare(ref, got, rtol, atol, third=None):
    """Lines naming what differs (missing, None against a value, values out of tolerance);
    where a third run (torch) differs from ref, got may differ from ref by four times as much
    (rounding that an ill-conditioned spot amplifies: a BatchNorm over three values)."""
    diffs = []
    for k in sorted(set(ref) | set(got), key=str):
        a, b = ref.get(k, "<missing>"), got.get(k, "<missing>")
        if isinstance(a, str) or isinstance(b, str) or (a is None) != (b is None):
            if not (a is None and b is None):
                diffs.append(f"{k}: {_short(a)} vs {_short(b)}")
            continue
        if a is None:
            continue
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            diffs.append(f"{k}: shape {a.shape} vs {b.shape}")
        elif not _close(a, b, rtol, atol, (third or {}).get(k)):
            err = np.max(np.abs(a - b)) if a.size else 0.0
            diffs.append(f"{k}: max abs diff {err:.3g} ({_short(a)} vs {_short(b)})")
    return diffs


def _close(a, b, rtol, atol, c):
    tol = atol * max(1.0, np.max(np.abs(a), initial=0)) + rtol * np.abs(a)
    if c is not None and np.shape(c) == a.shape:
        tol = tol + 4 * np.abs(a - np.asarray(c, dtype=np.float64))
    return bool(np.all((np.abs(a - b) <= tol) | (np.isnan(a) & np.isnan(b))))


def _short(v):
    s = np.array2string(np.asarray(v).ravel()[:4], precision=6) if not isinstance(v, str) else v
    return s if v is None or isinstance(v, str) or np.asarray(v).size <= 4 else s + "..."


def check(seed, modes=("torch", "eager", "compiled"), backend=None):
    """The mismatches of seed's program ([] when torch, eager and compiled agree)."""
    prog = generate(seed)
    runs = {}
    problems = []
    for mode in modes:
        try:
            runs[mode], broke = run(prog, mode, backend)
        except Exception as e:  # noqa: BLE001 - an error is a finding, named with its mode
            problems.append(f"{mode} raised {type(e).__name__}: {e}")
            continue
        problems += [f"{mode}: graph break: {m}" for m in broke]
    if "torch" in runs and "eager" in runs:
        problems += ["eager vs torch: " + d for d in compare(runs["torch"], runs["eager"],
                                                             *TORCH_TOL)]
    if "eager" in runs and "compiled" in runs:
        problems += ["compiled vs eager: " + d for d in compare(runs["eager"], runs["compiled"],
                                                                *COMPILED_TOL, runs.get("torch"))]
    return problems


def script(seed):
    """The program of seed as a standalone script: `python script.py torch|llgrad [compile]`."""
    head = ("import sys\nimport importlib\n\nlib = importlib.import_module(sys.argv[1] "
            "if len(sys.argv) > 1 else 'llgrad')\nCOMPILE = lib.compile if 'compile' in "
            "sys.argv else (lambda f: f)\n")
    tail = "\nprint('losses', losses)\nprint('lrs', lrs)\n"
    return head + PRELUDE + generate(seed).source + tail


def report(seed, problems, backend=None):
    prog = generate(seed)
    on = f" --backend {backend}" if backend else ""
    return (f"train program {seed} ({', '.join(sorted(prog.features))}):\n" +
            "\n".join("  " + p for p in problems[:20]) +
            f"\n--- the program (replay: python tests/fuzz/train_differential_sweep22.py "
            f"{seed}{on}; a script: ... {seed} --script > t.py; python t.py torch; "
            f"python t.py llgrad compile) ---\n" + prog.source)


if __name__ == "__main__":
    s = int(sys.argv[1])
    if "--script" in sys.argv:
        print(script(s))
    else:
        found = check(s, backend=sys.argv[sys.argv.index("--backend") + 1]
                      if "--backend" in sys.argv else None)
        print(report(s, found) if found else f"train program {s}: torch, eager and compiled agree")
