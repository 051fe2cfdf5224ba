"""Sweep 64 (t3): autograd semantics against torch (eager): views and in-place ops on them
(version-counter errors, CopySlices), retain_graph errors, double backward, retain_grad,
the order of tensor hooks, post-accumulate-grad hooks and module full backward hooks,
torch.autograd.Function (save_for_backward, mark_dirty, mark_non_differentiable,
set_materialize_grads, setup_context, once_differentiable), detect_anomaly, .grad
accumulation across calls and zero_grad(set_to_none). Each case returns what it observes
(values, grads, logs of hook calls) or raises; both must agree (parity_s64_t3_harness)."""
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from parity_s64_t3_harness import check_table  # noqa: E402

pytestmark = pytest.mark.torch


def _v(L, *xs):
    return L.tensor(list(xs), requires_grad=True)


# ---- views and in-place ops --------------------------------------------------------------------

def _views(L):
    a = _v(L, 1., 2., 3.)
    return {
        "saved input modified": lambda: (lambda b: (b.sin(), b.add_(1))[0].sum().backward())(a * 2),
        "unsaved input modified": lambda: (lambda b: ((lambda c: (b.add_(1), c)[1])(b * 3).sum()
                                                      .backward(), a.grad)[1])(a * 2),
        "result modified": lambda: (lambda b: (b.add_(1), b.sum().backward())[1])(a.exp()),
        "view in-place": lambda: (lambda b: (lambda v: (v.mul_(2), b.sum().backward(),
                                                        a.grad, b, b.grad_fn.name(),
                                                        v.grad_fn.name()))(b[1:]))(a * 1),
        "base in-place, view used": lambda: (lambda b: (lambda v: (b.mul_(2), (v * v).sum()
                                                                   .backward(), a.grad,
                                                                   v.grad_fn.name()))(b[1:]))(a * 1),
        "leaf in-place": lambda: a.add_(1),
        "view of leaf in-place": lambda: a[:2].add_(1),
        "unbind output in-place": lambda: (a * 2).unbind()[0].mul_(2),
        "split output in-place": lambda: (a * 2).split(1)[0].mul_(2),
        "diagonal view zero_": lambda: (lambda y: (y.diagonal().zero_(), y.sum().backward(),
                                                   y.grad_fn.name()))(L.eye(3, requires_grad=True) * 2),
        "expand in-place": lambda: (a * 1).expand(2, 3).mul_(2),
        "copy of an advanced index": lambda: (lambda y: (y[[0, 1]].mul_(2), y.sum().backward(),
                                                         a.grad))(a * 1),
        "mul_ by itself": lambda: (lambda y: (y.mul_(y), y.sum().backward()))(a * 1),
        "add_ itself": lambda: (lambda y: (y.add_(y), y.sum().backward(), a.grad))(a * 1),
        "relu_": lambda: (lambda y: (y.relu_(), y.sum().backward(), a.grad, y.grad_fn.name()))(a - 2),
        "sigmoid result setitem": lambda: (lambda c: (c.__setitem__(0, 1.), c.sum().backward()))(
            (a * 2).sigmoid()),
        "detach shares the version": lambda: (lambda b: (b.add_(1), a._version, b._version))(a.detach()),
        ".data bypasses the version": lambda: (lambda b: (lambda c: (b.data.add_(1), c.sum()
                                                                     .backward(), a.grad))(b.pow(2)))(a * 2),
        "sibling view's grad_fn regenerated": lambda: (lambda y: (lambda z, z2: (
            z.mul_(2), z2.grad_fn.name(), (z2 * 1).sum().backward(), a.grad))(y.view(-1), y.view(-1)))(a * 2),
    }


def _no_grad_views(L):
    a = _v(L, 1., 2., 3.)
    with L.no_grad():
        v, w = a[:2], (a * 1)[:2]
    return {"no_grad view of a leaf modified": lambda: v.mul_(2),
            "no_grad view of a result modified": lambda: w.mul_(2)}


def _named(builder):
    return [(name, lambda L, name=name: builder(L)[name]()) for name in builder(torch)]


def test_views_and_inplace():
    check_table(_named(_views) + _named(_no_grad_views))


# ---- backward twice, double backward, retain_grad, accumulation --------------------------------

