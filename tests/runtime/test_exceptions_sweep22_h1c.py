"""Exception parity with torch, sweep 22 (H1), autograd: backward twice, non-scalar backward,
grad of tensors that do not require it, unused inputs, in-place writes to leaves and to saved
tensors (version counters), .numpy() of a tensor requiring grad, requires_grad on non-leaves,
.grad of another shape or dtype, autograd.Function mistakes. Fixed here: autograd.grad /
backward of a non-tensor output (AttributeError, torch's AssertionError) or non-tensor input
(TypeError or AttributeError, torch's RuntimeError), backward(gradient=[1., 1.]) (a count
error, torch's TypeError)."""
import pytest

torch = pytest.importorskip("torch")

from exceptions_sweep22_h1_harness import check  # noqa: E402

def _backward_twice(L):
    x = L.ones(2, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    y.backward()


def _backward_twice_mul(L):
    x = L.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def _grad_twice(L):
    x = L.ones(2, requires_grad=True)
    y = (x.sin()).sum()
    L.autograd.grad(y, x)
    L.autograd.grad(y, x)


def _version(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    z = y.exp()
    z.add_(1)
    z.sum().backward()


def _version_sigmoid(L):
    x = L.ones(2, requires_grad=True)
    y = x.sigmoid()
    y.mul_(2)
    y.sum().backward()


def _version_saved_input(L):
    x = L.ones(2, requires_grad=True)
    y = x * 1
    z = y * y
    y.add_(1)
    z.sum().backward()


def _unused(L):
    x = L.ones(2, requires_grad=True)
    w = L.ones(2, requires_grad=True)
    return L.autograd.grad((x * 2).sum(), [x, w])


def _grad_no_req(L):
    x = L.ones(2)
    return L.autograd.grad((x * 2).sum(), x)


def _grad_output_no_req(L):
    x = L.ones(2, requires_grad=True)
    return L.autograd.grad(L.ones(()), x)


def _grad_nonscalar(L):
    x = L.ones(2, requires_grad=True)
    return L.autograd.grad(x * 2, x)


def _grad_outputs_shape(L):
    x = L.ones(2, requires_grad=True)
    return L.autograd.grad(x * 2, x, grad_outputs=L.ones(3))


def _backward_gradient_shape(L):
    x = L.ones(2, requires_grad=True)
    (x * 2).backward(L.ones(3))


def _backward_gradient_dtype(L):
    x = L.ones(2, requires_grad=True)
    (x * 2).backward(L.ones(2, dtype=L.long))


def _inplace_leaf_in_graph(L):
    x = L.ones(2, requires_grad=True)
    x.mul_(2)


def _setitem_leaf(L):
    x = L.ones(2, requires_grad=True)
    x[0] = 3.


def _view_of_leaf_inplace(L):
    x = L.ones(2, requires_grad=True)
    x[0].add_(1)


def _requires_grad_nonleaf_false(L):
    x = L.ones(2, requires_grad=True)
    (x * 2).requires_grad_(False)


def _requires_grad_attr_nonleaf_false(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    y.requires_grad = False


def _grad_setter_shape(L):
    x = L.ones(2, requires_grad=True)
    x.grad = L.ones(3)


def _grad_setter_dtype(L):
    x = L.ones(2, requires_grad=True)
    x.grad = L.ones(2, dtype=L.float64)


def _grad_setter_list(L):
    x = L.ones(2, requires_grad=True)
    x.grad = [1., 1.]


def _retain_grad_no_req(L):
    L.ones(2).retain_grad()


def _register_hook_no_req(L):
    L.ones(2).register_hook(lambda g: g)


def _backward_no_req(L):
    L.ones(2).sum().backward()


def _backward_inputs_empty(L):
    x = L.ones(2, requires_grad=True)
    (x * 2).sum().backward(inputs=[])


def _detach_view_inplace(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    v = y[:1]
    d = v.detach()
    y.add_(1)
    return d


def _multi_output_view_inplace(L):
    x = L.ones(4, requires_grad=True)
    a, b = (x * 2).split(2)
    a.mul_(2)


def _unbind_view_inplace(L):
    x = L.ones(2, 2, requires_grad=True)
    a, b = (x * 2).unbind(0)
    a.mul_(2)


def _no_grad_view_inplace(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    with L.no_grad():
        v = y[:1]
    v.mul_(2)


def _inference_tensor_inplace(L):
    with L.inference_mode():
        x = L.ones(2)
    x.add_(1)


def _inference_tensor_save(L):
    with L.inference_mode():
        x = L.ones(2)
    w = L.ones(2, requires_grad=True)
    return (w * x).sum().backward()


def _function_no_backward(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2
    x = L.ones(2, requires_grad=True)
    F.apply(x).sum().backward()


def _function_wrong_grad_count(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g
    x = L.ones(2, requires_grad=True)
    F.apply(x).sum().backward()


def _function_wrong_grad_shape(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum()
    x = L.ones(2, requires_grad=True)
    F.apply(x).sum().backward()


def _function_call_direct(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2
    return F()(L.ones(2))


def _numpy_req_grad(L):
    return L.ones(2, requires_grad=True).numpy()


def _numpy_nonleaf(L):
    return (L.ones(2, requires_grad=True) * 2).numpy()


def _tolist_ok(L):
    return (L.ones(2, requires_grad=True) * 2).tolist()


CASES = [
    ("backward_twice", _backward_twice),
    ("backward_twice_mul", _backward_twice_mul),
    ("grad_twice", _grad_twice),
    ("backward_nonscalar", lambda L: (L.ones(2, requires_grad=True) * 2).backward()),
    ("backward_nonscalar_2d", lambda L:
        (L.ones(2, 2, requires_grad=True) @ L.ones(2, 2)).backward()),
    ("backward_no_req", _backward_no_req),
    ("backward_inputs_empty", _backward_inputs_empty),
    ("backward_gradient_shape", _backward_gradient_shape),
    ("backward_gradient_dtype", _backward_gradient_dtype),
    ("grad_no_req", _grad_no_req),
    ("grad_output_no_req", _grad_output_no_req),
    ("grad_nonscalar", _grad_nonscalar),
    ("grad_outputs_shape", _grad_outputs_shape),
    ("grad_unused", _unused),
    ("inplace_leaf", lambda L: L.ones(2, requires_grad=True).add_(1)),
    ("inplace_leaf_mul", _inplace_leaf_in_graph),
    ("inplace_leaf_setitem", _setitem_leaf),
    ("inplace_leaf_view", _view_of_leaf_inplace),
    ("inplace_leaf_zero_", lambda L: L.ones(2, requires_grad=True).zero_()),
    ("inplace_leaf_uniform_", lambda L: L.ones(2, requires_grad=True).uniform_()),
    ("inplace_leaf_relu_", lambda L:
        L.nn.functional.relu(L.ones(2, requires_grad=True), inplace=True)),
    ("inplace_leaf_copy_", lambda L: L.ones(2, requires_grad=True).copy_(L.zeros(2))),
    ("param_inplace", lambda L: L.nn.Linear(2, 2).weight.add_(1)),
    ("version_exp", _version),
    ("version_sigmoid", _version_sigmoid),
    ("version_saved_input", _version_saved_input),
    ("detach_view_inplace_ok", _detach_view_inplace),
    ("split_view_inplace", _multi_output_view_inplace),
    ("unbind_view_inplace", _unbind_view_inplace),
    ("no_grad_view_inplace", _no_grad_view_inplace),
    ("inference_tensor_inplace", _inference_tensor_inplace),
    ("inference_tensor_save", _inference_tensor_save),
    ("numpy_req_grad", _numpy_req_grad),
    ("numpy_nonleaf", _numpy_nonleaf),
    ("tolist_req_grad_ok", _tolist_ok),
    ("requires_grad_nonleaf_false", _requires_grad_nonleaf_false),
    ("requires_grad_attr_nonleaf_false", _requires_grad_attr_nonleaf_false),
    ("grad_setter_shape", _grad_setter_shape),
    ("grad_setter_dtype", _grad_setter_dtype),
    ("grad_setter_list", _grad_setter_list),
    ("retain_grad_no_req", _retain_grad_no_req),
    ("register_hook_no_req", _register_hook_no_req),
    ("function_no_backward", _function_no_backward),
    ("function_wrong_grad_count", _function_wrong_grad_count),
    ("function_wrong_grad_shape", _function_wrong_grad_shape),
    ("function_call_direct", _function_call_direct),
]


# cases where llgrad's first line is its own (torch's class, its own words)
_OWN_WORDS = {"version_exp", "version_saved_input", "version_sigmoid"}


@pytest.mark.parametrize("name,fn", CASES, ids=[n for n, _ in CASES])
def test_raises_as_torch(name, fn):
    check(fn, torch, own_words=name in _OWN_WORDS)
