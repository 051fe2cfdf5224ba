"""Hooks and retained gradients against PyTorch, in the spirit of PyTorch's own
test/test_autograd.py (each check written anew; those marked "fixed" failed before):
autograd.grad of a non-leaf whose node need not run ran the node's own pre-hooks (PyTorch:
only the tensor hooks), and one whose node does run for another input captured the gradient
after its tensor hooks (PyTorch: as it arrived); backward(inputs=[non_leaf]) gave .grad after
the node's pre-hooks and left retains_grad False (PyTorch retains it); the tensor hooks and
retained gradient of a node no input needs ran; an AccumulateGrad post hook saw a copy, not
the .grad a post-accumulate-grad hook changed; retain_grad() on a base written through a view
and on a view whose base was written stayed with the old history (.grad wrong or None);
materialize_grads' zeros did not require grad under create_graph."""
import pytest

import llgrad

torch = pytest.importorskip("torch")

from autograd_oracle_sweep7 import same  # noqa: E402


def _prehook_ordering(T):
    log, got = [], []
    a = T.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.grad_fn.register_prehook(lambda gs: log.append(2) or tuple(g * 2 for g in gs))
    b.register_hook(lambda g: log.append(1) or g * 3)
    b.grad_fn.register_prehook(lambda gs: log.append(2) or tuple(g * 2 for g in gs))
    acc = b.grad_fn.next_functions[0][0]
    a.register_hook(lambda g: log.append(1) or g * 3)
    acc.register_prehook(lambda gs: log.append(2) or tuple(g * 2 for g in gs))
    a.register_hook(lambda g: log.append(1) or g * 3)
    for run in (lambda: b.sum().backward(retain_graph=True),
                lambda: got.append(T.autograd.grad(b.sum(), (a,), retain_graph=True)[0]),
                lambda: b.sum().backward(inputs=(b,))):
        log.clear()
        run()
        got.append(list(log))
    return got + [a.grad, b.grad, b.retains_grad]     # (fixed: b.grad 12, retains_grad False)


def _hooks_when_grad_asks_for_a_non_leaf(T):
    counts = {"tensor": 0, "pre": 0, "post": 0}

    def bump(key):
        return lambda *args: counts.__setitem__(key, counts[key] + 1)
    a = T.tensor(1.0, requires_grad=True)
    b = a * 2
    c = b * 2
    a.register_hook(bump("tensor"))
    b.register_hook(bump("tensor"))
    acc = b.grad_fn.next_functions[0][0]
    for node in (acc, b.grad_fn):
        node.register_hook(bump("post"))
        node.register_prehook(bump("pre"))
    out = []
    for run in (lambda: T.autograd.grad(c, inputs=(b,), retain_graph=True),
                lambda: T.autograd.grad(c, inputs=(a, b), retain_graph=True),
                lambda: c.backward(retain_graph=True),
                lambda: c.backward(inputs=(a, b), retain_graph=True)):
        for k in counts:
            counts[k] = 0
        run()
        out.append(sorted(counts.items()))
    return out


def _captured_gradient_of_a_running_node(T):
    # PyTorch's engine: a non-leaf input whose node also runs (for a) is captured as the
    # gradient arrived, before its tensor hooks; alone, after them
    a = T.tensor(1.0, requires_grad=True)
    b = a * 2
    b.register_hook(lambda g: g * 3)
    c = b * 2
    both = T.autograd.grad(c, (a, b), retain_graph=True)
    alone = T.autograd.grad(c, (b,), retain_graph=True)
    c.backward(inputs=(b,))
    return list(both) + list(alone) + [b.grad, b.retains_grad]


def _backward_inputs_non_leaf_ignores_node_prehooks(T):
    a = T.tensor(1.0, requires_grad=True)
    b = a * 2
    b.grad_fn.register_prehook(lambda gs: (gs[0] * 5,))
    (b * 2).backward(inputs=(b,))
    return [b.grad, b.retains_grad, a.grad]


def _unneeded_node_runs_no_hooks(T):
    seen = []
    a = T.tensor(1.0, requires_grad=True)
    y = T.tensor(2.0, requires_grad=True)
    b = a * 2
    b.register_hook(lambda g: seen.append(1))
    b.retain_grad()
    g = T.autograd.grad(b * 2 + y * 3, y)
    return [g, seen, b.grad]


def _post_accumulate_grad_hook_ordering(T):
    t = T.ones(3, requires_grad=True)
    acc = t.view_as(t).grad_fn.next_functions[0][0]
    t.register_hook(lambda g: g.sub(2.0))
    acc.register_prehook(lambda go: (go[0].div(5.0),))
    t.register_post_accumulate_grad_hook(lambda leaf: leaf.grad.add_(0.5))

    def post(grad_in, grad_out):
        t.grad = grad_out[0].mul(10)
    acc.register_hook(post)
    t.sum().backward()
    return t.grad           # ((1 - 2) / 5 + 0.5) * 10 (fixed: -2)


