"""The LAPACK ops (native_host in the op table) in compiled code: the kernel calls their
NumPy implementation back through Python (codegen/lowerings/host_call.py), so a step using
one stays native code: results and gradients equal eager's (and torch's), a disk-cached
kernel finds its callback in a fresh process, and a failure in the callback gives eager's
error."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import llgrad
from llgrad.codegen.kernel import Kernel

STEPS = {
    "inv": lambda a: llgrad.linalg.inv(a @ a.mT + 3 * llgrad.eye(4)).sum(),
    "det": lambda a: llgrad.linalg.det(a + 2 * llgrad.eye(4)).sum(),
    "eigh": lambda a: (llgrad.linalg.eigh(a @ a.mT)[0] ** 2).sum(),
    "svdvals": lambda a: llgrad.linalg.svdvals(a).sum(),
    "qr": lambda a: llgrad.linalg.qr(a)[1].abs().sum(),
    "lu_solve": lambda a: llgrad.linalg.lu_solve(*llgrad.linalg.lu_factor(a + 3 * llgrad.eye(4)),
                                                 a[..., :2]).sum(),
    "matrix_exp": lambda a: llgrad.linalg.matrix_exp(0.3 * a).sum(),
}


def _run(name, lib, x, compiled):
    a = lib.tensor(x, requires_grad=True)
    f = STEPS[name] if lib is llgrad else {
        "inv": lambda a: lib.linalg.inv(a @ a.mT + 3 * lib.eye(4, dtype=a.dtype)).sum(),
        "det": lambda a: lib.linalg.det(a + 2 * lib.eye(4, dtype=a.dtype)).sum(),
        "eigh": lambda a: (lib.linalg.eigh(a @ a.mT)[0] ** 2).sum(),
        "svdvals": lambda a: lib.linalg.svdvals(a).sum(),
        "qr": lambda a: lib.linalg.qr(a)[1].abs().sum(),
        "lu_solve": lambda a: lib.linalg.lu_solve(
            *lib.linalg.lu_factor(a + 3 * lib.eye(4, dtype=a.dtype)), a[..., :2]).sum(),
        "matrix_exp": lambda a: lib.linalg.matrix_exp(0.3 * a).sum()}[name]
    if compiled:
        f = llgrad.compile(f)
        for _ in range(2):
            f(lib.tensor(x, requires_grad=True))
        f.wait()        # (LLGRAD_COMPILE=background: the next call runs native code)
    loss = f(a)
    loss.backward()
    return float(loss.detach()), a.grad.numpy().copy(), f


@pytest.mark.parametrize("name", sorted(STEPS))
def test_native_and_equal_to_eager(name):
    x = np.random.default_rng(3).standard_normal((2, 4, 4))
    loss_c, grad_c, f = _run(name, llgrad, x, True)
    loss_e, grad_e, _ = _run(name, llgrad, x, False)
    np.testing.assert_allclose(loss_c, loss_e, rtol=1e-12)
    np.testing.assert_allclose(grad_c, grad_e, rtol=1e-9, atol=1e-12)
    entry = f.entries[0]
    assert all(isinstance(k, Kernel) for k in entry.kernels.values()), entry.kernels
    assert any("llgrad_host_call" in k.ir_before for k in entry.kernels.values())


@pytest.mark.parametrize("name", sorted(STEPS))
def test_equal_to_torch(name):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(4).standard_normal((2, 4, 4))
    loss_c, grad_c, _ = _run(name, llgrad, x, True)
    loss_t, grad_t, _ = _run(name, torch, x, False)
    np.testing.assert_allclose(loss_c, loss_t, rtol=1e-9)
    np.testing.assert_allclose(grad_c, grad_t, rtol=1e-7, atol=1e-9)


def test_a_view_operand_and_float32():
    x = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
    f = llgrad.compile(lambda a: llgrad.linalg.inv(a[:, ::2] @ a[:, ::2].T
                                                   + 3 * llgrad.eye(4)) * 2)
    a = llgrad.tensor(x)
    for _ in range(2):
        got = f(a)
    b = x[:, ::2]
    np.testing.assert_allclose(got.numpy(), 2 * np.linalg.inv(b @ b.T + 3 * np.eye(4)),
                               rtol=1e-5)
    assert got.dtype == llgrad.float32


def test_a_failure_in_the_callback_gives_eagers_error():
    f = llgrad.compile(lambda a: llgrad.linalg.eigh(a)[0].sum())
    good = llgrad.tensor(np.eye(3) * 2.0)
    assert f(good).item() == 6.0 and f(good).item() == 6.0
    bad = llgrad.tensor(np.full((3, 3), np.nan))
    with pytest.raises(Exception) as eager:
        llgrad.linalg.eigh(bad)
    with pytest.raises(type(eager.value)) as compiled:
        f(bad)
    assert str(compiled.value).splitlines()[0] == str(eager.value).splitlines()[0]


def test_a_cached_kernel_finds_its_callback_in_a_new_process(tmp_path):
    code = textwrap.dedent("""
        import numpy as np, llgrad
        f = llgrad.compile(lambda a: llgrad.linalg.det(a + 2 * llgrad.eye(3)) * 1.5)
        a = llgrad.tensor(np.arange(9.0).reshape(3, 3) / 10)
        f(a); print(repr(f(a).item()), f.n_llvm_compiles)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLGRAD_")}
    env.update(LLGRAD_CACHE_DIR=str(tmp_path / "cache"), LLGRAD_COMPILE="sync",
               LLGRAD_CACHE_KEY_FILE=str(tmp_path / "key"))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=300, check=True).stdout.split()
            for _ in range(2)]
    expected = 1.5 * np.linalg.det(np.arange(9.0).reshape(3, 3) / 10 + 2 * np.eye(3))
    assert float(runs[0][0]) == float(runs[1][0]) == pytest.approx(expected, rel=1e-14)
    assert runs[0][1] != "0" and runs[1][1] == "0"        # (the second: from the disk cache)
