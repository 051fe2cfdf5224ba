"""llgrad.explain: graphs, breaks with their reasons and lines, guards, native or
interpreted, saved bytes; and it changes nothing."""
import warnings

import numpy as np

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


def _line(marker):
    with open(__file__) as f:
        for k, line in enumerate(f, 1):
            if marker in line and "_line(" not in line:
                return k
    raise AssertionError(marker)


def test_explain_a_loss():
    def loss(x, w1, w2, y):
        return F.cross_entropy((x @ w1).tanh() @ w2, y)

    x, y = llgrad.randn(8, 4), llgrad.zeros(8, dtype=llgrad.int64)
    w1 = llgrad.randn(4, 16, requires_grad=True)
    w2 = llgrad.randn(16, 3, requires_grad=True)
    e = llgrad.explain(loss, x, w1, w2, y)
    assert e.graph_count == 2 and e.break_count == 0 and not e.runs_eagerly
    fwd, bwd = e.graphs
    assert fwd.which == "forward" and fwd.ops["mm"] == 2 and fwd.native and fwd.groups
    assert bwd.which == "backward" and bwd.n_ops > fwd.n_ops
    assert e.ops_per_graph == {"forward": fwd.n_ops, "backward": bwd.n_ops}
    # tanh's result (8x16 f32) and log_softmax's (8x3) are saved
    assert e.saved_bytes == 8 * 16 * 4 + 8 * 3 * 4
    text = str(e)
    assert repr(e) == text
    assert "graph(s), 0 graph break(s)" in text and "native:" in text
    assert "x.shape == (8, 4)" in text and "w1.requires_grad == True" in text
    assert f"saved for the backward: {e.saved_bytes:,} bytes" in text
    assert w1.grad is None                   # (nothing the caller sees changed)


def test_explain_names_a_graph_break_and_its_line():
    def f(x):
        y = x * 2
        print_me = y.numpy()                      # EXPLAIN-BREAK
        return y.sum() + len(print_me)

    with warnings.catch_warnings():
        warnings.simplefilter("error")            # explain reports; it does not warn
        e = llgrad.explain(f, llgrad.randn(3))
    assert e.runs_eagerly and e.graph_count == 0 and e.break_count == 1
    assert "numpy()" in e.graph_breaks[0]
    assert f"test_observe_explain.py:{_line('# EXPLAIN-BREAK')}" in e.graph_breaks[0]
    assert "graph breaks:" in str(e)


def test_explain_a_training_step_and_an_interpreted_graph():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().numpy().copy() for p in model.parameters()]

    @llgrad.compile
    def step(model, opt, x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    e = llgrad.explain(step, model, opt, llgrad.randn(5, 3))
    assert e.step and e.graph_count == 1 and e.graphs[0].native
    assert "type(model) is Sequential" in e.guards
    assert "opt.param_groups[0]['lr'] != 0  (its value an input, read at each call)" in \
        e.guards              # (a schedule does not trace again: runtime/hypers.py)
    assert "opt.param_groups[0]['momentum'] == 0" in e.guards
    assert "runs its own backward" in str(e)
    for p, b in zip(model.parameters(), before):       # explain stepped nothing
        np.testing.assert_array_equal(p.detach().numpy(), b)

    # float16 graphs run on the interpreter: explain says so and why
    h = llgrad.compile(lambda x: (x * 2).sum())
    e = llgrad.explain(h, llgrad.ones(4, dtype=llgrad.float16))
    assert not e.graphs[0].native and "interpreted" in e.graphs[0].interpreted


def test_explain_with_fullgraph_reports_the_break():
    def f(x):
        return llgrad.tensor(x.numpy()).sum()

    e = llgrad.explain(llgrad.compile(f, fullgraph=True), llgrad.randn(3))
    assert e.runs_eagerly and e.break_count == 1 and "numpy()" in e.graph_breaks[0]
