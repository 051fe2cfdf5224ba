"""Custom autograd.Function, saved-tensor hooks, anomaly mode, .grad layouts and node names
against PyTorch, in the spirit of PyTorch's test/test_autograd.py (each check written anew;
"fixed" marks what failed before): CopySlices, CopyBackwards and once_differentiable's
node were named CopySlices / CopyBackwards / DelayedError (PyTorch: torch::autograd::
CopySlices ..., its hand-written nodes, type Error); save_for_backward of a non-tensor
raised when no input required grad (PyTorch checks only when it records the node);
ctx._materialize_non_diff_grads = False was ignored; and the same hook / retain_grad /
backward(inputs=) programs through llgrad.compile give eager's results, .grad and hooks."""
import warnings

import numpy as np
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


def _name(node):
    return None if node is None else node.name().replace("torch::", "llgrad::")


def _function_with_python_number(T, once):
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g + g * b, None, g * ctx.k + g * a

    def forward(ctx, a, k, b):
        ctx.k = k
        ctx.save_for_backward(a, b)
        return a + k * b + a * b
    bw = T.autograd.function.once_differentiable(backward) if once else backward
    fn = type("Fn", (T.autograd.Function,), {"forward": staticmethod(forward),
                                             "backward": staticmethod(bw)})
    x, y = T.tensor([1., 2.], requires_grad=True), T.tensor([3., 4.], requires_grad=True)
    fn.apply(x, 2, y).sum().backward(T.ones((), requires_grad=True), create_graph=True)
    gf = x.grad.grad_fn
    return [x.grad, y.grad, _name(gf), [_name(n) for n, _ in gf.next_functions],  # (fixed)
            type(gf.next_functions[1][0]).__name__ if once else None,
            _raises(lambda: x.grad.sum().backward())]


