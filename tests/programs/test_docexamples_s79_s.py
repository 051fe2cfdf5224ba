"""PyTorch's own docstring examples of torch.nn (module classes and Module's methods),
torch.nn.functional, torch.linalg, torch.special, torch.fft, torch.distributions, torch.optim
(and lr_scheduler), torch.utils.data, torch.nn.utils (rnn, parametrize, parametrizations,
prune) and torch.nn.init, run as programs with torch and with llgrad
(tests/programs/docexamples_harness.py): each block's shown values must be torch's. A fast
subset runs by default, every block under -m slow.

Each block starts with what PyTorch's own doctest run defines (its --global-exec: `nn`, `F`)
and the names the docstring's module has in scope (doctest runs an example in its module's
globals: `Bernoulli` in torch.distributions, `StepLR` in lr_scheduler, ...). Blocks torch
itself cannot run here (undefined names such as `model` or `optimizer`, CUDA, torchdata) are
skipped by the harness; the ones relying on what llgrad deliberately lacks, or whose printed
value is a float32 round-off coin toss, are listed in KNOWN with the reason."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.utils.parametrizations  # noqa: E402,F401  (submodules dir() must see)
import torch.nn.utils.parametrize  # noqa: E402,F401
import torch.nn.utils.prune  # noqa: E402,F401
import torch.nn.utils.rnn  # noqa: E402,F401
import torch.optim.lr_scheduler  # noqa: E402,F401

import llgrad  # noqa: E402

from docexamples_harness import (compare, examples, public_functions,  # noqa: E402
                                 public_methods, run_block, skip_reason)


def _classes(mod, prefix):
    return [(f"{prefix}.{n}", getattr(mod, n)) for n in sorted(dir(mod))
            if not n.startswith("_") and isinstance(getattr(mod, n, None), type)]


def _objects():
    nnu = torch.nn.utils
    out = (_classes(torch.nn, "torch.nn") + public_methods(torch.nn.Module, "torch.nn.Module")
           + public_functions(torch.nn.functional, "torch.nn.functional")
           + public_functions(torch.linalg, "torch.linalg")
           + public_functions(torch.special, "torch.special")
           + public_functions(torch.fft, "torch.fft")
           + _classes(torch.distributions, "torch.distributions")
           + public_functions(torch.distributions, "torch.distributions")
           + _classes(torch.optim, "torch.optim")
           + public_methods(torch.optim.Optimizer, "torch.optim.Optimizer")
           + _classes(torch.optim.lr_scheduler, "torch.optim.lr_scheduler")
           + _classes(torch.utils.data, "torch.utils.data")
           + public_functions(torch.utils.data, "torch.utils.data"))
    for mod, prefix in ((nnu, "torch.nn.utils"), (nnu.rnn, "torch.nn.utils.rnn"),
                        (nnu.parametrize, "torch.nn.utils.parametrize"),
                        (nnu.parametrizations, "torch.nn.utils.parametrizations"),
                        (nnu.prune, "torch.nn.utils.prune")):
        out += public_functions(mod, prefix) + _classes(mod, prefix)
    return out + public_functions(torch.nn.init, "torch.nn.init")


_GLOBAL = "from torch import nn\nimport torch.nn.functional as F\nimport torch\nimport math\n"
_SCOPE = {"torch.distributions": "from torch.distributions import *\n",
          "torch.optim.lr_scheduler": "from torch.optim.lr_scheduler import *\n",
          "torch.nn.utils": "from torch.nn.utils import prune, spectral_norm, weight_norm, "
                            "remove_spectral_norm, remove_weight_norm\n",
          "torch.nn.utils.parametrizations": "from torch.nn.utils.parametrizations import *\n",
          "torch.nn.utils.prune": "from torch.nn.utils.prune import *\n",
          "torch.utils.data": "from torch.utils.data import *\n",
          "torch.linalg": "from torch import linalg\n"}


def _preamble(name):
    return _GLOBAL + "".join(v for k, v in _SCOPE.items() if name.startswith(k + "."))


BLOCKS = [(n, _preamble(n) + src) for n, src in examples(_objects())]

_COMPLEX = "complex linear algebra (README, Known limits: llgrad's linalg is real-only there)"
_ROUNDOFF = ("allclose(..) at its default atol 1e-8 of float32 results: which side of it "
             "torch lands on is round-off (the values agree: test_roundoff_blocks_agree)")
_FUSED_CELL = ("grad_fn's name only: llgrad's LSTMCell runs the fused cell, named as torch's "
               "CUDA path names it (ThnnFusedLstmCellBackward0); torch's CPU path writes the "
               "cell as adds and muls (AddBackward0); the values agree")
KNOWN = {
    "torch.nn.LSTMCell": _FUSED_CELL,
    "torch.linalg.cholesky": _COMPLEX, "torch.linalg.cholesky_ex": _COMPLEX,
    "torch.linalg.cond": _COMPLEX, "torch.linalg.eig": _COMPLEX, "torch.linalg.eigh": _COMPLEX,
    "torch.linalg.eigvalsh": _COMPLEX, "torch.linalg.inv": _COMPLEX,
    "torch.linalg.matrix_rank": _COMPLEX, "torch.linalg.pinv": _COMPLEX,
    "torch.linalg.householder_product": "torch.geqrf (README, Known limits: not there yet)",
    "torch.linalg.solve": _ROUNDOFF, "torch.linalg.solve_triangular": _ROUNDOFF,
    "torch.fft.hfft2": _ROUNDOFF, "torch.fft.hfftn": _ROUNDOFF,
}

# a spread over the namespaces, and the blocks that found a fix; the rest run under -m slow
FAST = {
    "torch.linalg.ldl_factor", "torch.linalg.ldl_factor_ex", "torch.linalg.svdvals",
    "torch.linalg.lu_factor", "torch.linalg.qr", "torch.linalg.vector_norm",
    "torch.linalg.multi_dot", "torch.nn.Linear", "torch.nn.Softplus", "torch.nn.Embedding",
    "torch.nn.CrossEntropyLoss", "torch.nn.Flatten", "torch.nn.Module.apply",
    "torch.nn.Module.named_modules", "torch.nn.functional.one_hot", "torch.nn.functional.pad",
    "torch.nn.functional.embedding", "torch.nn.functional.cosine_similarity",
    "torch.special.expit", "torch.special.xlogy", "torch.special.gammaln", "torch.special.i1",
    "torch.fft.fft", "torch.fft.rfft", "torch.fft.fftshift", "torch.fft.fftfreq",
    "torch.distributions.Gamma", "torch.distributions.Categorical",
    "torch.distributions.Dirichlet", "torch.nn.utils.rnn.pack_sequence",
    "torch.nn.utils.rnn.pad_sequence", "torch.nn.utils.prune.l1_unstructured",
    "torch.nn.init.xavier_uniform_", "torch.nn.init.calculate_gain",
    "torch.nn.init.kaiming_normal_", "torch.nn.utils.parametrizations.weight_norm",
}


def _param(name, src):
    marks = [] if name in FAST else [pytest.mark.slow]
    return pytest.param(name, src, id=name, marks=marks)


def test_the_sweep_finds_the_blocks():
    names = {n for n, _ in BLOCKS}
    assert len(BLOCKS) > 300
    assert FAST <= names, FAST - names
    assert set(KNOWN) <= names, set(KNOWN) - names


# The harness's judge() with a longer alarm: its 20 s are wall-clock, and the 3-D convolution
# and pooling blocks (inputs of 10^7 elements, a few CPU seconds in either library) pass them
# on a loaded machine
_ALARM = 120.0


@pytest.mark.parametrize("name,src", [_param(n, s) for n, s in BLOCKS])
def test_docstring_example(name, src):
    ref = run_block(src, torch, timeout=_ALARM)
    why = skip_reason(ref, run_block(src, torch, timeout=_ALARM))
    if why:
        pytest.skip(why)
    why = compare(ref, run_block(src, llgrad, timeout=_ALARM))
    if why and name in KNOWN:
        pytest.skip(KNOWN[name])
    assert why is None, f"{name}: {why}\n--- block:\n{src}"


def test_roundoff_blocks_agree():
    """The KNOWN round-off blocks: the solutions and round trips their allclose(..) checks
    agree with torch's to float32 precision."""
    def run(lib):
        lib.manual_seed(0)
        out = []
        A, b = lib.randn(3, 3), lib.randn(3)
        out.append(lib.linalg.solve(A, b))
        A, B = lib.randn(2, 3, 3), lib.randn(2, 3, 4)
        out += [lib.linalg.solve(A, B), A @ lib.linalg.solve(A, B)]
        lib.manual_seed(0)
        for kw, shape in (({"upper": True}, (3, 3)), ({"upper": False}, (2, 3, 3)),
                          ({"upper": False, "left": False}, (2, 4, 4))):
            A = lib.randn(*shape).triu_() if kw["upper"] else lib.randn(*shape).tril_()
            B = lib.randn(*((3, 4) if len(shape) == 2 else (2, 3, 4)))
            X = lib.linalg.solve_triangular(A, B, **kw)
            out += [X, X @ A if kw.get("left") is False else A @ X]
        lib.manual_seed(0)
        T = lib.rand(10, 9)
        out.append(lib.fft.hfft2(lib.fft.ihfft2(T), T.size()))
        T = lib.rand(10, 9)
        out.append(lib.fft.hfftn(lib.fft.ihfftn(T), T.size()))
        return out
    for a, b in zip(run(torch), run(llgrad)):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=2e-5, atol=2e-5)


