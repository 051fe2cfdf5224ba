"""The meta device against PyTorch's: tensors with shapes, strides, dtypes and autograd
history but no data (reprs, views, op results, errors for reading values and for mixing
devices), the factories under device='meta' and the default device, and the model
workflows that use it: build without memory, to_empty + load_state_dict, assign=True,
shape inference by running a module on meta inputs."""
import copy
import io
import pickle
import resource
import warnings

import pytest

import llgrad
import llgrad.nn as lnn
import llgrad.nn.functional as LF
from llgrad.runtime import meta_dispatch

torch = pytest.importorskip("torch")

M = "meta"


@pytest.fixture(autouse=True, scope="module")
def _meta_hook_out_afterwards():
    yield
    meta_dispatch.uninstall()       # (the tests after these run without the meta hook)


def _norm(x):
    """x with llgrad's names read as torch's (reprs, dtypes, sizes)."""
    if isinstance(x, (list, tuple)):
        return type(x)(_norm(v) for v in x)
    if isinstance(x, (torch.Size, llgrad.Size)):
        return ("Size", tuple(x))
    if isinstance(x, (torch.dtype, llgrad.dtype)):
        return str(x).replace("llgrad.", "torch.")
    if isinstance(x, str):
        return x.replace("llgrad.", "torch.")
    return x


def _run(fn, lib):
    try:
        return ("ok", _norm(fn(lib)))
    except Exception as e:      # noqa: BLE001 (the error is what is compared)
        return ("error", type(e).__name__)


def same(fn):
    """fn(torch) and fn(llgrad) give the same (normalised) result or raise the same type."""
    got, want = _run(fn, llgrad), _run(fn, torch)
    assert got == want, (got, want)
    return got


def _message(fn, lib):
    with pytest.raises(Exception) as info:
        fn(lib)
    return type(info.value).__name__, str(info.value)


def same_error(fn):
    """fn raises the same error type and message in both."""
    assert _message(fn, llgrad) == _message(fn, torch)


def test_empty_meta_tensors_repr_and_metadata():
    def f(lib):
        out = []
        for shape, kw in (((2, 3), {}), ((0,), {}), ((), {}), ((2,), {"dtype": lib.int64}),
                          ((2, 3), {"dtype": lib.float64}), ((2,), {"dtype": lib.bool}),
                          ((2, 3), {"requires_grad": True})):
            t = lib.empty(*shape, device=M, **kw)
            out.append((repr(t), str(t), t.is_meta, str(t.device), repr(t.device),
                        t.device.type, t.stride(), t.storage_offset(), t.is_cpu,
                        t.is_contiguous(), t.numel(), t.dim(), t.type()))
        out.append(repr(lib.empty(2, 3, device=M, requires_grad=True) * 2))
        out.append(f"{lib.empty((), device=M)}")
        out.append(repr(lib.nn.Parameter(lib.empty(2, device=M))))
        out.append((lib.empty(2, 3, device=M).untyped_storage().nbytes(),
                    str(lib.empty(2, device=M).untyped_storage().device)))
        return out
    same(f)


def test_device_objects():
    same(lambda lib: (lib.device(M) == lib.device(M), lib.device(M) != lib.device("cpu"),
                      str(lib.device("meta:0")), lib.empty(1, device=M).device == lib.device(M),
                      lib.ones(1).is_meta, lib.ones(1).is_cpu, lib.ones(1).device.type))


def test_views_have_torchs_strides_and_offsets():
    def f(lib):
        x = lib.empty(4, 6, device=M)
        views = (x[::2, 1:].t(), x.view(2, 12), x.t().reshape(24), x.unfold(1, 2, 2),
                 x.expand(3, 4, 6), x.permute(1, 0).unsqueeze(1), x[1:, 2:], x[2],
                 x.diagonal(1), x.as_strided((2, 2), (1, 2)), x.chunk(4, 1)[1], x.narrow(0, 1, 2))
        return [(tuple(v.shape), v.stride(), v.storage_offset(), v.is_meta) for v in views]
    same(f)
    same(lambda lib: lib.empty(2, 3, device=M).t().view(6))    # (PyTorch's view error)


