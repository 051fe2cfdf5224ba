"""Warm processes (stop 76, task L): a second process that shares the first one's disk cache
loads the kernels and prepared plans (codegen/prepared.py, native/cache.py) instead of
planning and building them, and must compute what the first computed, bit for bit, with
none of its kernels raising an error flag and no call falling back to eager silently
(run.py returns _RUN_EAGERLY on a kernel that raises: eager_settled.ran_eagerly counts it
here). Swept over every op table sample program (test_llvm_optable's batches, float32
contiguous: values, generator state, gradients) and whole compiled training steps, with
LLGRAD_COMPILE=sync and =background in the warm process, and eager mode's native kernels.

This file is also the driver: `python <this file> CASE...` runs the cases in one process and
prints one JSON line (digests of every value, the counters, errors)."""
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower as L
from llgrad.codegen import prepared
from llgrad.codegen.lowerings import gemm, host_call

_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(_HERE))
_OPTABLE, _NOTES = [], []


# ---- the driver (run in the subprocesses) ------------------------------------------------------

def _digest(values):
    h = hashlib.sha256()
    for v in values:
        a = np.ascontiguousarray(np.asarray(v))
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _optable():
    if _OPTABLE:
        return _OPTABLE[0]
    spec = importlib.util.spec_from_file_location(
        "_llvm_optable_for_warm", os.path.join(_HERE, "test_llvm_optable.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _OPTABLE.append(mod)
    return mod


def _opt_case(k):
    optable = _optable()
    run = optable.Run(optable.BATCHES[k], "contiguous", "float32", "llvm")
    notes = run.interpreted()
    vals = list(run.values) + [run.state] + [g for g in run.grads if g is not None]
    return vals, notes


def _train(torch, model, make_batch, loss_fn, steps=3, opt="adamw", compiled=True):
    opt = (torch.optim.AdamW if opt == "adamw" else torch.optim.SGD)(
        model.parameters(), lr=1e-2, **({} if opt == "adamw" else {"momentum": 0.9}))

    def step(*batch):
        opt.zero_grad()
        loss = loss_fn(model, *batch)
        loss.backward()
        opt.step()
        return loss
    step = torch.compile(step) if compiled else step
    out = []
    for i in range(steps):
        out.append(step(*make_batch(i)).detach().numpy().copy())
    _NOTES[:] = [k if isinstance(k, str) else type(k).__name__
                 for e in getattr(step, "entries", ()) for k in e.kernels.values()]
    out += [p.detach().numpy().copy() for p in model.parameters()]
    out += [b.numpy().copy() for b in model.buffers()]
    return out


def _regions(y):
    """A cond whose branch and a while_loop whose body call NumPy back (host_call.py)."""
    if y.sum() > 0:
        y = y * llgrad.linalg.det(y) + llgrad.special.zeta(y.abs() + 2, 3.0)
    else:
        y = y.sort(dim=1)[0] * 0.5
    n = llgrad.zeros(())
    while n < 2:
        y = y.topk(3, dim=1)[0].sum() * 0.1 + y
        n = n + 1
    return (y ** 2).mean()


def _step_case(name, compiled=True):
    import llgrad as torch
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    def t(*shape):
        return torch.tensor(rng.standard_normal(shape).astype(np.float32))
    if name == "mlp":
        model = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 5))
        return _train(torch, model, lambda i: (t(8, 12), torch.tensor(rng.integers(0, 5, 8))),
                      lambda m, x, y: F.cross_entropy(m(x), y), compiled=compiled)
    if name == "conv":
        model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
        return _train(torch, model, lambda i: (t(4, 3, 8, 8), torch.tensor(rng.integers(0, 3, 4))),
                      lambda m, x, y: F.cross_entropy(m(x), y), opt="sgd", compiled=compiled)
    if name == "lstm":
        lstm, head = nn.LSTM(6, 8, batch_first=True), nn.Linear(8, 1)
        model = nn.ModuleList([lstm, head])
        return _train(torch, model, lambda i: (t(3, 5, 6), t(3, 1)),
                      lambda m, x, y: F.mse_loss(m[1](m[0](x)[0][:, -1]), y))
    if name == "dropout":
        model = nn.Sequential(nn.Linear(10, 10), nn.Dropout(0.3), nn.Linear(10, 2))
        return _train(torch, model, lambda i: (t(6, 10),),
                      lambda m, x: (m(x + 0.1 * torch.randn(6, 10)) ** 2).mean()) \
            + [torch.random.get_rng_state().numpy()]
    if name == "linalg":
        lin = nn.Linear(4, 4)
        return _train(torch, lin, lambda i: (t(4, 4),), lambda m, x: (
            torch.linalg.solve(m(x) @ m(x).mT + 4 * torch.eye(4), x).sum()
            + torch.linalg.slogdet(m.weight @ m.weight.mT + torch.eye(4))[1]
            + torch.linalg.inv(m.weight + 3 * torch.eye(4)).sum()))
    if name == "complex":
        lin = nn.Linear(8, 8)
        return _train(torch, lin, lambda i: (t(3, 8),), lambda m, x: (
            torch.fft.rfft(m(x)).abs().sum() + torch.view_as_complex(
                m(x).reshape(3, 4, 2)).angle().sum()))
    if name == "sort":
        lin = nn.Linear(8, 8)
        return _train(torch, lin, lambda i: (t(5, 8),), lambda m, x: (
            m(x).sort(dim=1)[0][:, :3].sum() + m(x).topk(2, dim=1)[0].sum()
            + m(x).argsort(dim=0).float().sum() * 0 + m(x).cumsum(1).max()))
    if name == "scatter":
        lin = nn.Linear(6, 6)
        idx = torch.tensor(rng.integers(0, 4, (5, 6)))

        def loss(m, x):
            y = m(x)
            z = torch.zeros(4, 6).scatter_add(0, idx, y)
            w = torch.zeros(10, 6)
            w = w.index_put((torch.tensor([1, 3, 3, 7]),), y[:4], accumulate=True)
            return (z ** 2).sum() + w.sum() + y.gather(1, idx[:, :2]).sum()
        return _train(torch, lin, lambda i: (t(5, 6),), loss)
    if name == "control":
        lin = nn.Linear(5, 5)

        def loss(m, x):
            y = m(x)
            if y.sum() > 0:
                y = y.tanh()
            else:
                y = y.sigmoid()
            n = torch.zeros(())
            while n < 3:
                y = y * 0.9 + 0.1
                n = n + 1
            return (y ** 2).mean()
        return _train(torch, lin, lambda i: (t(4, 5) * (1 if i % 2 else -1),), loss, steps=4)
    if name == "regions":     # (host calls inside a cond's branch and a while_loop's body)
        f = torch.compile(_regions)      # (no gradients: with them
        out = [f(t(4, 4) * s).numpy().copy() for s in (1, -1, 1, -1)]  # Python's if stays)
        _NOTES[:] = [k if isinstance(k, str) else type(k).__name__
                     for e in f.entries for k in e.kernels.values()]
        assert {"cond", "while_loop"} <= {n.op for e in f.entries for n in e.forward.nodes}
        return out
    if name == "deep":        # (more than TABLE_CALLS groups: the entry walks a call table)
        model = nn.Sequential(*[m for _ in range(12) for m in (nn.Linear(8, 8), nn.Tanh())])
        return _train(torch, model, lambda i: (t(4, 8),), lambda m, x: (m(x) ** 2).mean())
    if name == "sizes":       # (one graph at several batch sizes: code shared between sizes)
        model = nn.Sequential(nn.Linear(6, 7), nn.ReLU(), nn.Linear(7, 2))
        return _train(torch, model, lambda i: (t((8, 5, 3, 11, 5)[i], 6),),
                      lambda m, x: m(x).logsumexp(1).mean(), steps=5)
    if name == "transformer":
        emb, layer = nn.Embedding(11, 8), nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1,
                                                                     batch_first=True)
        model = nn.ModuleList([emb, layer, nn.Linear(8, 11)])
        return _train(torch, model, lambda i: (torch.tensor(rng.integers(0, 11, (2, 5))),),
                      lambda m, x: F.cross_entropy(m[2](m[1](m[0](x))).reshape(10, 11),
                                                   x.reshape(10)))
    raise KeyError(name)


