"""autograd.Function against PyTorch (each failed before its fix): what backward may return
(shapes, gradients for non-tensor inputs, non-tensors), non-tensor outputs, mark_dirty (not
returned; on a view: the base's history goes through the custom backward), the outputs that
are views (an input returned as is, a view made in forward; a full backward hook's outputs):
writing them in place raises PyTorch's error; keyword and default arguments (setup_context did
not see them: a silently wrong gradient); ctx.save_for_forward (missing) and jvp run on
primals; a once_differentiable backward differentiated again (no edges: nothing to do)."""
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from autograd_oracle_sweep7 import same  # noqa: E402


def _fn(L, forward, backward):
    return type("F", (L.autograd.Function,), {"forward": staticmethod(forward),
                                              "backward": staticmethod(backward)})


def _leaf(L):
    return L.tensor([1.0, 2.0], requires_grad=True)


def _grad_shape_not_expandable(L):
    F = _fn(L, lambda ctx, x: x * 2, lambda ctx, g: g[:1])
    F.apply(_leaf(L)).sum().backward()


def _grad_for_int_input(L):
    F = _fn(L, lambda ctx, x, k: x * k, lambda ctx, g: (g, g))
    F.apply(_leaf(L), 3).sum().backward()


def _grad_not_a_tensor(L):
    F = _fn(L, lambda ctx, x: x * 2, lambda ctx, g: 1.0)
    F.apply(_leaf(L)).sum().backward()


def _grad_broadcast_summed(L):
    a = _leaf(L)
    F = _fn(L, lambda ctx, x: x * 2, lambda ctx, g: g.expand(3, 2))
    F.apply(a).sum().backward()
    return a.grad


def _non_tensor_outputs(L):
    seen = []

    def backward(ctx, g, g_int, g_str, g2):
        seen.extend([g_int, g_str, g2])
        return g * 2
    F = _fn(L, lambda ctx, x: (x * 2, 5, "s", x * 3), backward)
    a = _leaf(L)
    y, n, s, _ = F.apply(a)
    y.sum().backward()
    return n, s, seen, a.grad


def _dirty_not_returned(L):
    def forward(ctx, x, y):
        y.add_(1)
        ctx.mark_dirty(y)
        return x * 2
    F = _fn(L, forward, lambda ctx, g: (g, None))
    F.apply(_leaf(L), L.ones(2))


def _double(ctx, x):
    x.mul_(2)
    ctx.mark_dirty(x)
    return x


def _dirty_view(L):
    F = _fn(L, _double, lambda ctx, g: g * 2)
    a = L.ones(2, 3, requires_grad=True)
    b = a * 1
    v = b[0]
    y = F.apply(v)
    names = (y is v, type(y.grad_fn).__name__, type(b.grad_fn).__name__, y._version)
    b.sum().backward()
    return names, a.grad


def _dirty_view_two_outputs(L):
    def forward(ctx, x, y):
        x.mul_(2)
        ctx.mark_dirty(x)
        return y * 1, x
    F = _fn(L, forward, lambda ctx, g, g2: (g2 * 2, g))
    F.apply((L.ones(2, 3, requires_grad=True) * 1)[0], L.ones(3, requires_grad=True))


def _returned(L, body, leaf, write, no_grad_write=False):
    F = _fn(L, lambda ctx, x: body(x), lambda ctx, g: g.sum() * L.ones(2))
    a = _leaf(L)
    y = F.apply(a if leaf else a * 1)
    if no_grad_write:
        with L.no_grad():
            write(y)
        return y.grad_fn
    write(y)
    y.sum().backward()
    return a.grad


def _as_is(x):
    return x


def _view(x):
    return x[:1]


def _view_of_clone(x):
    return x.clone()[:1]


def _mul2(y):
    y.mul_(2)


@pytest.mark.parametrize("fn", [
    _grad_shape_not_expandable, _grad_for_int_input, _grad_not_a_tensor,
    _grad_broadcast_summed, _non_tensor_outputs, _dirty_not_returned, _dirty_view,
    _dirty_view_two_outputs,
    lambda L: _returned(L, _as_is, True, _mul2),
    lambda L: _returned(L, _as_is, False, _mul2),
    lambda L: _returned(L, _as_is, False, _mul2, no_grad_write=True),
    lambda L: _returned(L, _view, False, _mul2),
    lambda L: _returned(L, _view, True, _mul2, no_grad_write=True),
    lambda L: _returned(L, _view_of_clone, True, _mul2),
    lambda L: _returned(L, _view, False, lambda y: y.view(1, 1).add_(1)),
])
def test_custom_function_against_torch(fn):
    same(fn, torch)


def _views_of_inputs(L):
    F = _fn(L, lambda ctx, x: x, lambda ctx, g: g)
    plain = L.tensor([1.0, 2.0])
    y = F.apply(plain)
    y.mul_(2)                               # (nothing requires grad: allowed, and shared)
    a = _leaf(L)
    z = F.apply(a)
    with L.no_grad():
        w = F.apply(a)
    w.mul_(2)                               # (no_grad: a detached alias, not a view)
    return y._base is plain, plain, z._base is a, z.is_leaf, w._base is None


