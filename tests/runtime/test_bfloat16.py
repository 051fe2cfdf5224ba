"""bfloat16 tensors and CPU autocast against PyTorch: values rounded as PyTorch's CPU kernels
round them (in float32, once per op), PyTorch's promotion and number rules, gradients,
views sharing memory, in-place writes rounded, checkpoints both ways, the compile fallback,
and training steps under autocast and in bfloat16 (llgrad/ir/bfloat16.py,
runtime/dispatch_bf16.py, runtime/autocast_cast.py)."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as LF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 6)).astype(np.float32)
B = RNG.standard_normal((4, 6)).astype(np.float32)
X4 = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
W4 = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)


def _spacing(v):
    """One bfloat16 ulp at each |v| (8 significant bits)."""
    a = np.maximum(np.abs(v), 2.0 ** -120)
    return 2.0 ** (np.floor(np.log2(a)) - 7)


def _ulps(got, want):
    """got's largest distance from want in bfloat16 ulps of want's largest magnitude."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not want.size:
        return 0.0
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    scale = _spacing(np.abs(want[ok]).max()) if ok.any() else 1.0
    return float(np.abs(got[ok] - want[ok]).max() / scale) if ok.any() else 0.0


def _name(dt):
    return str(dt).split(".")[-1]


OPS = {
    "add": lambda L, F, a, b: a + b, "sub": lambda L, F, a, b: a - b,
    "mul": lambda L, F, a, b: a * b, "div": lambda L, F, a, b: a / b,
    "pow": lambda L, F, a, b: a.abs() ** b, "exp": lambda L, F, a, b: a.exp(),
    "log": lambda L, F, a, b: a.abs().log(), "tanh": lambda L, F, a, b: a.tanh(),
    "sigmoid": lambda L, F, a, b: a.sigmoid(), "relu": lambda L, F, a, b: F.relu(a),
    "gelu": lambda L, F, a, b: F.gelu(a), "gelu_tanh": lambda L, F, a, b: F.gelu(a, approximate="tanh"),
    "silu": lambda L, F, a, b: F.silu(a), "softmax": lambda L, F, a, b: F.softmax(a, -1),
    "log_softmax": lambda L, F, a, b: F.log_softmax(a, -1),
    "layer_norm": lambda L, F, a, b: F.layer_norm(a, (6,)),
    "rms_norm": lambda L, F, a, b: F.rms_norm(a, (6,)),
    "sum": lambda L, F, a, b: a.sum(), "sum_dim": lambda L, F, a, b: a.sum(1),
    "mean": lambda L, F, a, b: a.mean(0), "var": lambda L, F, a, b: a.var(1),
    "std": lambda L, F, a, b: a.std(), "max": lambda L, F, a, b: a.max(1)[0],
    "amax": lambda L, F, a, b: a.amax(0), "cumsum": lambda L, F, a, b: a.cumsum(1),
    "sqrt": lambda L, F, a, b: a.abs().sqrt(), "rsqrt": lambda L, F, a, b: (a.abs() + 0.1).rsqrt(),
    "clamp": lambda L, F, a, b: a.clamp(-0.5, 0.5), "where": lambda L, F, a, b: L.where(a > 0, a, b),
    "matmul": lambda L, F, a, b: a @ b.T, "linear": lambda L, F, a, b: F.linear(a, b),
    "bmm": lambda L, F, a, b: L.bmm(a.view(2, 2, 6), b.view(2, 6, 2)),
    "einsum": lambda L, F, a, b: L.einsum("ij,kj->ik", a, b),
    "cat": lambda L, F, a, b: L.cat([a, b], 0), "index": lambda L, F, a, b: a[[0, 2]],
    "slice": lambda L, F, a, b: a[:, 1:4] * 2, "mse": lambda L, F, a, b: F.mse_loss(a, b),
    "norm": lambda L, F, a, b: a.norm(), "erf": lambda L, F, a, b: a.erf(),
    "masked_softmax": lambda L, F, a, b: a.masked_fill(b > 0, float("-inf")).softmax(-1),
    "lerp": lambda L, F, a, b: a.lerp(b, 0.3),
    "addcmul": lambda L, F, a, b: a.addcmul(a, b, value=0.5),
    "cross_entropy": lambda L, F, a, b: F.cross_entropy(a, L.tensor([1, 5, 0, 2])),
    "sdpa": lambda L, F, a, b: F.scaled_dot_product_attention(
        a.view(1, 1, 4, 6), b.view(1, 1, 4, 6), a.view(1, 1, 4, 6), is_causal=True),
    "logsumexp": lambda L, F, a, b: a.logsumexp(1), "softplus": lambda L, F, a, b: F.softplus(a),
    "normalize": lambda L, F, a, b: F.normalize(a, dim=1),
    "embedding": lambda L, F, a, b: F.embedding(L.tensor([1, 3, 0]), a),
    "conv2d": lambda L, F, a, b: F.conv2d(a, b, padding=1),
    "max_pool": lambda L, F, a, b: F.max_pool2d(a, 2),
    "avg_pool": lambda L, F, a, b: F.avg_pool2d(a, 2),
    "batch_norm": lambda L, F, a, b: F.batch_norm(a, None, None, training=True),
    "group_norm": lambda L, F, a, b: F.group_norm(a, 3),
}
_IMAGES = {"conv2d", "max_pool", "avg_pool", "batch_norm", "group_norm"}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_values_and_gradients_are_torch_s(name):
    """Each op's result within a bfloat16 ulp of torch's (PyTorch's kernels compute in float32
    and round once, as llgrad does), its gradients within two (llgrad's VJP rules run in
    float32, rounded once; some of PyTorch's round at each step), and the same dtypes."""
    arrays = (X4, W4) if name in _IMAGES else (A, B)
    ts = [torch.tensor(a).bfloat16().requires_grad_() for a in arrays]
    gs = [llgrad.tensor(a).bfloat16().requires_grad_() for a in arrays]
    want, got = OPS[name](torch, TF, *ts), OPS[name](llgrad, LF, *gs)
    assert _name(got.dtype) == _name(want.dtype) == "bfloat16"
    assert _ulps(got.float().detach().numpy(), want.float().detach().numpy()) <= 1.01
    # (a generator of its own: the global one's state depends on the tests run before)
    go = torch.randn(want.shape, generator=torch.Generator().manual_seed(0)).bfloat16()
    want.backward(go)
    got.backward(llgrad.tensor(go.float().numpy()).bfloat16())
    for t, g in zip(ts, gs):
        assert (t.grad is None) == (g.grad is None)
        if t.grad is not None:
            assert g.grad.dtype is llgrad.bfloat16
            assert _ulps(g.grad.float().numpy(), t.grad.float().numpy()) <= 2.01


