"""A dict argument the compiled function only subscripts with constant keys is guarded by
those keys (compile/dict_reads.py): a collated batch's string ids, new every step, no
longer trace every step. Everything else still sees the whole dict: each case compares the
compiled calls with eager ones, over calls whose unread and read parts change."""
import functools
import linecache
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
from llgrad.compile import dict_reads


def _batch(i, **extra):
    g = np.random.default_rng(i)
    b = {"x": llgrad.from_numpy(g.standard_normal((5, 4)).astype(np.float32)),
         "y": llgrad.from_numpy(g.integers(0, 3, 5)),
         "id": [f"s{i}_{j}" for j in range(5)], "text": f"sample {i}"}
    b.update(extra)
    return b


def _train(step_of, batches, compiled):
    llgrad.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
    step = step_of(model, opt)
    f = llgrad.compile(step) if compiled else step
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no fallback to eager, no recompile limit)
        losses = [float(f(model, b)) for b in batches]
    return losses, [p.detach().numpy().copy() for p in model.parameters()], f


def _same_as_eager(step_of, batches):
    """batches: a function making the list (each run gets its own: a step may write them)."""
    el, ep, _ = _train(step_of, batches(), False)
    cl, cp, f = _train(step_of, batches(), True)
    np.testing.assert_allclose(cl, el, rtol=1e-6)
    for a, b in zip(cp, ep):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    return f


def _plain_step(model, opt):
    def step(model, batch):
        opt.zero_grad()
        loss = F.cross_entropy(model(batch["x"]), batch["y"])
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def test_unread_strings_do_not_trace_again():
    f = _same_as_eager(_plain_step, lambda: [_batch(i) for i in range(10)])
    assert f.n_traces == 1


def test_a_read_string_is_still_guarded():
    def step_of(model, opt):
        def step(model, batch):
            opt.zero_grad()
            out = model(batch["x"])
            if batch["id"][0].startswith("s1"):        # the batch's id decides
                out = out * 2
            loss = F.cross_entropy(out, batch["y"])
            loss.backward()
            opt.step()
            return loss.detach()
        return step
    _same_as_eager(step_of, lambda: [_batch(i) for i in range(4)])


def _scale_of(batch):
    return batch["scale"]


# each a function of its own: what the bytecode shows is per function
_SCALE_READS = {
    "helper": "s = _scale_of(batch)",
    "method": "s = batch.get('scale')",
    "dict_get": "s = dict.get(batch, 'scale')",
    "iterate": "s = [v for k, v in batch.items() if k == 'scale'][0]",
    "closure": "s = (lambda: batch['scale'])()",
    "reassigned": "batch = dict(batch)\n    s = batch['scale']",
    "frame": "s = locals()['batch']['scale']",
    "subclass": "s = batch['scale']",
    "wrapped": "s = batch['scale']",
}


@pytest.mark.parametrize("how", sorted(_SCALE_READS))
def test_the_whole_dict_where_it_may_be_read_otherwise(how):
    """The scale is read in ways the bytecode does not show as `batch[const]` of the
    compiled function itself: it must still be guarded (each call's changes the loss)."""
    def step_of(model, opt):
        space = {"F": F, "opt": opt, "_scale_of": _scale_of}
        src = ("def step(model, batch):\n    " + _SCALE_READS[how] + "\n"
               "    opt.zero_grad()\n"
               "    loss = F.cross_entropy(model(batch['x']) * s, batch['y'])\n"
               "    loss.backward()\n"
               "    opt.step()\n"
               "    return loss.detach()\n")
        name = f"<dict_reads_{how}>"        # (its source where inspect looks: linecache)
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        exec(compile(src, name, "exec"), space)
        step = space["step"]
        if how == "wrapped":
            inner = step

            @functools.wraps(inner)
            def step(model, batch):         # (a wrapper reads what it likes)
                batch["scale"] = 1.0 if batch["text"].endswith("1") else batch["scale"]
                return inner(model, batch)
        return step

    class Batch(dict):
        def __getitem__(self, k):
            return dict.__getitem__(self, "other" if k == "scale" else k)

    def batches():
        made = [_batch(i, scale=1.0 + i, other=3.0 - i) for i in range(4)]
        return [Batch(b) for b in made] if how == "subclass" else made
    _same_as_eager(step_of, batches)


def test_a_key_read_but_missing_raises_as_eager():
    step = llgrad.compile(lambda model, batch: model(batch["x"]).sum())
    model = nn.Linear(4, 3)
    step(model, _batch(0))
    b = _batch(1)
    del b["x"]
    with pytest.raises(KeyError):
        step(model, b)
    want = model(_batch(2)["x"]).sum().item()
    assert step(model, _batch(2)).item() == pytest.approx(want)


def test_unread_tensors_are_no_inputs_and_read_ones_are():
    def f(batch):
        return (batch["x"] * 2).sum()
    cf = llgrad.compile(f)
    for i in range(4):
        b = _batch(i, unused=llgrad.ones(i + 1))        # (a new shape each call)
        assert float(cf(b)) == pytest.approx(float(f(b)), rel=1e-6)
    assert cf.n_traces == 1


@pytest.mark.parametrize("src,keys", [
    ("def f(b):\n    return b['x'] + b['y'] + b['x']", ("x", "y")),
    ("def f(b):\n    return b[0]", (0,)),
    ("def f(b):\n    return g(b)", None),
    ("def f(b):\n    return b.get('x')", None),
    ("def f(b):\n    b['x'] = 1", None),
    ("def f(b):\n    del b['x']", None),
    ("def f(b):\n    return b[k]", None),
    ("def f(b):\n    b = {}\n    return b['x']", None),
    ("def f(b):\n    return lambda: b['x']", None),
    ("def f(b):\n    return locals()", None),
    ("def f(b):\n    return {**b}", None),
    ("def f(b, c):\n    return c['x']", ()),
])
def test_the_keys_the_bytecode_shows(src, keys):
    space = {}
    exec(src, space)
    assert dict_reads._subscripted(space["f"].__code__, "b") == keys