def _under_no_grad_view(L):
    F = _fn(L, lambda ctx, x: x[:1], lambda ctx, g: g)
    a = _leaf(L)
    with L.no_grad():
        y = F.apply(a)
    with L.no_grad():
        a.mul_(1)
    return y.requires_grad, y.grad_fn


@pytest.mark.parametrize("fn", [_views_of_inputs, _under_no_grad_view])
def test_outputs_that_are_views(fn):
    same(fn, torch)


def _module_output_written(L, in_forward):
    class M(L.nn.Module):
        def forward(self, x):
            return x.relu_() if in_forward else x * 2
    m = M()
    m.register_full_backward_hook(lambda *a: None)
    x = L.ones(2, requires_grad=True) * 1
    y = m(x)
    if not in_forward:
        y.add_(1)
    y.sum().backward()


@pytest.mark.parametrize("in_forward", [False, True])
def test_full_backward_hook_outputs_may_not_be_written(in_forward):
    same(lambda L: _module_output_written(L, in_forward), torch)


def _setup_context_fn(L, record):
    def forward(x, k=2.0):
        return x * k

    def setup_context(ctx, inputs, output):
        record.append(len(inputs))
        ctx.k = inputs[-1]

    def backward(ctx, g):
        return g * ctx.k, None
    return type("F", (L.autograd.Function,), {
        "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward)})


def _keyword_and_default_inputs(L):
    seen = []
    F = _setup_context_fn(L, seen)
    a = _leaf(L)
    F.apply(a, k=3.0).sum().backward()          # (k was dropped: the gradient was a's)
    F.apply(a).sum().backward()
    return seen, a.grad


def _input_returned_non_differentiable(L):
    def forward(ctx, x):
        ctx.mark_non_differentiable(x)
        return x
    F = _fn(L, forward, lambda ctx, g: g)
    y = F.apply(_leaf(L) * 1)
    return y.requires_grad, y.grad_fn, y._base is None


@pytest.mark.parametrize("fn", [_keyword_and_default_inputs, _input_returned_non_differentiable])
def test_inputs_and_outputs_against_torch(fn):
    same(fn, torch)


def _save_for_forward(L):
    fw = L.autograd.forward_ad

    def forward(ctx, x, k):
        ctx.save_for_forward(x)
        ctx.k = k
        return x.sin() * k

    def jvp(ctx, tx, tk):
        x, = ctx.saved_tensors
        return tx * x.cos() * ctx.k
    F = type("F", (L.autograd.Function,), {"forward": staticmethod(forward),
                                           "backward": staticmethod(lambda ctx, g: (g, None)),
                                           "jvp": staticmethod(jvp)})
    with fw.dual_level():
        d = fw.make_dual(L.tensor([1.0, 2.0]), L.tensor([1.0, 1.0]))
        t = fw.unpack_dual(F.apply(d, 2.0)).tangent
        return t, fw.unpack_dual(t).tangent        # (jvp ran on primals: no tangent)


def test_save_for_forward_against_torch():
    same(_save_for_forward, torch)


def _save_both(ctx, inputs, output):
    ctx.save_for_backward(*inputs)
    ctx.save_for_forward(*inputs)


def _once_differentiable_sin(L):
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.cos()
    return type("G", (L.autograd.Function,), {
        "forward": staticmethod(lambda x: x.sin()),
        "setup_context": staticmethod(_save_both),
        "jvp": staticmethod(lambda ctx, t: t * ctx.saved_tensors[0].cos()),
        "backward": staticmethod(L.autograd.function.once_differentiable(backward))})


def test_jvp_through_a_once_differentiable_backward_is_never_zero():
    # PyTorch runs the Function's jvp; llgrad's jvp differentiates the backward, which
    # once_differentiable forbids: it raises (it gave zeros: the node had no edges)
    x, t = [1.0, 2.0], [1.0, 1.0]
    want = torch.func.jvp(_once_differentiable_sin(torch).apply, (torch.tensor(x),),
                          (torch.tensor(t),))[1].tolist()
    try:
        got = llgrad.func.jvp(_once_differentiable_sin(llgrad).apply, (llgrad.tensor(x),),
                              (llgrad.tensor(t),))[1].tolist()
    except RuntimeError as e:
        assert "once_differentiable" in str(e)
    else:
        assert got == pytest.approx(want)


def _saved_for_forward_and_backward(L):
    def forward(ctx, x):
        ctx.save_for_forward(x * 100)
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g
    a = _leaf(L)
    _fn(L, forward, backward).apply(a).sum().backward()
    return a.grad


def test_backward_reads_what_was_saved_for_backward():
    same(_saved_for_forward_and_backward, torch)
