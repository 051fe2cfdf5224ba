"""llgrad.profile(groups=True) and debug's group-by-group comparison over two compiled
functions whose kernels are the same code (two instances of one model class, each with its
own llgrad.compile): each runs with its own kernel's launch. The groups' functions are
cached by the code's key, and the copy made to time them was the first kernel's, so the
second model's timed run returned outputs keyed by the first model's graph: a BatchNorm's
running statistics (written in place) raised KeyError."""
import numpy as np

import llgrad


class _Net(llgrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = llgrad.nn.Linear(6, 4)
        self.bn = llgrad.nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.lin(x)).relu().pow(2).mean()


def _make(seed):
    llgrad.manual_seed(seed)
    net = _Net()
    return net, llgrad.compile(lambda x: net(x))


def _run(net, f, x):
    loss = f(x)
    grads = llgrad.autograd.grad(loss, list(net.parameters()))
    return [float(loss.detach())] + [g.numpy().copy() for g in grads] + \
        [net.bn.running_mean.numpy().copy(), net.bn.running_var.numpy().copy()]


def test_second_model_of_the_same_code_profiles_by_group():
    x = llgrad.tensor(np.random.default_rng(0).standard_normal((16, 6)).astype(np.float32))
    models = [_make(s) for s in (0, 1)]
    refs = []
    for net, f in models:
        for _ in range(2):
            _run(net, f, x)
            f.wait()            # (LLGRAD_COMPILE=background: native code from here on)
        llgrad.manual_seed(7)
        twin, _ = _make(7)      # (eager reference: the same weights and statistics)
        twin.load_state_dict(net.state_dict())
        refs.append(_run(twin, lambda x, m=twin: m(x), x))
    for (net, f), ref in zip(models, refs):
        with llgrad.profile(groups=True) as p:
            got = _run(net, f, x)
        assert p.kernel_rows()
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert all(len(f.entries) == 1 for _, f in models)
