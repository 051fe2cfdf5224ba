"""`bench/first_steps.py --warm`: a warm process's time from the first call of the
char-transformer example's compiled training step to the first call that runs native code
(issue 19: < 0.3 s), with its breakdown, in fresh processes against a kernel cache filled
by a run before, in both bytecode states: PYTHONDONTWRITEBYTECODE=1 (llgrad keeps its own
modules' bytecode in the kernel cache: llgrad/_bytecode.py) and Python's own __pycache__
files (a temporary PYTHONPYCACHEPREFIX).

    python bench/first_steps.py --warm [--repeat 5]

The child (`python bench/first_steps_warm.py`) runs the example's step in-process and
prints one JSON line: per-step seconds (wall and this process's CPU), the step whose call
ran native code first (a launch of a Kernel's code: codegen/launch.py), and the parts: the
trace and the build of the native run (a warm cache: its load; wall seconds, as the
compile log has them), the codegen modules imported on the way (how many, and CPU
seconds), the graph printed for the keys, the prepared plan's and the kernel's lookups
(CPU seconds of the thread doing them: on a shared machine wall time mostly waits)."""
import importlib.util
import json
import os
import sys
import threading
import time

import statistics
import subprocess
import tempfile

ROOT = os.environ.get("FIRST_STEPS_ROOT") or \
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
EXAMPLE = os.path.join(ROOT, "examples", "char_transformer.py")
PARTS = {"llgrad.compile.background": ("graph_text",), "llgrad.codegen.prepared": ("load",),
         "llgrad.codegen.native.jit": ("lookup",)}
_sums, _native, _lock = {}, [], threading.Lock()
_depth = threading.local()


def _timed(label, fn):
    def wrapper(*a, **k):
        t0 = time.thread_time()         # (CPU of the calling thread: the machine may be
        try:                            # shared, and wall time then mostly waits)
            return fn(*a, **k)
        finally:
            with _lock:
                _sums[label] = _sums.get(label, 0.0) + time.thread_time() - t0
    return wrapper


def _patch(name, mod):
    for attr in PARTS.get(name, ()):
        setattr(mod, attr, _timed(f"{name.rsplit('.', 1)[-1]}.{attr}", getattr(mod, attr)))
    if name == "llgrad.codegen.kernel":         # (the first launch of native code)
        made = mod._launcher

        def launcher(*a, **k):
            launch = made(*a, **k)

            def first(*b, **c):
                if not _native:
                    _native.append(time.perf_counter())
                return launch(*b, **c)
            return first
        mod._launcher = launcher


class _Hook:
    """A finder first on sys.meta_path: times the outermost codegen imports and patches
    the modules PARTS names (and kernel.py) as they load."""
    @classmethod
    def find_spec(cls, name, path, target=None):
        if not name.startswith("llgrad.codegen"):
            return None
        for finder in sys.meta_path:
            if finder is cls or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, run = spec.loader, spec.loader.exec_module

        def exec_module(module):
            outer = not getattr(_depth, "n", 0)
            _depth.n = getattr(_depth, "n", 0) + 1
            t0 = time.thread_time()
            try:
                run(module)
            finally:
                _depth.n -= 1
                with _lock:
                    _sums["codegen modules"] = _sums.get("codegen modules", 0) + 1
                    if outer:
                        _sums["codegen imports"] = _sums.get("codegen imports", 0.0) + \
                            time.thread_time() - t0
            _patch(name, module)
        loader.exec_module = exec_module
        return spec


