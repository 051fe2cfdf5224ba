"""The tracer: functionalisation of in-place ops, guards, RNG nodes, source lines,
nested arguments, golden IR text, and clear errors for what cannot be traced."""
import os
import sys

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.ir import interpret, parse_graph, verify
from llgrad.tracer import TraceError

sys.path.insert(0, os.path.dirname(__file__))
import golden_fns  # noqa: E402


def run_both(fn, *arrays):
    """Trace fn on tensors made from arrays; return (interpreted outputs, interpreted
    inputs after write-back, eager outputs, eager inputs after the call)."""
    g = llgrad.trace(fn, *[llgrad.tensor(a.copy()) for a in arrays])
    verify(g)
    assert str(parse_graph(str(g))) == str(g)
    feeds = [a.copy() for a in arrays]
    got = interpret(g, *feeds)
    eager_in = [llgrad.tensor(a.copy()) for a in arrays]
    out = fn(*eager_in)
    out = out if isinstance(out, (tuple, list)) else (out,)
    return g, got, feeds, [o.numpy() for o in out], [t.numpy() for t in eager_in]


def check(fn, *arrays):
    g, got, feeds, want, want_in = run_both(fn, *arrays)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    for a, b in zip(feeds, want_in):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    return g


R = np.random.default_rng(0)


def rnd(*shape):
    return R.standard_normal(shape).astype(np.float32)


# ---- functionalisation ------------------------------------------------------------------

def test_setitem_on_slice_of_intermediate():
    def f(x):
        h = x * 2
        h[:, 1:] = h[:, 1:] * 10
        return h
    check(f, rnd(3, 4))


def test_inplace_through_transpose_select_of_input_is_written_back():
    def f(x):
        x.t()[0].mul_(3)
        return x + 1
    g = check(f, rnd(3, 3))
    assert 0 in g.mutated


def test_chain_of_views_and_later_reads_see_the_update():
    def f(x):
        h = x.exp()
        v = h[1:, ::2]          # a view taken before the write
        w = v.t()[0]            # a view of a view
        w.add_(100)
        return h, v, w, h.sum()
    check(f, rnd(4, 6))


def test_inplace_on_input_slices_and_reads_of_other_aliases():
    def f(x, y):
        a = x[:2]
        b = x[1:]
        a.mul_(y[0])
        b.add_(1)               # overlaps a's row 1
        return a + b[:2]
    g = check(f, rnd(3, 4), rnd(2, 4))
    assert list(g.mutated) == [0]


def test_setitem_with_scalar_and_tensor_and_advanced_index():
    def f(x, i):
        x[0] = 5.0
        x[:, 2] = x[:, 1]
        x[i] = -1.0
        return x * 1
    check(f, rnd(4, 3), np.array([1, 3]))


def test_inplace_activation_and_fill_on_intermediate_views():
    def f(x):
        h = x @ x.t()
        h.diagonal().fill_(0)
        h[0].relu_()
        h.clamp_(-1, 1)
        return h
    check(f, rnd(4, 4))


def test_unmutated_input_is_not_written_back():
    g = llgrad.trace(lambda x: x * 2, llgrad.ones(3))
    assert g.mutated == {}


def test_inputs_sharing_memory_are_read_not_written():
    # (x[:-1], x[1:]: a language model's inputs and targets) read as they are; a write into
    # the memory they share cannot be traced
    x = llgrad.arange(4.0)
    g = llgrad.trace(lambda a, b: a + b, x[:-1], x[1:])
    assert len(g.inputs) == 2 and g.mutated == {}
    out = interpret(g, x[:-1].numpy(), x[1:].numpy())
    np.testing.assert_array_equal(out[0] if isinstance(out, (list, tuple)) else out, [1, 3, 5])
    with pytest.raises(TraceError, match="writing into memory that inputs share"):
        llgrad.trace(lambda a, b: a.mul_(2), x[:-1], x[1:])
    # (a.add_(b) of partly shared memory: PyTorch's own error, eager or traced)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        llgrad.trace(lambda a, b: a.add_(b), x[:-1], x[1:])


