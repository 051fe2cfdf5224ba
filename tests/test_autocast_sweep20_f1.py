"""CPU autocast against PyTorch, the functions sweep 20's probe found off PyTorch's lists:
float32-list functions (linalg, 3-d and fractional pools, unpooling, reflection/replication
pads, grid_sample, trace, quantile, the inverse FFTs) given bfloat16 or float32 operands,
functions on no list whose llgrad form uses a matrix product inside (adaptive_avg_pool2d,
one-operand einsum, pinv), losses on no list (gaussian_nll, multilabel_soft_margin), the
promote list's index_copy, and out= (PyTorch's out= forms are not autocast)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

R = np.random.default_rng(0)
X = R.standard_normal((4, 6)).astype(np.float32)
Y = R.standard_normal((4, 6)).astype(np.float32)
IMG = R.standard_normal((2, 3, 8, 8)).astype(np.float32)
SEQ = R.standard_normal((2, 5, 6)).astype(np.float32)
_S = R.standard_normal((4, 4)).astype(np.float32)
SPD = (_S @ _S.T + 4 * np.eye(4)).astype(np.float32)
GRID = R.uniform(-1, 1, (2, 4, 4, 2)).astype(np.float32)

CASES = {
    "avg_pool3d": lambda L, F, t: F.avg_pool3d(t["img"].unsqueeze(0), 2),
    "max_pool3d": lambda L, F, t: F.max_pool3d(t["img"].unsqueeze(0), 2),
    "adaptive_avg_pool3d": lambda L, F, t: F.adaptive_avg_pool3d(t["img"].unsqueeze(0), 3),
    "adaptive_max_pool3d": lambda L, F, t: F.adaptive_max_pool3d(t["img"].unsqueeze(0), 2),
    "max_unpool2d": lambda L, F, t: F.max_unpool2d(*F.max_pool2d(t["img"], 2, return_indices=True), 2),
    "fractional_max_pool2d": lambda L, F, t: F.fractional_max_pool2d(
        t["img"], 2, output_size=3, _random_samples=L.full((2, 3, 2), 0.5)),
    "reflection_pad2d": lambda L, F, t: F.pad(t["img"], (2, 2, 1, 1), mode="reflect"),
    "reflection_pad1d": lambda L, F, t: L.nn.ReflectionPad1d(2)(t["seq"]),
    "replication_pad3d": lambda L, F, t: F.pad(t["img"].unsqueeze(0), (1,) * 6, mode="replicate"),
    "reflection_pad3d": lambda L, F, t: F.pad(t["img"].unsqueeze(0), (1,) * 6, mode="reflect"),
    "grid_sample": lambda L, F, t: F.grid_sample(t["img"], t["grid"], align_corners=False),
    "trace": lambda L, F, t: L.trace(t["spd"]),
    "inverse": lambda L, F, t: L.inverse(t["spd"]),
    "linalg_inv": lambda L, F, t: L.linalg.inv(t["spd"]),
    "linalg_inv_ex": lambda L, F, t: L.linalg.inv_ex(t["spd"])[0],
    "tensorinv": lambda L, F, t: L.linalg.tensorinv(t["spd"], ind=1),
    "cholesky": lambda L, F, t: L.linalg.cholesky(t["spd"]),
    "cholesky_solve": lambda L, F, t: L.cholesky_solve(t["x"][:, :4], L.linalg.cholesky(t["spd"])),
    "solve": lambda L, F, t: L.linalg.solve(t["spd"], t["x"][:, :4]),
    "svdvals": lambda L, F, t: L.linalg.svdvals(t["spd"]),
    "eigvalsh": lambda L, F, t: L.linalg.eigvalsh(t["spd"]),
    "qr_r": lambda L, F, t: L.linalg.qr(t["spd"])[1].abs(),
    "lstsq": lambda L, F, t: L.linalg.lstsq(t["spd"], t["x"][:, :4]).solution,
    "pinverse": lambda L, F, t: L.pinverse(t["spd"]),
    "matrix_rank": lambda L, F, t: L.linalg.matrix_rank(t["spd"]),
    "cond": lambda L, F, t: L.linalg.cond(t["spd"]),
    "triangular_solve": lambda L, F, t: L.triangular_solve(t["x"][:, :4], L.linalg.cholesky(t["spd"]),
                                                           upper=False)[0],
    "quantile": lambda L, F, t: L.quantile(t["x"], 0.3, dim=1),
    "nanquantile": lambda L, F, t: L.nanquantile(t["x"], 0.3, dim=1),
    "ifft": lambda L, F, t: L.fft.ifft(t["x"]).abs(),
    "irfft": lambda L, F, t: L.fft.irfft(t["x"]),
    "hfft": lambda L, F, t: L.fft.hfft(t["x"]),
    "view_as_complex": lambda L, F, t: L.view_as_complex(t["x"].view(4, 3, 2)).abs(),
    "gaussian_nll": lambda L, F, t: F.gaussian_nll_loss(t["x"], t["y"], t["y"].abs() + 0.1),
    "multilabel_soft_margin": lambda L, F, t: F.multilabel_soft_margin_loss(t["x"], (t["y"] > 0).to(t["x"].dtype)),
    "adaptive_avg_pool2d": lambda L, F, t: F.adaptive_avg_pool2d(t["img"], 3),
    "einsum_one_operand": lambda L, F, t: L.einsum("ij->j", t["x"]),
    "einsum_diagonal": lambda L, F, t: L.einsum("ii->i", t["spd"]),
    "local_response_norm": lambda L, F, t: F.local_response_norm(t["img"], 2),
    "index_copy": lambda L, F, t: t["x"][:, :3].index_copy(0, L.tensor([1, 0]), L.mm(t["x"][:2], t["y"][:3].T)),
    "torch_index_copy": lambda L, F, t: L.index_copy(t["x"][:, :3], 0, L.tensor([1, 0]), L.mm(t["x"][:2], t["y"][:3].T)),
}


def _run(L, name, given, low):
    t = {k: L.tensor(v).to(getattr(L, given)).requires_grad_() for k, v in
         dict(x=X, y=Y, img=IMG, seq=SEQ, spd=SPD, grid=GRID).items()}
    with L.autocast("cpu", dtype=getattr(L, low)):
        out = CASES[name](L, L.nn.functional, t)
    grads = {}
    if out.requires_grad:
        w = np.random.default_rng(1).standard_normal(tuple(out.shape))
        (out.double() * L.tensor(w)).sum().backward()
        grads = {k: v.grad for k, v in t.items() if v.grad is not None}
    return out, grads


def _close(got, want, low):
    got = got.detach().double().numpy()
    want = want.detach().double().numpy()
    scale = max(np.abs(want).max(), 1e-30) * 2.0 ** -(7 if low == "bfloat16" else 10)
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * scale)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("given,low", [("float32", "bfloat16"), ("bfloat16", "bfloat16"),
                                       ("float32", "float16")])
def test_autocast_list_dtype_value_and_grads_are_torch_s(name, given, low):
    got, ggot = _run(llgrad, name, given, low)
    want, gwant = _run(torch, name, given, low)
    assert str(got.dtype) == str(want.dtype).replace("torch", "llgrad")
    _close(got, want, low)
    assert sorted(ggot) == sorted(gwant)
    for k in gwant:
        assert str(ggot[k].dtype) == str(gwant[k].dtype).replace("torch", "llgrad")
        _close(ggot[k], gwant[k], low)


@pytest.mark.parametrize("fn", ["mm", "matmul", "bmm3"])
@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_out_forms_run_without_autocast(fn, low):
    """torch.mm(a, b, out=float32_tensor) under autocast: PyTorch's out= overload is on no
    list, so it runs in float32 and fills out."""
    res = []
    for L in (torch, llgrad):
        a, b = L.tensor(X), L.tensor(Y).T
        with L.autocast("cpu", dtype=getattr(L, low)):
            out = L.empty(4, 4)
            if fn == "bmm3":
                r = L.bmm(a[None], b[None], out=out[None])
            else:
                r = getattr(L, fn)(a, b, out=out)
        assert r.dtype == L.float32 and out.dtype == L.float32
        res.append(out.numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-6, atol=1e-6)


def test_a_float32_list_function_with_out_runs_without_autocast():
    """linalg.pinv(A, out=float32) under autocast: the out= form is on no list, so
    PyTorch's composite runs its products under autocast (bfloat16), written to out."""
    res = []
    for L in (torch, llgrad):
        with L.autocast("cpu"):
            out = L.empty(4, 4)
            L.linalg.pinv(L.tensor(SPD), out=out)
        res.append(out.numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=0, atol=2 ** -8 * np.abs(res[0]).max())
    assert np.abs(res[1] - np.linalg.pinv(SPD)).max() > 1e-5     # (not float32's products)