def child(steps=5):
    spec = importlib.util.spec_from_file_location("char_transformer", EXAMPLE)
    ct = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ct)
    import numpy as np
    import llgrad
    sys.meta_path.insert(0, _Hook)
    for name in PARTS:
        if name in sys.modules:
            _patch(name, sys.modules[name])
    llgrad.manual_seed(0)
    with open(ct.DATA, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    model = ct.TinyGPT(len(chars), 48, 4, 2, 32)
    opt = llgrad.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    step = llgrad.compile(ct.train_step)
    rng, offsets = np.random.default_rng(0), np.arange(33)
    before = set(sys.modules)
    ends, cpus, native_at, losses = [], [], None, []
    t0, c0 = time.perf_counter(), time.process_time()
    for it in range(1, steps + 1):
        chunk = data[rng.integers(0, len(data) - 33, 16)[:, None] + offsets]
        xb = llgrad.from_numpy(chunk[:, :-1].copy())
        yb = llgrad.from_numpy(chunk[:, 1:].copy())
        losses.append(step(model, opt, xb, yb).item())
        ends.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        if native_at is None and _native:
            native_at = it
    timings = step.entries[0].timings if step.entries else {}
    print(json.dumps({
        "ends": ends, "cpu": cpus, "native_at": native_at, "losses": losses,
        "trace": timings.get("trace_total"), "load": timings.get("forward"),
        "how": timings.get("forward_how"), "parts": _sums,
        "codegen": sorted(m for m in set(sys.modules) - before
                          if m.startswith("llgrad.codegen"))}))


def _child(env):
    out = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"first_steps_warm failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(runs):
    """The medians of a row's runs: seconds from the first call to the end of the first
    call that ran native code (wall, and this process's CPU), and the parts."""
    def med(f):
        vals = [v for v in map(f, runs) if v is not None]
        return statistics.median(vals) if vals else float("nan")
    at = [r["native_at"] for r in runs]
    return {"native_at": at,
            "wall": med(lambda r: r["ends"][r["native_at"] - 1] if r["native_at"] else None),
            "cpu": med(lambda r: r["cpu"][r["native_at"] - 1] if r["native_at"] else None),
            "step 1": med(lambda r: r["ends"][0]),
            "trace": med(lambda r: r["trace"]), "load": med(lambda r: r["load"]),
            **{k: med(lambda r, k=k: r["parts"].get(k, 0.0))
               for k in ("codegen imports", "codegen modules", "background.graph_text",
                         "prepared.load", "jit.lookup")}}


def warm(repeat=5, root=None):
    """Print the warm rows: both bytecode states, sync and background builds."""
    root = os.path.abspath(root or ROOT)
    base = dict(os.environ, LLGRAD_NUM_THREADS="1", LLGRAD_QUIET="1", PYTHONPATH=root,
                FIRST_STEPS_ROOT=root)
    base.pop("LLGRAD_CHECK_PREPARED", None)     # (the suite's check prepares every hit)
    print(f"char-transformer example, warm kernel cache: seconds from the step's first call "
          f"to the end of the first call running native code (median of {repeat} fresh "
          f"processes, 1 thread; {root})")
    for state in ("PYTHONDONTWRITEBYTECODE=1 (llgrad's own bytecode cache)",
                  "__pycache__ (PYTHONPYCACHEPREFIX)"):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as pyc:
            env = dict(base, LLGRAD_CACHE_DIR=cache, LLGRAD_COMPILE="sync")
            if state.startswith("__pycache__"):
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                env["PYTHONPYCACHEPREFIX"] = pyc
            else:
                env["PYTHONDONTWRITEBYTECODE"] = "1"
            _child(env)                                     # (fills both caches)
            for mode in ("sync", "background"):
                r = _row([_child(dict(env, LLGRAD_COMPILE=mode)) for _ in range(repeat)])
                print(f"  {state}, {mode}: first native result {r['wall']:.3f} s wall "
                      f"({r['cpu']:.3f} s CPU), at call {r['native_at']}")
                print(f"    wall: step 1 (eager) {r['step 1']:.3f}, trace {r['trace']:.3f}, "
                      f"native run made {r['load']:.3f}; CPU: codegen imports "
                      f"{r['codegen imports']:.3f} ({r['codegen modules']:.0f} modules), "
                      f"graph printed {r['background.graph_text']:.3f}, prepared plan "
                      f"{r['prepared.load']:.3f}, kernel lookup {r['jit.lookup']:.3f}")


if __name__ == "__main__":
    child(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
