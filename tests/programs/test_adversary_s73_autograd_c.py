"""Autograd behaviour users rely on, torch vs llgrad eager vs llgrad.compile (part c, see
adversary_s73_autograd_harness): second and third order gradients through a compiled call
(gradient penalties, hessian-vector products with and without retain_graph, one output of
two), grad modes switched inside the function, checkpoint options (kwargs, no RNG
preservation, checkpoint_sequential), hooks on a tensor then modified in place,
create_graph into .grad, hooks in autograd.grad, autograd.functional.hessian's forward-mode
outer jacobian."""
import importlib

import numpy as np
import pytest

pytest.importorskip("torch")
from adversary_s73_autograd_harness import check3, gname, params, raises  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case)

A = np.array([[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]], np.float32)
B = np.array([[0.5, 0.25], [-1.0, 0.125], [0.0625, 1.5]], np.float32)


def leaf(lib, a, s):
    return lib.tensor(a * s, requires_grad=True)


def cpm(torch):
    return importlib.import_module(torch.__name__ + ".utils.checkpoint")


def f_tanh_mm(torch, x, w):
    return torch.tanh(x @ w)


def f_two(torch, x, w):
    h = x @ w
    return torch.tanh(h), h.sigmoid()


def d_pen_plus_loss(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    out = f(x, w).pow(2).sum()
    g, = torch.autograd.grad(out, [x], create_graph=True)
    (out + (g ** 2).sum()).backward()
    return [x.grad, w.grad, gname(g)]


def d_third_order(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(x, w).sum()
    g, = torch.autograd.grad(y, w, create_graph=True)
    h, = torch.autograd.grad(g.sum(), w, create_graph=True)
    t, = torch.autograd.grad(h.sum(), w)
    return [g, h, t]


def d_hvp_twice(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y = f(x, w)
    g, = torch.autograd.grad((y * y).sum(), w, create_graph=True)
    h1, = torch.autograd.grad(g.sum(), w, retain_graph=True)
    h2, = torch.autograd.grad((g * g).sum(), x)
    return [h1, h2]


def d_grad_then_out_backward(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    out = (f(x, w) ** 3).sum()
    g, = torch.autograd.grad(out, w, create_graph=True)
    g.sum().backward(retain_graph=True)
    out.backward()
    return [x.grad, w.grad]


def d_one_of_two_pen(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    a, b = f(x, w)
    g, = torch.autograd.grad(b.pow(2).sum(), w, create_graph=True)
    (g.sum() + (a * b).sum()).backward()
    return [x.grad, w.grad]


def d_hook_in_double(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    seen = []
    x.register_hook(lambda g: seen.append(1) or g * 2)
    g, = torch.autograd.grad(f(x, w).pow(2).sum(), x, create_graph=True)
    g.sum().backward()
    return [x.grad, w.grad, len(seen)]


def f_modes_inside(torch, x, w):
    with torch.no_grad():
        s = (x * 2).sum()
    torch.set_grad_enabled(False)
    a = x * 3
    torch.set_grad_enabled(True)
    return x @ w * s + x.detach().exp().sum(), a, x * x.detach()


def d_modes_inside(torch, f, s):
    x, w = leaf(torch, A, s), leaf(torch, B, 1.0)
    y, a, b = f(x, w)
    (y.sum() + b.sum()).backward()
    return [y, a, b, a.requires_grad, x.grad, w.grad]


def f_cp_kwargs(torch, x):
    return cpm(torch).checkpoint(lambda a, k=1.0: (a * k).sin(), x, k=3.0, use_reentrant=False)


def d_cp_kwargs(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    y.sum().backward()
    return [y, x.grad]


def f_dropout(torch, x):
    return torch.nn.functional.dropout(x, 0.5, True) * x


def d_cp_no_rng(torch, f, s):
    torch.manual_seed(3)
    x = torch.tensor(np.linspace(0.5, 2.0, 8, dtype=np.float32) * s, requires_grad=True)
    y = cpm(torch).checkpoint(f, x, use_reentrant=False, preserve_rng_state=False)
    y.sum().backward()
    return [y, x.grad, torch.rand(2)]


def d_cp_sequential(torch, f, s):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    x = leaf(torch, A, s)
    y = cpm(torch).checkpoint_sequential(m, 2, f(x, x.t() @ x), use_reentrant=False)
    y.sum().backward()
    return [y, x.grad, m[0].weight.grad]


def f_double(torch, x):
    return x * 2


def d_hook_then_inplace(torch, f, s):
    x = leaf(torch, A, s)
    h = f(x)
    seen = []
    h.register_hook(lambda g: seen.append(g.clone()) or g * 10)
    h.mul_(3)
    h.register_hook(lambda g: seen.append(g.clone()) or g + 1)
    h.sum().backward()
    return [x.grad, seen, gname(h)]


def d_view_inplace_hook(torch, f, s):
    x = leaf(torch, A, s)
    y = f(x)
    seen = []
    y.register_hook(lambda g: seen.append(g.clone()))
    y[0].mul_(5)
    (y * y).sum().backward()
    return [x.grad, seen, gname(y), y]


def d_create_graph_accum(torch, f, s):
    x = leaf(torch, A, s)
    (f(x) ** 3).sum().backward(create_graph=True)
    first = x.grad.clone()
    x.grad.sum().backward()
    return [first, x.grad, x.grad.requires_grad]


def d_hook_in_grad(torch, f, s):
    x = leaf(torch, A, s)
    seen = []
    x.register_hook(lambda g: seen.append(1) or g * 2)
    g, = torch.autograd.grad((f(x) * x).sum(), x)
    return [g, len(seen), x.grad]


def f_exp_sum(torch, x, y):
    return (x * y.exp()).sum()


def d_hessian_forward_outer(torch, f, s):
    x = torch.tensor(A[0] * s)
    y = torch.tensor(A[1])
    h = torch.autograd.functional.hessian(
        f, (x, y), outer_jacobian_strategy="forward-mode", vectorize=True)
    return [list(map(list, h)), [[t.requires_grad for t in r] for r in h]]


def d_forward_mode_refusals(torch, f, s):
    """hessian with a forward-mode outer jacobian refuses what jacobian's forward mode
    does (create_graph, strict, vectorize=False), in PyTorch's order; an unknown strategy."""
    AF = torch.autograd.functional
    xy = (torch.tensor(A[0] * s), torch.tensor(A[1]))
    got = []
    flags = [(c, t, v) for c in (False, True) for t in (False, True) for v in (False, True)]
    for cg, st, vec in flags:
        got.append(raises(lambda: AF.hessian(f, xy, create_graph=cg, strict=st, vectorize=vec,
                                             outer_jacobian_strategy="forward-mode"),
                          "create_graph", "strict", "vectorize"))
        got.append(raises(lambda: AF.jacobian(lambda a: a.exp(), xy[0], create_graph=cg, strict=st,
                                              vectorize=vec, strategy="forward-mode"),
                          "create_graph", "strict", "vectorize"))
    got.append(raises(lambda: AF.hessian(f, xy, outer_jacobian_strategy="bogus"))[:2])
    return [g[:3] if g[0] == "raises" else "ok" for g in got]


def f_sin_of_copy(torch, x):
    a = x * 1
    return a, a.sin()


def d_allow_mutation(torch, f, s):
    x = leaf(torch, A, s)
    with torch.autograd.graph.allow_mutation_on_saved_tensors():
        a, y = f(x)
        a.mul_(2)           # (the saved a is cloned before the write)
        y.sum().backward()
    return [x.grad, a]


CASES = [
    (f_tanh_mm, d_pen_plus_loss), (f_tanh_mm, d_third_order), (f_tanh_mm, d_hvp_twice),
    (f_tanh_mm, d_grad_then_out_backward), (f_two, d_one_of_two_pen),
    (f_tanh_mm, d_hook_in_double), (f_modes_inside, d_modes_inside),
    (f_cp_kwargs, d_cp_kwargs), (f_dropout, d_cp_no_rng), (f_tanh_mm, d_cp_sequential),
    (f_double, d_hook_then_inplace), (f_double, d_view_inplace_hook),
    (f_double, d_create_graph_accum), (f_double, d_hook_in_grad),
    (f_exp_sum, d_hessian_forward_outer), (f_exp_sum, d_forward_mode_refusals),
    (f_sin_of_copy, d_allow_mutation),
]
XFAIL = {"d_hessian_forward_outer": "torch's hessian with a forward-mode outer jacobian "
         "returns tensors that require grad (its inner create_graph=True leaks out); "
         "llgrad's do not (the values agree)"}
NOT_COMPILED = {}


@pytest.mark.parametrize("fwd,drive", params(CASES, XFAIL))
def test_autograd_case_c(fwd, drive):
    check3(fwd, drive, not_compiled=NOT_COMPILED.get(drive.__name__, ()))