def test_rounding_is_torch_s_bit_for_bit():
    x = (RNG.standard_normal(20000) * 10.0 ** RNG.integers(-40, 39, 20000)).astype(np.float32)
    x = np.concatenate([x, np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0, 3.3895314e38,
                                       3.4e38, 1e-40, -1e-45])])
    got = llgrad.tensor(x).to(llgrad.bfloat16).float().numpy()
    want = torch.tensor(x).to(torch.bfloat16).float().numpy()
    assert np.array_equal(got, want, equal_nan=True)
    num = ~np.isnan(want)       # (a NaN's sign and payload: PyTorch's differ by code path)
    assert np.array_equal(np.signbit(got[num]), np.signbit(want[num]))
    d = 1 + 2.0 ** -8 + 2.0 ** -30    # (float64 through float32: rounded twice, as PyTorch)
    assert llgrad.tensor(d, dtype=llgrad.float64).bfloat16().item() == \
        torch.tensor(d, dtype=torch.float64).bfloat16().item()


S = 0.3 + 2 ** -12      # a number bfloat16 rounds visibly
NUMBERS = {
    "add": lambda L, a, b: a + S, "rsub": lambda L, a, b: S - a, "mul": lambda L, a, b: a * S,
    "div": lambda L, a, b: a / S, "pow": lambda L, a, b: a.abs() ** (1 + S),
    "clamp": lambda L, a, b: a.clamp(-S, S), "lerp": lambda L, a, b: a.lerp(b, S),
    "add_alpha": lambda L, a, b: a.add(b, alpha=S), "masked_fill": lambda L, a, b: a.masked_fill(b > 0, S),
    "where": lambda L, a, b: L.where(b > 0, a, S), "elu": lambda L, a, b: L.nn.functional.elu(a, S),
    "div_floor": lambda L, a, b: a.div(S, rounding_mode="floor"),
    "add_0d": lambda L, a, b: a + L.tensor(S), "mul_0d": lambda L, a, b: a * L.tensor(S),
    "add_": lambda L, a, b: a.clone().add_(S), "lerp_": lambda L, a, b: a.clone().lerp_(b, S),
    "fill_": lambda L, a, b: a.clone().fill_(S), "full": lambda L, a, b: L.full((3,), S, dtype=a.dtype),
}


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_numbers_beside_bfloat16_are_rounded_where_torch_rounds_them(name):
    """PyTorch keeps mul / div / lerp's number in float32 and rounds other ops' numbers (and
    0-d tensors of other dtypes) to bfloat16 first: bit-equal results."""
    a, b = (RNG.standard_normal(4000) * 3).astype(np.float32), RNG.standard_normal(4000)
    want = NUMBERS[name](torch, torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16())
    got = NUMBERS[name](llgrad, llgrad.tensor(a).bfloat16(), llgrad.tensor(b).bfloat16())
    assert _name(got.dtype) == _name(want.dtype)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