def test_op_results_shapes_strides_dtypes():
    def f(lib):
        x = lib.empty(4, 6, device=M)
        res = (x.t() * 2, x.sum(0), x.argmax(1), lib.empty(4, 1, device=M) +
               lib.empty(6, device=M, dtype=lib.float64), x > 0,
               lib.empty(4, 6, device=M, dtype=lib.int64) / 2,
               lib.cat([lib.empty(2, 3, device=M), lib.empty(4, 3, device=M)]),
               lib.stack([lib.empty(2, 3, device=M)] * 3, 1), x.softmax(-1),
               lib.empty(2, 3, 4, device=M) @ lib.empty(4, 5, device=M),
               lib.empty(3, device=M) @ lib.empty(3, device=M),
               lib.addmm(lib.empty(4, device=M), lib.empty(2, 3, device=M),
                         lib.empty(3, 4, device=M)),
               x.t().clone(), x.t().contiguous(), x.t().double(), x.half(),
               lib.empty(2, 3, 4, 5, device=M).contiguous(memory_format=lib.channels_last),
               lib.where(x > 0, x, 0.0), lib.empty(5, 3, device=M)[lib.tensor([0, 2])],
               lib.empty(5, 3, device=M)[:, [0, 1]], x * lib.tensor(3.0), x.max(1).indices,
               x.topk(2).values, x.sort(0).indices, lib.empty(0, 3, device=M).sum(0),
               lib.nn.functional.cross_entropy(lib.empty(4, 5, device=M),
                                               lib.empty(4, dtype=lib.long, device=M)),
               lib.nn.functional.conv2d(lib.empty(1, 3, 8, 8, device=M),
                                        lib.empty(4, 3, 3, 3, device=M), stride=2, padding=1))
        return [(tuple(r.shape), r.stride(), r.dtype, r.is_meta) for r in res]
    same(f)


def test_big_meta_model_takes_no_memory():
    # 10 GB of float32 weights: made, initialised, run, cast and printed without memory
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    lin = lnn.Linear(50000, 50000, device=M)
    y = lin(llgrad.empty(8, 50000, device=M))
    lin.half()
    z = lin.weight.t().contiguous() * 2
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before    # (kilobytes)
    assert (tuple(y.shape), z.stride(), z.dtype) == ((8, 50000), (50000, 1), llgrad.float16)
    assert grown < 500_000


@pytest.mark.parametrize("fn", [
    lambda lib: lib.empty(2, 3, device=M).item(), lambda lib: lib.empty((), device=M).item(),
    lambda lib: lib.empty(3, device=M).tolist(), lambda lib: lib.empty(3, device=M).numpy(),
    lambda lib: bool(lib.empty((), device=M)), lambda lib: float(lib.empty(1, device=M)),
    lambda lib: int(lib.empty(1, device=M)), lambda lib: lib.empty(2, device=M).cpu(),
    lambda lib: lib.empty(2, device=M).to("cpu"),
    lambda lib: lib.ones(3).copy_(lib.empty(3, device=M)),
    lambda lib: lib.empty(2, device=M) + lib.ones(2),
    lambda lib: lib.ones(2) * lib.empty(2, device=M),
    lambda lib: lib.empty(3, device=M, requires_grad=True).mul_(2),
    lambda lib: lib.empty(5, 3, device=M).add_(lib.empty(2, 5, 3, device=M)),
    lambda lib: lib.empty(2, 3, device=M).nonzero(),
    lambda lib: (lambda m: m[m > 0])(lib.empty(2, 3, device=M)),
    lambda lib: lib.nn.Linear(2, 2, device=M).to("cpu"),
    lambda lib: (lambda x: x.to(M).sum().backward())(lib.ones(2, requires_grad=True)),
    lambda lib: lib.nn.Linear(2, 2, device=M).cpu(),
], ids=range(19))
def test_errors_as_torch(fn):
    got, want = _message(fn, llgrad), _message(fn, torch)
    assert got[0] == want[0]
    if "shape" not in want[1]:          # (the broadcast error's words differ)
        # (nonzero's: without torch.fx's setting llgrad has not)
        assert want[1].replace("torch.", "llgrad.").startswith(got[1]) and len(got[1]) > 30


def test_inplace_and_copies_on_meta():
    def f(lib):
        m = lib.empty(5, 3, device=M)
        r = m.add_(1).mul_(lib.empty(3, device=M))
        m[0] = 1.0
        m[lib.tensor([True, False, True, True, False])] = 2.0
        c = lib.empty(3, device=M).copy_(lib.ones(3))
        with lib.no_grad():
            p = lib.empty(3, device=M, requires_grad=True).normal_().uniform_(-1, 1)
        return (r is m, repr(r), m._version, repr(c), repr(p),
                tuple(m[lib.tensor([True, False, True, True, False])].shape))
    same(f)