def _main(cases):
    import llgrad
    from llgrad.codegen import prepared
    from llgrad.codegen.native import jit
    from llgrad.compile import eager_settled
    eager = []
    ran_eagerly = eager_settled.ran_eagerly

    def counted(cf, args, kwargs):
        eager.append(getattr(cf, "__name__", "?"))
        return ran_eagerly(cf, args, kwargs)
    eager_settled.ran_eagerly = counted
    stored, store = [], prepared.store

    def storing(key, made, libraries):      # (which graphs a process prepared and kept)
        stored.append(made[0].name)
        return store(key, made, libraries)
    prepared.store = storing
    out = {}
    for case in cases:
        before = len(eager)
        del stored[:]
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if case.startswith("opt:"):
                    vals, notes = _opt_case(int(case[4:]))
                elif case.startswith("eager:"):
                    vals, notes = _step_case(case[6:], compiled=False), []
                else:
                    vals = _step_case(case)
                    notes = [n for n in _NOTES if n != "Kernel"] or \
                        ([] if _NOTES else ["no kernel"])
            out[case] = {"digest": _digest(vals), "each": [_digest([v]) for v in vals],
                         "notes": notes, "eager": len(eager) - before, "stored": stored[:],
                         "warnings": sorted({str(w.message)[:200] for w in caught
                                             if "llgrad" in str(w.message)})}
        except Exception as e:      # noqa: BLE001 (a finding: reported, not raised)
            out[case] = {"error": f"{type(e).__name__}: {e}"[:500]}
    print(json.dumps({"cases": out, "plans": dict(prepared.counts),
                      "jit": {k: jit.stats.get(k, 0) for k in ("loaded", "codegen")}}))