DTYPES = ["bfloat16", "float16", "float32", "float64", "int64", "int32", "uint8", "bool",
          "complex64"]


@pytest.mark.parametrize("other", DTYPES)
def test_promotion_is_torch_s(other):
    for lib in (llgrad, torch):
        assert lib.promote_types(lib.bfloat16, getattr(lib, other)) is not None
    assert _name(llgrad.promote_types(llgrad.bfloat16, getattr(llgrad, other))) == \
        _name(torch.promote_types(torch.bfloat16, getattr(torch, other)))

    def results(lib):
        x = lib.ones(3, dtype=lib.bfloat16)
        y = lib.ones(3, dtype=getattr(lib, other))
        y0 = lib.ones((), dtype=getattr(lib, other))
        return [_name((x + y).dtype), _name((x * y0).dtype), _name((y * x[0]).dtype)]
    assert results(llgrad) == results(torch)


def test_views_share_memory_and_writes_are_rounded():
    x = llgrad.zeros(2, 3, dtype=llgrad.bfloat16)
    x[0].add_(0.1)                            # (through a view, rounded)
    x.t()[2, 1] = 1 / 3
    x[1, :2].copy_(llgrad.tensor([1.00390625, 3.0]))  # (a tie: to even)
    t = torch.zeros(2, 3, dtype=torch.bfloat16)
    t[0].add_(0.1)
    t.t()[2, 1] = 1 / 3
    t[1, :2].copy_(torch.tensor([1.00390625, 3.0]))
    assert x.float().tolist() == t.float().tolist()
    assert x.element_size() == 2 and x.t().stride() == (1, 3) and x.is_floating_point()
    with pytest.raises(TypeError, match="BFloat16"):
        x.numpy()
    with pytest.raises(NotImplementedError, match="bfloat16"):
        x.view(llgrad.int16)
    assert llgrad.finfo(llgrad.bfloat16).eps == torch.finfo(torch.bfloat16).eps