def test_autograd_gives_meta_gradients():
    def f(lib):
        x = lib.empty(3, 4, device=M, requires_grad=True)
        w = lib.empty(4, 2, device=M, requires_grad=True)
        y = ((x @ w).tanh() * 2).sum()
        y.backward()
        gx, = lib.autograd.grad((x.t() @ x).exp().mean(), x)
        return (repr(y), type(y.grad_fn).__name__, repr(x.grad), repr(w.grad), x.grad.stride(),
                repr(gx))
    same(f)


def test_factories_and_default_device():
    def f(lib):
        out = [repr(t) for t in (
            lib.zeros(2, 3, device=M), lib.ones(2, device=M, dtype=lib.int32),
            lib.full((2,), 3, device=M), lib.full((2,), True, device=M),
            lib.randn(2, 2, device=M), lib.rand(3, device=M, requires_grad=True),
            lib.tensor([1.0, 2.0], device=M), lib.arange(5, device=M),
            lib.randint(0, 5, (3,), device=M), lib.randperm(4, device=M),
            lib.eye(3, device=M), lib.linspace(0, 1, 5, device=M))]
        out.append(lib.empty_strided((2, 3), (1, 2), device=M).stride())
        out.append(lib.empty(2, 3, 4, 5, device=M, memory_format=lib.channels_last).stride())
        lib.set_default_device(M)
        try:
            out += [repr(lib.zeros(2)), repr(lib.arange(3)), str(lib.get_default_device())]
        finally:
            lib.set_default_device(None)
        out += [repr(lib.zeros(2)), str(lib.get_default_device())]
        with lib.device(M):
            with lib.device("cpu"):
                a = lib.zeros(1)
            b = lib.zeros(1)
        out.append((str(a.device), str(b.device), str(lib.zeros(1).device)))
        return out
    same(f)


def test_meta_draws_leave_the_generator_alone():
    def f(lib):
        lib.manual_seed(3)
        lib.randn(3, device=M)
        lib.empty(3, device=M).normal_()
        lib.randint(0, 5, (3,), device=M)
        lib.randperm(4, device=M)
        lib.nn.Linear(3, 3, device=M)
        lib.empty(2, 4, device=M).multinomial(2)
        lib.bernoulli(lib.empty(3, device=M))
        return lib.rand(3).tolist()
    same(f)


def test_library_functions_on_meta():
    def f(lib):
        A, B = lib.empty(3, 3, device=M), lib.empty(2, 4, 3, device=M)
        F = lib.nn.functional
        # (LAPACK's results: shapes only, llgrad's CPU results are row-major too)
        lapack = [(tuple(r.shape), r.dtype, r.is_meta) for r in
                  (lib.linalg.inv(A), lib.linalg.cholesky(A), lib.linalg.eigh(A)[1],
                   lib.linalg.solve(A, lib.empty(3, 2, device=M)))]
        res = (lib.linalg.det(A), lib.linalg.vector_norm(B, dim=-1), B.cumsum(1), B.std(1), B.logsumexp(1),
               F.layer_norm(B, (3,)), F.gelu(B), F.interpolate(lib.empty(1, 2, 4, 4, device=M),
                                                               scale_factor=2),
               F.pad(B, (1, 1)), B.gather(2, lib.empty(2, 4, 1, dtype=lib.long, device=M)),
               lib.einsum("bij,bkj->bik", B, B), B.clamp(0, 1), B.argsort(1),
               F.one_hot(lib.empty(3, dtype=lib.long, device=M), 5),
               lib.empty(2, 4, device=M).multinomial(2), lib.bernoulli(B),
               lib.nn.LSTM(3, 5, device=M)(lib.empty(7, 2, 3, device=M))[0],
               lib.nn.MultiheadAttention(4, 2, device=M, batch_first=True)(
                   *[lib.empty(2, 5, 4, device=M)] * 3)[0],
               lib.nn.TransformerEncoderLayer(8, 2, 16, device=M, batch_first=True)(
                   lib.empty(2, 5, 8, device=M)))
        return lapack, [(tuple(r.shape), r.stride(), r.dtype, r.is_meta) for r in res]
    same(f)


