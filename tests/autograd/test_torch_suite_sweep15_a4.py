"""Gradient edges, in-place writes through views, copy_ and re-entrant backward against
PyTorch, in the spirit of PyTorch's test/test_autograd.py (each check written anew; "fixed"
marks what failed before): autograd.grad and backward refused a GradientEdge as an input or
output ("inputs must be Tensors"), so neither the gradient at a node nor a backward in two
steps through one could be taken; backward(inputs=[t]) of a t that does not require grad
raised the engine's error where PyTorch's retain_grad() refuses first; in anomaly mode an
error other than a nan (a backward or hook raising) gave no "Error detected in <node>"
warning."""
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")

from autograd_oracle_sweep7 import same  # noqa: E402


def _raises(fn):
    try:
        fn()
    except Exception as e:      # noqa: BLE001 (the exception is what is compared)
        return type(e).__name__, str(e).splitlines()[0].replace("torch.", "llgrad.")
    return "no error"


def _edge(T, t):
    return T.autograd.graph.GradientEdge(t.grad_fn, t.output_nr)


def _gradient_edges_as_inputs(T):
    x = T.tensor([1., 2.], requires_grad=True)
    leaf = T.autograd.graph.get_gradient_edge(x)
    out = [type(leaf).__name__, leaf.output_nr,
           T.autograd.grad((x.clone() * 3).sum(), leaf)]       # (fixed: TypeError)
    y = x.clone()
    before = T.autograd.graph.get_gradient_edge(y)
    y *= 2
    out.append(T.autograd.grad(y.sum(), (before, y)))
    a, b = T.ones(2, requires_grad=True).clone(), T.ones(2, requires_grad=True).clone()
    o = a.clone()
    out += [T.autograd.grad(o.sum(), (_edge(T, a), b), allow_unused=True, materialize_grads=True),
            T.autograd.grad(o.sum(), (a, _edge(T, b)), allow_unused=True),
            _raises(lambda: T.autograd.grad(o.sum(), (a, _edge(T, b)), allow_unused=True,
                                            materialize_grads=True))]
    return out


def _gradient_edges_in_backward(T):
    x, y = T.ones(2, requires_grad=True), T.ones(2, requires_grad=True)
    xc, yc = x.clone(), y.clone()
    o = xc.clone() * 3
    T.autograd.backward(o.sum(), inputs=(_edge(T, xc), yc), retain_graph=True)
    T.autograd.backward(o.sum(), inputs=(xc, yc), retain_graph=True)
    T.autograd.backward(o.sum(), inputs=(xc, _edge(T, yc)), retain_graph=True)
    T.autograd.backward(o.sum(), inputs=(_edge(T, xc), _edge(T, yc)), retain_graph=True)
    (o * 2).sum().backward(inputs=T.autograd.graph.get_gradient_edge(x))
    return [xc.grad, yc.grad, x.grad, y.grad]


def _gradient_edge_as_output(T):
    x = T.tensor([1.0, 2.0], requires_grad=True)

    def two_steps(reduce):
        tmp = x.sin().cos()
        tmp = tmp.sum() if reduce else tmp
        return tmp.exp().clone().sin().sum(), T.autograd.graph.get_gradient_edge(tmp)
    out, edge = two_steps(True)
    g_tmp, = T.autograd.grad(out, (edge,))
    g_x, = T.autograd.grad(edge, (x,), grad_outputs=(g_tmp,))
    res = [g_tmp, g_x, T.autograd.grad(two_steps(True)[0], (x,))]
    _, edge = two_steps(False)
    res += [_raises(lambda: T.autograd.grad(edge, (x,)))[0],
            _raises(lambda: T.autograd.grad(edge, (x,), grad_outputs=T.ones(4)))[0],
            T.autograd.grad(two_steps(True)[1], (x,))]
    _, edge = two_steps(True)
    T.autograd.backward((edge,), retain_graph=True)
    return res + [x.grad]


def _in_place_through_views(T):
    out = []
    a = T.arange(6.).reshape(3, 2).requires_grad_()
    w = T.ones(2, requires_grad=True)
    x = a.clone()
    x[1].mul_(w)
    (x * x).sum().backward()
    out += [a.grad, w.grad]
    r = T.zeros(4, 4, requires_grad=True)
    y = r.clone()
    v1 = y.narrow(0, 1, 2)
    v2 = v1.narrow(1, 1, 2)
    v2.add_(T.ones(2, 2, requires_grad=True))
    out += [v1.grad_fn.name(), v2.grad_fn.name()]
    y.sum().backward()
    root = T.ones(2, 3, 2).requires_grad_()
    z = root.clone()
    z.narrow(0, 0, 1).narrow(1, 1, 1).mul_(2)
    z.sum().backward()
    return out + [r.grad, root.grad]


