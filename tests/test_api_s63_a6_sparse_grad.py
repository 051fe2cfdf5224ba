"""nn.Embedding / nn.EmbeddingBag with sparse=True: the weight's sparse COO gradient (its
entries, their order, coalesced or not), its accumulation, and the optimisers that take it
(SGD, Adagrad, SparseAdam; the rest raise PyTorch's errors), compared with PyTorch bit for bit."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _pair(num, dim, **kw):
    w = np.random.default_rng(0).standard_normal((num, dim)).astype(np.float32)
    t = torch.nn.Embedding(num, dim, sparse=True, **kw)
    m = llgrad.nn.Embedding(num, dim, sparse=True, **kw)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(w))
    with llgrad.no_grad():
        m.weight.copy_(llgrad.tensor(w))
    return t, m


def _same_sparse(a, b):
    assert b.is_sparse and a.is_sparse
    assert a.is_coalesced() == b.is_coalesced()
    assert a._indices().tolist() == b._indices().tolist()
    np.testing.assert_array_equal(a._values().detach().numpy(), b._values().detach().numpy())


def test_embedding_sparse_grad_entries_and_accumulation():
    t, m = _pair(7, 3, padding_idx=5)
    x = [[1, 2, 1], [0, 5, 1]]
    scale = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    for _ in range(2):
        (t(torch.tensor(x)) * torch.from_numpy(scale)).sum().backward()
        out = m(llgrad.tensor(x))
        assert type(out.grad_fn).__name__ == "EmbeddingBackward0"
        (out * llgrad.tensor(scale)).sum().backward()
        _same_sparse(t.weight.grad, m.weight.grad)
    (t(torch.tensor([3, 1])).sum()).backward()      # other indices: merged, not appended
    m(llgrad.tensor([3, 1])).sum().backward()
    _same_sparse(t.weight.grad, m.weight.grad)
    _same_sparse(t.weight.grad.coalesce(), m.weight.grad.coalesce())
    assert repr(m) == "Embedding(7, 3, padding_idx=5, sparse=True)"


def test_sparse_and_dense_gradients_accumulate_dense():
    t, m = _pair(5, 2)
    for e, lib in ((t, torch), (m, llgrad)):
        idx = lib.tensor([1, 1, 3])
        (e(idx).sum() + (e.weight ** 2).sum()).backward()   # sparse + dense edges: dense
        e(idx).sum().backward()                             # then a sparse one into it
    assert not m.weight.grad.is_sparse
    np.testing.assert_array_equal(t.weight.grad.numpy(), m.weight.grad.numpy())


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_sparse_grad(mode):
    w = np.random.default_rng(1).standard_normal((6, 2)).astype(np.float32)
    t = torch.nn.EmbeddingBag(6, 2, mode=mode, sparse=True, padding_idx=5)
    m = llgrad.nn.EmbeddingBag(6, 2, mode=mode, sparse=True, padding_idx=5)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(w))
    with llgrad.no_grad():
        m.weight.copy_(llgrad.tensor(w))
    x, off = [1, 2, 1, 5, 0, 4, 1], [0, 3, 5]
    scale = np.arange(6, dtype=np.float32).reshape(3, 2) / 3
    ot = t(torch.tensor(x), torch.tensor(off))
    om = m(llgrad.tensor(x), llgrad.tensor(off))
    np.testing.assert_array_equal(ot.detach().numpy(), om.detach().numpy())
    assert type(om.grad_fn).__name__ == "EmbeddingBagBackward0"
    (ot * torch.from_numpy(scale)).sum().backward()
    (om * llgrad.tensor(scale)).sum().backward()
    _same_sparse(t.weight.grad, m.weight.grad)


def test_embedding_bag_sparse_per_sample_weights():
    w = np.random.default_rng(2).standard_normal((4, 2)).astype(np.float32)
    psw = np.array([[0.5, 2.0], [1.0, 3.0]], np.float32)
    grads = []
    for lib in (torch, llgrad):
        e = lib.nn.EmbeddingBag(4, 2, mode="sum", sparse=True)
        with lib.no_grad():
            e.weight.copy_(lib.tensor(w))
        p = lib.tensor(psw, requires_grad=True)
        e(lib.tensor([[1, 2], [3, 3]]), per_sample_weights=p).pow(2).sum().backward()
        grads.append((e.weight.grad, p.grad.numpy()))
    _same_sparse(grads[0][0], grads[1][0])
    np.testing.assert_array_equal(grads[0][1], grads[1][1])


def _train(lib, opt_name, steps=4, **kw):
    e = _pair(8, 3)[0 if lib is torch else 1]
    opt = getattr(lib.optim, opt_name)(e.parameters(), **kw)
    for step in range(steps):
        opt.zero_grad()
        idx = lib.tensor([[1, 2, 1], [step, 4, 1]])
        loss = (e(idx) ** 2).sum() + e(lib.tensor([7, step])).sum()
        loss.backward()
        opt.step()
    return e.weight.detach().numpy(), opt


@pytest.mark.parametrize("opt_name,kw", [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "maximize": True}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01}),
    ("SparseAdam", {"lr": 0.05}),
    ("SparseAdam", {"lr": 0.05, "betas": (0.8, 0.99), "maximize": True}),
])
def test_optimisers_with_sparse_gradients_equal_torch(opt_name, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (torch's sparse invariant-check notice)
        wt, ot = _train(torch, opt_name, **kw)
    wm, om = _train(llgrad, opt_name, **kw)
    if opt_name != "SGD":
        # (torch's float32 sqrt is not always correctly rounded on CPU, llgrad's is: one
        # ulp in a std can differ, as in the dense Adagrad)
        np.testing.assert_allclose(wt, wm, rtol=1e-6, atol=0)
    else:
        np.testing.assert_array_equal(wt, wm)
    if opt_name == "SparseAdam":
        st, sm = ot.state_dict()["state"][0], om.state_dict()["state"][0]
        assert sm["step"] == st["step"] == 4
        np.testing.assert_allclose(st["exp_avg_sq"].numpy(), sm["exp_avg_sq"].numpy(),
                                   rtol=1e-5)


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW", "RMSprop", "Adadelta", "NAdam"])
def test_optimisers_without_sparse_rule_raise_torch_error(opt_name):
    msgs = []
    for lib in (torch, llgrad):
        e = lib.nn.Embedding(4, 2, sparse=True)
        opt = getattr(lib.optim, opt_name)(e.parameters())

        def closure():
            opt.zero_grad()
            loss = e(lib.tensor([1, 2])).sum()
            loss.backward()
            return loss
        with pytest.raises(RuntimeError) as info:
            opt.step(closure)
        msgs.append(str(info.value))
        w = e.weight.detach().numpy().copy()
        with pytest.raises(RuntimeError):
            opt.step()
        np.testing.assert_array_equal(w, e.weight.detach().numpy())
    assert msgs[0] == msgs[1]


def test_sparse_adam_errors():
    for lib in (torch, llgrad):
        p = lib.nn.Parameter(lib.zeros(3))
        with pytest.raises(ValueError, match="Invalid learning rate: -1"):
            lib.optim.SparseAdam([p], lr=-1)
        with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
            lib.optim.SparseAdam([p], betas=(0.9, 1.0))
        opt = lib.optim.SparseAdam([p])
        p.sum().backward()
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients, "
                                               "please consider Adam instead"):
            opt.step()


def test_adagrad_sparse_weight_decay_and_scale_grad_by_freq_raise():
    for lib in (torch, llgrad):
        e = lib.nn.Embedding(4, 2, sparse=True)
        e(lib.tensor([1, 2])).sum().backward()
        with pytest.raises(RuntimeError, match="weight_decay option is not compatible with "
                                               "sparse gradients"):
            lib.optim.Adagrad(e.parameters(), weight_decay=0.1).step()
        e = lib.nn.Embedding(4, 2, sparse=True, scale_grad_by_freq=True)
        out = e(lib.tensor([1, 1])).sum()
        with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse"):
            out.backward()


def test_dense_plus_sparse_adds_entries_in_order():
    """dense.add_(sparse, alpha): each entry added in turn (duplicates too), as torch's."""
    rng = np.random.default_rng(3)
    d = rng.standard_normal((4, 3)).astype(np.float32)
    v = rng.standard_normal((5, 3)).astype(np.float32) * 1e3
    i = [[2, 0, 2, 2, 3]]
    outs = []
    for lib in (torch, llgrad):
        s = lib.sparse_coo_tensor(lib.tensor(i), lib.tensor(v), (4, 3))
        a = lib.tensor(d)
        a.add_(s, alpha=0.37)
        b = lib.tensor(d).sub(s, alpha=3.3)
        s2 = lib.sparse_coo_tensor(lib.tensor([[3, 1]]), lib.tensor(v[:2]), (4, 3))
        c = s + s2
        s.add_(s2, alpha=0.5)
        outs.append((a.numpy(), b.numpy(), c, s))
    for x, y in zip(outs[0][:2], outs[1][:2]):
        np.testing.assert_array_equal(x, y)
    _same_sparse(outs[0][2], outs[1][2])
    _same_sparse(outs[0][3], outs[1][3])


