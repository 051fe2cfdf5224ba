"""PyTorch's own docstring examples of torch.* functions and torch.Tensor methods, run as
programs with torch and with llgrad (tests/programs/docexamples_harness.py): each block's
shown values must be torch's. A fast subset runs by default, every block under -m slow.

Blocks torch itself cannot run here (CUDA-only lines are dropped first; undefined names,
missing files, uninitialised memory) are skipped by the harness; blocks relying on what
llgrad deliberately lacks are listed in DELIBERATE with the reason. The fixes these examples
found have their own tests below, against torch (and eager == compiled where it applies)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

from docexamples_harness import (examples, judge, public_functions,  # noqa: E402
                                 public_methods)

_QUANT = "quantized tensors (llgrad deliberately has none)"
_CSR = "sparse CSR/CSC/BSR/BSC layouts (llgrad has strided and sparse COO only)"
_CONJ = "lazy conjugate / negative bits (llgrad computes conj(); is_conj() is False)"
DELIBERATE = {
    "torch.quantize_per_channel": _QUANT, "torch.quantize_per_tensor": _QUANT,
    "torch.quantize_per_tensor_dynamic": _QUANT, "torch.quantized_batch_norm": _QUANT,
    "torch.quantized_max_pool1d": _QUANT, "torch.quantized_max_pool2d": _QUANT,
    "torch.sparse_bsc_tensor": _CSR, "torch.sparse_bsr_tensor": _CSR,
    "torch.sparse_compressed_tensor": _CSR, "torch.sparse_csc_tensor": _CSR,
    "torch.sparse_csr_tensor": _CSR, "torch.Tensor.col_indices": _CSR,
    "torch.Tensor.crow_indices": _CSR, "torch.Tensor.to_sparse": _CSR,
    "torch.Tensor.to_sparse_bsc": _CSR, "torch.Tensor.to_sparse_bsr": _CSR,
    "torch.Tensor.to_sparse_csc": _CSR, "torch.Tensor.to_sparse_csr": _CSR,
    "torch.conj": _CONJ, "torch.resolve_conj": _CONJ, "torch.resolve_neg": _CONJ,
    "torch.cholesky_inverse": "complex linear algebra (llgrad's linalg is real-only)",
    "torch.cholesky_solve": "complex linear algebra (llgrad's linalg is real-only)",
    "torch.hash_tensor": "uint64 results (llgrad deliberately has no uint64 tensors)",
    "torch.set_default_dtype": "complex32 (llgrad has no complex half: NumPy has none)",
    "torch.typename": "names the library: 'llgrad.LongTensor' as Tensor.type() does",
}

BLOCKS = examples(public_functions(torch, "torch") + public_methods(torch.Tensor, "torch.Tensor"))

# a spread of the blocks (creation, math, reductions, indexing, autograd, sparse, files) and
# every block that found a fix; the rest run under -m slow
FAST = {
    "torch.from_file", "torch.narrow_copy", "torch.sparse_coo_tensor",
    "torch.Tensor.register_post_accumulate_grad_hook", "torch.arange", "torch.cat",
    "torch.cumsum", "torch.gather", "torch.index_select", "torch.logsumexp", "torch.max",
    "torch.combinations", "torch.nonzero", "torch.randn", "torch.take_along_dim", "torch.sort",
    "torch.topk", "torch.unique", "torch.where", "torch.einsum", "torch.matmul",
    "torch.Tensor.scatter_", "torch.Tensor.index_add_", "torch.Tensor.register_hook",
    "torch.Tensor.new_tensor", "torch.Tensor.expand", "torch.Tensor.view",
    "torch.std_mean", "torch.histc", "torch.tensordot",
}


def _param(name, src):
    marks = [] if name in FAST else [pytest.mark.slow]
    return pytest.param(name, src, id=name, marks=marks)


def test_the_sweep_finds_the_blocks():
    names = {n for n, _ in BLOCKS}
    assert len(BLOCKS) > 300
    assert FAST <= names, FAST - names


@pytest.mark.parametrize("name,src", [_param(n, s) for n, s in BLOCKS])
def test_docstring_example(name, src):
    kind, why = judge(name, src, llgrad, torch)
    if kind == "skip":
        pytest.skip(why)
    if kind == "mismatch" and name in DELIBERATE:
        pytest.skip(DELIBERATE[name])
    assert kind == "equal", f"{name}: {why}\n--- block:\n{src}"


# ---- the fixes -------------------------------------------------------------------------------
def test_post_accumulate_grad_hook_may_return_the_leaf():
    """Tensor.register_post_accumulate_grad_hook's example: `lambda p: p.add_(...)` returns
    the leaf, which PyTorch allows (other results raise); llgrad raised for it."""
    got = {}
    for lib in (torch, llgrad):
        v = lib.tensor([0., 0., 0.], requires_grad=True)
        h = v.register_post_accumulate_grad_hook(lambda p: p.add_(p.grad, alpha=-0.01))
        v.backward(lib.tensor([1., 2., 3.]))
        h.remove()
        w = lib.tensor([0., 0.], requires_grad=True)
        w.register_post_accumulate_grad_hook(lambda p: p.detach())
        with pytest.raises(RuntimeError, match="should return None"):
            w.sum().backward()
        got[lib.__name__] = (v.detach().numpy().copy(), v.grad.numpy().copy())
    np.testing.assert_array_equal(got["torch"][0], got["llgrad"][0])
    np.testing.assert_array_equal(got["torch"][1], got["llgrad"][1])


def test_post_accumulate_grad_hook_returning_the_leaf_compiled():
    """Compiled == eager == torch; the compiled step traces as often as with a hook that
    returns None."""
    def run(lib, compiled, returns_leaf=True):
        w = lib.tensor([1., 2., 3.], requires_grad=True)

        def hook(p):
            r = p.add_(p.grad, alpha=-0.1)
            return r if returns_leaf else None
        w.register_post_accumulate_grad_hook(hook)

        def step(x):
            loss = (w * x).sum()
            loss.backward()
            return loss.detach()
        fn = llgrad.compile(step) if compiled else step
        outs = []
        for i in range(3):
            outs.append(fn(lib.tensor([1., 1., 2.]) * (i + 1)).numpy().copy())
            if compiled:
                fn.wait()
            w.grad = None
        return outs, w.detach().numpy().copy(), fn
    t_outs, t_w, _ = run(torch, False)
    e_outs, e_w, _ = run(llgrad, False)
    c_outs, c_w, fn = run(llgrad, True)
    n_outs, n_w, fn_none = run(llgrad, True, returns_leaf=False)
    for a, b, c in zip(t_outs, e_outs, c_outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)
        np.testing.assert_array_equal(c, b)
    np.testing.assert_allclose(e_w, t_w, rtol=1e-6)
    np.testing.assert_array_equal(c_w, e_w)
    np.testing.assert_array_equal(n_w, c_w)
    assert fn.n_traces == fn_none.n_traces


def test_narrow_copy_of_sparse_stays_sparse():
    got = {}
    for lib in (torch, llgrad):
        s = lib.arange(16).reshape(2, 2, 2, 2).to_sparse(2)
        rs = [lib.narrow_copy(s, 0, 0, 1), s.narrow_copy(1, 1, 1), lib.narrow_copy(s, 3, 0, 1)]
        got[lib.__name__] = [(str(r.layout).split(".")[-1], r.sparse_dim(), r.dense_dim(),
                              tuple(r.shape), r.to_dense().numpy().tolist()) for r in rs]
    assert got["llgrad"] == got["torch"]


@pytest.mark.parametrize("indices", [[[0., 1.]], [[0.5, 1.]], [[True, False]], [[1, 0]]])
def test_sparse_coo_tensor_converts_indices(indices):
    """sparse_coo_tensor's example passes torch.empty([1, 0]) (float32) as the indices:
    PyTorch converts any indices to int64; llgrad refused float and bool indices."""
    got = {}
    for lib in (torch, llgrad):
        s = lib.sparse_coo_tensor(lib.tensor(indices), lib.tensor([1., 2.]), [2])
        e = lib.sparse_coo_tensor(lib.empty([1, 0]), lib.empty([0, 2]), [1, 2])
        got[lib.__name__] = (str(s._indices().dtype).split(".")[-1],
                             s.to_dense().numpy().tolist(), tuple(e.shape), e.dense_dim())
    assert got["llgrad"] == got["torch"]


def test_from_file(tmp_path):
    """torch.from_file was missing: a copy (shared=False) or a mapping (shared=True, which
    makes or grows the file) of a file's elements; torch's errors for a short or missing
    file."""
    got = {}
    for lib in (torch, llgrad):
        p = str(tmp_path / f"{lib.__name__}.bin")
        np.arange(10, dtype=np.float64).tofile(p)
        a = lib.from_file(p, size=3, dtype=lib.float64)
        b = lib.from_file(p, False, 10, dtype=lib.float64)
        b[0] = 7.0                              # a copy: the file keeps its 0
        c = lib.from_file(p, True, 10, dtype=lib.float64)
        c[1] = 42.0                             # a mapping: the file gets the 42
        del c
        d = lib.from_file(p, size=4)            # default dtype float32 over the same bytes
        e = lib.from_file(p, size=0)
        q = str(tmp_path / f"{lib.__name__}_new.bin")
        f = lib.from_file(q, True, 3)           # shared: made, zero-filled
        errs = []
        for args in ((p, False, 30), (str(tmp_path / "missing.bin"), False, 3)):
            with pytest.raises(RuntimeError) as ei:
                lib.from_file(*args, dtype=lib.float64)
            errs.append(str(ei.value).split(" ")[0])
        got[lib.__name__] = (a.numpy().tolist(), b.numpy().tolist(),
                             np.fromfile(p).tolist(), d.numpy().tolist(), tuple(e.shape),
                             str(d.dtype).split(".")[-1], f.numpy().tolist(),
                             os.path.getsize(q), errs, b.requires_grad)
    assert got["llgrad"] == got["torch"]