def _graphs(L):
    def x():
        return _v(L, 1., 2.)
    return {
        "backward twice": lambda: (lambda y: (y.backward(), y.backward()))((lambda t: (t.exp() * t).sum())(x())),
        "backward twice, nothing saved": lambda: (lambda t: (lambda y: (y.backward(), y.backward(), t.grad))((t * 2).sum()))(x()),
        "retain_graph": lambda: (lambda t: (lambda y: (y.backward(retain_graph=True), y.backward(), t.grad))((t * t).sum()))(x()),
        "saved tensor after free": lambda: (lambda y: (y.sum().backward(), y.grad_fn._saved_self))(x() * x()),
        "double backward": lambda: (lambda t: (lambda g: (g, L.autograd.grad(g.sum(), t)[0], g.grad_fn.name()))(
            L.autograd.grad((t ** 3).sum(), t, create_graph=True)[0]))(x()),
        "create_graph into .grad": lambda: (lambda t: ((t.sin() * t.tanh()).sum().backward(create_graph=True),
                                                       (lambda g: (setattr(t, "grad", None), (g * g).sum().backward(), g, t.grad))(t.grad)))(x()),
        "allow_unused": lambda: (lambda t, u: L.autograd.grad((t * t).sum(), [t, u], allow_unused=True))(x(), x()),
        "unused": lambda: (lambda t, u: L.autograd.grad((t * t).sum(), [t, u]))(x(), x()),
        "materialize_grads": lambda: (lambda t, u: L.autograd.grad((t * t).sum(), [t, u], allow_unused=True,
                                                                  materialize_grads=True))(x(), x()),
        "retain_grad": lambda: (lambda t: (lambda y: (y.retain_grad(), (y * y).sum().backward(), y.grad, t.grad,
                                                      y.retains_grad, y.is_leaf))(t * 2))(x()),
        "retain_grad, two backwards": lambda: (lambda y: (y.retain_grad(), (y * y).sum().backward(),
                                                          (y * 3).sum().backward(), y.grad))(x() * 2),
        "retain_grad then in-place": lambda: (lambda t: (lambda y: (y.retain_grad(), y.add_(1), (y * y).sum().backward(),
                                                                    y.grad, t.grad))(t * 2))(x()),
        "accumulate into the same .grad": lambda: (lambda t: ((t * t).sum().backward(), (lambda g: (
            (t * 3).sum().backward(), g is t.grad, t.grad))(t.grad)))(x()),
        "accumulate after create_graph": lambda: (lambda t: ((t * t).sum().backward(create_graph=True),
                                                             (t * 3).sum().backward(), t.grad, t.grad.requires_grad))(x()),
        "preset .grad": lambda: (lambda t: (setattr(t, "grad", L.tensor([1., 1.])), (t * t).sum().backward(), t.grad))(x()),
        "grad of another dtype": lambda: setattr(x(), "grad", L.tensor([1, 1])),
        "grad of another shape": lambda: setattr(x(), "grad", L.tensor([1.])),
        "backward of a vector": lambda: (x() * 2).backward(),
        "backward without grad": lambda: (L.tensor([1., 2.]) * 2).sum().backward(),
        "backward inputs=": lambda: (lambda t, w: (lambda y: (y.retain_grad(), (y * y).sum().backward(inputs=[y, w]),
                                                              t.grad, w.grad, y.grad))(t * w))(x(), x()),
        "module zero_grad": lambda: (lambda lin: (lin(L.ones(1, 2)).sum().backward(), lin.zero_grad(),
                                                  lin.weight.grad, lin(L.ones(1, 2)).sum().backward(),
                                                  lin.zero_grad(set_to_none=False), lin.weight.grad,
                                                  lin.bias.grad))(L.nn.Linear(2, 1)),
        # (torch.optim's zero_grad and a wrong-shaped backward gradient: first calls of
        # several seconds in torch; covered by test_parity_s64_t3_d's compiled steps)
    }


def test_graphs_and_accumulation():
    check_table(_named(_graphs))


# ---- hooks --------------------------------------------------------------------------------------

