"""Bugs the differential fuzzer (tests/fuzz/test_fuzz.py) found, as minimal programs.

Fixed ones are plain tests. Bugs in files other engineers own (tracer, codegen, compile/,
the interpreter) are strict xfails naming the file: a fix shows up as XPASS; then remove the
xfail here and the matching entry of programs.KNOWN_BUGS, which keeps the generator from
drawing those programs meanwhile."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F

from differential import BACKENDS, Listing, check_program

pytestmark = [pytest.mark.fuzz,
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]   # log(0), 0/0 on purpose


@pytest.fixture(autouse=True)
def _environment(monkeypatch):
    monkeypatch.delenv("LLGRAD_BACKEND", raising=False)
    monkeypatch.delenv("LLGRAD_DUMP", raising=False)


def _xfail(reason, *backends):
    """Parameters over BACKENDS, those listed as strict xfails (all when none listed)."""
    bad = set(backends or BACKENDS)
    return [pytest.param(b, marks=pytest.mark.xfail(strict=True, reason=reason))
            if b in bad else b for b in BACKENDS]


# ---- fixed: eager runtime and op table ---------------------------------------------------------

REDUCTIONS_OF_0D = [   # (method call on a 0-d x = 1.5, value, gradient)
    ("sum(0)", 1.5, 1.0), ("mean(-1)", 1.5, 1.0), ("prod(0, keepdim=True)", 1.5, 1.0),
    ("amax(0)", 1.5, 1.0), ("amin(-1)", 1.5, 1.0), ("logsumexp(0)", 1.5, 1.0),
    ("max(0).values", 1.5, 1.0), ("min(-1, keepdim=True).values", 1.5, 1.0),
    ("softmax(0)", 1.0, 0.0), ("log_softmax(-1)", 0.0, 0.0), ("cumsum(0)", 1.5, 1.0),
    ("var(0, correction=0)", 0.0, 0.0),
]


@pytest.mark.parametrize("call,value,grad", REDUCTIONS_OF_0D)
def test_reduction_along_the_dim_of_a_0d_tensor(call, value, grad):
    """A 0-d tensor has one dim (0 or -1) to reduce along, as in PyTorch: x.sum(0) raised
    'axis 0 is out of bounds' (llgrad/runtime/methods_reduce.py, llgrad/ir/ops_reduce.py)
    and x.cumsum(0) came out 1-d."""
    x = llgrad.tensor(1.5, dtype=llgrad.float64, requires_grad=True)
    out = eval(f"x.{call}", {"x": x})
    assert out.shape == () and out.item() == value
    out.backward()
    assert x.grad.shape == () and x.grad.item() == grad


@pytest.mark.parametrize("call", ["argmax(0, keepdim=True)", "argmin(-1, keepdim=True)",
                                  "argmax(0)", "argmax(keepdim=True)"])
def test_argmax_of_a_0d_tensor_is_0d(call):
    """keepdim=True gave shape (1,) (llgrad/ir/ops_reduce.py _arg); PyTorch keeps 0-d."""
    x = llgrad.tensor(1.5)
    out = eval(f"x.{call}", {"x": x})
    assert out.shape == () and out.item() == 0


def test_reductions_of_0d_tensors_compile():
    check_program(Listing('''
        def f(x0, x1):
            v0 = x0.sum(0) + x0.logsumexp(-1, keepdim=True) * x0.amax(0)
            v1, v2 = x1.max(-1)
            v3 = F.embedding(x1.argmax(0, keepdim=True), x0.expand(2, 3))
            return v0 * x1.cumsum(0), v1.softmax(0), v2, (x1 > 0).any(0), v3

        def make_inputs():
            return [make_input((), 'float64', seed=1, requires_grad=True),
                    make_input((), 'float32', 'offset', seed=2, requires_grad=True)]
    '''))


@pytest.mark.parametrize("call", ["softmax(0)", "log_softmax(1)", "logsumexp(0)",
                                  "softmax(-1)"])
def test_softmax_family_of_an_empty_tensor(call):
    """softmax/log_softmax/logsumexp of a tensor with no elements: empty results (-inf for
    logsumexp over nothing), as in PyTorch; np.max of nothing raised (ops_reduce.py)."""
    x = llgrad.zeros(0, 3, dtype=llgrad.float64, requires_grad=True)
    out = eval(f"x.{call}", {"x": x})
    expect = {"logsumexp(0)": np.full(3, -np.inf)}.get(call, np.zeros((0, 3)))
    np.testing.assert_array_equal(out.detach().numpy(), expect)
    out.sum().backward()
    assert x.grad.shape == (0, 3)


def test_softmax_of_an_empty_tensor_compiles():
    check_program(Listing('''
        def f(x0):
            v0 = x0.permute(0)
            return F.softmax(v0, dim=-1), x0.logsumexp(0)

        def make_inputs():
            return [make_input((0,), 'float64', 'offset', seed=4262, requires_grad=True)]
    '''))


@pytest.mark.parametrize("dst,src", [((), (1,)), ((3,), (2, 3)), ((1,), (3,)), ((2, 1), (2, 3)),
                                     ((1,), (0,))])
@pytest.mark.parametrize("call", ["add_", "copy_", "mul_"])
def test_inplace_operand_may_not_broadcast_beyond_self(dst, src, call):
    """PyTorch's error; a (1,)-shaped operand went silently into a 0-d tensor (NumPy's
    assignment allows it), other shapes raised NumPy's messages (llgrad/runtime/dispatch.py
    call_inplace)."""
    x, y = llgrad.zeros(dst), llgrad.ones(src)
    with pytest.raises(RuntimeError, match=r"output with shape \[.*\] doesn't match the "
                                           r"broadcast shape"):
        getattr(x, call)(y)


def test_inplace_operand_broadcasting_into_self_still_works():
    x = llgrad.zeros(2, 3)
    x.add_(llgrad.ones(3))
    x.mul_(llgrad.full((2, 1), 2.0))
    x[0] = llgrad.tensor(5.0)
    np.testing.assert_array_equal(x.numpy(), [[5, 5, 5], [2, 2, 2]])
    x = llgrad.zeros(0, 3)
    x.add_(llgrad.ones(1, 3))
    assert x.shape == (0, 3)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_of_no_elements(reduction):
    """mean over no elements: nan, and an empty gradient; the VJP raised ZeroDivisionError
    (llgrad/ir/ops_nn.py)."""
    x = llgrad.zeros(0, 2, dtype=llgrad.float64, requires_grad=True)
    y = llgrad.zeros(0, 2, dtype=llgrad.float64, requires_grad=True)
    with np.errstate(all="ignore"):
        loss = F.mse_loss(x, y, reduction=reduction)
    assert np.isnan(loss.item()) if reduction == "mean" else loss.sum().item() == 0
    loss.sum().backward()
    assert x.grad.shape == (0, 2) and y.grad.shape == (0, 2)


@pytest.mark.parametrize("view", ["", "t", "slice"])
@pytest.mark.parametrize("op", ["mul_", "div_"])
def test_inplace_op_reading_its_own_target_raises_at_backward(op, view):
    """x.mul_(x) saved its operand x after writing it, at the new version: backward used
    x*x for x and gave a wrong gradient with no error. PyTorch saves it before the write, so
    backward raises the in-place error (llgrad/runtime/inplace.py call_inplace)."""
    x = llgrad.tensor([0.7, -1.3], requires_grad=True)
    v = x.neg()
    v = {"": v, "t": v.t(), "slice": v[:]}[view]
    getattr(v, op)(v)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        v.sum().backward()


def test_inplace_op_reading_its_own_target_fails_compiled_too():
    check_program(Listing('''
        def f(x0):
            v0 = x0.neg()
            v1 = v0.t()
            v1.mul_(v1)
            return v1, v0

        def make_inputs():
            return [make_input((), 'float64', seed=0, requires_grad=True)]
    '''))


def test_inplace_op_with_an_unrelated_operand_still_differentiates():
    x = llgrad.tensor([0.7, -1.3], requires_grad=True)
    y = x * 1
    y.mul_(x * 2)
    y.add_(y.detach())
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.8, -5.2])


@pytest.mark.parametrize("shape,start,end,expect", [
    ((0, 2, 2), 1, -1, (0, 4)), ((2, 0, 3), 1, -1, (2, 0)), ((2, 0, 3), 0, 1, (0, 3)),
    ((0, 2, 2), 0, -1, (0,)), ((2, 3, 4), 1, 2, (2, 12))])
def test_flatten_of_an_empty_tensor(shape, start, end, expect):
    """flatten reshaped to (..., -1, ...), which is ambiguous when another dim is 0:
    "shape '[0, -1]' is invalid for input of size 0" (llgrad/runtime/methods_views.py)."""
    x = llgrad.zeros(shape, dtype=llgrad.float64, requires_grad=True)
    y = x.flatten(start, end)
    assert y.shape == expect
    y.sum().backward()
    assert x.grad.shape == shape


def test_flatten_of_an_empty_tensor_compiles():
    check_program(Listing('''
        def f(x0):
            v0 = x0.neg()
            return v0.flatten(1)

        def make_inputs():
            return [make_input((0, 2, 2), 'float64', seed=0, requires_grad=True)]
    '''))


@pytest.mark.parametrize("shape,size", [((), ()), ((3,), (3,)), ((3,), (1, 3)), ((0, 3), (0, 3)),
                                        ((1, 0), (2, 0))])
def test_inplace_through_an_expand_that_repeats_nothing(shape, size):
    """expand's impl (np.broadcast_to) is read-only, so every in-place write through an
    expanded view raised 'more than one element of the written-to tensor refers to a single
    memory location'; PyTorch raises that only when elements repeat (llgrad/ir/ops_shape.py)."""
    x = llgrad.zeros(shape, dtype=llgrad.float64, requires_grad=True)
    y = x * 1
    y.expand(size).add_(2.0).mul_(3.0)
    np.testing.assert_array_equal(y.detach().numpy(), np.full(shape, 6.0))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(shape, 3.0))