@pytest.mark.parametrize("fn", [
    lambda lib: lib.nn.Linear(3, 2, device=M)(lib.ones(4, 3)),
    lambda lib: lib.nn.Linear(3, 2)(lib.empty(4, 3, device=M)),
    lambda lib: lib.nn.functional.mse_loss(lib.empty(4, 3, device=M), lib.ones(4, 3)),
    lambda lib: lib.where(lib.ones(2, 3) > 0, lib.empty(2, 3, device=M), 0.0),
], ids=range(4))
def test_modules_mixing_devices_raise(fn):
    assert _message(fn, llgrad)[0] == _message(fn, torch)[0] == "RuntimeError"


def test_like_new_and_to():
    def f(lib):
        x = lib.ones(2, 3).t()
        m = lib.empty(2, device=M)
        return [(repr(t), t.stride()) for t in (
            lib.empty_like(x, device=M), lib.zeros_like(lib.empty(2, 3, device=M).t()),
            lib.zeros_like(lib.empty(2, 3, device=M), dtype=lib.float64),
            lib.randn_like(lib.empty(2, 3, device=M)), lib.full_like(m, 2.0),
            m.new_zeros(3, 4), m.new_full((2,), 3.0), m.new_tensor([1, 2]),
            lib.ones(2).new_empty(3, device=M), m.new_zeros(2, device="cpu"),
            x.to(M), lib.ones(2, 3).to(M, lib.float64), x.to(device=M),
            lib.ones(2, 3, requires_grad=True).to(M), lib.zeros_like(m, device="cpu"))]
    same(f)


