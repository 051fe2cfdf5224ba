"""Sweep 63 (c2): a second-order gradient through a compiled call frees what eager's frees.

grad(s, w, create_graph=True) through a compiled call replays its forward through the
dispatcher (backward_node.py); a backward from that gradient without retain_graph freed
the replay's nodes but not the call's own node, so a later backward from the call's
results gave a gradient where torch and eager raise 'Trying to backward through the graph
a second time' (compile/replayed_graph.py). Each scenario runs with torch (the oracle),
llgrad eagerly and llgrad compiled (contract_harness_sweep7.runs). Two results (the
replay of _exact): test_contract_sweep12's test_a_graph_freed_by_a_second_order_gradient."""
import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _raised(fn):
    try:
        return fn()
    except RuntimeError as e:
        return e


def one_result_then_backward_again(lib, wrap, see):
    """One result (the compiled backward's create_graph path replays the backward too)."""
    cf = wrap(lambda x, w: (x @ w).tanh().sum())
    w = lib.full((2, 2), 0.5, requires_grad=True)
    for k in range(2):
        s = cf(lib.ones(3, 2) * (k + 1), w)
        gw, = lib.autograd.grad(s, w, create_graph=True)
        see(gw, lib.autograd.grad(gw.sum(), w)[0])     # (frees the forward's nodes)
        see(_raised(lambda: lib.autograd.grad(s, w)[0]))


def retained_second_order_graph_still_runs(lib, wrap, see):
    """Negative: with retain_graph the forward's nodes are not freed: a later backward
    gives eager's gradient, no error."""
    cf = wrap(lambda x, w: (x @ w).tanh().sum())
    w = lib.full((2, 2), 0.5, requires_grad=True)
    s = cf(lib.ones(3, 2), w)
    gw, = lib.autograd.grad(s, w, create_graph=True)
    see(lib.autograd.grad(gw.sum(), w, retain_graph=True)[0])
    see(lib.autograd.grad(s, w)[0])


def test_one_result_then_backward_again_raises_as_eager():
    runs(one_result_then_backward_again, torch)


def test_a_retained_second_order_graph_still_runs():
    runs(retained_second_order_graph_still_runs, torch)