# ---- guards ----------------------------------------------------------------------------------

def branchy(x):
    if x.sum() > 0:
        return x * 2
    return -x


@pytest.mark.parametrize("sign,expected", [(1.0, True), (-1.0, False)])
def test_data_dependent_branch_records_its_outcome(sign, expected):
    g = llgrad.trace(branchy, llgrad.ones(3) * sign)
    assert len(g.guards) == 1
    assert g.guards[0].expected is expected
    assert g.guards[0].loc.startswith("test_trace.py:")
    assert f"== {expected}" in str(g)
    np.testing.assert_allclose(interpret(g, np.ones(3, np.float32) * sign)[0],
                               branchy(llgrad.ones(3) * sign).numpy())


def test_item_float_int_record_guards():
    def f(x):
        n = int(x[0])
        s = float(x.sum())
        return x * n + s + x.max().item()
    g = llgrad.trace(f, llgrad.tensor([2.0, 3.0]))
    assert [gd.expected for gd in g.guards] == [2.0, 5.0, 3.0]
    assert str(parse_graph(str(g))) == str(g)


def test_constants_created_inside_are_folded_in_and_need_no_guard():
    g = llgrad.trace(lambda x: x + llgrad.tensor([1.0, 2.0]), llgrad.ones(2))
    assert g.guards == [] and any(n.op == "constant" for n in g.nodes)


# ---- random ops ----------------------------------------------------------------------------

def random_fn(x):
    return x + llgrad.randn(3) + F.dropout(x, 0.5) * llgrad.rand(3)


def test_rng_nodes_replay_eager_draws_from_the_same_seed():
    llgrad.manual_seed(7)
    g = llgrad.trace(random_fn, llgrad.ones(3))
    assert [n.op for n in g.nodes if n.op.startswith("rng")] == \
        ["rng_normal", "rng_uniform", "rng_uniform"]
    assert g.inputs[-1].name == "rng"
    state = g.example_inputs[-1].copy()
    got = interpret(g, np.ones(3, np.float32), state)[0]
    llgrad.manual_seed(7)
    want = random_fn(llgrad.ones(3)).numpy()
    np.testing.assert_array_equal(got, want)
    # the state input is written back advanced, as eager's generator advanced
    assert not np.array_equal(state, g.example_inputs[-1])


def test_generator_state_continues_across_calls():
    llgrad.manual_seed(1)
    g = llgrad.trace(lambda x: x + llgrad.randn(2), llgrad.zeros(2))
    state = g.example_inputs[-1].copy()
    first = interpret(g, np.zeros(2, np.float32), state)[0]
    second = interpret(g, np.zeros(2, np.float32), state)[0]
    llgrad.manual_seed(1)
    np.testing.assert_array_equal(first, llgrad.randn(2).numpy())
    np.testing.assert_array_equal(second, llgrad.randn(2).numpy())


@pytest.mark.parametrize("what", ["randint with a generator", "randperm with a generator",
                                  "unique"])
def test_untraceable_randomness_and_shapes_are_clear_errors(what):
    calls = {"randint with a generator": lambda x: x + llgrad.randint(
                 0, 3, (2,), generator=llgrad.Generator()),
             "randperm with a generator": lambda x: x + llgrad.randperm(
                 2, generator=llgrad.Generator()),
             "unique": lambda x: llgrad.unique(x > 0)}
    with pytest.raises(TraceError, match=f"{what}.*cannot be traced.*test_trace.py:"):
        llgrad.trace(calls[what], llgrad.ones(2))


# ---- structure, names and locations ---------------------------------------------------------