def test_compiled_step_with_sparse_embedding_runs_eagerly_with_warning():
    m = _pair(6, 2)[1]
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1)

    def step(idx):
        opt.zero_grad()
        loss = m(idx).pow(2).sum()
        loss.backward()
        opt.step()
        return loss
    compiled = llgrad.compile(step)
    ref_m = _pair(6, 2)[0]
    ref_opt = torch.optim.SGD(ref_m.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="running eagerly: embedding.sparse=True"):
        for k in range(3):
            compiled(llgrad.tensor([1, k, 1]))
    for k in range(3):
        ref_opt.zero_grad()
        ref_m(torch.tensor([1, k, 1])).pow(2).sum().backward()
        ref_opt.step()
    np.testing.assert_array_equal(ref_m.weight.detach().numpy(), m.weight.detach().numpy())


def test_sparse_gradient_order_through_the_engine_and_accumulation():
    """PyTorch merges contiguous values and concatenates others (sum's stride-0 gradient);
    a sparse sum in the engine's buffer takes the newer gradient first."""
    got = []
    for lib in (torch, llgrad):
        e = _pair(5, 2)[0 if lib is torch else 1]
        a, b = e(lib.tensor([1, 3, 1])), e(lib.tensor([2]))
        (a.sum() + b.sum() * 2).backward()
        row = [e.weight.grad]
        out = e(lib.tensor([[1], [2]]))
        e.weight.grad = None
        out.sum().backward(retain_graph=True)
        out.sum().backward()
        row.append(e.weight.grad)
        seen = []
        h = e.weight.register_hook(lambda g: seen.append(g._indices().tolist()))
        row.append(lib.autograd.grad(e(lib.tensor([4, 0])).sum(), e.weight)[0])
        h.remove()
        got.append((row, seen))
    for x, y in zip(got[0][0], got[1][0]):
        _same_sparse(x, y)
    assert got[0][1] == got[1][1] == [[[4, 0]]]


