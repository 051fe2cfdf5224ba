"""Run a scenario (tests/fuzz/state_programs.py) twice from its seed, in two independently
built worlds: once with its functions undecorated (eager) and once through llgrad.compile,
and after every event compare everything eager code can observe: the event's exception
(both raise, or neither; the compiled one an instance of eager's type), the result `out`
(values, dtype, shape, requires_grad, Python numbers), every tensor, NumPy array, Python
number and container of the world's namespace (inputs, globals, the captured object's
attributes, HOOKS' call counts), `.grad` of every tensor reached, the model's parameters,
buffers and train/eval flags, the optimiser's param groups and state tensors, the
scheduler's state, and the generator state. Warnings are allowed (a compiled call may run
eagerly and warn); they are listed with a mismatch. Tolerances: rtol 1e-5, atol 1e-6.

    python tests/fuzz/state_differential.py SEED [--backend llvm] [--shrink] [--script]

replays one scenario (--shrink: drop the events the mismatch does not need; --script: print
it as a standalone compiled script)."""
import itertools
import linecache
import random
import sys
import warnings

import numpy as np

import llgrad
import llgrad.nn as nn
from llgrad.optim.lr_scheduler import LRScheduler
from llgrad.optim.optimizer import Optimizer

from state_programs import generate

RTOL, ATOL = 1e-5, 1e-6
_RUNS = itertools.count()


def backend_for(seed):
    """About a quarter of the scenarios run on llvm (each new trace costs an LLVM compile)."""
    return "llvm" if seed % 4 == 3 else "interpret"


# ---- snapshots ------------------------------------------------------------------------------

def _rng_state():
    """The states of llgrad's default generator (read without drawing; should its internals
    move, two draws, which advance both worlds alike), NumPy's and Python's."""
    try:
        from llgrad.runtime.creation import default_generator
        ours = repr(default_generator.state.tolist())
    except (ImportError, AttributeError, KeyError):
        ours = repr(llgrad.rand(2).tolist())
    return ("rng", (ours, hash(np.random.get_state()[1].tobytes()), hash(random.getstate())))


def snapshot(ns, skip=()):
    """{path: comparable leaf} of everything observable in the world's namespace (but the
    names in skip: the functions, compiled in one world)."""
    out, seen = {"<generator states>": _rng_state()}, set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, v in ns.items():
            if name.startswith("__") or name in skip or type(v).__name__ == "module" or \
                    callable(v) and not isinstance(v, nn.Module):
                continue
            _snap(v, name, out, seen)
    return out


def _snap(v, path, out, seen):
    if isinstance(v, llgrad.Tensor):
        out[path] = ("tensor", str(v.dtype), tuple(v.shape), v.requires_grad, v.is_leaf,
                     np.array(v.detach().numpy(), copy=True))
        if not path.endswith(".grad"):      # (a .grad's own .grad is not compared)
            g = v.grad
            if g is None:
                out[path + ".grad"] = None
            else:
                _snap(g, path + ".grad", out, seen)
    elif isinstance(v, np.ndarray):
        out[path] = ("ndarray", str(v.dtype), v.shape, np.array(v, copy=True))
    elif isinstance(v, float):
        out[path] = ("float", v)
    elif v is None or isinstance(v, (int, str, bool)):
        out[path] = (type(v).__name__, v)
    elif isinstance(v, (list, tuple)):
        out[path] = (type(v).__name__, len(v))
        for i, x in enumerate(v):
            _snap(x, f"{path}[{i}]", out, seen)
    elif isinstance(v, dict):
        out[path] = ("dict", len(v))
        for i, (k, x) in enumerate(v.items()):
            key = repr(k) if isinstance(k, (str, int)) else f"#{i}"
            _snap(x, f"{path}[{key}]", out, seen)
    elif id(v) in seen:
        return
    elif isinstance(v, nn.Module):
        seen.add(id(v))
        for name, m in v.named_modules():
            out[f"{path}.{name}.training" if name else f"{path}.training"] = ("bool", m.training)
        for name, p in itertools.chain(v.named_parameters(), v.named_buffers()):
            _snap(p, f"{path}.{name}", out, seen)
    elif isinstance(v, Optimizer):
        seen.add(id(v))
        for i, group in enumerate(v.param_groups):
            _snap({k: x for k, x in group.items() if k != "params"}, f"{path}.param_groups[{i}]",
                  out, seen)
        params = [p for g in v.param_groups for p in g["params"]]
        for i, p in enumerate(params):
            _snap(dict(v.state.get(p, {})), f"{path}.state[param {i}]", out, seen)
    elif isinstance(v, LRScheduler) or type(v).__module__ == "state_scenario":
        seen.add(id(v))
        out[path] = ("object", type(v).__name__)
        for k, x in sorted(vars(v).items()):
            if k not in ("optimizer",):     # (a scheduler's optimiser: compared as opt)
                _snap(x, f"{path}.{k}", out, seen)
    else:
        out[path] = ("object", type(v).__name__)