def _in_place_through_views_makes_base_require_grad(T):
    b = T.ones(2, 4, requires_grad=True)
    x = T.zeros(4, 4).clone()
    v = x.narrow(0, 1, 2)
    out = [x.requires_grad]
    v.mul_(b)
    out += [x.requires_grad, v.requires_grad, x.is_leaf]
    (x * 2).sum().backward()
    c = T.tensor([3.], requires_grad=True)
    d = T.tensor([2., 5.])
    res = d.narrow(0, 1, 1).mul_(c)
    res.sum().backward()
    r = T.ones(1, requires_grad=True)
    base = T.ones(5)
    sel = base.select(0, 1)
    out.append(sel.requires_grad)
    base.add_(r)
    out.append(sel.requires_grad)
    sel.sum().backward()
    return out + [b.grad, c.grad, d.requires_grad, res.requires_grad, r.grad]


def _multi_output_views_written_in_place(T):
    out = []
    for split in (lambda t: t.split(1), lambda t: t.split_with_sizes([1, 1]),
                  lambda t: t.chunk(2), lambda t: t.unbind()):
        s1, s2 = split(T.ones(2, 2, requires_grad=True).clone())
        out.append(_raises(lambda: s1.mul_(s2))[0])
    a = T.tensor([1., 2., 3.], requires_grad=True)
    b = a * 1
    c = b * b
    b[:2].mul_(2)
    out.append(_raises(lambda: c.sum().backward())[0])
    (b.sum() * 3).backward()
    return out + [a.grad]


def _in_place_activation_checks(T):
    a = T.tensor([-1., 1.], requires_grad=True)
    out = [_raises(lambda: T.nn.functional.leaky_relu_(a.clone(), -2).sum().backward())]
    b = T.nn.functional.rrelu_(a.clone(), -5.0, 1.0)
    return out + [_raises(lambda: b.sum().backward())]


def _floating_dtypes_only_require_grad(T):
    out = []
    for dt in (T.int64, T.int32, T.bool, T.uint8, T.float16, T.float64):
        out += [_raises(lambda: T.zeros(1, dtype=dt).requires_grad_()),
                _raises(lambda: T.zeros(1, dtype=dt, requires_grad=True))]
    return out


def _copy_gradients(T):
    x = T.ones(2, 3, requires_grad=True)
    y = T.zeros(2, 3)
    y.copy_(x)
    y.sum().backward()
    a = T.ones(3, requires_grad=True)
    z = T.zeros(2, 3)
    z.copy_(a)
    (z * 2).sum().backward()
    d = T.ones(3, dtype=T.float64, requires_grad=True)
    f = T.zeros(3)
    f.copy_(d)
    f.sum().backward()
    e = T.ones(2, requires_grad=True)
    rows = T.zeros(4, 2)
    rows[1].copy_(e)
    rows.sum().backward()
    with T.no_grad():
        n = T.zeros(2)
        n.copy_(e * 2)
    return [x.grad, y.grad_fn.name().split("::")[-1], a.grad, d.grad, e.grad, n.requires_grad]