@pytest.mark.parametrize("opt_name,kw", [("SGD", {"lr": 0.1, "momentum": 0.9}),
                                         ("SparseAdam", {"lr": 0.1})])
def test_compiled_optimizer_step_with_sparse_gradients_equals_eager(opt_name, kw):
    weights = []
    for compiled in (False, True):
        m = _pair(6, 2)[1]
        opt = getattr(llgrad.optim, opt_name)(m.parameters(), **kw)
        step = llgrad.compile(opt.step) if compiled else opt.step
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (the compiled step runs eagerly)
            for k in range(3):
                opt.zero_grad()
                m(llgrad.tensor([1, k, 1])).pow(2).sum().backward()
                step()
        weights.append(m.weight.detach().numpy())
    np.testing.assert_array_equal(weights[0], weights[1])


@pytest.mark.xfail(strict=True, reason="EmbeddingBag(mode='mean') with a dense gradient: "
                   "PyTorch's backward scales each row by 1 / bag size and accumulates the "
                   "rows (a last-bit difference from llgrad's division of the bag's gradient); "
                   "the sparse backward is PyTorch's (test_embedding_bag_sparse_grad)")
def test_embedding_bag_mean_dense_gradient_bitwise():
    g = np.random.default_rng(0).standard_normal((1, 1000)).astype(np.float32)
    grads = []
    for lib in (torch, llgrad):
        e = lib.nn.EmbeddingBag(1, 1000, mode="mean")
        (e(lib.zeros(7, dtype=lib.int64), lib.tensor([0])) * lib.tensor(g)).sum().backward()
        grads.append(e.weight.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