def _post_accumulate_grad_hooks(T):
    out = []
    t = T.tensor([1., 2., 3.], requires_grad=True)

    def sub_grad(leaf):
        with T.no_grad():
            leaf.sub_(leaf.grad)

    def times4(leaf):
        with T.no_grad():
            leaf.mul_(4.)
    t.register_post_accumulate_grad_hook(sub_grad)
    t.register_post_accumulate_grad_hook(times4)
    t.sum().backward()
    out.append(t.detach().clone())
    try:
        (t * 2).register_post_accumulate_grad_hook(sub_grad)
    except RuntimeError as e:
        out.append(str(e))
    u = T.ones(2, requires_grad=True)
    u.register_post_accumulate_grad_hook(lambda leaf: leaf.grad)
    try:
        u.sum().backward()
    except RuntimeError as e:
        out.append(str(e))
    return out


def _accumulate_grad_hooks_see_tensor_hook(T):
    rec = []
    a = T.tensor(1.0, requires_grad=True)
    b = a.clone()
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(lambda gi, go: rec.append(("post", len(gi), go[0].item())))
    acc.register_prehook(lambda go: rec.append(("pre", len(go), go[0].item())))
    a.register_hook(lambda g: g * 2)
    b.backward()
    # a leaf outside `inputs`: neither its tensor hook nor its node's hooks run
    c = T.tensor(1.0, requires_grad=True)
    d = a.clone()
    a.register_hook(lambda g: rec.append("a hook"))
    d.grad_fn.next_functions[0][0].register_hook(lambda *g: rec.append("acc hook"))
    (a + c + d).sum().backward(inputs=[c])
    return [rec, a.grad, c.grad]


def _retains_grad_sees_earlier_tensor_hooks(T):
    out = []
    for before in (True, False):
        a = T.tensor(1.0, requires_grad=True)
        b = a.clone()
        if before:
            b.register_hook(lambda g: g * 2)
        b.retain_grad()
        b.register_hook(lambda g: g * 2)
        b.clone().backward()
        out.append(b.grad)
    return out


def _retain_grad_basics(T):
    inp = T.tensor([[1., 2., 3.]], requires_grad=True)
    h = inp * 3
    o = (h * h).sum()
    h.retain_grad()
    h.retain_grad()
    o.backward(retain_graph=True)
    first = h.grad.clone()
    o.backward(retain_graph=True)
    with T.no_grad():
        inp.grad.zero_()
    inp.retain_grad()           # (a no-op on a leaf)
    o.backward()
    return [first, h.grad, inp.grad, inp.retains_grad, h.retains_grad]


def _retain_grad_in_place(T):
    out = []
    a = T.tensor([1.0], requires_grad=True).clone()
    a.retain_grad()
    a.mul_(2)
    a.mul_(2)
    a.sum().backward()
    out.append(a.grad)
    x = T.tensor([1.0], requires_grad=True).clone()
    x.retain_grad()
    x[:].mul_(2)            # (the retained gradient follows x to CopySlices: fixed)
    x *= 2
    x.sum().backward()
    out.append(x.grad)
    z = T.zeros(4)
    z.view(2, 2).add_(T.ones(2, 2, requires_grad=True))
    return out + [z.requires_grad, z.grad_fn.name().split("::")[-1]]


def _retain_grad_views_of_a_written_base(T):
    base = T.tensor([1.0, 2.0], requires_grad=True).clone()
    view, view2 = base[:], base[:]
    view.retain_grad()
    view2.retain_grad()
    view.mul_(2)
    (view + view2).sum().backward()
    return [view.grad, view2.grad]          # (fixed: view2.grad None)


def _tensor_hooks_and_in_place(T):
    seen = []
    a = T.tensor([1.0], requires_grad=True)
    b = a.clone()
    b.register_hook(lambda g: seen.append(("first", g.item())) or g * 2)
    b.mul_(2)
    b.register_hook(lambda g: seen.append(("second", g.item())) or g * 2)
    b.sum().backward()
    # the hooks of a view whose base was written stay with its old history
    base = T.tensor([1.0], requires_grad=True).clone()
    v, v2 = base[:], base[:]
    v.register_hook(lambda g: seen.append("v"))
    v2.register_hook(lambda g: seen.append("v2"))
    v.mul_(2)
    v2.grad_fn
    v2.register_hook(lambda g: seen.append(("v2 new", g.item())))
    (v + v2).sum().backward()
    return [seen, a.grad]


def _hooks_counted_and_removed(T):
    x = T.ones(3, requires_grad=True)
    y = (T.ones(3) * 4).requires_grad_()
    count = [0]
    z = x ** 2 + x * y + y
    h1 = z.register_hook(lambda g: count.__setitem__(0, count[0] + 1))
    z.backward(T.ones(3), retain_graph=True)
    h2 = z.register_hook(lambda g: count.__setitem__(0, count[0] + 2))
    z.backward(T.ones(3), retain_graph=True)
    h2.remove()
    z.backward(T.ones(3), retain_graph=True)
    h1.remove()
    z.register_hook(lambda g: g * 2)
    y.grad = None
    z.backward(T.ones(3), retain_graph=True)
    first = y.grad
    y.register_hook(lambda g: g * 2)
    y.grad = None
    z.backward(T.ones(3))
    return [count[0], first, y.grad]