def test_nested_arguments_and_outputs():
    def f(params, batch, scale=2.0):
        h = batch["x"] @ params[0] + params[1]
        return {"out": h * scale, "parts": [h.sum(), params[1]]}
    g = llgrad.trace(f, [llgrad.randn(3, 4), llgrad.randn(4)], {"x": llgrad.randn(2, 3)})
    assert [v.name for v in g.inputs] == ["params_0", "params_1", "batch_x"]
    assert len(g.outputs) == 3
    assert not any(n.op == "constant" for n in g.nodes)   # 2.0 is an inline constant


def test_non_tensor_output_is_a_clear_error():
    with pytest.raises(TraceError, match="returned a non-tensor \\(int\\)"):
        llgrad.trace(lambda x: (x * 2, 3), llgrad.ones(2))


def test_locations_are_the_users_lines():
    g = llgrad.trace(golden_fns.layer_norm, llgrad.randn(2, 4), llgrad.randn(4),
                     llgrad.randn(4))
    assert {n.loc.split(":")[0] for n in g.nodes} == {"golden_fns.py"}


def test_autograd_inside_the_traced_function_is_traced_too():
    def f(x):
        y = (x * x).sum()
        (gx,) = llgrad.autograd.grad(y, x, create_graph=True)
        return gx
    x = llgrad.tensor([1.0, 2.0], requires_grad=True)
    g = llgrad.trace(f, x)
    np.testing.assert_allclose(interpret(g, np.array([3.0, 4.0], np.float32))[0], [6.0, 8.0])


def test_exception_in_user_code_leaves_no_tracer_behind():
    def bad(x):
        raise ValueError("boom")
    with pytest.raises(ValueError, match="boom"):
        llgrad.trace(bad, llgrad.ones(2))
    from llgrad.runtime import trace_state
    assert trace_state.state.tracer is None
    assert llgrad.trace(lambda x: x + 1, llgrad.ones(2)).nodes[0].op == "add"


def test_same_function_prints_the_same_text():
    args = (llgrad.randn(2, 4), llgrad.randn(4), llgrad.randn(4))
    assert str(llgrad.trace(golden_fns.layer_norm, *args)) == \
        str(llgrad.trace(golden_fns.layer_norm, *args))


# ---- golden IR ----------------------------------------------------------------------------------

GOLDEN_MLP = """\
graph mlp_loss(%x: f32[4,3]{3,1}, %w1: f32[3,5]{5,1}, %b1: f32[5]{1}, %w2: f32[5,2]{2,1}, %b2: f32[2]{1}, %y: i64[4]{1}) {
  %0 = mm %x, %w1                      : f32[4,5]{5,1}          # golden_fns.py:7
  %1 = add %0, %b1 alpha=1             : f32[4,5]{5,1}          # golden_fns.py:7
  %2 = tanh %1                         : f32[4,5]{5,1}          # golden_fns.py:7
  %3 = mm %2, %w2                      : f32[4,2]{2,1}          # golden_fns.py:8
  %4 = add %3, %b2 alpha=1             : f32[4,2]{2,1}          # golden_fns.py:8
  %5 = log_softmax %4 dim=1            : f32[4,2]{2,1}          # golden_fns.py:9
  %6 = nll_loss %5, %y, None ignore_index=-100 reduction='mean' : f32[]{}  # golden_fns.py:9
  return %6
}"""

GOLDEN_LAYER_NORM = """\
graph layer_norm(%x: f32[2,4]{4,1}, %gamma: f32[4]{1}, %beta: f32[4]{1}) {
  %0 = mean %x dim=(1,) keepdim=True   : f32[2,1]{1,1}          # golden_fns.py:13
  %1 = sub %x, %0 alpha=1              : f32[2,4]{4,1}          # golden_fns.py:14
  %2 = pow %1, 2                       : f32[2,4]{4,1}          # golden_fns.py:14
  %3 = mean %2 dim=(1,) keepdim=True   : f32[2,1]{1,1}          # golden_fns.py:14
  %4 = sub %x, %0 alpha=1              : f32[2,4]{4,1}          # golden_fns.py:15
  %5 = add %3, 1e-05 alpha=1           : f32[2,1]{1,1}          # golden_fns.py:15
  %6 = sqrt %5                         : f32[2,1]{1,1}          # golden_fns.py:15
  %7 = div %4, %6                      : f32[2,4]{4,1}          # golden_fns.py:15
  %8 = mul %7, %gamma                  : f32[2,4]{4,1}          # golden_fns.py:15
  %9 = add %8, %beta alpha=1           : f32[2,4]{4,1}          # golden_fns.py:15
  return %9
}"""

