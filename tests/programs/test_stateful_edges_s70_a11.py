"""The edges of autograd: errors PyTorch raises (a hook changing the gradient's shape,
backward of a non-scalar, requires_grad on a non-leaf, a custom Function's gradient of the
wrong shape, an in-place write after a full backward hook, once_differentiable twice),
backward's inputs= and grad_tensors, .grad set by hand, custom Functions returning their
input or reading needs_input_grad: torch, llgrad eager and llgrad.compile over six calls
(stateful_harness_s70_a11.check); training-step edges are in
test_stateful_training_edges_s70_a11.py."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402
from test_stateful_optim_s70_a11 import model_of  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile or two a case; the fast regressions are in
# test_stateful_regressions_s70_a11.py)


def xy(i):
    return randn(10 + i, 5, 4), randn(20 + i, 5, 2)


def _w(lib, k=1, shape=(4, 2)):
    return lib.tensor(randn(k, *shape), requires_grad=True)


def hook_changes_shape_errors(lib):
    w = _w(lib)
    w.register_hook(lambda g: g.sum(0))

    def step(x, y):
        (x @ w * y).sum().backward()
        return w * 1
    return dict(step=step, state=lambda: [w.grad])


def hook_changes_dtype(lib):
    w = _w(lib)
    w.register_hook(lambda g: g.double())

    def step(x, y):
        (x @ w * y).sum().backward()
        return w * 1
    return dict(step=step, state=lambda: [w.grad])


def hook_on_no_grad_tensor_errors(lib):
    w = _w(lib)

    def step(x, y):
        x.register_hook(lambda g: g)
        return (x @ w).sum()
    return dict(step=step, state=lambda: [w.grad])


def backward_of_nonscalar_errors(lib):
    w = _w(lib)

    def step(x, y):
        (x @ w).backward()
        return w * 1
    return dict(step=step, state=lambda: [w.grad])


def backward_with_gradient(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        h.backward(y * 2)
        return h
    return dict(step=step, state=lambda: [w.grad])


def backward_with_wrong_gradient_errors(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        h.backward(y[:, :1].t())
        return h
    return dict(step=step, state=lambda: [w.grad])


def backward_inputs_only(lib):
    w, v = _w(lib), _w(lib, 2, (2,))

    def step(x, y):
        loss = ((x @ w + v) * y).pow(2).sum()
        loss.backward(inputs=[v])
        return loss
    return dict(step=step, state=lambda: [w.grad, v.grad])


def autograd_backward_grad_tensors(lib):
    w, v = _w(lib), _w(lib, 2, (2,))

    def step(x, y):
        a, b = x @ w, (x @ w + v).tanh()
        lib.autograd.backward([a, b.sum()], [y, None])
        return a, b
    return dict(step=step, state=lambda: [w.grad, v.grad])


def requires_grad_false_on_nonleaf_errors(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        h.requires_grad_(False)
        return h
    return dict(step=step, state=lambda: [w.grad])


def nonleaf_grad_read_warns(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        (h * y).sum().backward()
        return h.grad is None, h.is_leaf, w.is_leaf
    return dict(step=step, state=lambda: [w.grad])


def inplace_on_view_of_leaf_errors(lib):
    w = _w(lib)

    def step(x, y):
        w[0].mul_(2)
        return w * 1
    return dict(step=step, state=lambda: [w])


def inplace_view_under_no_grad_then_grad(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        with lib.no_grad():
            v = h[1:]
        v.mul_(2)         # (a view made in no_grad, written with grad on: an error)
        return h
    return dict(step=step, state=lambda: [w.grad])


def retain_grad_on_leaf(lib):
    w = _w(lib)

    def step(x, y):
        w.retain_grad()
        (x @ w * y).sum().backward()
        return w.grad * 1
    return dict(step=step, state=lambda: [w.grad])


def grad_set_by_hand(lib):
    w = _w(lib)

    def step(x, y):
        w.grad = lib.ones_like(w) * 0.5
        (x @ w * y).sum().backward()
        return w.grad * 1
    return dict(step=step, state=lambda: [w.grad])


def grad_set_wrong_shape_errors(lib):
    w = _w(lib)

    def step(x, y):
        w.grad = lib.ones(3)
        return w * 1
    return dict(step=step, state=lambda: [w.grad])


def _bad_function(lib):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum(0)
    return Bad


def custom_function_wrong_shape_errors(lib):
    Bad = _bad_function(lib)
    w = _w(lib)

    def step(x, y):
        (Bad.apply(x @ w) * y).sum().backward()
        return w * 1
    return dict(step=step, state=lambda: [w.grad])


def custom_function_needs_input_grad(lib):
    class Mul(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return (g * b if ctx.needs_input_grad[0] else None,
                    g * a if ctx.needs_input_grad[1] else None)
    w = _w(lib)

    def step(x, y):
        loss = Mul.apply(x @ w, y).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad])


def full_backward_hook_then_inplace_errors(lib):
    lin = model_of(lib)[0]
    lin.register_full_backward_hook(lambda m, gi, go: None)

    def step(x, y):
        h = lib.nn.functional.relu(lin(x), inplace=True)
        return h.sum()
    return dict(step=step, state=lambda: [])


def full_backward_hook_input_without_grad(lib):
    lin = model_of(lib)[0]
    seen = []
    lin.register_full_backward_hook(
        lambda m, gi, go: seen.append((gi[0] is None, tuple(go[0].shape))))

    def step(x, y):
        loss = lin(x).pow(2).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [lin.weight.grad, seen[-1] if seen else None,
                                          len(seen)])


def custom_function_returns_input(lib):
    class Ident(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5
    w = _w(lib)

    def step(x, y):
        h = x @ w
        out = Ident.apply(h)
        loss = (out * y).sum() + (h * y).sum()
        loss.backward()
        return loss, out is h
    return dict(step=step, state=lambda: [w.grad])


def custom_function_once_differentiable(lib):
    from importlib import import_module
    once = import_module(lib.__name__ + ".autograd.function").once_differentiable

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x * x * g
    w = _w(lib)

    def step(x, y):
        loss = (Cube.apply(x @ w) * y).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad])


def custom_function_once_differentiable_double_errors(lib):
    from importlib import import_module
    once = import_module(lib.__name__ + ".autograd.function").once_differentiable

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x * x * g
    w = _w(lib)

    def step(x, y):
        g, = lib.autograd.grad((Cube.apply(x @ w) * y).sum(), w, create_graph=True)
        g.sum().backward()
        return g
    return dict(step=step, state=lambda: [w.grad])


CASES = [full_backward_hook_then_inplace_errors, full_backward_hook_input_without_grad,
         custom_function_returns_input, custom_function_once_differentiable,
         custom_function_once_differentiable_double_errors, hook_changes_shape_errors,
         hook_changes_dtype, hook_on_no_grad_tensor_errors, backward_of_nonscalar_errors,
         backward_with_gradient, backward_with_wrong_gradient_errors, backward_inputs_only,
         autograd_backward_grad_tensors, requires_grad_false_on_nonleaf_errors,
         nonleaf_grad_read_warns, inplace_on_view_of_leaf_errors,
         inplace_view_under_no_grad_then_grad, retain_grad_on_leaf, grad_set_by_hand,
         grad_set_wrong_shape_errors, custom_function_wrong_shape_errors,
         custom_function_needs_input_grad]

# (cases compile runs eagerly, and the reason its warning gives)
EAGER = {}


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_edges(make):
    check(make, xy, compiled_warns=EAGER.get(make), atol=1e-5)