# ---- the fix: torch.linalg.ldl_factor / ldl_factor_ex / ldl_solve were missing --------------
def _sym_cases():
    rng = np.random.default_rng(79)
    for i in range(24):
        n = int(rng.integers(1, 8))
        batch = (2,) if i % 3 == 0 else ()
        dt = np.float64 if i % 2 else np.float32
        a = rng.standard_normal(batch + (n, n)).astype(dt)
        if i % 4 == 1:
            a = a + np.swapaxes(a, -1, -2)      # indefinite: 2x2 Bunch-Kaufman pivots
        elif i % 4 == 2:
            a = a @ np.swapaxes(a, -1, -2)
        if i % 5 == 0:
            a[..., 0, 0] = 0.0
        yield a, rng.standard_normal(batch + (n, 3)).astype(dt)


def test_ldl_factor_matches_torch():
    """LAPACK's sytrf / sytrs (lower) step for step: torch's LD, pivots (int32, negative for
    2x2 blocks) and info; the solution of ldl_solve; only A's lower triangle is read."""
    two_by_two = 0
    for a, b in _sym_cases():
        t = torch.linalg.ldl_factor_ex(torch.tensor(a))
        g = llgrad.linalg.ldl_factor_ex(llgrad.tensor(a))
        assert g.pivots.dtype == llgrad.int32 and g.info.dtype == llgrad.int32
        assert g.pivots.tolist() == t.pivots.tolist() and g.info.tolist() == t.info.tolist()
        tol = 1e-4 if a.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(g.LD.numpy(), t.LD.numpy(), rtol=tol, atol=tol)
        two_by_two += bool((t.pivots < 0).any())
        if not t.info.eq(0).all():
            continue
        xt = torch.linalg.ldl_solve(t.LD, t.pivots, torch.tensor(b))
        xg = llgrad.linalg.ldl_solve(g.LD, g.pivots, llgrad.tensor(b))
        scale = max(1.0, float(np.abs(xt.numpy()).max()))
        np.testing.assert_allclose(xg.numpy(), xt.numpy(), rtol=tol * 10, atol=tol * 10 * scale)
    assert two_by_two >= 3


