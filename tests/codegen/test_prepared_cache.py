"""Prepared graphs in the disk cache (llgrad/codegen/prepared.py): a plan loaded from an
entry emits exactly the module, and describes exactly the buffers and call table, that
preparing the graph afresh gives, for the forward and backward graphs of every op table
sample program; a second process finds the entry, runs the kernels (the libraries the
plan's preparation made resolvable made so again) and gets the first process's numbers;
an entry another key signed is never unpickled."""
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
from llgrad.codegen.lowerings import gemm

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "_llvm_optable_for_prepared", os.path.join(_HERE, "test_llvm_optable.py"))
optable = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(optable)


def _graphs(batch):
    """The forward and (where there is one) backward graph of the batch's programs traced
    together, float32, contiguous, with the release positions lower gets."""
    progs = [p for p in batch if optable._layout_of(p, "contiguous") is not None]
    sizes = [len(p.inputs) for p in progs]

    def fn(*xs):
        outs, k = [], 0
        for p, n in zip(progs, sizes):
            outs += optable._flat(p.fn(llgrad, *xs[k:k + n]))
            k += n
        return tuple(outs)
    cf = llgrad.compile(fn, backend="interpret")
    inputs = [t for p in progs for t in optable._build(p, "contiguous", "float32")]
    llgrad.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf(*inputs)
    out = []
    for entry in cf.entries:
        out.append((entry.forward, ()))
        if entry.backward is not None:
            out.append((entry.backward, tuple(k for k, s in enumerate(entry.saved)
                                              if s.input_index is None)))
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("k", range(len(optable.BATCHES)),
                         ids=[f"{b[0].op}..{b[-1].op}" for b in optable.BATCHES])
def test_loaded_plan_emits_what_preparing_emits(k):
    graphs = _graphs(optable.BATCHES[k])
    assert graphs
    for graph, release in graphs:
        try:
            with gemm.libraries_asked() as libraries:
                made = L._prepare(graph, True, True, True, release)
        except L.Unsupported:
            continue
        blob = prepared.dumps(made, libraries)
        assert blob is not None, graph.name
        back, libs = prepared.loads(blob)
        assert libs == sorted(set(libraries))
        assert back[3:] == made[3:]                        # key, entry name, family
        assert str(back[0]) == str(made[0])
        assert back[2] == made[2]                          # the release split
        p, q = made[1], back[1]
        assert q.describe() == p.describe()
        assert (q.nslots, q.arena_bytes) == (p.nslots, p.arena_bytes)
        assert [b.slot for b in q.outputs] == [b.slot for b in p.outputs]
        assert [str(v) for v in q.escaping] == [str(v) for v in p.escaping]
        table_p, table_q = getattr(p, "call_table", None), getattr(q, "call_table", None)
        assert (table_p is None) == (table_q is None)
        if table_p is not None:
            np.testing.assert_array_equal(np.asarray(table_q), np.asarray(table_p))
        want = str(L._emit(p, "llgrad_entry", made[2]))
        assert str(L._emit(q, "llgrad_entry", back[2])) == want, graph.name


_PROGRAM = r"""
import json, sys
import numpy as np
import llgrad
from llgrad.codegen import prepared
llgrad.manual_seed(0)
model = llgrad.nn.Sequential(llgrad.nn.Linear(24, 32), llgrad.nn.GELU(),
                             llgrad.nn.LayerNorm(32), llgrad.nn.Linear(32, 5))
opt = llgrad.optim.AdamW(model.parameters(), lr=1e-2)

def step(x, y):
    opt.zero_grad()
    loss = llgrad.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

step = llgrad.compile(step) if sys.argv[1] == "compile" else step
rng = np.random.default_rng(0)
losses = []
for _ in range(4):
    x = llgrad.tensor(rng.standard_normal((16, 24)).astype(np.float32))
    y = llgrad.tensor(rng.integers(0, 5, 16))
    losses.append(float(step(x, y)))
kernels = [k for e in getattr(step, "entries", ()) for k in e.kernels.values()
           if not isinstance(k, str)]
print(json.dumps({"losses": losses, "loaded": prepared.counts["loaded"],
                  "stored": prepared.counts["stored"], "kernels": len(kernels),
                  "weight": model[0].weight.detach().numpy().ravel()[:8].tolist()}))
"""


def _run(tmp_path, mode="compile", check="0"):
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path / "cache"), LLGRAD_COMPILE="sync",
               LLGRAD_CHECK_PREPARED=check, LLGRAD_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _PROGRAM, mode], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_runs_the_stored_plans(tmp_path):
    eager = _run(tmp_path, "eager")
    first = _run(tmp_path)
    assert first["stored"] >= 1 and first["loaded"] == 0 and first["kernels"] >= 1
    second = _run(tmp_path)     # (its kernels call the libraries the plans asked for)
    assert second["loaded"] == first["stored"] and second["stored"] == 0
    assert second["kernels"] == first["kernels"]
    assert second["losses"] == first["losses"] and second["weight"] == first["weight"]
    np.testing.assert_allclose(first["losses"], eager["losses"], rtol=1e-5)
    checked = _run(tmp_path, check="1")     # (prepared afresh as well, and compared)
    assert checked["losses"] == first["losses"]


def test_an_entry_that_fails_its_tag_is_prepared_again(tmp_path):
    first = _run(tmp_path)
    plans = tmp_path / "cache" / prepared.SUBDIR
    names = sorted(os.listdir(plans))
    assert names
    for name in names:      # (a byte of each pickle changed: its tag no longer matches)
        data = bytearray((plans / name).read_bytes())
        data[len(data) // 2] ^= 0x40
        (plans / name).write_bytes(bytes(data))
    again = _run(tmp_path)
    assert again["loaded"] == 0 and again["stored"] == first["stored"]
    assert again["losses"] == first["losses"]


def test_no_disk_cache_no_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE_DIR", "0")
    env = dict(os.environ, LLGRAD_COMPILE="sync")
    out = subprocess.run([sys.executable, "-c", _PROGRAM, "compile"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["stored"] == 0 and got["loaded"] == 0