def _reentrant_backward_and_grad_mode(T):
    modes = []

    class Reentrant(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with T.enable_grad():
                ctx.x = x.detach().requires_grad_()
                ctx.out = ctx.x ** 2
            return ctx.out.detach()

        @staticmethod
        def backward(ctx, g):
            modes.append(T.is_grad_enabled())
            with T.enable_grad():
                ctx.out.backward(g)
            return ctx.x.grad
    x = T.tensor([1., 2.], requires_grad=True)
    Reentrant.apply(x).sum().backward()
    Reentrant.apply(x).sum().backward(create_graph=True)
    return [x.grad, modes, T.is_grad_enabled()]


def _second_order_through_grad(T):
    x, y = T.tensor([1., 2.], requires_grad=True), T.tensor([3., 4.], requires_grad=True)
    z = x ** 2 + y * x + y ** 2
    z.backward(T.ones(2), create_graph=True)
    out = [x.grad, y.grad, x.grad.requires_grad]
    (2 * x.grad + y.grad).backward(T.ones(2))
    out += [x.grad, y.grad]
    x0 = T.tensor([1., 2.], requires_grad=True)
    w = T.tensor([0.5, 0.5], requires_grad=True)
    p = x0
    for _ in range(3):
        gp, = T.autograd.grad(p ** 2 + w * p + w ** 2, p, grad_outputs=T.ones(2),
                              create_graph=True)
        out += [gp, w.grad]
        p = p + 0.05 * gp
    p.backward(T.ones(2))
    return out + [w.grad, x0.grad]


def _tensor_and_node_hook_results_checked(T):
    x = T.ones(2, requires_grad=True)
    out = []
    for reg in (lambda y: y.register_hook(lambda g: T.ones(3)),
                lambda y: y.register_hook(lambda g: g.double()),
                lambda y: y.register_hook(lambda g: 5),
                lambda y: y.grad_fn.register_prehook(lambda gs: gs[0]),
                lambda y: y.grad_fn.register_prehook(lambda gs: (gs[0], gs[0]))):
        y = x * 2
        reg(y)
        out.append(_raises(lambda: y.sum().backward()))
    out.append(_raises(lambda: T.ones(2).register_hook(lambda g: g)))
    x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    x.register_hook(lambda g: g + 1)
    (x * 3).sum().backward()
    return out + [x.grad]


def _grad_of_repeated_and_output_inputs(T):
    x = T.tensor([1., 2.], requires_grad=True)
    y = x * 3
    out = [T.autograd.grad((x * x).sum(), [x, x]),
           T.autograd.grad((y * y).sum(), [y, x, y], retain_graph=True),
           T.autograd.grad(y, y, T.ones(2)), T.autograd.grad([y, x], [x], [T.ones(2), T.ones(2)])]
    s = (x * 2).sum()
    out += [_raises(lambda: s.backward(inputs=[])), _raises(lambda: s.backward(inputs=[T.ones(2)]))]
    e = x.exp().sum()
    out += [T.autograd.grad(e, x, create_graph=True), T.autograd.grad(e, x),
            _raises(lambda: T.autograd.grad(e, x))[0]]
    return out


def _anomaly_mode_names_the_failing_node(T):
    class Boom(T.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.clone()

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    def bad(g):
        raise ValueError("hook")
    out = []
    for loss in (lambda x: Boom.apply(x).sum(),       # a node's backward raises
                 lambda x: (x * 2).sum(),             # a leaf's hook (one node before it)
                 lambda x: (x * 2).sum() + (x * 3).sum()):
        x = T.ones(2, requires_grad=True)
        x.register_hook(bad)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with T.autograd.detect_anomaly():
                out.append(_raises(loss(x).backward))
        # (fixed: only a nan gave the warning)
        out.append([str(w.message).splitlines()[0].replace("torch::", "llgrad::")
                    for w in caught if "Error detected" in str(w.message)])
    return out


@pytest.mark.parametrize("check", [
    _anomaly_mode_names_the_failing_node, _gradient_edges_as_inputs, _gradient_edges_in_backward, _gradient_edge_as_output,
    _in_place_through_views, _in_place_through_views_makes_base_require_grad,
    _multi_output_views_written_in_place, _in_place_activation_checks,
    _floating_dtypes_only_require_grad, _copy_gradients, _reentrant_backward_and_grad_mode,
    _second_order_through_grad, _tensor_and_node_hook_results_checked,
    _grad_of_repeated_and_output_inputs,
], ids=lambda f: f.__name__.strip("_"))
def test_autograd_as_torch(check):
    same(check, torch)


@pytest.mark.xfail(strict=True, reason="an op's node keeps no output shape: a GradientEdge "
                   "made by hand (not get_gradient_edge) as an output needs grad_outputs")
def test_hand_made_edge_of_a_scalar_output_as_root():
    def check(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        s = x.sin().sum()
        return T.autograd.grad(_edge(T, s), (x,))
    same(check, torch)


def _hooks_around_and_inside_compiled(T, wrap):
    """Hooks on a parameter the function reads, and on a result; a hook and retain_grad()
    inside the function (a compiled call runs those eagerly, with a warning): each program
    run twice (the second call a compiled one)."""
    w = T.tensor([3., 4.], requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(g.sum().item()) or g * 2)
    read_w = wrap(lambda x: (x * w * w).sum())
    box = []

    def inner(x):
        y = x * 2
        y.register_hook(lambda g: seen.append("inner") or g * 3)
        y.retain_grad()
        box.append(y)
        return (y * y).sum()
    hooked = wrap(inner)
    out = []
    for _ in range(2):
        w.grad = None
        read_w(T.tensor([1., 2.])).backward()
        x = T.tensor([1., 2.], requires_grad=True)
        hooked(x).backward()
        y = read_w(x) * 1
        y.retain_grad()
        y.register_hook(lambda g: g + 1)
        (y * y).backward()
        out = [w.grad, x.grad, box[-1].grad, y.grad]
    return out + [seen]


def test_hooks_around_and_inside_compiled_calls():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _hooks_around_and_inside_compiled(llgrad, llgrad.compile)
    assert any("running eagerly" in str(w.message) for w in caught)    # (the inner hooks)
    same(lambda T: got if T is llgrad else _hooks_around_and_inside_compiled(T, lambda f: f),
         torch)
