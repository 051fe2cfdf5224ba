"""Autograd behaviour users rely on, torch vs llgrad eager vs llgrad.compile (the traced
part is fwd; hooks, backward, autograd.grad run around it, see
adversary_s73_autograd_harness): tensor hooks on leaves and non-leaves (modifying, None,
used twice, order, removal, with retain_grad), post-accumulate-grad hooks, retain_grad on a
view, the non-leaf .grad warning, retain_graph, backward(inputs=), autograd.grad
allow_unused/materialize_grads, grad_outputs of other shapes, the gradient penalty, the
grad_fn names of outputs."""
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
from adversary_s73_autograd_harness import check3, gname, params, raises  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case)

A = np.array([[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]], np.float32)
B = np.array([[0.5, 0.25], [-1.0, 0.125], [0.0625, 1.5]], np.float32)


def leaf(lib, a, s):
    return lib.tensor(a * s, requires_grad=True)


def f_square_sum(torch, x):
    return (x * x).sum()


def d_leaf_hook_scales(torch, f, s):
    x = leaf(torch, A, s)
    x.register_hook(lambda g: g * 3)
    f(x).backward()
    return [x.grad]


def f_hook_inside_nonleaf(torch, x):
    h = x * 3
    h.register_hook(lambda g: g + 1)
    return (h * h).sum()