def _scale(w):
    """max(1, the largest finite |w|): atol is relative to the array's magnitude, as a float32
    rounding in one entry is (the gradient of tanh, g * (1 - y*y), cancels where y rounds
    near 1: one ulp of y moves it by ~1.2e-7 * |g|, and numpy's and LLVM's tanh may round
    differently)."""
    finite = np.abs(w[np.isfinite(w)]) if w.dtype.kind in "fc" else np.zeros(0)
    return max(1.0, float(finite.max())) if finite.size else 1.0


def _differs(g, w):
    """A description of how leaf g (compiled) differs from w (eager), or None."""
    if g is None or w is None or g[0] != w[0]:
        return None if g == w else f"{_short(w)} in eager, {_short(g)} compiled"
    if g[0] == "float":
        return None if np.isclose(g[1], w[1], rtol=RTOL, atol=ATOL, equal_nan=True) else \
            f"{w[1]!r} in eager, {g[1]!r} compiled"
    if g[0] not in ("tensor", "ndarray"):
        return None if g == w else f"{w[1:]!r} in eager, {g[1:]!r} compiled"
    meta = ("dtype", "shape", "requires_grad", "is_leaf")
    for name, a, b in zip(meta, g[1:-1], w[1:-1]):
        if a != b:
            return f"{name} {b!r} in eager, {a!r} compiled"
    a, b = g[-1], w[-1]
    ok = np.allclose(a, b, rtol=RTOL, atol=ATOL * _scale(b), equal_nan=True) \
        if a.dtype.kind in "fc" else np.array_equal(a, b)
    if ok:
        return None
    return (f"values differ (max abs diff {np.max(np.abs(a.astype(float) - b.astype(float))):.3g})"
            f"\n        eager:    {_fmt(b)}\n        compiled: {_fmt(a)}")


def _fmt(a):
    return np.array2string(np.asarray(a), precision=5, threshold=12, max_line_width=200)


def _short(leaf):
    if leaf is None:
        return "None"
    if leaf[0] == "tensor":
        return f"a tensor {leaf[1]}{list(leaf[2])} requires_grad={leaf[3]} {_fmt(leaf[-1])}"
    if leaf[0] == "ndarray":
        return f"an ndarray {_fmt(leaf[-1])}"
    return f"{leaf[0]} {leaf[1]!r}" if len(leaf) > 1 else leaf[0]


# ---- running --------------------------------------------------------------------------------

class Mismatch(AssertionError):
    def __init__(self, scenario, backend, event, diffs, warned):
        self.scenario, self.backend, self.event = scenario, backend, event
        self.diffs, self.warned = diffs, warned
        super().__init__(self.report())

    def report(self):
        s = self.scenario
        lines = [f"state scenario seed={s.seed} backend={self.backend}: compiled differs from "
                 f"eager at event {self.event} of {len(s.events)}", "", s.describe(self.event),
                 "", f"# mismatch at event {self.event} ({s.events[self.event].label}):"]
        lines += [f"    {d}" for d in self.diffs[:10]]
        if len(self.diffs) > 10:
            lines.append(f"    ... and {len(self.diffs) - 10} more")
        if self.warned:
            lines.append("# warnings of the compiled run at that event:")
            lines += [f"    {w}" for w in self.warned]
        lines.append(f"# replay: python tests/fuzz/state_differential.py {s.seed} "
                     f"--backend {self.backend} --shrink --script")
        return "\n".join(lines)


def _world(scenario, backend):
    """A fresh namespace with the world built; its functions compiled when backend is set."""
    source = scenario.source()
    filename = f"<state scenario {scenario.seed} #{next(_RUNS)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": "state_scenario"}
    exec(compile(source, filename, "exec"), ns)
    for f in scenario.funcs if backend else ():
        ns[f.name] = llgrad.compile(ns[f.name], backend=backend)
    return ns, filename


