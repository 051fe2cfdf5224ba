"""Code shared between sizes (codegen/size_params.py) when the sizes alternate between two
classes whose code differs (a training step on two threads: a large batch's loops split
between them, a small one's run on one). The family remembers its last two specialised sizes
(native/size_families.py MAX_LAST), so the second size of each class derives a template from
the first of its class, and the later sizes of both classes share code. With the last size
alone, each size met the other class there and built code of its own (7 builds for 7 sizes
here). Results are eager's."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    from llgrad.codegen.native import cache, jit
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    jit._reset()
    cache._reset()
    before = llgrad.get_num_threads()
    llgrad.set_num_threads(2)
    yield monkeypatch
    llgrad.set_num_threads(before)
    monkeypatch.undo()
    jit._reset()
    cache._reset()


def _step(x, y):
    x = x.detach().requires_grad_()
    loss = F.cross_entropy(F.layer_norm(x, (6,)), y, ignore_index=2, label_smoothing=0.1)
    loss.backward()
    return loss.detach(), x.grad


def test_sizes_alternating_between_classes_share_code_within_each(fresh_cache):
    # (a trace per size, dynamic=False: the code sharing below, not size_templates.py)
    compiled = llgrad.compile(_step, recompile_limit=16, dynamic=False)
    rng = np.random.default_rng(0)
    sizes = [3, 700, 5, 2000, 9, 4096, 13]
    for n in sizes:
        x = llgrad.from_numpy(rng.standard_normal((n, 6)).astype(np.float32))
        y = llgrad.from_numpy(rng.integers(0, 6, n))
        for _ in range(2):                          # (the second call runs native code)
            for a, b in zip(compiled(x, y), _step(x, y)):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert compiled.n_traces == len(sizes)
    # the first size of each class, and a template per class (7 with the last size alone)
    assert compiled.n_llvm_compiles <= 4
    shared = [k for e in compiled.entries for k in e.kernels.values()
              if getattr(k, "shares_sizes", False)]
    assert len(shared) >= len(sizes) - 4