def d_hook_inside_nonleaf(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    y.backward()
    return [y, x.grad, gname(y)]


def f_hook_inside_leaf(torch, x):
    x.register_hook(lambda g: g * -2)
    return (x.exp() * x).sum()


def d_hook_inside_leaf(torch, f, s):
    x = leaf(torch, A, s)
    f(x).backward()
    return [x.grad]


SEEN = []


def f_hook_none_records(torch, x):
    h = x.sin()
    h.register_hook(lambda g: SEEN.append(g.clone()))
    return (h * x).sum()


def d_hook_none_records(torch, f, s):
    SEEN.clear()
    x = leaf(torch, A, s)
    f(x).backward()
    return [x.grad, len(SEEN), SEEN[0] if SEEN else None]


def f_used_twice(torch, x):
    h = x * 2
    h.register_hook(lambda g: SEEN.append(g.clone()) or g * 10)
    return (h * h + h).sum()


def d_used_twice(torch, f, s):
    SEEN.clear()
    x = leaf(torch, A, s)
    f(x).backward()
    return [x.grad, len(SEEN), SEEN[0] if SEEN else None]


def f_tanh_mm(torch, x, w):
    return torch.tanh(x @ w)


def d_hook_order_and_remove(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(x, w)
    y.register_hook(lambda g: g + 1)
    y.register_hook(lambda g: g * 2)
    r = y.register_hook(lambda g: g * 100)
    r.remove()
    y.sum().backward()
    return [x.grad, w.grad]


def d_retain_grad_then_hook(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(x, w)
    y.retain_grad()
    y.register_hook(lambda g: g * 2)
    (y * y).sum().backward()
    return [y.grad, x.grad, y.is_leaf, y.retains_grad]


def d_post_accumulate(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    calls = []

    def hook(p):
        calls.append(p.grad.clone())
        p.grad.mul_(0.5)
    w.register_post_accumulate_grad_hook(hook)
    f(x, w).sum().backward()
    f(x, w).pow(2).sum().backward()
    return [w.grad, len(calls), calls, x.grad]


def f_retain_view(torch, x):
    v = x[:, 1:]
    v.retain_grad()
    return v, (v * v).sum() + x.sum()


def d_retain_view(torch, f, s):
    x = leaf(torch, A, s)
    v, y = f(x)
    y.backward()
    return [v.grad, x.grad, v._is_view(), gname(v), v.retains_grad]


def d_nonleaf_grad_warns(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = y.grad
    return [g, [(x.category.__name__, "non-leaf" in str(x.message)) for x in w]]


def d_retain_graph_twice(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(x, w).sum()
    y.backward(retain_graph=True)
    y.backward()
    third = raises(y.backward, "second time")
    return [x.grad, w.grad, third[:2] + third[2:]]


def f_no_saved(torch, x):
    return (x * 2).sum()


def d_twice_no_saved(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    y.backward()
    r = raises(y.backward, "second time")
    return [x.grad, r[0]]


def d_twice_saved_raises(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    y.backward()
    return [raises(y.backward, "second time", "retain_graph"), x.grad]


def d_backward_inputs(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(x, w).sum()
    y.backward(inputs=[w], retain_graph=True)
    g1 = [x.grad, w.grad]
    y.backward(inputs=[x])
    return g1 + [x.grad, w.grad]


def f_mm_mid(torch, x, w):
    h = x @ w
    return h, torch.tanh(h).sum()


def d_backward_inputs_nonleaf(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    h, y = f(x, w)
    y.backward(inputs=[h])
    return [h.grad, x.grad, w.grad]


def f_uses_first(torch, a, b):
    return (a.sin() * 2).sum()


def d_grad_unused(torch, f, s):
    a, b = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(a, b)
    r1 = raises(lambda: torch.autograd.grad(y, [a, b], retain_graph=True), "not have been used")
    g2 = torch.autograd.grad(y, [a, b], allow_unused=True, retain_graph=True)
    g3 = torch.autograd.grad(y, [a, b], allow_unused=True, materialize_grads=True)
    return [r1[:2], r1[2], list(g2), list(g3), a.grad]


def f_scale(torch, x):
    return x * 2 + 1


def d_grad_outputs_shapes(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    r1 = raises(lambda: y.backward(torch.ones(3, 2), retain_graph=True), "shape")
    r2 = raises(lambda: y.backward(retain_graph=True), "scalar")
    r3 = raises(lambda: torch.autograd.grad(y, x, torch.ones(6), retain_graph=True), "shape")
    y.backward(torch.full((2, 3), 2.0), retain_graph=True)
    return [r1[0], r1[1:], r2, r3[:2], x.grad]


def d_grad_outputs_broadcast(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    return [raises(lambda: y.backward(torch.ones(3)), "shape"), x.grad]


def d_no_grad_fn_raises(torch, f, s):
    x = torch.tensor(A * s)
    y = f(x)
    return [raises(y.backward, "does not require grad"),
            raises(lambda: torch.autograd.grad(y.sum(), x), "does not require grad")]


def d_gradient_penalty(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    out = f(x, w).sum()
    g, = torch.autograd.grad(out, x, create_graph=True)
    pen = g.norm() ** 2
    pen.backward()
    return [g, pen, gname(g), x.grad, w.grad]


def d_hvp(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    out = f(x, w).pow(2).sum()
    g, = torch.autograd.grad(out, w, create_graph=True)
    v = torch.ones_like(w)
    hv, = torch.autograd.grad((g * v).sum(), w)
    return [g, hv]


def f_named(torch, x, w):
    return (x[:, 1:], x.t(), x.view(-1), x.expand(2, 2, 3), x.sum(1), x.mean(), x.clone(),
            x.unsqueeze(0), x @ w, (x * 1).exp_(), x.permute(1, 0), x.reshape(3, 2),
            torch.cat([x, x]), x.select(0, 1), x.squeeze(), x.abs().max())


def d_grad_fn_names(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    outs = f(x, w)
    return [[gname(o) for o in outs], [o._is_view() for o in outs], list(outs)]


def d_input_modified_after(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    xc = x * 1
    y = f(xc, w).sum()
    xc.add_(1)
    return [raises(y.backward, "modified by an inplace operation", "version"), w.grad]


def d_output_modified_after(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(x, w)
    y.mul_(2)                       # (tanh saves its output)
    return [raises(lambda: y.sum().backward(), "modified by an inplace operation"), y]


def f_row_view(torch, x):
    return x[0], x.t()


def d_view_output_inplace(torch, f, s):
    x = leaf(torch, A, s)
    xc = x * 1
    r, t = f(xc)
    r.mul_(3)
    (t * t).sum().backward()
    return [r, xc, x.grad, r._is_view(), t._is_view()]


def d_hook_wrong_shape(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    y.register_hook(lambda g: g.sum(0))
    return [raises(lambda: y.sum().backward(), "hook"), x.grad]


def d_hook_wrong_dtype(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    y.register_hook(lambda g: g.double())
    r = raises(lambda: y.sum().backward(), "hook", "type")
    return [r, x.grad]


def d_grad_layout(torch, f, s):
    x = torch.tensor(A.T * s).t().requires_grad_()      # (a transposed leaf)
    f(x).sum().backward()
    y = f(x)
    return [x.grad, x.grad.stride(), x.grad.is_contiguous()]


def d_multi_root(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    h, y = f(x, w)
    torch.autograd.backward([y, h], [torch.tensor(2.0), torch.ones_like(h)])
    return [x.grad, w.grad]


def d_grads_batched(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    eye = torch.eye(6).reshape(6, 2, 3)
    g, = torch.autograd.grad(y, x, eye, is_grads_batched=True)
    return [g]


def d_manual_grad_wrong(torch, f, s):
    x = leaf(torch, A, s)
    r = raises(lambda: setattr(x, "grad", torch.ones(3)), "shape", "size")
    x.grad = torch.full((2, 3), 0.5)
    f(x).sum().backward()
    return [r, x.grad]


def f_checkpoint_inside(torch, x, w):
    from importlib import import_module
    cp = import_module(torch.__name__ + ".utils.checkpoint").checkpoint
    return cp(lambda a, b: torch.tanh(a @ b) * 2, x, w, use_reentrant=False)


def d_checkpoint_inside(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(x, w)
    y.sum().backward()
    return [y, x.grad, w.grad]


def d_node_hooks(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    seen = []
    y.grad_fn.register_prehook(lambda gout: seen.append(("pre", len(gout))))
    y.grad_fn.register_hook(lambda gin, gout: seen.append(("post", len(gin), len(gout))))
    y.sum().backward()
    return [seen, x.grad]


CASES = [
    (f_square_sum, d_leaf_hook_scales), (f_hook_inside_nonleaf, d_hook_inside_nonleaf),
    (f_hook_inside_leaf, d_hook_inside_leaf), (f_hook_none_records, d_hook_none_records),
    (f_used_twice, d_used_twice), (f_tanh_mm, d_hook_order_and_remove),
    (f_tanh_mm, d_retain_grad_then_hook), (f_tanh_mm, d_post_accumulate),
    (f_retain_view, d_retain_view), (f_scale, d_nonleaf_grad_warns),
    (f_tanh_mm, d_retain_graph_twice), (f_no_saved, d_twice_no_saved),
    (f_square_sum, d_twice_saved_raises), (f_tanh_mm, d_backward_inputs),
    (f_mm_mid, d_backward_inputs_nonleaf), (f_uses_first, d_grad_unused),
    (f_scale, d_grad_outputs_shapes), (f_scale, d_grad_outputs_broadcast),
    (f_scale, d_no_grad_fn_raises), (f_tanh_mm, d_gradient_penalty), (f_tanh_mm, d_hvp),
    (f_named, d_grad_fn_names), (f_tanh_mm, d_input_modified_after),
    (f_tanh_mm, d_output_modified_after), (f_row_view, d_view_output_inplace),
    (f_scale, d_hook_wrong_shape), (f_scale, d_hook_wrong_dtype), (f_scale, d_grad_layout),
    (f_mm_mid, d_multi_root), (f_scale, d_grads_batched), (f_scale, d_manual_grad_wrong),
    (f_checkpoint_inside, d_checkpoint_inside), (f_scale, d_node_hooks),
]
XFAIL = {}
# the grad_fn of a compiled call's outputs is one CompiledFunctionBackward (as
# torch.compile's): its name and its hooks' gradient counts are not eager's
NOT_COMPILED = {"d_grad_fn_names": (0,), "d_node_hooks": (0,)}


@pytest.mark.parametrize("fwd,drive", params(CASES, XFAIL))
def test_autograd_case(fwd, drive):
    check3(fwd, drive, not_compiled=NOT_COMPILED.get(drive.__name__, ()))