def test_inplace_through_an_expand_that_repeats_still_raises():
    y = llgrad.zeros(1, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        y.expand(2, 3).add_(1)


def test_inplace_through_an_expand_compiles():
    check_program(Listing('''
        def f(x0, x1):
            v0 = x1.expand(())
            v0.tanh_().exp_()
            v1 = (x0 * 1).unsqueeze(0)
            v1.expand(1, 3).mul_(v0)
            return v0, v1

        def make_inputs():
            return [make_input((3,), 'float64', seed=1, requires_grad=True),
                    make_input((), 'float64', seed=0)]
    '''))


# ---- not fixed: strict xfails (files owned elsewhere) -----------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_unbind_into_one_piece(backend):
    """split/unbind into one piece came out of the interpret and python backends with an
    extra leading dim of 1: both wrapped the impl's 1-tuple of pieces once more
    (llgrad/ir/interpret.py, llgrad/codegen/pysource.py)."""
    check_program(Listing('''
        def f(x0):
            v0, = x0.unbind(0)
            return v0 * 2

        def make_inputs():
            return [make_input((1, 3), 'float64', seed=0, requires_grad=True)]
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cat_of_one_tensor(backend):
    """The same in the backward: cat of one tensor has a one-piece split as its VJP."""
    check_program(Listing('''
        def f(x0):
            return llgrad.cat([x0.softmax(0)])

        def make_inputs():
            return [make_input((4,), 'float64', seed=638, requires_grad=True)]
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_written_into_an_input(backend):
    """An input that does not require grad, written in place with a value that does: eager
    gives it history (CopySlices); compile cannot, and said 'input requires grad and is
    modified in place', which the input did not. It now says what happens, and the call
    runs eagerly (the generator keeps steering around it: KNOWN_BUGS["grad_into_input"])."""
    def f(x0, x1):
        x0[1:] = x1
        return x0

    x1 = llgrad.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(Exception, match="input 'x0' does not require grad but is written in "
                                        "place with a value that does"):
        llgrad.compile(f, backend=backend, fullgraph=True)(llgrad.zeros(3), x1)
    cf = llgrad.compile(f, backend=backend)     # (without fullgraph: eager, and a warning)
    with pytest.warns(UserWarning, match="running eagerly: .*'x0' does not require grad"):
        out = cf(llgrad.zeros(3), x1)
    assert type(out.grad_fn).__name__ == "CopySlices" and out.tolist() == [0.0, 1.0, 2.0]
    with llgrad.no_grad():                      # no history to give: compiled as usual
        for _ in range(2):
            assert cf(llgrad.zeros(3), x1).tolist() == [0.0, 1.0, 2.0]


# x[mask] with a bool mask: the IR types the result from the mask's count (a value guard
# of the trace when the mask is data; tests/tracer/test_bool_mask.py has the rest)
@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_mask_index_backward(backend):
    check_program(Listing('''
        def f(x0):
            return x0[llgrad.tensor([True, False, True])]

        def make_inputs():
            return [make_input((3,), 'float64', seed=1, requires_grad=True)]
    '''), (backend,))


def test_bool_mask_index_type():
    x = llgrad.tensor([1.0, 2.0, 3.0])
    g = llgrad.trace(lambda x0: x0[llgrad.tensor([True, False, True])] * 2, x)
    assert g.outputs[0].type.shape == (2,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_with_an_unused_empty_piece(backend):
    """A tensor made while tracing with a 0-size dim before other dims (here the zero
    gradient of the unused empty piece) became a constant whose IR type lost the trailing
    dims ((2, 0, 3).tolist() is [[], []]), and cat in the traced backward raised
    (llgrad/tracer/trace.py value_of)."""
    check_program(Listing('''
        def f(x0):
            v0, v1 = x0.split([0, 2], 1)
            return v1

        def make_inputs():
            return [make_input((2, 2, 3), 'float64', seed=475, requires_grad=True)]
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_view_output(backend):
    """An llvm-compiled graph whose output is an empty view at a nonzero offset of a buffer
    the kernel computes: making the output array raised (np.ndarray at offset > 0 of a
    0-byte buffer, llgrad/codegen/kernel.py _build)."""
    check_program(Listing('''
        def f(x0):
            return (x0 * 2)[:, 1]

        def make_inputs():
            return [make_input((0, 3), 'float64', seed=1)]
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_stack_of_empty_tensors(backend):
    """The same in the backward: the VJP of stack unbinds the empty cotangent."""
    check_program(Listing('''
        def f(x0, x1):
            return llgrad.stack([x0, x1], 1) * 2

        def make_inputs():
            return [make_input((0,), 'float64', seed=1, requires_grad=True),
                    make_input((0,), 'float64', seed=2, requires_grad=True)]
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_returned_under_no_grad(backend):
    """Called under llgrad.no_grad(), a compiled function returning one of its inputs gave,
    from the second call on, a new alias of it (made under no_grad); eager returns the
    input itself (llgrad/compile/run.py run_entry)."""
    check_program(Listing('''
        def f(x0):
            return x0 * 2, x0

        def make_inputs():
            return [make_input((2,), 'float64', seed=1, requires_grad=True)]

        NO_GRAD_CALL = True
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_view_of_an_expanded_input(backend):
    """x.t().detach() of an input with stride-0 dims: the tracer re-derived the untraced
    alias from the input through strided_scatter, which sums the elements that share
    memory: every element came out 2x its value (llgrad/tracer/trace.py value_of)."""
    check_program(Listing('''
        def f(x0):
            return x0.t().detach()

        def make_inputs():
            return [make_input((2, 3), 'float64', 'expanded', seed=7, expand=(0,))]
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_mask_index_of_an_empty_tensor(backend):
    """x[mask] of a tensor with a 0-size dim: the backward's index_put took the empty
    cotangent for a scalar (numel <= 1) that broadcasts to any count, left the count out,
    and the shape rule's stand-in mask selected nothing (llgrad/tracer/masks.py)."""
    check_program(Listing('''
        def f(x0):
            v0 = x0.neg()
            v1 = v0[llgrad.tensor([False, True, True])]
            return (v1,)

        def make_inputs():
            return [make_input((3, 2, 0), 'float32', seed=0, requires_grad=True)]
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_input_returned_under_no_grad(backend):
    """Under no_grad, a compiled function's output that is x.detach() of an input (the same
    array as the input) became a view made under no_grad, which requires grad; eager's
    detached alias does not (llgrad/compile/run.py run_entry)."""
    check_program(Listing('''
        def f(x0, x1):
            v0 = x0.detach()
            v1 = x1.detach()
            v2 = v0.float()
            return v2, v1

        def make_inputs():
            return [make_input((), 'float32', seed=0, requires_grad=True),
                    make_input((), 'float32', seed=0)]

        NO_GRAD_CALL = True
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_view_of_an_input_under_no_grad(backend):
    """Under no_grad, an empty view of an input that requires grad requires grad (with no
    edge: its backward raises, as eager's does); the compiled output came out a fresh
    array, which does not (llgrad/compile/run.py run_entry)."""
    check_program(Listing('''
        def f(x0):
            v0 = x0.neg()
            v1 = x0.narrow(0, 0, 0)
            v2 = v0.neg()
            return v2, v1

        def make_inputs():
            return [make_input((2, 2), 'float32', seed=0, requires_grad=True)]

        NO_GRAD_CALL = True
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_of_a_cat_emitted_twice(backend):
    """The suite's dedupe check (a group emitted again must give the same code) failed here:
    the same loop hints come out under new metadata numbers (llgrad/codegen/schedule/dedupe.py
    body_text now reads metadata by content)."""
    check_program(Listing('''
        def f(x0):
            v0 = llgrad.cat([x0, x0, x0], 1)
            v1 = F.layer_norm(v0, (15, 9), None, None)
            return (v1,)

        def make_inputs():
            return [make_input((2, 5, 9), 'float32', seed=0, requires_grad=True)]
    '''), (backend,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_of_a_detached_input_returned_twice_under_no_grad(backend):
    """Under no_grad, a view of x.detach() (made under no_grad, of a tensor that does not
    require grad) was taken for a view that requires grad and re-made as one."""
    check_program(Listing('''
        def f(x0):
            v0 = x0.detach()
            v1 = v0.transpose(0, 0)
            return v1, v1

        def make_inputs():
            return [make_input((2, 2), 'float32', seed=0, requires_grad=True)]

        NO_GRAD_CALL = True
    '''), (backend,))


def test_known_bugs_listed_here():
    """Every KNOWN_BUGS entry of the generator has its xfail above (and only those)."""
    pytest.importorskip("hypothesis")
    from programs import KNOWN_BUGS
    assert set(KNOWN_BUGS) == {"grad_into_input"}


@pytest.mark.parametrize("layout,extra", [("expanded", ", expand=(0,)"), ("stepped", "")])
def test_a_saved_input_view_keeps_its_layout_across_calls(layout, extra):
    """A saved input view (here the broadcast input itself) is kept by the backward as a copy;
    np.array made that copy dense (a stride-0 dim in Fortran order), and from the second call
    on the backward kernel refused it: 'expected strides (0, 1), got (1, 2)'
    (compile/backward_node.py _copy_with_layout)."""
    check_program(Listing(f'''
        def f(x0):
            v0 = x0.tanh().exp()
            v1 = x0.tanh().exp()
            v2 = v0.neg()
            return v2, v1

        def make_inputs():
            return [make_input((2, 2), 'float32', '{layout}', seed=0, requires_grad=True{extra})]
    '''), ("interpret", "python", "llvm"))