def _events(scenario, ns, filename):
    """Run the events, yielding (k, exception or None, snapshot, warnings) after each."""
    for k, ev in enumerate(scenario.events):
        code = compile(ev.text, f"{filename} event {k}", "exec")
        err = None
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                exec(code, ns)
            except Exception as e:          # noqa: BLE001 - compared with the other world
                err = e
            for f in scenario.funcs:        # (background builds: native from the next event)
                wait = getattr(ns.get(f.name), "wait", None)
                if wait is not None:
                    wait()
        yield k, err, snapshot(ns, {f.name for f in scenario.funcs}), \
            [f"{w.category.__name__}: {w.message}" for w in warned]


def _compare_event(want, got):
    (w_err, w_snap), (g_err, g_snap) = want, got
    diffs = []
    if (w_err is None) != (g_err is None) or w_err is not None and \
            not isinstance(g_err, type(w_err)):
        show = lambda e: "nothing" if e is None else f"{type(e).__name__}: {str(e)[:300]}"  # noqa
        diffs.append(f"exception: eager raised {show(w_err)}; compiled raised {show(g_err)}")
    for path in list(w_snap) + [p for p in g_snap if p not in w_snap]:
        if path not in g_snap:
            diffs.append(f"{path}: {_short(w_snap[path])} in eager, absent compiled")
        elif path not in w_snap:
            diffs.append(f"{path}: absent in eager, {_short(g_snap[path])} compiled")
        else:
            d = _differs(g_snap[path], w_snap[path])
            if d:
                diffs.append(f"{path}: {d}")
    return diffs


def find_mismatch(scenario, backend, full=False):
    """The first Mismatch of the compiled world against eager's, or None. full=True runs
    every event even past a mismatch (to time a scenario as if it passed)."""
    ns, fname = _world(scenario, None)
    want = [(err, snap) for _, err, snap, _ in _events(scenario, ns, fname)]
    del ns
    ns, fname = _world(scenario, backend)
    first = None
    for k, err, snap, warned in _events(scenario, ns, fname):
        diffs = _compare_event(want[k], (err, snap))
        if diffs and first is None:
            first = Mismatch(scenario, backend, k, diffs, warned)
            if not full:
                break
    return first


def _try(scenario, backend):
    try:
        return find_mismatch(scenario, backend)
    except Exception:       # noqa: BLE001 - a world that no longer builds
        return None


def shrink(scenario, backend, mismatch):
    """Drop the events, then the world's lines, the mismatch does not need (greedy, one
    at a time): the smaller scenario's first Mismatch."""
    events = scenario.events[:mismatch.event + 1]
    i = 0
    while i < len(events):
        cand = scenario.with_events(events[:i] + events[i + 1:])
        m = _try(cand, backend) if cand.events else None
        if m is not None:
            mismatch, events = m, cand.events[:m.event + 1]
        else:
            i += 1
    scenario = scenario.with_events(events)
    for _ in range(3):          # then world lines (not the manual_seed) it does not need
        i, before = 1, len(scenario.world)
        while i < len(scenario.world):
            cand = scenario.with_world(scenario.world[:i] + scenario.world[i + 1:])
            m = _try(cand, backend)
            if m is not None and m.event == len(events) - 1:
                mismatch, scenario = m, cand
            else:
                i += 1
        if len(scenario.world) == before:
            break
    return find_mismatch(scenario, backend) or mismatch


def check_scenario(seed, backend=None, shrink_it=False):
    backend = backend or backend_for(seed)
    scenario = generate(seed)
    m = find_mismatch(scenario, backend)
    if m is not None:
        if shrink_it:
            m = shrink(scenario, backend, m)
        raise m


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="replay one state-fuzzer scenario")
    ap.add_argument("seed", type=int)
    ap.add_argument("--backend", default=None, choices=("llvm", "interpret", "python"))
    ap.add_argument("--shrink", action="store_true")
    ap.add_argument("--script", action="store_true", help="print the standalone script")
    a = ap.parse_args(argv)
    backend = a.backend or backend_for(a.seed)
    scenario = generate(a.seed)
    m = find_mismatch(scenario, backend)
    if m is not None and a.shrink:
        m = shrink(scenario, backend, m)
    if a.script:
        s = m.scenario if m is not None else scenario
        print(s.script(backend))
    print(m.report() if m is not None else
          f"state scenario seed={a.seed} backend={backend}: no mismatch\n\n" + scenario.describe())
    return 1 if m is not None else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