def _grad_fn_prehooks_and_removal(T):
    a = T.tensor([1.0], requires_grad=True)
    b = a * 2
    seen, pre = [], [0]

    def prehook(go):
        pre[0] += 1
        return (go[0] * 2,)
    b.grad_fn.register_hook(lambda gi, go: seen.append((pre[0], go[0].item(), gi[0].item())))
    for hook in (prehook, lambda g: None, prehook, prehook, lambda g: g):
        b.grad_fn.register_prehook(hook)
    b.sum().backward()
    c = a * 2
    count = [0]

    def remover(go):
        h2.remove()
        h3.remove()             # (already removed: fine)
    c.grad_fn.register_prehook(remover)
    h2 = c.grad_fn.register_prehook(lambda go: count.__setitem__(0, count[0] + 1))
    h3 = c.grad_fn.register_prehook(lambda go: count.__setitem__(0, count[0] + 1))
    h3.remove()
    c.sum().backward()
    return [seen, pre[0], count[0], a.grad]


def _hook_of_output_no_gradient_reaches(T):
    class Pass(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x, y

        @staticmethod
        def backward(ctx, gx, gy):
            return gx, None
    got = []
    x, y = T.ones(2, requires_grad=True), T.ones(2)
    rx, ry = Pass.apply(x, y)
    rx.register_hook(lambda g: got.append(g is None))
    ry.register_hook(lambda g: got.append(g is None))
    (rx + ry).sum().backward()
    return [rx.requires_grad, ry.requires_grad, got, x.grad]


def _unbind_hook_on_one_output(T):
    x = T.arange(4.).requires_grad_()
    parts = x.unbind()
    last = [None]
    parts[0].register_hook(lambda g: last.__setitem__(0, g))
    out = []
    for p in parts:
        p.backward()
        out += [last[0], x.grad.clone(), p.is_leaf]
    return out


def _materialized_grads(T):
    x = T.tensor(0.5, requires_grad=True)
    y = x * T.tensor(1.0, requires_grad=True)
    d, = T.autograd.grad(y, x, create_graph=True)
    none = T.autograd.grad(d, x, create_graph=True, allow_unused=True)
    zero = T.autograd.grad(d, x, create_graph=True, allow_unused=True, materialize_grads=True)
    third = T.autograd.grad(zero, x, materialize_grads=True)    # (fixed: did not require grad)
    u = T.ones(3, requires_grad=True)
    plain = T.autograd.grad((x * 2).sum(), (x, u), materialize_grads=True)
    t = T.zeros(4, 3).t().requires_grad_()
    layout = T.autograd.grad((x * 2), (x, t), materialize_grads=True)[1].stride()
    return [none, zero, zero[0].requires_grad, third, plain, plain[1].requires_grad, layout]


def _retained_grads_during_autograd_grad(T):
    out = []
    for inputs in ("a", "b", "ab"):
        a = T.ones(2, requires_grad=True)
        b = a * 2
        b.retain_grad()
        b.register_hook(lambda g: g * 5)
        out += [T.autograd.grad((b * 3).sum(), [{"a": a, "b": b}[k] for k in inputs]), b.grad]
    return out


@pytest.mark.parametrize("check", [
    _retained_grads_during_autograd_grad, _prehook_ordering, _hooks_when_grad_asks_for_a_non_leaf, _captured_gradient_of_a_running_node,
    _backward_inputs_non_leaf_ignores_node_prehooks, _unneeded_node_runs_no_hooks,
    _post_accumulate_grad_hook_ordering, _post_accumulate_grad_hooks,
    _accumulate_grad_hooks_see_tensor_hook, _retains_grad_sees_earlier_tensor_hooks,
    _retain_grad_basics, _retain_grad_in_place, _retain_grad_views_of_a_written_base,
    _tensor_hooks_and_in_place, _hooks_counted_and_removed, _grad_fn_prehooks_and_removal,
    _hook_of_output_no_gradient_reaches, _unbind_hook_on_one_output, _materialized_grads,
], ids=lambda f: f.__name__.strip("_"))
def test_hooks_as_torch(check):
    same(check, torch)


@pytest.mark.xfail(strict=True, reason="var_mean / std_mean make two nodes (one per result); "
                   "PyTorch's one VarMeanBackward0 gets both gradients in one pre-hook call")
def test_var_mean_is_one_node_with_two_gradients():
    def check(T):
        a = T.arange(9.).reshape(3, 3).requires_grad_()
        var, mean = T.var_mean(a, dim=0)
        mean.grad_fn.register_prehook(lambda go: tuple(g * 2 for g in go))
        (var + mean).sum().backward()
        return [var.grad_fn is mean.grad_fn, mean.output_nr, a.grad]
    same(check, torch)
