"""A compiled step whose traced runs are never kept (each changed Python state a compiled
call cannot replay) runs eagerly call after call: it warns once, naming the reason and the
user's line, as graph breaks do; one traced run not kept, then one kept (a list marked as
appended to: appended_lists.py) is a retry and warns nothing. Results equal eager's."""
import inspect
import os
import warnings
from functools import partial

import numpy as np

import llgrad

CALLS = 5
HERE = os.path.basename(__file__)


def _calls(step, args_of):
    """[step(*args_of(i)) for each call], the warnings llgrad gave, the line of the call."""
    line = inspect.currentframe().f_lineno + 5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = []
        for i in range(CALLS):
            out.append(step(*args_of(i)))
    return out, [w for w in caught if "llgrad.compile" in str(w.message)], line


def _one_fallback(caught, line, reason):
    """The warnings are one: the fallback's, with reason, attributed to the user's line."""
    texts = [str(w.message) for w in caught]
    assert len(caught) == 1, texts
    w = caught[0]
    assert "running eagerly" in texts[0] and reason in texts[0], texts
    assert "no traced run is kept" in texts[0], texts
    assert f"{HERE}:{line}" in texts[0], texts
    assert (os.path.basename(w.filename), w.lineno) == (HERE, line)


def _hooked_model(seed):
    """miniai's append_stats: `hook.stats = ([], [])` on the first call, then appends to
    the tuple's lists from a forward hook (items of a tuple: not replayed)."""
    llgrad.manual_seed(seed)
    nn = llgrad.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    class Hook:
        def __init__(self, m, f):
            self.hook = m.register_forward_hook(partial(f, self))

    def append_stats(hook, mod, inp, outp):
        if not hasattr(hook, "stats"):
            hook.stats = ([], [])
        acts = outp.detach()
        hook.stats[0].append(acts.mean())
        hook.stats[1].append(acts.std())

    hook = Hook(model[0], append_stats)
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return model, hook, step


def test_hook_appending_to_tuple_items_warns_once():
    x = llgrad.randn(3, 4)
    model, hook, step = _hooked_model(0)
    e_model, e_hook, e_step = _hooked_model(0)
    cf = llgrad.compile(step)
    got, caught, line = _calls(cf, lambda i: (x,))
    _one_fallback(caught, line, "the traced run changed len(")
    assert len(cf.entries) == 0 and len(cf.graph_breaks) == 1
    want = [e_step(x) for _ in range(CALLS)]
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g.detach().numpy(), e.detach().numpy())
    for p, q in zip(model.parameters(), e_model.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        assert p.grad is None and q.grad is None
    for k in range(2):
        assert len(hook.stats[k]) == len(e_hook.stats[k]) == CALLS
        for a, b in zip(hook.stats[k], e_hook.stats[k]):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


STATS = ([],)


def _logged(x, n):
    """A number argument (an input of the trace: symbolic_args.py) and an append to a
    tuple's list: each trace with stand-ins is put back and the call runs eagerly."""
    STATS[0].append(x.sum().item() * n)
    return x * n


def test_number_input_trace_not_kept_warns_once():
    x = llgrad.randn(3)
    STATS[0].clear()
    cf = llgrad.compile(_logged)
    got, caught, line = _calls(cf, lambda i: (x, i + 1))
    assert cf.n_traces == CALLS and not cf.entries
    _one_fallback(caught, line, "the traced run changed len(STATS[0])")
    compiled_log = list(STATS[0])
    STATS[0].clear()
    want = [_logged(x, i + 1) for i in range(CALLS)]
    assert compiled_log == STATS[0]
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g.detach().numpy(), e.detach().numpy())


class _History:
    def __init__(self):
        self.losses = []


def test_list_marked_then_kept_warns_nothing():
    """A retry: the first trace grows a list it only appends to and is not kept; the
    second is kept and replays the appends."""
    history, w = _History(), llgrad.ones(3, requires_grad=True)

    def step(x):
        loss = (w * x).sum()
        history.losses.append(loss.detach())
        return loss

    cf = llgrad.compile(step)
    x = llgrad.arange(3.0)
    got, caught, _ = _calls(cf, lambda i: (x + i,))
    cf.wait()
    assert caught == [] and cf.graph_breaks == []
    assert cf.n_traces == 2 and len(cf.entries) == 1
    want = [(w * (x + i)).sum() for i in range(CALLS)]
    for g, h, e in zip(got, history.losses, want):
        np.testing.assert_array_equal(g.detach().numpy(), e.detach().numpy())
        np.testing.assert_array_equal(h.numpy(), e.detach().numpy())