def _hooks(L):
    log = []

    def tensor_hooks():
        x = _v(L, 1., 2.)
        x.register_hook(lambda g: log.append(("h1", g.tolist())))
        x.register_hook(lambda g: (log.append(("h2", g.tolist())), g * 2)[1])
        x.register_post_accumulate_grad_hook(lambda t: log.append(("post", t.grad.tolist())))
        y = x * 3
        y.register_hook(lambda g: log.append(("y", g.tolist())))
        y.retain_grad()
        y.register_hook(lambda g: (log.append(("y2", g.tolist())), g + 1)[1])
        y.sum().backward()
        return log, x.grad, y.grad

    def hook_across_inplace():
        x = _v(L, 1., 2.)
        y = x * 2
        y.register_hook(lambda g: log.append(("before", g.tolist())))
        y.mul_(3)
        y.register_hook(lambda g: log.append(("after", g.tolist())))
        (y * y).sum().backward()
        return log, x.grad

    def module_hooks():
        lin = L.nn.Linear(2, 2)
        with L.no_grad():
            lin.weight.copy_(L.tensor([[1., 2.], [3., 4.]]))
            lin.bias.fill_(0.5)
        lin.register_full_backward_hook(lambda m, gi, go: log.append(
            ("bh", [None if g is None else g.tolist() for g in gi], [g.tolist() for g in go])))
        lin.register_full_backward_pre_hook(lambda m, go: log.append(("pre", [g.tolist() for g in go])))
        lin.register_forward_hook(lambda m, i, o: log.append(("fh", o.tolist())))
        lin.register_forward_pre_hook(lambda m, i: log.append(("fph",)))
        lin.weight.register_hook(lambda g: log.append(("w", g.tolist())))
        lin.weight.register_post_accumulate_grad_hook(lambda p: log.append(("wpost",)))
        x = L.tensor([[1., -1.]], requires_grad=True)
        x.register_hook(lambda g: log.append(("x", g.tolist())))
        (lin(x) ** 2).sum().backward()
        lin(L.tensor([[2., 0.]])).sum().backward()      # (an input without grad: gi is None)
        return log

    def replacing_module_hooks():
        class M(L.nn.Module):
            def forward(self, a, b):
                return a * b, a + b
        m = M()
        m.register_full_backward_pre_hook(lambda mod, go: (log.append("pre"),
                                                           tuple(None if g is None else g * 10 for g in go))[1])
        m.register_full_backward_hook(lambda mod, gi, go: (log.append(
            ([None if g is None else g.tolist() for g in gi], [None if g is None else g.tolist() for g in go])),
            (gi[0] + 1, None))[1])
        a, b = _v(L, 1., 2.), L.tensor([3., 4.])
        p, s = m(a, b)
        (p * 2).sum().backward()
        return log, a.grad

    def node_hooks():
        x = _v(L, 1., 2.)
        y = x * 2
        y.grad_fn.register_hook(lambda gi, go: log.append(("node", [g.tolist() for g in gi if g is not None])))
        y.grad_fn.register_prehook(lambda go: log.append(("prenode", [g.tolist() for g in go])))
        y.register_hook(lambda g: log.append(("t", g.tolist())))
        (y * y).sum().backward()
        return log, y.grad_fn.next_functions[0][0].name()

    def bad_hook():
        x = _v(L, 1., 2.)
        x.register_hook(lambda g: g[:1])
        (x * 2).sum().backward()

    return {"tensor hooks": tensor_hooks, "hook across in-place": hook_across_inplace,
            "module hooks": module_hooks, "replacing module hooks": replacing_module_hooks,
            "node hooks": node_hooks, "hook returning a wrong shape": bad_hook,
            "hook on a tensor without grad": lambda: L.ones(2).register_hook(lambda g: g),
            "post hook on a non-leaf": lambda: (_v(L, 1.) * 2).register_post_accumulate_grad_hook(print)}


def test_hooks():
    check_table(_named(_hooks))


# ---- torch.autograd.Function and detect_anomaly -------------------------------------------------

def _function(L, forward, backward, setup_context=None):
    body = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    if setup_context:
        body["setup_context"] = staticmethod(setup_context)
    return type("F", (L.autograd.Function,), body)