GOLDEN_INPLACE = """\
graph inplace_on_view(%x: f32[2,3]{3,1}, %v: f32[2,2]{2,1}) {
  %0 = mul %x, 2                       : f32[2,3]{3,1}          # golden_fns.py:19
  %1 = slice %0 dim=1 start=1 end=3 step=1 : f32[2,2]{3,1}+1    # view of %0; golden_fns.py:20
  %2 = copy %1, %v                     : f32[2,2]{2,1}          # golden_fns.py:20
  %3 = strided_scatter %0 geom=((2,3),(3,1),0) span=6 : f32[6]{1}  # golden_fns.py:20
  %4 = strided_put %3, %2 geom=((2,2),(3,1),1) : f32[6]{1}      # golden_fns.py:20
  %5 = strided_gather %4 geom=((2,3),(3,1),0) : f32[2,3]{3,1}   # golden_fns.py:20
  %6 = t %x                            : f32[3,2]{1,3}          # view of %x; golden_fns.py:21
  %7 = select %6 dim=0 index=0         : f32[2]{3}              # view of %6; golden_fns.py:21
  %8 = mul %7, 3                       : f32[2]{1}              # golden_fns.py:21
  %9 = strided_scatter %x geom=((2,3),(3,1),0) span=6 : f32[6]{1}  # golden_fns.py:21
  %10 = strided_put %9, %8 geom=((2,),(3,),0) : f32[6]{1}       # golden_fns.py:21
  %11 = strided_gather %10 geom=((2,3),(3,1),0) : f32[2,3]{3,1}  # golden_fns.py:21
  %12 = sum %5 dim=(0,) keepdim=False  : f32[3]{1}              # golden_fns.py:22
  %13 = select %11 dim=0 index=1       : f32[3]{1}+3            # view of %11; golden_fns.py:22
  %14 = add %12, %13 alpha=1           : f32[3]{1}              # golden_fns.py:22
  mutate %x = %11
  return %14
}"""


def test_golden_mlp_loss():
    g = llgrad.trace(golden_fns.mlp_loss, llgrad.randn(4, 3), llgrad.randn(3, 5),
                     llgrad.randn(5), llgrad.randn(5, 2), llgrad.randn(2),
                     llgrad.tensor([0, 1, 1, 0]))
    assert str(g) == GOLDEN_MLP


def test_golden_layer_norm():
    g = llgrad.trace(golden_fns.layer_norm, llgrad.randn(2, 4), llgrad.randn(4),
                     llgrad.randn(4))
    assert str(g) == GOLDEN_LAYER_NORM


def test_golden_inplace_on_view():
    x, v = rnd(2, 3), rnd(2, 2)
    g = llgrad.trace(golden_fns.inplace_on_view, llgrad.tensor(x.copy()), llgrad.tensor(v))
    assert str(g) == GOLDEN_INPLACE
    feeds = [x.copy(), v.copy()]
    got = interpret(g, *feeds)[0]
    xe = llgrad.tensor(x.copy())
    np.testing.assert_allclose(got, golden_fns.inplace_on_view(xe, llgrad.tensor(v)).numpy())
    np.testing.assert_allclose(feeds[0], xe.numpy())


def test_two_thousand_op_trace_is_quick_enough_to_be_in_bench():
    # the figure lives in bench/trace_speed.py; here only that a long trace works
    def f(x):
        for _ in range(500):
            x = (x * 1.0001).tanh() + 0.5 - 0.5
        return x
    g = llgrad.trace(f, llgrad.ones(4))
    assert len(g.nodes) == 2000
