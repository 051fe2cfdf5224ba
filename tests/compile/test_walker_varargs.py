"""A *args parameter's tuple gets a guard walker (compile/guard_walker.py) that keys calls as
the full walk does: new shapes, dtypes, counts, orders and requires_grad in the tuple all
reach the right entry (results equal eager's), and a **kwargs parameter keeps the full
walk."""
import numpy as np

import llgrad
from llgrad.compile.guard_walker import make_walker


def _step(model, *batch):
    x, t = batch
    return ((model(x) - t) ** 2).mean()


def test_varargs_walker_is_made_and_keys_like_the_full_walk():
    llgrad.manual_seed(0)
    lin = llgrad.nn.Linear(4, 3)
    x, t = llgrad.randn(5, 4), llgrad.randn(5, 3)
    walk = make_walker(_step, (lin, x, t), {})
    assert walk is not None and walk((lin, x, t), {}) is not None
    step = llgrad.compile(_step)
    calls = [(x, t), (x, t), (llgrad.randn(2, 4), llgrad.randn(2, 3)),
             (x.double(), t.double()), (x.requires_grad_(), t), (x, t)]
    for batch in calls:
        lin.zero_grad()
        if batch[0].dtype == llgrad.float64:
            lin.double()
        else:
            lin.float()
        got = step(lin, *batch)
        got.backward()
        g_compiled = lin.weight.grad.numpy().copy()
        lin.zero_grad()
        want = _step(lin, *batch)
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        np.testing.assert_allclose(g_compiled, lin.weight.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert step._walkers, "the *args call got no walker"


def test_varargs_count_and_order():
    def total(*ts, scale=2.0):
        return sum(t.sum() * (k + 1) for k, t in enumerate(ts)) * scale
    f = llgrad.compile(total)
    a, b = llgrad.randn(3), llgrad.randn(2, 2)
    for args, kw in [((a,), {}), ((a, b), {}), ((b, a), {}), ((a, b), {"scale": 3.0}),
                     ((a,), {})]:
        assert abs(f(*args, **kw).item() - total(*args, **kw).item()) < 1e-5


def test_kwargs_parameter_keeps_the_full_walk():
    def g(x, **opts):
        return x * opts["k"]
    assert make_walker(g, (llgrad.ones(2),), {"k": 2.0}) is None