def _functions(L):
    def saved(ctx, x, y):
        ctx.save_for_backward(x, y)
        ctx.k = 3
        return x * y, (x + y).detach()

    def saved_bwd(ctx, g1, g2):
        x, y = ctx.saved_tensors
        return g1 * y * ctx.k, g1 * x + g2

    def dirty(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    def argmax_fwd(ctx, x):
        i = x.argmax()
        ctx.mark_non_differentiable(i)
        ctx.save_for_backward(i)
        return x.max(), i

    def argmax_bwd(ctx, g, gi):
        i, = ctx.saved_tensors
        return L.zeros(2).index_put((i,), g)

    def no_materialize(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    def run(F, *xs, outs=slice(0, 1)):
        r = F.apply(*xs)
        r = r if isinstance(r, tuple) else (r,)
        sum(o.sum() for o in r[outs]).backward()
        return r, [x.grad for x in xs if isinstance(x, L.Tensor)], r[0].grad_fn.name()

    def x():
        return _v(L, 1., 2.)

    def under_no_grad():
        with L.no_grad():
            o = _function(L, lambda ctx, a: a.clone(), lambda ctx, g: g).apply(x())
        return o.requires_grad, o.grad_fn
    return {
        "save_for_backward": lambda: run(_function(L, saved, saved_bwd), x(), _v(L, 3., 4.)),
        "saved and modified": lambda: (lambda t: (lambda o: (t.add_(1), o.sum().backward()))(
            _function(L, lambda ctx, a: (ctx.save_for_backward(a), a * 2)[1],
                      lambda ctx, g: g * ctx.saved_tensors[0]).apply(t)))(x() * 1),
        "mark_dirty": lambda: (lambda t: (lambda y: (lambda z: (z.sum().backward(), z is y, t.grad,
                                                                z.grad_fn.name(), y._version))(
            _function(L, dirty, lambda ctx, g: g * 2).apply(y)))(t * 1))(x()),
        "mark_dirty on a leaf": lambda: _function(L, dirty, lambda ctx, g: g).apply(x()),
        "mark_non_differentiable": lambda: (lambda t: (lambda r: (r[0].backward(), r, r[1].requires_grad,
                                                                  t.grad))(
            _function(L, argmax_fwd, argmax_bwd).apply(t)))(x()),
        "set_materialize_grads(False)": lambda: run(_function(L, no_materialize, lambda ctx, a, b: (
            a if b is None else b * 5) if a is not None else b), x()),
        "setup_context": lambda: run(_function(L, lambda a, k: a * k, lambda ctx, g: (g * ctx.k * 2, None),
                                               lambda ctx, inputs, output: setattr(ctx, "k", inputs[1])), x(), 3.),
        "needs_input_grad": lambda: (lambda log: (run(_function(L, lambda ctx, a, b, k: a + b * k, lambda ctx, g: (
            log.append(tuple(ctx.needs_input_grad)), (g, g, None))[1]), x(), L.tensor([1., 2.]), 3), log)[1])([]),
        "non-tensor outputs": lambda: run(_function(L, lambda ctx, a: (a * 2, 5, None),
                                                    lambda ctx, g, g2, g3: g * 2), x()),
        "returns None as the grad": lambda: run(_function(L, lambda ctx, a: a * 2, lambda ctx, g: None), x()),
        "returns the input": lambda: (lambda t: (lambda z: (z.sum().backward(), t.grad, z is t))(
            _function(L, lambda ctx, a: a, lambda ctx, g: g * 3).apply(t)))(x()),
        "too many grads": lambda: run(_function(L, lambda ctx, a: a * 2, lambda ctx, g: (g, g)), x()),
        "grad of a wrong shape": lambda: run(_function(L, lambda ctx, a: a * 2, lambda ctx, g: g[:1]), x()),
        "grad of another dtype": lambda: run(_function(L, lambda ctx, a: a * 2, lambda ctx, g: g.double()), x()),
        "grad broadcastable": lambda: run(_function(L, lambda ctx, a: a * 2, lambda ctx, g: g.reshape(1, 2)), x()),
        "returned view modified": lambda: (lambda z: (z.mul_(2),))(
            _function(L, lambda ctx, a: a.view(2), lambda ctx, g: g).apply(x() * 1)),
        "under no_grad": lambda: under_no_grad(),
        "create_graph through it": lambda: (lambda t: (lambda g: (g, g.requires_grad))(L.autograd.grad(
            _function(L, lambda ctx, a: (ctx.save_for_backward(a), a ** 2)[1],
                      lambda ctx, g: 2 * ctx.saved_tensors[0] * g).apply(t).sum(), t, create_graph=True)[0]))(x()),
        "anomaly: nan in the forward's backward": lambda: (lambda t: (L.autograd.set_detect_anomaly(True),
                                                                      t.sqrt().sum().backward()))(_v(L, 1., -1.)),
        "anomaly: nan gradient": lambda: (lambda t: (L.autograd.set_detect_anomaly(True),
                                                     (t.sqrt() * 0).sum().backward()))(_v(L, 0., 1.)),
    }


def test_autograd_function_and_anomaly():
    try:
        check_table(_named(_functions))
    finally:
        for L in (torch, llgrad):
            L.autograd.set_detect_anomaly(False)