class _Block(lnn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = lnn.LayerNorm(d)
        self.attn = lnn.Linear(d, 3 * d)
        self.proj = lnn.Linear(d, d)
        self.mlp = lnn.Sequential(lnn.Linear(d, 4 * d), lnn.GELU(), lnn.Linear(4 * d, d))

    def forward(self, x):
        q, k, v = self.attn(self.ln(x)).chunk(3, -1)
        x = x + self.proj(LF.scaled_dot_product_attention(q, k, v, is_causal=True))
        return x + self.mlp(x)


class _GPT(lnn.Module):
    def __init__(self, vocab=50, d=16, layers=2):
        super().__init__()
        self.emb = lnn.Embedding(vocab, d)
        self.blocks = lnn.ModuleList([_Block(d) for _ in range(layers)])
        self.head = lnn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_model_built_on_meta_then_materialised():
    with llgrad.device(M):
        g = _GPT()
    params = list(g.named_parameters())
    assert all(p.is_meta and isinstance(p, lnn.Parameter) and p.requires_grad for _, p in params)
    assert all(v.is_meta for v in g.state_dict().values())
    out = g(llgrad.zeros(2, 5, dtype=llgrad.long, device=M))
    assert (tuple(out.shape), out.stride(), out.is_meta) == ((2, 5, 50), (250, 50, 1), True)
    out.sum().backward()
    assert g.blocks[0].attn.weight.grad.is_meta
    llgrad.manual_seed(0)
    ref = _GPT()
    g.to_empty(device="cpu")
    assert not any(p.is_meta for p in g.parameters()) and params[0][1] is g.emb.weight
    g.load_state_dict(ref.state_dict())
    idx = llgrad.tensor([[1, 2, 3]])
    assert (g(idx) - ref(idx)).abs().max().item() == 0
    with llgrad.device(M):
        g2 = _GPT()
    g2.load_state_dict(ref.state_dict(), assign=True)
    assert g2.emb.weight.device.type == "cpu" and type(g2.emb.weight) is lnn.Parameter
    assert (g2(idx) - ref(idx)).abs().max().item() == 0
    g3 = _GPT().to(M)
    g3.blocks[0].apply(lambda m: m.reset_parameters() if isinstance(m, lnn.Linear) else None)
    assert g3.blocks[0].attn.weight.is_meta


def test_loading_into_meta_parameters_without_assign_warns():
    def f(lib):
        lin = lib.nn.Linear(3, 2, device=M)
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            lin.load_state_dict(lib.nn.Linear(3, 2).state_dict())
        return lin.weight.is_meta, sorted({str(w.message) for w in ws})
    same(f)


def test_init_functions_on_meta_draw_nothing():
    def f(lib):
        init, out = lib.nn.init, []
        lib.manual_seed(0)
        for name in ("xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
                     "orthogonal_", "trunc_normal_", "zeros_", "ones_", "eye_", "dirac_",
                     "sparse_", "uniform_", "normal_"):
            t = lib.empty(*((4, 3, 3, 3) if name == "dirac_" else (4, 3)), device=M)
            r = getattr(init, name)(t, *((0.5,) if name == "sparse_" else ()))
            out.append((name, r is t, repr(r)))
        l = lib.nn.Linear(3, 2, device=M)
        l(lib.empty(4, 3, device=M)).sum().backward()
        out.append(repr(lib.nn.utils.clip_grad_norm_(l.parameters(), 1.0)))
        out.append(lib.rand(2).tolist())
        return out
    same(f)


@pytest.mark.parametrize("fn", [
    lambda lib, m, i: m.gather(1, i), lambda lib, m, i: m.scatter(1, i, 1.0),
    lambda lib, m, i: m.index_put((i[:, 0],), lib.tensor(1.0)), lambda lib, m, i: m.take(i),
    lambda lib, m, i: lib.nn.functional.embedding(i, m),
    lambda lib, m, i: m.masked_fill(lib.ones(4, 3, dtype=lib.bool), 0.0),
    lambda lib, m, i: lib.nn.functional.mse_loss(m, lib.ones(4, 3)),
    lambda lib, m, i: lib.nn.functional.nll_loss(m, lib.tensor([1, 0, 2, 2])),
], ids=range(8))
def test_cpu_index_operands_beside_meta(fn):
    same(lambda lib: (lambda r: (tuple(r.shape), r.is_meta))(
        fn(lib, lib.empty(4, 3, device=M), lib.zeros(4, 1, dtype=lib.long))))


def test_copies_and_pickles_stay_on_meta():
    def f(lib):
        m = copy.deepcopy(lib.nn.Linear(3, 2, device=M))
        t = pickle.loads(pickle.dumps(lib.empty(2, 3, device=M, requires_grad=True).t()))
        return repr(m.weight), type(m.weight).__name__, repr(t), t.stride()
    same(f)


def test_load_with_map_location_meta():
    def f(lib):
        buf = io.BytesIO()
        lib.save({"w": lib.ones(2, 3).t(), "n": lib.tensor(3)}, buf)
        buf.seek(0)
        sd = lib.load(buf, map_location=M)
        return sorted((k, repr(v), v.stride(), v.storage_offset()) for k, v in sd.items())
    same(f)


@pytest.mark.parametrize("saver", ["torch", "llgrad"])
def test_save_and_load_meta_tensors_across_libraries(saver):
    src = torch if saver == "torch" else llgrad
    buf = io.BytesIO()
    src.save({"w": src.empty(3, 4, device=M).t(), "p": src.nn.Parameter(src.empty(2, device=M))},
             buf)

    def f(lib):
        sd = lib.load(io.BytesIO(buf.getvalue()), weights_only=True)
        return sorted((k, repr(v), v.stride(), type(v).__name__) for k, v in sd.items())
    same(f)


def test_to_empty_and_skip_init_and_batch_norm():
    def f(lib):
        lin = lib.nn.Linear(3, 2, device=M)
        lin.to_empty(device="cpu")
        bn = lib.nn.BatchNorm1d(3, device=M)
        y = bn(lib.empty(4, 3, device=M))
        s = lib.nn.utils.skip_init(lib.nn.Linear, 3, 2, device=M)
        opt = lib.optim.SGD(s.parameters(), lr=0.1, momentum=0.9)
        s(lib.empty(5, 3, device=M)).sum().backward()
        opt.step()
        return (str(lin.weight.device), type(lin.weight).__name__, lin.weight.requires_grad,
                repr(bn.running_mean), repr(bn.num_batches_tracked), repr(y),
                repr(s.weight), repr(s.weight.grad))
    same(f)


def test_module_moves():
    def f(lib):
        net = lib.nn.Sequential(lib.nn.Conv2d(3, 8, 3, stride=2, padding=1),
                                lib.nn.BatchNorm2d(8), lib.nn.ReLU(), lib.nn.MaxPool2d(2),
                                lib.nn.Flatten()).to(M)
        y = net(lib.empty(2, 3, 32, 32, device=M))
        return tuple(y.shape), y.stride(), str(y.device), repr(net[0].weight)
    same(f)


def test_compiled_function_on_meta_runs_eagerly():
    f = llgrad.compile(lambda x, w: (x @ w).relu().sum())
    x, w = llgrad.empty(4, 3, device=M), llgrad.empty(3, 2, device=M, requires_grad=True)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        r = f(x, w)
        r.backward()
        r2 = f(x, w)
    assert r.is_meta and r2.is_meta and w.grad.is_meta and tuple(w.grad.shape) == (3, 2)
    assert any("meta" in str(m.message) for m in ws)
