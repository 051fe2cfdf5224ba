"""Code shared between sizes (codegen/size_params.py) under many op kinds at once: a compiled
step called at sizes chosen to hit the template's edges (1 and 2, odd sizes, the first size
again, a batch equal to the feature count, 0, large then small) computes what eager llgrad
and torch do, and what code specialised to each size does (LLGRAD_SHARE_SIZES=0: bitwise,
on one thread, float32), while it builds LLVM code for fewer sizes than it traces. The ops:
broadcasting with size-1 dims, reductions over the varying dim and others, mean's 1/N,
softmax / log_softmax / layer_norm, cross_entropy with ignore_index and label_smoothing,
matmul, cumsum along the varying dim, gather / index_select, a causal mask from arange(n),
views and an in-place update; a training step with conv1d, batch_norm's statistics over the
batch (running stats updated in place), pooling, embedding and AdamW's state."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    from llgrad.codegen.native import cache, jit
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    jit._reset()
    cache._reset()
    yield monkeypatch
    monkeypatch.undo()
    jit._reset()
    cache._reset()


@pytest.fixture
def one_thread():
    before = llgrad.get_num_threads()
    llgrad.set_num_threads(1)
    yield
    llgrad.set_num_threads(before)


def _ops(T, x, b, c, w, y, j, k):
    F = T.nn.functional
    n = x.shape[0]
    pos = T.arange(n)
    causal = pos[:, None] >= pos[None, :]
    att = (x @ x.t()).masked_fill(~causal, float("-inf")).softmax(-1) @ x
    h = F.layer_norm((x * b + c).tanh() + att, (6,))
    z = x * 1                                   # (an in-place update of an intermediate)
    z[:, 1] = z[:, 0] * 2
    z.mul_(h.sigmoid())
    return (F.cross_entropy(h @ w, y, ignore_index=2, label_smoothing=0.1),
            x.softmax(0), x.log_softmax(1), x.mean(0), x.sum(1, keepdim=True) / n, x.mean(),
            x.cumsum(0), x.gather(1, j), x.index_select(0, k), z,
            x.reshape(n, 2, 3).permute(2, 0, 1).contiguous(), x.t().flatten())


def _inputs(n, rng):
    return [(rng.standard_normal((n, 6)).astype(np.float32), True),
            (rng.standard_normal((1, 6)).astype(np.float32), True),
            (rng.standard_normal((n, 1)).astype(np.float32), True),
            (rng.standard_normal((6, 5)).astype(np.float32), True),
            (rng.integers(0, 5, n), False), (rng.integers(0, 6, (n, 3)), False),
            (rng.integers(0, max(n, 1), n), False)]


def _step(T):
    def step(*xs):
        outs = _ops(T, *xs)
        loss = sum((o * o.detach().cos()).sum() for o in outs)
        loss.backward()
        return [o.detach() for o in outs]
    return step


def _run(T, step, sizes, calls=2):
    """Per size and call: outputs, then the gradients of the float inputs."""
    rng = np.random.default_rng(0)
    got = []
    for n in sizes:
        arrays = _inputs(n, rng)
        for _ in range(calls):
            xs = [T.tensor(a.copy()).requires_grad_(g) if g else T.tensor(a.copy())
                  for a, g in arrays]
            outs = step(*xs)
            got.append([o.numpy().copy() for o in outs]
                       + [x.grad.numpy().copy() for x in xs if x.grad is not None])
    return got


def _close(got, want, rtol=1e-4, atol=1e-5):
    assert len(got) == len(want)
    for a_call, b_call in zip(got, want):
        assert len(a_call) == len(b_call)
        for a, b in zip(a_call, b_call):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _shared_kernels(f):
    return [k for e in f.entries for k in e.kernels.values() if getattr(k, "shares_sizes", False)]


# 1 and 2 after a template, 6 == the feature count, the first size again
SIZES = [5, 9, 6, 1, 2, 5]


def test_many_ops_at_a_sweep_of_sizes_match_eager_and_torch(fresh_cache):
    compiled = llgrad.compile(_step(llgrad), recompile_limit=16)
    got = _run(llgrad, compiled, SIZES)
    # (5 and 9 make a template, its sizes read as SymInts; 6 and 2 are made from it; 1
    # traces: a size of 1 broadcasts; size_templates.py)
    assert compiled.n_traces == 3
    assert _shared_kernels(compiled)                    # (shared code ran)
    assert compiled.n_llvm_compiles < len(set(SIZES))
    assert not compiled.graph_breaks
    eager = _run(llgrad, _step(llgrad), SIZES)
    _close(got, eager)
    _close(eager[::2], _run(torch, _step(torch), SIZES, calls=1))


@pytest.mark.slow
def test_many_ops_shared_code_gives_the_specialised_code_bits(fresh_cache, one_thread):
    sizes = [5, 9, 13]
    shared = llgrad.compile(_step(llgrad), recompile_limit=16)
    got = _run(llgrad, shared, sizes)
    assert _shared_kernels(shared)
    fresh_cache.setenv("LLGRAD_SHARE_SIZES", "0")
    specialised = llgrad.compile(_step(llgrad), recompile_limit=16)
    want = _run(llgrad, specialised, sizes)
    assert not _shared_kernels(specialised)
    for a_call, b_call in zip(got, want):
        for a, b in zip(a_call, b_call):
            np.testing.assert_array_equal(a, b)


def _empty_ok(T, x, b, w):
    F = T.nn.functional
    h = F.layer_norm(x * b, (6,))
    return (h @ w).softmax(0), x.cumsum(0), (x * b).log_softmax(1), x.t() @ x


def test_an_empty_batch_between_shared_sizes(fresh_cache):
    def step(T):
        def f(x, b, w):
            outs = _empty_ok(T, x, b, w)
            sum((o * o.detach().cos()).sum() for o in outs).backward()
            return [o.detach() for o in outs] + [x.grad, b.grad, w.grad]
        return f
    rng = np.random.default_rng(3)
    compiled = llgrad.compile(step(llgrad), recompile_limit=16)
    sizes = [3, 5, 0, 7, 0, 2]
    for n in sizes:
        arrays = [rng.standard_normal(s).astype(np.float32) for s in ((n, 6), (1, 6), (6, 4))]
        for _ in range(2):
            got = compiled(*[llgrad.tensor(a).requires_grad_() for a in arrays])
            want = step(torch)(*[torch.tensor(a).requires_grad_() for a in arrays])
            for a, b in zip(got, want):
                assert tuple(a.shape) == tuple(b.shape)
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
    assert _shared_kernels(compiled)


def test_forwards_at_several_sizes_then_their_backwards_in_reverse(fresh_cache):
    # (the backward of each size runs the shared code's tail after other sizes ran it)
    def f(T, x, w):
        h = (x @ w).tanh()
        return T.nn.functional.layer_norm(h, (6,)).softmax(0) * x.mean(0).sum()
    compiled = llgrad.compile(lambda x, w: f(llgrad, x, w), recompile_limit=16)
    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 6)).astype(np.float32)
    pending = []            # (a size's first call traces; its second runs native code)
    for n in [5, 9, 6, 13, 5]:
        x = rng.standard_normal((n, 6)).astype(np.float32)
        compiled(llgrad.tensor(x, requires_grad=True), llgrad.tensor(w, requires_grad=True))
        xl, wl = llgrad.tensor(x, requires_grad=True), llgrad.tensor(w, requires_grad=True)
        pending.append((x, xl, wl, compiled(xl, wl)))
    assert _shared_kernels(compiled)
    for x, xl, wl, out in reversed(pending):
        g = np.cos(np.arange(out.numel(), dtype=np.float32)).reshape(out.shape)
        out.backward(llgrad.tensor(g))
        xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
        want = f(torch, xt, wt)
        want.backward(torch.tensor(g))
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-5)
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(wl.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-5)


def _net(T):
    nn = T.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 8)
            self.conv = nn.Conv1d(8, 8, 3, padding=1, bias=False)   # (BN follows)
            self.bn = nn.BatchNorm1d(8)
            self.fc = nn.Linear(8, 8)

        def forward(self, i):
            h = self.bn(self.conv(self.emb(i).transpose(1, 2))).relu()
            h = T.nn.functional.max_pool1d(h, 2, ceil_mode=True).transpose(1, 2)
            return self.fc(h).cumsum(1)
    return Net()


def _train(T, model, sizes, compile_step=False):
    opt = T.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)

    def step(i, y):
        opt.zero_grad()
        out = model(i)
        loss = T.nn.functional.cross_entropy(out.reshape(-1, 8), y.reshape(-1),
                                             ignore_index=0, label_smoothing=0.05)
        loss.backward()
        opt.step()
        return loss.detach()
    f = llgrad.compile(step, recompile_limit=16) if compile_step else step
    rng = np.random.default_rng(1)
    losses = []
    for b, length in sizes:
        i = rng.integers(0, 11, (b, length))
        y = rng.integers(0, 8, (b, (length + 1) // 2))
        for _ in range(2):
            losses.append(f(T.tensor(i), T.tensor(y)).item())
    return losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}, f


@pytest.mark.slow      # (~3 s)
def test_a_conv_batch_norm_step_across_batch_sizes_matches_torch(fresh_cache):
    # (batch == channels at 8; batch 2, the smallest batch_norm trains at; the first again)
    sizes = [(4, 7), (8, 7), (2, 7), (4, 7), (5, 7)]
    torch.manual_seed(0)
    reference = _net(torch)
    model = _net(llgrad)
    model.load_state_dict({k: llgrad.tensor(v.numpy()) for k, v in
                           reference.state_dict().items()})
    losses, state, f = _train(llgrad, model, sizes, compile_step=True)
    assert _shared_kernels(f)
    # (fewer builds than sizes: code shared between sizes, and sizes served by a template)
    assert f.n_llvm_compiles < len(set(sizes))
    t_losses, t_state, _ = _train(torch, reference, sizes)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-5, atol=1e-6)
    for k in t_state:
        np.testing.assert_allclose(state[k], t_state[k], rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.slow
def test_many_ops_on_two_threads_large_then_small(fresh_cache):
    # (sizes where a loop's thread split and vector tails change; shared code computes a
    # thread count from its run-time trip count)
    before = llgrad.get_num_threads()
    llgrad.set_num_threads(2)
    try:
        sizes = [3, 700, 5, 2000, 64, 1, 4096, 9]
        compiled = llgrad.compile(_step(llgrad), recompile_limit=16)
        got = _run(llgrad, compiled, sizes)
        assert _shared_kernels(compiled)
        _close(got, _run(llgrad, _step(llgrad), sizes), rtol=1e-4, atol=1e-4)
    finally:
        llgrad.set_num_threads(before)