@pytest.mark.parametrize("make", [
    lambda L: L.tensor([0.1, 1 / 3, 300.7], dtype=L.bfloat16),
    lambda L: L.full((2,), 0.1, dtype=L.bfloat16), lambda L: L.arange(0, 3, 0.3, dtype=L.bfloat16),
    lambda L: L.linspace(0, 1, 7, dtype=L.bfloat16), lambda L: L.eye(2, dtype=L.bfloat16),
    lambda L: L.arange(250, 270).to(L.bfloat16), lambda L: L.ones(3).bfloat16() / 3,
    lambda L: L.zeros_like(L.ones(2), dtype=L.bfloat16) + 1 / 3,
])
def test_creation_and_printing_are_torch_s(make):
    got, want = make(llgrad), make(torch)
    assert got.float().tolist() == want.float().tolist()
    assert repr(got).replace("llgrad.", "") == repr(want).replace("torch.", "")


def test_default_dtype_bfloat16():
    try:
        llgrad.set_default_dtype(llgrad.bfloat16)
        assert llgrad.tensor(0.1).dtype is llgrad.bfloat16
        assert llgrad.tensor(0.1).item() == torch.tensor(0.1, dtype=torch.bfloat16).item()
        assert (llgrad.ones(2, dtype=llgrad.float32) * 0.1).dtype is llgrad.float32
    finally:
        llgrad.set_default_dtype(llgrad.float32)


def test_checkpoints_both_ways(tmp_path):
    x = llgrad.randn(3, 4).bfloat16()
    llgrad.save({"x": x, "v": x[:, 1:3]}, tmp_path / "a.pt")
    t = torch.load(tmp_path / "a.pt")
    assert t["x"].dtype is torch.bfloat16 and t["x"].float().tolist() == x.float().tolist()
    assert t["v"].float().tolist() == x[:, 1:3].float().tolist()
    torch.save(torch.nn.Linear(3, 2).bfloat16().state_dict(), tmp_path / "b.pt")
    sd = llgrad.load(tmp_path / "b.pt")
    want = torch.load(tmp_path / "b.pt")
    assert sd["weight"].dtype is llgrad.bfloat16
    assert sd["weight"].float().tolist() == want["weight"].float().tolist()


