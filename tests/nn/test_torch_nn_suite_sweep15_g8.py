"""Sweep 15 (g8): training steps of modules with state a forward writes (spectral_norm's
power-iteration vectors, Embedding's max_norm renorm, a lazy module's first call, pruning
masks, hooks that count or rewrite), run eagerly with torch and llgrad and under
`llgrad.compile`: the compiled steps must give eager's numbers and leave the same state."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.utils.prune  # noqa: E402,F401 (torch imports it only on demand)

import llgrad  # noqa: E402
import oracle_sweep15_g as o  # noqa: E402


def _three_ways(run, rtol=1e-5, atol=1e-6):
    want = o._norm(run(torch, lambda f: f))
    eager = o._norm(run(llgrad, lambda f: f))
    comp = o._norm(run(llgrad, llgrad.compile))
    o._same(eager, want, rtol, atol, ("eager",))
    o._same(comp, eager, rtol, atol, ("compiled",))


def _step(lib, model, opt, loss_fn):
    def step(*xs):
        opt.zero_grad()
        loss = loss_fn(model, *xs)
        loss.backward()
        opt.step()
        return loss
    return step


def test_spectral_norm_step_updates_power_iteration_vectors():
    def run(lib, wrap):
        lib.manual_seed(0)
        m = lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4))
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        f = wrap(_step(lib, m, opt, lambda mm, x: mm(x).pow(2).sum()))
        x = lib.arange(6.0).reshape(2, 3) / 6
        snm = m.parametrizations.weight[0]
        out = [f(x) for _ in range(3)]
        return out + [snm._u, snm._v, m.parametrizations.weight.original]
    _three_ways(run, 1e-4, 1e-5)


def test_old_spectral_norm_step():
    def run(lib, wrap):
        lib.manual_seed(0)
        m = lib.nn.utils.spectral_norm(lib.nn.Conv1d(2, 3, 2))
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
        f = wrap(_step(lib, m, opt, lambda mm, x: mm(x).tanh().sum()))
        x = lib.arange(10.0).reshape(1, 2, 5) / 10
        out = [f(x) for _ in range(3)]
        return out + [m.weight_u, m.weight_orig, m.weight]
    _three_ways(run, 1e-4, 1e-5)


def test_embedding_max_norm_step_renormalises_rows():
    def run(lib, wrap):
        lib.manual_seed(0)
        e = lib.nn.Embedding(6, 3, max_norm=1.0)
        with lib.no_grad():
            e.weight.mul_(3)
        opt = lib.optim.SGD(e.parameters(), lr=0.5)
        f = wrap(_step(lib, e, opt, lambda mm, i: mm(i).pow(2).sum()))
        out = [f(lib.tensor([[0, 2], [2, 5]])) for _ in range(3)]
        return out + [e.weight]
    _three_ways(run, 1e-5, 1e-5)


def test_embedding_bag_per_sample_weights_step():
    def run(lib, wrap):
        lib.manual_seed(0)
        bag = lib.nn.EmbeddingBag(5, 2, mode="sum", padding_idx=1)
        opt = lib.optim.Adagrad(bag.parameters(), lr=0.1)
        f = wrap(_step(lib, bag, opt,
                       lambda mm, i, off, w: (mm(i, off, per_sample_weights=w) - 1).pow(2).sum()))
        i, off = lib.tensor([0, 1, 4, 4, 2]), lib.tensor([0, 2])
        w = lib.tensor([0.5, 2.0, 1.0, -1.0, 3.0])
        return [f(i, off, w) for _ in range(3)] + [bag.weight]
    _three_ways(run)


def test_lazy_module_first_call_inside_compiled_step():
    def run(lib, wrap):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.LazyLinear(3), lib.nn.ReLU(), lib.nn.LazyLinear(1))

        def step(x):
            return net(x).sum()
        f = wrap(step)
        x = lib.arange(8.0).reshape(2, 4) / 8
        ys = [f(x), f(x * 2)]
        return ys + [type(net[0]).__name__, list(net.parameters())]
    _three_ways(run)


def test_forward_hooks_counting_and_rewriting_in_compiled_step():
    def run(lib, wrap):
        lib.manual_seed(0)
        m = lib.nn.Linear(3, 2)
        calls = []
        m.register_forward_pre_hook(lambda mod, a: (a[0] * 2,))
        m.register_forward_hook(lambda mod, a, out: calls.append(1) or out + 1)
        m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        x = (lib.arange(6.0).reshape(2, 3) / 6).requires_grad_()
        f = wrap(_step(lib, m, opt, lambda mm, t: mm(t).pow(2).sum()))
        out = [f(x) for _ in range(3)]
        return out + [len(calls), x.grad, list(m.parameters())]
    _three_ways(run)


@pytest.mark.slow
def test_pruned_conv_with_dropout_and_batchnorm_step():
    def run(lib, wrap):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3, padding="same"), lib.nn.BatchNorm2d(3),
                                lib.nn.Dropout2d(0.3), lib.nn.AdaptiveMaxPool2d((2, 3)),
                                lib.nn.Flatten(), lib.nn.Linear(18, 2))
        lib.nn.utils.prune.ln_structured(net[0], "weight", amount=1, n=2, dim=0)
        opt = lib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        f = wrap(_step(lib, net, opt, lambda mm, x, y: lib.nn.functional.cross_entropy(mm(x), y)))
        x = lib.tensor(np.random.default_rng(0).standard_normal((4, 2, 5, 7)).astype(np.float32))
        y = lib.tensor([0, 1, 1, 0])
        out = [f(x, y) for _ in range(3)]
        return out + [net[1].running_mean, net[1].running_var, net[0].weight, lib.rand(1)]
    _three_ways(run, 1e-4, 1e-5)


def test_mha_with_masks_and_packed_lstm_step():
    def run(lib, wrap):
        lib.manual_seed(0)
        mha = lib.nn.MultiheadAttention(4, 2, add_bias_kv=True, add_zero_attn=True)
        lstm = lib.nn.LSTM(4, 3)
        params = list(mha.parameters()) + list(lstm.parameters())
        opt = lib.optim.SGD(params, lr=0.1)
        R = lib.nn.utils.rnn

        def step(x, lengths, am):
            opt.zero_grad()
            y, w = mha(x, x, x, attn_mask=am, average_attn_weights=False)
            p = R.pack_padded_sequence(y, lengths, enforce_sorted=False)
            z, (h, c) = lstm(p)
            zp, _ = R.pad_packed_sequence(z, total_length=4)
            loss = zp.pow(2).sum() + h.sum() + w.sum()
            loss.backward()
            opt.step()
            return loss
        f = wrap(step)
        x = lib.tensor(np.random.default_rng(1).standard_normal((4, 3, 4)).astype(np.float32))
        am = lib.tensor(np.triu(np.ones((4, 4), bool), 1))
        out = [f(x, lib.tensor([2, 4, 3]), am) for _ in range(2)]
        return out + params
    _three_ways(run, 1e-4, 1e-5)
