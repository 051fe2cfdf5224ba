"""llgrad's own object loader (codegen/native/elf.py): kernels it loads compute exactly what
MCJIT-loaded ones do; objects it does not handle fall back to MCJIT; and a process whose
kernels all come from the disk cache never loads LLVM (nor pays its resident memory)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import llgrad
from llgrad.codegen.native import elf, jit

pytestmark = pytest.mark.skipif(not elf.supported(), reason="the own loader is x86-64 Linux's")


def _step_results(own_loader, monkeypatch):
    monkeypatch.setattr(jit, "OWN_LOADER", own_loader)
    jit._reset()
    before = dict(jit.loader_stats)
    llgrad.manual_seed(0)
    model = llgrad.nn.Sequential(llgrad.nn.Linear(7, 33), llgrad.nn.GELU(),
                                 llgrad.nn.LayerNorm(33), llgrad.nn.Linear(33, 5))
    x = llgrad.randn(19, 7)
    y = llgrad.randint(0, 5, (19,))
    f = llgrad.compile(lambda: llgrad.nn.functional.cross_entropy(model(x), y))
    for _ in range(2):
        model.zero_grad()
        loss = f()
        loss.backward()
    f.wait()
    model.zero_grad()
    loss = f()
    loss.backward()
    used = {k: jit.loader_stats[k] - before[k] for k in before}
    return loss.item(), [p.grad.numpy().copy() for p in model.parameters()], used


def test_same_results_as_mcjit(monkeypatch, tmp_path):
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path / "a"))
    own = _step_results(True, monkeypatch)
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path / "b"))
    mcjit = _step_results(False, monkeypatch)
    assert own[2]["own"] >= 2 and own[2]["mcjit"] == 0
    assert mcjit[2]["mcjit"] >= 2 and mcjit[2]["own"] == 0
    assert own[0] == mcjit[0]
    for a, b in zip(own[1], mcjit[1]):
        np.testing.assert_array_equal(a, b)


def test_refuses_what_it_does_not_handle(monkeypatch):
    assert elf.load(b"not an object file" + bytes(64), lambda name: None) is None
    mod = jit.new_module("elf_missing")
    from llvmlite import ir
    f32 = ir.FloatType()
    ext = ir.Function(mod, ir.FunctionType(f32, [f32]), name="llgrad_no_such_symbol")
    fn = ir.Function(mod, ir.FunctionType(f32, [f32]), name="elf_missing_entry")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.call(ext, [fn.args[0]]))
    before = dict(jit.loader_stats)
    jit.compile_module(mod, ["elf_missing_entry"])      # (never called: no such symbol)
    assert jit.loader_stats["mcjit"] == before["mcjit"] + 1     # (fell back to MCJIT)
    assert jit.loader_stats["own"] == before["own"]


_CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import llgrad
    from llgrad.codegen.native import jit
    llgrad.manual_seed(0)
    model = llgrad.nn.Sequential(llgrad.nn.Linear(6, 16), llgrad.nn.Tanh(),
                                 llgrad.nn.Linear(16, 3))
    opt = llgrad.optim.Adam(model.parameters(), lr=0.01)
    x = llgrad.tensor(np.linspace(-1, 1, 60, dtype=np.float32).reshape(10, 6))
    y = llgrad.tensor(np.arange(10) % 3)

    @llgrad.compile
    def step():
        opt.zero_grad()
        loss = llgrad.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    losses = []
    for _ in range(6):
        losses.append(step().item())
        step.wait()
    print(json.dumps({"losses": losses, "llvm": "llvmlite.binding" in sys.modules,
                      "codegen": jit.stats["codegen"], "loaded": jit.stats["loaded"]}))
""")


@pytest.mark.slow
@pytest.mark.parametrize("worker", ["1", "0"])
def test_a_warm_process_never_loads_llvm(tmp_path, worker):
    """Warm: every kernel from the disk cache, no LLVM. Cold: LLVM only in the compile
    worker's process (codegen/native/worker.py), or in this one without the worker."""
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path), LLGRAD_NUM_THREADS="1",
               LLGRAD_COMPILE_WORKER=worker)
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["llvm"] == (worker == "0") and cold["codegen"] >= 1
    assert not warm["llvm"] and warm["codegen"] == 0 and warm["loaded"] >= 1
    np.testing.assert_allclose(warm["losses"], cold["losses"], rtol=1e-6)