def test_compile_runs_bfloat16_eagerly_with_a_warning():
    m = llgrad.nn.Linear(4, 3).bfloat16()

    @llgrad.compile
    def step(x):
        return m(x).relu().sum()
    x = llgrad.randn(2, 4).bfloat16()
    with pytest.warns(UserWarning, match="bfloat16"):
        got = step(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert step(x).item() == got.item() == m(x).relu().sum().item()
        assert got.dtype is llgrad.bfloat16


# ---- CPU autocast ------------------------------------------------------------------------
AUTOCAST = {
    "linear": lambda L, F, x: F.linear(x, x[:3]), "matmul": lambda L, F, x: x @ x.T,
    "mm": lambda L, F, x: L.mm(x, x.T), "bmm": lambda L, F, x: L.bmm(x.view(2, 2, 6), x.view(2, 6, 2)),
    "addmm": lambda L, F, x: L.addmm(x[:, :4], x, x[:4].T),
    "einsum": lambda L, F, x: L.einsum("ij,kj->ik", x, x),
    "sdpa": lambda L, F, x: F.scaled_dot_product_attention(x.view(1, 1, 4, 6), x.view(1, 1, 4, 6),
                                                           x.view(1, 1, 4, 6)),
    "softmax": lambda L, F, x: F.softmax(x, -1), "layer_norm": lambda L, F, x: F.layer_norm(x, (6,)),
    "cross_entropy": lambda L, F, x: F.cross_entropy(x, L.tensor([1, 0, 3, 2])),
    "mse": lambda L, F, x: F.mse_loss(x, x * 2), "l1": lambda L, F, x: F.l1_loss(x, x * 2),
    "bce_logits": lambda L, F, x: F.binary_cross_entropy_with_logits(x, x.sigmoid()),
    "kl": lambda L, F, x: F.kl_div(x, x.softmax(-1), reduction="batchmean"),
    "prod": lambda L, F, x: x.prod(), "add": lambda L, F, x: x + x,
    "where": lambda L, F, x: L.where(x > 0, x, x.float()),
    "mha": lambda L, F, x: L.nn.MultiheadAttention(6, 2, batch_first=True)(
        x.view(1, 4, 6), x.view(1, 4, 6), x.view(1, 4, 6))[0],
    "lstm": lambda L, F, x: L.nn.LSTM(6, 4, batch_first=True)(x.view(1, 4, 6))[0],
    "float64": lambda L, F, x: x.double() @ x.double().T,
}


@pytest.mark.parametrize("name", sorted(AUTOCAST))
@pytest.mark.parametrize("given", ["float32", "bfloat16"])
def test_autocast_dtypes_and_values_are_torch_s(name, given):
    def run(L, F):
        L.manual_seed(0)
        x = L.tensor(A).to(getattr(L, given))
        with L.autocast("cpu", dtype=L.bfloat16):
            assert L.is_autocast_enabled("cpu")
            return AUTOCAST[name](L, F, x)
    try:
        want = run(torch, TF)
    except RuntimeError as e:       # (PyTorch's oneDNN has no bfloat16 LSTM on some CPUs)
        if "could not create a primitive descriptor" not in str(e):
            raise
        pytest.skip(f"torch's CPU kernel refuses this host: {e}")
    got = run(llgrad, LF)
    assert _name(got.dtype) == _name(want.dtype)
    assert _ulps(got.float().detach().numpy(), want.float().detach().numpy()) <= 2.01
    assert not llgrad.is_autocast_enabled("cpu")


def test_autocast_nests_and_backward_runs_without_it():
    x = llgrad.tensor(A, requires_grad=True)
    with llgrad.autocast("cpu"):
        y = x @ x.T
        with llgrad.autocast("cpu", enabled=False):
            assert (x @ x.T).dtype is llgrad.float32
        assert (x @ x.T).dtype is llgrad.bfloat16
        y.float().sum().backward()
    assert y.dtype is llgrad.bfloat16 and x.grad.dtype is llgrad.float32
    t = torch.tensor(A, requires_grad=True)
    with torch.autocast("cpu"):
        (t @ t.T).float().sum().backward()
    assert _ulps(x.grad.numpy(), t.grad.numpy()) <= 1.01
    with pytest.warns(UserWarning, match="CPU Autocast only supports dtypes"):
        with llgrad.autocast("cpu", dtype=llgrad.float64):
            assert not llgrad.is_autocast_enabled("cpu")


def _block(L, weights, bf16):
    nn = L.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.ln = nn.Embedding(50, 32), nn.LayerNorm(32)
            self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
            self.fc1, self.fc2, self.head = nn.Linear(32, 64), nn.Linear(64, 32), nn.Linear(32, 50)

        def forward(self, idx):
            x = self.emb(idx)
            h = self.ln(x)
            mask = L.triu(L.ones(idx.shape[1], idx.shape[1], dtype=L.bool), 1)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            x = x + self.fc2(L.nn.functional.gelu(self.fc1(self.ln(x))))
            return self.head(x)
    m = Block()
    if weights is not None:
        with L.no_grad():
            for p, w in zip(m.parameters(), weights):
                p.copy_(L.tensor(w))
    return m.bfloat16() if bf16 else m


@pytest.mark.parametrize("mode", ["autocast", "bfloat16"])
def test_a_training_step_follows_torch(mode):
    """A transformer block trained 5 SGD steps under autocast (float32 weights) or in
    bfloat16: losses and weights within bfloat16's rounding of torch's."""
    idx, tgt = RNG.integers(0, 50, (4, 16)), RNG.integers(0, 50, (4, 16))
    weights = [p.detach().numpy().copy() for p in _block(torch, None, False).parameters()]
    runs = {}
    for L in (torch, llgrad):
        m = _block(L, weights, mode == "bfloat16")
        opt = L.optim.SGD(m.parameters(), lr=0.5)
        i, t, losses = L.tensor(idx), L.tensor(tgt), []
        for _ in range(5):
            with L.autocast("cpu", enabled=mode == "autocast"):
                loss = L.nn.functional.cross_entropy(m(i).view(-1, 50), t.view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        runs[L.__name__] = losses, [p.detach().float().numpy() for p in m.parameters()]
    (lt, wt), (lg, wg) = runs["torch"], runs["llgrad"]
    np.testing.assert_allclose(lg, lt, rtol=2 ** -7 if mode == "bfloat16" else 2e-4)
    tol = 2 ** -6 if mode == "bfloat16" else 2e-3
    assert max(np.abs(a - b).max() for a, b in zip(wg, wt)) <= tol
    assert all(p.dtype is (llgrad.bfloat16 if mode == "bfloat16" else llgrad.float32)
               for p in _block(llgrad, None, mode == "bfloat16").parameters())


@pytest.mark.parametrize("n", [5, 16, 40, 4099])
def test_random_draws_are_torch_s(n):
    """randn / rand / normal_ / uniform_ in bfloat16: PyTorch's numbers for a seed (float32
    draws, in its order, rounded once; a draw rounded up to the bound becomes the other),
    and a module made in bfloat16 gets PyTorch's initial weights."""
    draws = [lambda L: L.randn(n, dtype=L.bfloat16), lambda L: L.rand(n, dtype=L.bfloat16),
             lambda L: L.empty(n, dtype=L.bfloat16).normal_(0.5, 2),
             lambda L: L.empty(n, dtype=L.bfloat16).uniform_(-1, 3),
             lambda L: L.nn.Linear(n, 3, dtype=L.bfloat16).weight.detach()]
    for lib in (llgrad, torch):
        lib.manual_seed(0)
    for draw in draws:
        got, want = draw(llgrad), draw(torch)
        assert got.dtype is llgrad.bfloat16
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_a_compiled_function_called_under_autocast_runs_eagerly():
    """Its graphs are traced without autocast's casts: under autocast a call runs eagerly
    (with a warning), giving eager's bfloat16 result, and native code serves again after."""
    m = llgrad.nn.Linear(4, 3)

    @llgrad.compile
    def f(x):
        return m(x)
    x = llgrad.randn(2, 4)
    assert f(x).dtype is llgrad.float32 and f(x).dtype is llgrad.float32
    with pytest.warns(UserWarning, match="CPU autocast is on"):
        with llgrad.autocast("cpu"):
            got, want = f(x), m(x)
    assert got.dtype is want.dtype is llgrad.bfloat16
    assert got.float().tolist() == want.float().tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(x).dtype is llgrad.float32


def test_assert_close_pickle_and_numpy_conversion():
    # (values in [1, 2): adding 0.001 moves one by at most an ulp there, within bfloat16's
    # rtol; a draw near 0.04 moved by an ulp of 2.4% failed, as torch's would)
    a = (llgrad.rand(10, generator=llgrad.Generator().manual_seed(0)) + 1).bfloat16()
    llgrad.testing.assert_close(a, a + 0.001)         # (bfloat16's tolerances, as torch's)
    with pytest.raises(AssertionError, match="not close"):
        llgrad.testing.assert_close(a, a + 0.1)
    with pytest.raises(AssertionError, match="dtype"):
        llgrad.testing.assert_close(a, a.float())
    llgrad.testing.assert_close(a, a.float(), check_dtype=False)
    with pytest.raises(TypeError, match="BFloat16"):
        np.asarray(a)
    import copy
    import pickle
    for b in (pickle.loads(pickle.dumps(a)), copy.deepcopy(a)):
        assert b.dtype is llgrad.bfloat16 and b.float().tolist() == a.float().tolist()