# ---- the tests ----------------------------------------------------------------------------------

STEPS = ("mlp", "conv", "lstm", "dropout", "linalg", "complex", "sort", "scatter", "control",
         "regions", "deep", "sizes", "transformer")


def _run(cache, cases, mode="sync"):
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(cache), LLGRAD_COMPILE=mode,
               LLGRAD_NUM_THREADS="1", PYTHONPATH=ROOT)
    env.pop("LLGRAD_CHECK_PREPARED", None)     # (a hit prepared afresh: a build's path)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), *cases], env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _compare(cold, warm, what, strict=True):
    """warm's cases computed cold's values bit for bit, none ran eagerly or interpreted; with
    strict (LLGRAD_COMPILE=sync as cold) it neither prepared nor built a graph. (Background
    mode builds graphs sync never did, as the first size's of a function called at several:
    those it prepares, and may build, on its worker.)"""
    bad = []
    for case, c in cold["cases"].items():
        w = warm["cases"][case]
        if "error" in c or "error" in w:
            bad.append((case, c.get("error"), w.get("error")))
        elif w["digest"] != c["digest"] or w["eager"] or c["eager"] or w["notes"] or \
                (strict and w["stored"]):
            diff = [k for k, (a, b) in enumerate(zip(c["each"], w["each"])) if a != b]
            bad.append((case, "values differ at", diff, "eager", c["eager"], w["eager"],
                        w["notes"], w["stored"], w["warnings"]))
    assert not bad, (what, bad)
    assert warm["plans"]["loaded"] >= cold["plans"]["stored"] >= 1, (what, warm, cold)
    if strict:
        assert warm["jit"]["codegen"] == 0 and warm["plans"]["stored"] == 0, (what, warm)


def _sweep(tmp_path, cases):
    cold = _run(tmp_path, cases)
    assert cold["plans"]["stored"] >= 1 and cold["jit"]["codegen"] >= 1   # (a graph met
    # twice, as the eager cases' kernels after the compiled ones', is loaded in it too)
    _compare(cold, _run(tmp_path, cases), "warm")
    _compare(cold, _run(tmp_path, cases, "background"), "warm, background", strict=False)


@pytest.mark.slow
def test_every_optable_program_in_a_warm_process(tmp_path):
    _sweep(tmp_path, [f"opt:{k}" for k in range(len(_optable().BATCHES))])


@pytest.mark.slow
def test_training_steps_and_eager_kernels_in_a_warm_process(tmp_path):
    _sweep(tmp_path, list(STEPS) + ["eager:mlp", "eager:conv", "eager:lstm",
                                    "eager:transformer"])


def test_a_loaded_plan_registers_the_host_calls_inside_its_regions():
    """A cond's branch and a while_loop's body are planned on their own (control.py): a
    plan loaded from the disk cache registers their host calls' keys too, and a plan whose
    regions the interpreter ran pickles (its graphs' interpreter caches are left out).
    Before: the plan was never stored (every warm process planned it again); stored, its
    kernel raised its flag at every call in a warm process and the call ran eagerly."""
    cf = llgrad.compile(_regions, backend="interpret")
    x = llgrad.tensor(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4) + 0.5)
    want = [cf(x).item() for _ in range(2)]
    (entry,) = cf.entries
    assert {"cond", "while_loop"} <= {n.op for n in entry.forward.nodes}
    before = dict(host_call._CALLS)
    try:
        host_call._CALLS.clear()
        with gemm.libraries_asked() as libraries:
            made = L._prepare(entry.forward, True, True, True, ())
        keys = set(host_call._CALLS)
        assert len(keys) >= 3          # (det, zeta, topk: in the regions only)
        blob = prepared.dumps(made, libraries)
        assert blob is not None
        host_call._CALLS.clear()
        back, _ = prepared.loads(blob)
        host_call.register_loaded(back[1])     # (what prepared.load does on a hit)
        assert set(host_call._CALLS) == keys
    finally:
        host_call._CALLS.update(before)
    assert want[0] == want[1] == _regions(x).item()


if __name__ == "__main__":
    _main(sys.argv[1:])