def test_ldl_errors_and_no_derivative():
    for lib in (torch, llgrad):
        ld, piv = lib.linalg.ldl_factor(lib.tensor([[1., 2.], [2., 1.]]))
        assert piv.tolist() == [-2, -2]
        with pytest.raises(RuntimeError):           # singular: info > 0
            lib.linalg.ldl_factor(lib.zeros(3, 3))
        assert lib.linalg.ldl_factor_ex(lib.zeros(3, 3)).info.item() == 1
        with pytest.raises(RuntimeError, match="square"):
            lib.linalg.ldl_factor(lib.ones(2, 3))
        with pytest.raises(RuntimeError, match="Incompatible matrix sizes"):
            lib.linalg.ldl_solve(ld, piv, lib.ones(3, 1))
        with pytest.raises(RuntimeError, match="same dtype"):
            lib.linalg.ldl_solve(ld, piv, lib.ones(2, 1, dtype=lib.float64))
        a = lib.randn(3, 3, requires_grad=True)
        ld = lib.linalg.ldl_factor(a @ a.mT).LD
        assert ld.requires_grad
        with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_factor_ex"):
            ld.sum().backward()


def test_ldl_compiled_equals_eager():
    def f(a, b):
        ld, piv, info = llgrad.linalg.ldl_factor_ex(a @ a.mT - 0.5)
        return llgrad.linalg.ldl_solve(ld, piv, b) * 2, ld, piv, info
    llgrad.manual_seed(0)
    a, b = llgrad.randn(2, 4, 4), llgrad.randn(2, 4, 3)
    eager = f(a, b)
    cf = llgrad.compile(f)
    for _ in range(3):
        got = cf(a, b)
        cf.wait()
    for e, c in zip(eager, got):
        assert e.dtype == c.dtype and e.shape == c.shape
        np.testing.assert_array_equal(c.numpy(), e.numpy())
    assert cf.n_traces == 1