def _function_returns_its_input(T):
    class Twice(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2
    out = []
    for shape in [(1,), ()]:
        v = T.ones(shape, requires_grad=True)
        r = Twice.apply(v)
        out += [r is v, r.grad_fn.name(), v.is_leaf]
        r.backward()
        Twice.apply(v.clone()).backward()
        out.append(v.grad)
    return out


def _function_gradient_none_and_materialize(T):
    class NoGrad(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return None
    seen = []

    def two_outputs(materialize):
        class Two(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                return x.clone(), x.clone()

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append([g1, g2])
                return g1 if g1 is not None else g2
        return Two
    x = T.ones(2, requires_grad=True)
    NoGrad.apply(x).sum().backward()
    out = [x.grad, T.autograd.grad(NoGrad.apply(x).sum(), x, allow_unused=True)]
    for m in (True, False):
        two_outputs(m).apply(x)[0].sum().backward()
    return out + [seen, x.grad]


def _function_non_differentiable_outputs(T):
    seen = []

    class Mixed(T.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            a, b, mask = i + 1, i + 2, i > 0
            ctx.mark_non_differentiable(a, mask)
            ctx._materialize_non_diff_grads = False
            return a, b, mask

        @staticmethod
        def backward(ctx, ga, gb, gm):
            seen.append([ga, gm])
            return gb
    x = T.ones(2, requires_grad=True)
    a, b, mask = Mixed.apply(x)
    b.sum().backward()
    return [a.requires_grad, a.grad_fn, b.grad_fn.name(), mask.requires_grad, seen, x.grad]


def _function_non_tensor_outputs(T):
    class Scaled(T.autograd.Function):
        @staticmethod
        def forward(ctx, t1, t2, scale, t3):
            ctx.scale = scale
            ctx.save_for_backward(t1, t2, t3)
            return scale, (t1 + t2 * t3) * scale, None, True, (t1 * t2 + t3) * scale, "bar", t1

        @staticmethod
        def backward(ctx, *g):
            s, (v1, v2, v3) = ctx.scale, ctx.saved_tensors
            return (g[1] * s + g[4] * v2 * s + g[6], g[1] * v3 * s + g[4] * v1 * s, None,
                    g[1] * v2 * s + g[4] * s)
    t1 = T.tensor([1., 2.], dtype=T.float64, requires_grad=True)
    t2 = T.tensor([3., 4.], dtype=T.float64, requires_grad=True)
    t3 = T.tensor([5., 6.], dtype=T.float64)
    r = Scaled.apply(t1, t2, 3, t3)
    T.autograd.backward([r[1].sum(), r[4].sum(), r[6].sum()])
    return [r[0], r[2], r[3], r[5], r[1], r[4], r[6] is t1, t1.grad, t2.grad, t3.grad,
            Scaled.apply(2.0, 3.0, 4, 5.0)[1]]


def _function_bad_gradients(T):
    def make(bw):
        return type("Bad", (T.autograd.Function,), {
            "forward": staticmethod(lambda ctx, x: x * 2), "backward": staticmethod(bw)})
    x = T.ones(5, 5, requires_grad=True)
    out = [_raises(lambda: make(lambda ctx, g: T.ones(10)).apply(x).sum().backward()),
           _raises(lambda: make(lambda ctx, g: (g, g)).apply(x).sum().backward())]

    def boom(ctx, g):
        raise ValueError("Simulate error on backward pass")
    out.append(_raises(lambda: make(boom).apply(x * 1).sum().backward()))
    make(lambda ctx, g: g.double()).apply(x).sum().backward()
    return out + [str(x.grad.dtype).split(".")[-1]]


def _function_setup_context_and_needs_input_grad(T):
    seen = []

    class Square(T.autograd.Function):
        @staticmethod
        def forward(x, k, other):
            return x ** 2 + other

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k, other = inputs
            ctx.save_for_backward(x)
            seen.append(tuple(ctx.needs_input_grad))

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            seen.append(tuple(ctx.needs_input_grad))
            return g * 2 * x, None, g
    x = T.tensor(3.0, requires_grad=True)
    y = Square.apply(x, 4, T.tensor(1.0))
    return [y, T.autograd.grad(y, x), seen]


def _function_saved_tensors(T):
    class Exp(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y, None)
            ctx.extra = 5
            return y

        @staticmethod
        def backward(ctx, g):
            y, none = ctx.saved_tensors
            return g * y * (1 if none is None else 0)
    x = T.tensor([0., 1.], requires_grad=True)
    y = Exp.apply(x)
    out = [y.grad_fn.extra, len(y.grad_fn.saved_tensors), y.grad_fn.saved_tensors[0].equal(y)]
    y.backward(T.ones(2), retain_graph=True)
    with T.no_grad():
        y.mul_(2)
    return out + [x.grad, _raises(lambda: y.backward(T.ones(2)))[0],
                  _raises(lambda: y.grad_fn.saved_tensors)[0]]


def _function_mark_dirty(T):
    class AddOne(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3
    a = T.ones(2, 3, requires_grad=True)
    b = a.clone()
    v = b._version
    r = AddOne.apply(b)
    out = [r is b, b._version - v, b.grad_fn.name(), _raises(lambda: AddOne.apply(a))[0]]
    r.sum().backward()
    c = a.clone()
    AddOne.apply(c[0])          # (on a view: CopySlices on the base)
    out += [_name(c.grad_fn), c[0].grad_fn.name()]
    c.sum().backward()
    return out + [a.grad]


def _saved_tensors_hooks(T):
    log = []
    a = T.tensor([1., 2.], requires_grad=True)
    with T.autograd.graph.saved_tensors_hooks(lambda t: log.append("pack") or t * 2,
                                              lambda t: log.append("unpack") or t + 1):
        y = a * a
        with T.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * 3):
            z = a.sin()
    y.sum().backward()
    first = a.grad.clone()
    z.sum().backward()
    with T.autograd.graph.save_on_cpu():
        w = (a * a * a).sum()
    g = T.autograd.grad(w, a)
    e = a.exp()
    e.grad_fn._raw_saved_result.register_hooks(lambda t: t * 0 + 5, lambda t: t)
    return [log, first, a.grad, g, T.autograd.grad(e.sum(), a)]


def _saved_tensors_hooks_misuse(T):
    out = []
    with T.autograd.graph.disable_saved_tensors_hooks("not allowed here"):
        def enter():
            with T.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
        out.append(_raises(enter))
    b = T.ones(2, requires_grad=True).pow(2)
    raw = b.grad_fn._raw_saved_self
    raw.register_hooks(lambda t: t, lambda t: t)
    out.append(_raises(lambda: raw.register_hooks(lambda t: t, lambda t: t)))
    x = T.tensor([1., 2.], requires_grad=True)
    with T.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
        c = x * 1
        y = c * c
    with T.no_grad():
        c.add_(1)               # (a packed value has no version to check)
    y.sum().backward()
    return out + [x.grad]


def _saved_attributes(T):
    a, b = T.tensor([1., 2.], requires_grad=True), T.tensor([3., 4.], requires_grad=True)
    x = T.arange(6.).reshape(2, 3).requires_grad_()
    y, e = a * b, a.exp()
    out = [y.grad_fn._saved_self is a, y.grad_fn._saved_other is b, a.pow(3).grad_fn._saved_exponent,
           e.grad_fn._saved_result.equal(e), e.grad_fn._saved_result is e,
           T.cat([a, b]).grad_fn._saved_dim, x.transpose(0, 1).grad_fn._saved_dim0,
           x.select(1, 2).grad_fn._saved_index, x.clamp(min=1.).grad_fn._saved_min,
           x.add(x, alpha=2).grad_fn._saved_alpha, x.sum(1, keepdim=True).grad_fn._saved_dim,
           x.permute(1, 0).grad_fn._saved_dims, x.softmax(1).grad_fn._saved_result.shape,
           x.narrow(1, 1, 2).grad_fn.name()]
    e.sum().backward()
    return out + [_raises(lambda: e.grad_fn._saved_result)[0],
                  _raises(lambda: y.grad_fn._saved_nope)]


def _anomaly_mode(T):
    a = T.tensor([0.0, 1.0], requires_grad=True)

    class NaNGrad(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with T.autograd.detect_anomaly():
            out = [T.is_anomaly_enabled(), _raises(lambda: (a / a).sum().backward()),
                   _raises(lambda: NaNGrad.apply(a).sum().backward())]
        with T.autograd.detect_anomaly(check_nan=False):
            NaNGrad.apply(a).sum().backward()
            out.append(T.is_anomaly_check_nan_enabled())
    out += [T.is_anomaly_enabled(), np.isnan(a.grad.numpy()).tolist()]
    with T.autograd.set_detect_anomaly(True):
        out.append(T.is_anomaly_enabled())
    return out + [T.is_anomaly_enabled()]


def _grad_layouts(T):
    out = []
    for make in (lambda: T.zeros(3, 4), lambda: T.zeros(4, 3).t(), lambda: T.zeros(4, 6)[:, ::2],
                 lambda: T.zeros(2, 3, 4).permute(2, 0, 1), lambda: T.zeros(3, 1, 2).transpose(0, 2),
                 lambda: T.zeros(2, 3, 4, 5).to(memory_format=T.channels_last)):
        x = make().requires_grad_()
        (x * 2).sum().backward()
        out.append((x.stride(), x.grad.stride()))
    e = T.zeros(2, 3).requires_grad_()
    e.expand(4, 2, 3).sum().backward()
    p = T.tensor([1.5, 1.5]).requires_grad_()
    p.grad = g = T.tensor([1.5, 1.5])
    p.backward(T.tensor([1.5, 1.5]))
    kept = p.grad is g
    p.backward(T.tensor([1.5, 1.5]), create_graph=True)
    a, b = T.rand(4, 0, requires_grad=True), T.rand(4, 1, requires_grad=True)
    (a + b).sum().backward()
    return out + [e.grad.stride(), kept, p.grad is g, g, p.grad, a.grad, b.grad]


@pytest.mark.parametrize("check", [
    lambda T: _function_with_python_number(T, False), lambda T: _function_with_python_number(T, True),
    _function_returns_its_input, _function_gradient_none_and_materialize,
    _function_non_differentiable_outputs, _function_non_tensor_outputs, _function_bad_gradients,
    _function_setup_context_and_needs_input_grad, _function_saved_tensors, _function_mark_dirty,
    _saved_tensors_hooks, _saved_tensors_hooks_misuse, _saved_attributes, _anomaly_mode,
    _grad_layouts,
])
def test_autograd_as_torch(check):
    same(check, torch)


def _compiled_programs(T, wrap):
    """Hooks, retained grads and backward(inputs=) around a compiled call (wrap) or an
    eager one: what each gives."""
    x = T.tensor([1., 2., 3.], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.clone()) or g * 2)
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
    square = wrap(lambda x: (x * x).sum())
    r = square(x)
    r.backward()
    pair = wrap(lambda x: (x * 2, (x * 2).exp()))
    a, b = pair(x)
    a.retain_grad()
    b.register_hook(lambda g: g * 3)
    b.retain_grad()
    (a.sum() * 3 + b.sum()).backward()
    w = T.tensor([2., 2., 2.], requires_grad=True)
    y = wrap(lambda x, w: x * w)(x, w)
    (y * y).sum().backward(inputs=[w])
    e = wrap(lambda x: x.exp())(x)
    (e * e).sum().backward(inputs=[e])
    g = T.autograd.grad(square(x), [x, w], allow_unused=True, materialize_grads=True)
    return [r, a.grad, b.grad, w.grad, e.grad, e.retains_grad, x.grad, g] + seen


def test_compiled_hooks_and_retained_grads_equal_eager():
    cache = {}

    def compiled(fn):       # (one compiled function per program, warmed by a first run)
        if fn.__code__ not in cache:
            cache[fn.__code__] = llgrad.compile(fn)
        return cache[fn.__code__]
    _compiled_programs(llgrad, compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no fallback to eager)
        got = _compiled_programs(llgrad, compiled)
    same(lambda T: _compiled_programs(T, lambda fn: fn), torch)
    want = _compiled_programs(llgrad, lambda fn: fn)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for a, b in zip(g if isinstance(g, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
            assert type(a) is type(b)
            if isinstance(a, llgrad.Tensor):       # (compiled exp: within an ulp of NumPy's)
                assert a.shape == b.shape and a.dtype == b.dtype
                np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
            else:
                assert a == b
