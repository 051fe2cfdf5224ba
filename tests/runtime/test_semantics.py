"""PyTorch's autograd semantics on llgrad: graph recording, backward/grad, hooks, grad
modes, in-place ops and version counters, autograd.Function, gradcheck, iterative
backward, freeing of saved tensors, and the snippets of the notes in shared/seeds.

Expected values are derived by hand, not computed with torch (which these tests don't need).
"""
import gc
import math
import re
import sys
import threading
import warnings
import weakref

import numpy as np
import pytest

import llgrad as torch
from llgrad.runtime import grad_mode

FREED = "Trying to backward through the graph a second time"
LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
MODIFIED = ("one of the variables needed for gradient computation has been modified by an "
            "inplace operation")


@pytest.fixture(autouse=True)
def _fresh_grad_mode():
    grad_mode._reset()
    yield
    grad_mode._reset()


def vals(t):
    return np.asarray(t.detach()._data, dtype=np.float64)


def close(t, expected, rtol=1e-6, atol=1e-6):
    assert t is not None
    np.testing.assert_allclose(vals(t), np.asarray(expected, dtype=np.float64),
                               rtol=rtol, atol=atol)


def name(node):
    return type(node).__name__


def here():
    """The caller's source line, as error messages print it."""
    return f"{__file__.rsplit('/', 1)[-1]}:{sys._getframe(1).f_lineno}"


# ---- requires_grad, leaves, grad_fn ---------------------------------------------------------

def test_requires_grad_propagates():
    x = torch.tensor([1., 2.], requires_grad=True)
    c = torch.tensor([3., 4.])
    assert not c.requires_grad and c.is_leaf
    y = x * c
    assert y.requires_grad and not y.is_leaf
    z = c * 2 + c
    assert not z.requires_grad and z.grad_fn is None and z.is_leaf
    assert (z + y).requires_grad
    # integer results of comparisons never require grad
    assert not (x > 1).requires_grad


def test_leaf_and_non_leaf():
    x = torch.randn(3, requires_grad=True)
    assert x.is_leaf and x.grad_fn is None
    y = x.exp()
    assert not y.is_leaf
    d = y.detach()
    assert d.is_leaf and not d.requires_grad


def test_grad_fn_names_and_next_functions():
    x = torch.tensor([1., 2.], requires_grad=True)
    w = torch.tensor([3., 4.], requires_grad=True)
    c = torch.tensor([5., 6.])
    y = x * w
    z = y.exp()
    s = z.sum()
    assert (name(y.grad_fn), name(z.grad_fn), name(s.grad_fn)) == \
        ("MulBackward0", "ExpBackward0", "SumBackward0")
    assert s.grad_fn.next_functions == ((z.grad_fn, 0),)
    assert z.grad_fn.next_functions == ((y.grad_fn, 0),)
    (ax, nx), (aw, nw) = y.grad_fn.next_functions
    assert name(ax) == name(aw) == "AccumulateGrad" and nx == nw == 0
    assert ax.variable is x and aw.variable is w
    # an input that needs no gradient gets the (None, 0) edge
    u = x * c
    assert u.grad_fn.next_functions[1] == (None, 0)
    assert u.grad_fn.next_functions[0][0] is ax      # one AccumulateGrad per leaf
    assert (x + 1).grad_fn.next_functions[1] == (None, 0)
    assert re.fullmatch(r"<MulBackward0 object at 0x[0-9a-f]+>", repr(y.grad_fn))
    assert name((x - 1).grad_fn) == "SubBackward0"
    assert name((x / 2).grad_fn) == "DivBackward0"
    assert name((x @ w).grad_fn) == "DotBackward0"
    assert name(x.relu().grad_fn) == "ReluBackward0"
    assert name(x.mean().grad_fn) == "MeanBackward0"
    assert name(x.pow(2).grad_fn) == "PowBackward0"


def test_scalar_overloads_have_one_edge():
    x = torch.tensor(2., requires_grad=True)
    assert len(x.pow(2).grad_fn.next_functions) == 1
    assert len(x.clamp(0, 1).grad_fn.next_functions) == 1


def test_a_saved_integer_output_has_no_history():
    # max's indices, saved for MaxBackward0: unpacked, they neither require grad nor point
    # at the node (as PyTorch's _saved_indices); a double backward then scatters with them
    x = torch.tensor([[1., 3., 2.], [0., -1., 5.]], requires_grad=True)
    v, i = x.max(1)
    saved = v.grad_fn._saved_result1
    assert saved.dtype == torch.int64 and not saved.requires_grad and saved.grad_fn is None
    g, = torch.autograd.grad(v.sum() * 2, x, create_graph=True)
    close(g, [[0., 2., 0.], [0., 0., 2.]])


def test_saved_tensors_are_exposed():
    x = torch.tensor([1., 2.], requires_grad=True)
    w = torch.tensor([3., 4.], requires_grad=True)
    y = x * w
    assert y.grad_fn._saved_self is x
    assert y.grad_fn._saved_other is w
    z = x.exp()
    r = z.grad_fn._saved_result
    assert r is not z                      # a new wrapper around the same output
    assert r.data_ptr() == z.data_ptr()
    close(r, np.exp([1., 2.]))
    assert r.grad_fn is z.grad_fn
    p = x.pow(2)
    assert p.grad_fn._saved_self is x and p.grad_fn._saved_exponent == 2
    with pytest.raises(AttributeError):
        y.grad_fn._saved_nothing


def test_requires_grad_on_int_tensor_raises():
    msg = "Only Tensors of floating point and complex dtype can require gradients"
    with pytest.raises(RuntimeError, match=msg):
        torch.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require "
                                           "gradients"):      # (PyTorch's words differ here)
        torch.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="only" + msg[4:]):
        torch.tensor([1, 2]).requires_grad = True


def test_requires_grad_flag_only_on_leaves():
    x = torch.tensor([1.], requires_grad=True)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf "
                                           "variables."):
        (x * 2).requires_grad_(False)
    e = torch.tensor([1.])
    assert e.requires_grad_() is e and e.requires_grad and e.is_leaf
    e.requires_grad = False
    assert not e.requires_grad


# ---- backward ----------------------------------------------------------------------------------

def test_backward_with_gradient_is_a_vjp():
    x = torch.tensor([2., 3.], requires_grad=True)
    y = x ** 2
    y.backward(gradient=torch.tensor([0.1, 2.0]))
    close(x.grad, [0.4, 12.0])             # 2 * x * v


def test_non_scalar_backward_needs_gradient():
    x = torch.tensor([1., 2.], requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                           "outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of "
                                           r"llgrad.Size\(\[3\]\) and output\[0\] has a shape "
                                           r"of llgrad.Size\(\[2\]\)"):
        (x * 2).backward(torch.ones(3))


def test_backward_of_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and "
                                           "does not have a grad_fn"):
        torch.tensor(1.).backward()


def test_grad_accumulates_over_two_backwards():
    x = torch.tensor([1., 2.], requires_grad=True)
    (x * x).sum().backward()
    close(x.grad, [2., 4.])
    g = x.grad
    (x * 3).sum().backward()
    close(x.grad, [5., 7.])
    assert x.grad is g                      # accumulated in place into the same tensor
    x.grad = None
    (x * 3).sum().backward()
    close(x.grad, [3., 3.])


def test_grad_setter_checks():
    x = torch.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="attempting to assign a gradient of size"):
        x.grad = torch.zeros(3)
    x.grad = torch.ones(2)
    (x * 2).sum().backward()
    close(x.grad, [3., 3.])


def test_retain_graph():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    close(x.grad, [4., 8.])
    with pytest.raises(RuntimeError, match=FREED):
        y.backward()


def test_second_backward_without_saved_tensors_is_fine():
    # nothing saved (add, sum): nothing freed, so a second pass works, as in PyTorch
    x = torch.tensor([1., 2.], requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    close(x.grad, [2., 2.])


def test_create_graph_and_higher_order():
    x = torch.tensor(3., requires_grad=True)
    y = x ** 3
    y.backward(create_graph=True)
    close(x.grad, 27.)                      # 3 x^2
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    g = x.grad
    x.grad = None
    g.backward()
    close(x.grad, 18.)                      # 6 x


def test_autograd_grad_higher_order_x_cubed():
    x = torch.tensor(2., requires_grad=True)
    y = x ** 3
    d1, = torch.autograd.grad(y, x, create_graph=True)
    d2, = torch.autograd.grad(d1, x, create_graph=True)
    d3, = torch.autograd.grad(d2, x)
    close(d1, 12.)                           # 3 x^2
    close(d2, 12.)                           # 6 x
    close(d3, 6.)
    assert x.grad is None                    # grad() does not accumulate
    assert not d3.requires_grad


def test_higher_order_of_sin():
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    g, = torch.autograd.grad(x.sin().sum(), x, create_graph=True)
    close(g, np.cos([0.5, 1.0]))
    g.sum().backward()
    close(x.grad, -np.sin([0.5, 1.0]))


def test_double_backward_through_inplace_op():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = torch.tensor([3., 4.], requires_grad=True)
    z = (x * 1).mul_(y)
    gy, = torch.autograd.grad(z.sum(), y, create_graph=True)
    close(gy, [1., 2.])                       # x
    assert gy.requires_grad
    gy.sum().backward()
    close(x.grad, [1., 1.])


def test_backward_inputs_argument():
    x = torch.tensor(2., requires_grad=True)
    w = torch.tensor(3., requires_grad=True)
    (x * w).backward(inputs=[x])
    close(x.grad, 3.)
    assert w.grad is None
    (x * w).backward(inputs=w)
    close(w.grad, 2.)
    close(x.grad, 3.)
    with pytest.raises(RuntimeError, match="`inputs` argument to `backward\\(\\)` cannot be "
                                           "empty."):
        (x * w).backward(inputs=[])


def test_backward_inputs_non_leaf():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 2
    (y * y).sum().backward(inputs=[y])
    close(y.grad, [4., 8.])                  # 2 y
    assert x.grad is None


def test_autograd_backward_function():
    x = torch.tensor(1., requires_grad=True)
    torch.autograd.backward([x * 2, x * 3], [torch.tensor(1.), torch.tensor(10.)])
    close(x.grad, 32.)


def test_retain_grad():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 3
    z = y * y
    assert not y.retains_grad
    y.retain_grad()
    y.retain_grad()                           # idempotent
    assert y.retains_grad and not x.retains_grad
    z.sum().backward(retain_graph=True)
    close(y.grad, [6., 12.])                  # 2 y
    close(x.grad, [18., 36.])
    z.sum().backward()
    close(y.grad, [12., 24.])                 # accumulates like a leaf's
    x.retain_grad()                           # no-op on a leaf
    assert not x.retains_grad
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has "
                                           "requires_grad=False"):
        torch.ones(1).retain_grad()


def test_non_leaf_grad_access_warns():
    x = torch.tensor([1.], requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match="The .grad attribute of a Tensor that is not a leaf "
                                         "Tensor is being accessed"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is None


# ---- autograd.grad ------------------------------------------------------------------------------

def test_autograd_grad_with_grad_outputs():
    x = torch.tensor([1., 2.], requires_grad=True)
    g, = torch.autograd.grad(x * x, x, grad_outputs=torch.tensor([1., 10.]))
    close(g, [2., 40.])
    assert x.grad is None
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                           "outputs"):
        torch.autograd.grad(x * 2, x)


def test_autograd_grad_allow_unused():
    x = torch.tensor([1., 2.], requires_grad=True)
    u = torch.tensor(1., requires_grad=True)
    with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to "
                                           "not have been used in the graph. Set "
                                           "allow_unused=True if this is the desired behavior."):
        torch.autograd.grad((x * 2).sum(), [x, u])
    gx, gu = torch.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    close(gx, [2., 2.])
    assert gu is None
    gx, gu = torch.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
    close(gu, 0.)


def test_autograd_grad_multiple_outputs_and_inputs():
    a = torch.tensor(2., requires_grad=True)
    b = torch.tensor(5., requires_grad=True)
    ga, gb = torch.autograd.grad([a * b, a + b], [a, b],
                                 grad_outputs=[torch.tensor(1.), torch.tensor(3.)])
    close(ga, 5. + 3.)
    close(gb, 2. + 3.)


def test_autograd_grad_create_graph_is_differentiable():
    x = torch.tensor([1., 2.], requires_grad=True)
    w = torch.tensor([3., 4.], requires_grad=True)
    gx, = torch.autograd.grad((x * x * w).sum(), x, create_graph=True)
    close(gx, [6., 16.])                      # 2 x w
    assert gx.requires_grad
    gx.sum().backward()                       # d/dw of sum(2 x w) = 2 x ; d/dx = 2 w
    close(w.grad, [2., 4.])
    close(x.grad, [6., 8.])


def test_autograd_grad_on_tensor_without_grad_raises():
    x = torch.tensor(1., requires_grad=True)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        torch.autograd.grad(torch.ones(2).sum(), x)
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require "
                                           "grad"):
        torch.autograd.grad((x * 2), torch.ones(1))


# ---- hooks ------------------------------------------------------------------------------------

def test_leaf_hook_modifies_grad_and_is_removable():
    x = torch.tensor([1., 2.], requires_grad=True)
    seen = []
    h1 = x.register_hook(lambda g: seen.append(vals(g).tolist()))   # returns None: observes
    h2 = x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    assert seen == [[3., 3.]]
    close(x.grad, [30., 30.])
    h2.remove()
    h2.remove()                                # removing twice is harmless
    x.grad = None
    (x * 3).sum().backward()
    close(x.grad, [3., 3.])
    h1.remove()
    (x * 3).sum().backward()
    assert len(seen) == 2


def test_leaf_hooks_run_in_order():
    x = torch.tensor([1., 2.], requires_grad=True)
    x.register_hook(lambda g: g + 1)
    x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    close(x.grad, [40., 40.])                  # (3 + 1) * 10


def test_non_leaf_hook_changes_upstream_grad():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 2
    seen = []
    h = y.register_hook(lambda g: seen.append(vals(g).tolist()) or g + 1)
    (y * y).sum().backward()
    assert seen == [[4., 8.]]                  # 2 y
    close(x.grad, [10., 18.])                  # (2 y + 1) * 2
    h.remove()
    x.grad = None
    y = x * 2
    (y * y).sum().backward()
    close(x.grad, [8., 16.])


def test_non_leaf_hook_with_retain_grad_sees_hooked_grad():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 100)
    y.sum().backward()
    close(y.grad, [100., 100.])
    close(x.grad, [200., 200.])


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                                           "require gradient"):
        torch.ones(1).register_hook(lambda g: g)


# ---- grad modes --------------------------------------------------------------------------------

def test_no_grad_and_enable_grad_context_managers():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        assert not torch.is_grad_enabled()
        y = x * 2
        with torch.enable_grad():
            assert torch.is_grad_enabled()
            z = x * 2
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and name(z.grad_fn) == "MulBackward0"
    assert x.requires_grad                     # no_grad does not touch the flag
    assert (x * 2).requires_grad


def test_grad_modes_as_decorators():
    x = torch.ones(2, requires_grad=True)

    @torch.no_grad()
    def f():
        return x * 2

    @torch.no_grad
    def f_bare():
        return x * 2

    @torch.enable_grad()
    def g():
        return x * 2

    @torch.set_grad_enabled(False)
    def h():
        return x * 2

    assert torch.is_grad_enabled()             # decorating did not switch the mode
    assert not f().requires_grad and not f_bare().requires_grad and not h().requires_grad
    with torch.no_grad():
        assert g().requires_grad
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    assert f.__name__ == "f"                   # functools.wraps


def test_decorator_restores_mode_on_exception():
    @torch.no_grad()
    def boom():
        raise ValueError("x")

    with pytest.raises(ValueError):
        boom()
    assert torch.is_grad_enabled()


def test_set_grad_enabled():
    x = torch.ones(1, requires_grad=True)
    with torch.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert torch.is_grad_enabled()
    with torch.no_grad():
        with torch.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not torch.is_grad_enabled()
    torch.set_grad_enabled(False)              # used as a plain function call
    assert not torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    assert torch.is_grad_enabled()


def test_grad_mode_is_thread_local():
    x = torch.ones(2, requires_grad=True)
    seen = {}

    def worker():
        seen["enabled"] = torch.is_grad_enabled()
        seen["inference"] = torch.is_inference_mode_enabled()
        seen["requires_grad"] = (x * 2).requires_grad
        with torch.no_grad():
            seen["inner"] = torch.is_grad_enabled()

    with torch.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == {"enabled": True, "inference": False, "requires_grad": True, "inner": False}
    with torch.inference_mode():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen["enabled"] and not seen["inference"]

    # and a thread's no_grad does not leak into the main thread
    def disable():
        torch.set_grad_enabled(False)
        seen["thread"] = torch.is_grad_enabled()

    t = threading.Thread(target=disable)
    t.start()
    t.join()
    assert seen["thread"] is False and torch.is_grad_enabled()


def test_inference_mode():
    x = torch.ones(2, requires_grad=True)
    assert not x.is_inference()
    with torch.inference_mode():
        assert torch.is_inference_mode_enabled() and not torch.is_grad_enabled()
        i = x * 2
        fresh = torch.zeros(2)
        assert i.is_inference() and fresh.is_inference()
        assert not i.requires_grad and i.grad_fn is None
        v = i[0:1]
        assert v.is_inference()
        i.add_(1)                              # in-place allowed inside
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()
    close(i, [3., 3.])
    assert not (x * 2).is_inference()
    with torch.inference_mode(False):
        assert not torch.is_inference_mode_enabled()


def test_inference_mode_decorator():
    x = torch.ones(2, requires_grad=True)

    @torch.inference_mode()
    def f():
        return x * 2

    @torch.inference_mode
    def f_bare():
        return x * 2

    a, b = f(), f_bare()
    assert a.is_inference() and b.is_inference() and not a.requires_grad
    assert not torch.is_inference_mode_enabled()


def test_inference_tensors_restrictions():
    x = torch.ones(2, requires_grad=True)
    with torch.inference_mode():
        i = torch.ones(2) * 3
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        i * x                                  # MulBackward0 would save i
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        x * i
    (x + i).sum().backward()                   # add saves nothing: allowed
    close(x.grad, [1., 1.])
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                           "InferenceMode is not allowed"):
        i.add_(1)
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor "
                                           "outside InferenceMode is not allowed."):
        i.requires_grad_()
    c = i.clone()                              # the documented workaround
    assert not c.is_inference()
    (c * x).sum().backward()
    close(x.grad, [4., 4.])


# ---- detach --------------------------------------------------------------------------------

def test_detach_shares_storage():
    x = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert d.data_ptr() == x.data_ptr()
    d[0:1].fill_(5.)
    assert x.tolist()[0] == [5., 5.]
    assert x._version == 1                     # shared version counter
    y = x * 2
    assert not y.detach().requires_grad and y.detach().data_ptr() == y.data_ptr()
    v = torch.tensor([1., 2.], requires_grad=True)
    v.detach()[1] = 7.                         # through a 0-d view of the detached alias
    assert v.tolist() == [1., 7.] and v._version == 1


def test_detach_modification_is_caught_by_version_counter():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x.exp()
    y.detach().zero_()
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        y.sum().backward()


def test_detach_():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 2
    assert y.detach_() is y
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    v = (x * 2)[0:1]
    with pytest.raises(RuntimeError, match=r"Can't detach views in-place. Use detach\(\) "
                                           r"instead."):
        v.detach_()


def test_data_is_detached():
    x = torch.tensor([1., 2.], requires_grad=True)
    assert not x.data.requires_grad and x.data.data_ptr() == x.data_ptr()


# ---- in-place ops and version counters ------------------------------------------------------

INPLACE = {
    "add_": lambda t: t.add_(1.), "sub_": lambda t: t.sub_(1.), "mul_": lambda t: t.mul_(2.),
    "div_": lambda t: t.div_(2.), "zero_": lambda t: t.zero_(), "fill_": lambda t: t.fill_(3.),
    "copy_": lambda t: t.copy_(torch.ones(2, 3)), "clamp_": lambda t: t.clamp_(0., 1.),
    "relu_": lambda t: t.relu_(), "iadd": lambda t: t.__iadd__(1.),
    "setitem_slice": lambda t: t.__setitem__((slice(0, 1),), 1.),
    "setitem_tensor": lambda t: t.__setitem__((slice(None), slice(1, 2)), torch.ones(2, 1)),
    "setitem_mask": lambda t: t.__setitem__(t > 100., 0.),
}


@pytest.mark.parametrize("op", INPLACE)
def test_inplace_ops_bump_version(op):
    t = torch.zeros(2, 3)
    v = t[1:]
    ptr = t.data_ptr()
    assert t._version == 0
    r = INPLACE[op](t)
    assert t._version == 1 and v._version == 1
    assert t.data_ptr() == ptr
    if r is not None:
        assert r is t


def test_inplace_values():
    t = torch.tensor([[-1., 2.], [3., -4.]])
    t.add_(1.)
    t.mul_(2.)
    t.sub_(torch.tensor([1., 0.]))
    t.div_(2.)
    assert t.tolist() == [[-0.5, 3.], [3.5, -3.]]
    t.clamp_(-1., 3.)
    assert t.tolist() == [[-0.5, 3.], [3., -1.]]
    t.relu_()
    assert t.tolist() == [[0., 3.], [3., 0.]]
    t[1:2] = 7.
    assert t.tolist() == [[0., 3.], [7., 7.]]
    assert t._version == 7


def test_inplace_on_leaf_requiring_grad_raises():
    x = torch.tensor([1., 2.], requires_grad=True)
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        x.add_(1.)
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        x.zero_()
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        x[0:1] = 3.                          # through a view of the leaf
    assert x._version == 0 and x.tolist() == [1., 2.]


def test_inplace_on_view_of_leaf_raises():
    x = torch.tensor([1., 2., 3.], requires_grad=True)
    msg = "a view of a leaf Variable that requires grad is being used in an in-place operation."
    with pytest.raises(RuntimeError, match=msg):
        x[0:2].add_(1.)
    with pytest.raises(RuntimeError, match=msg):
        x.view(3).mul_(2.)


def test_inplace_on_leaf_allowed_under_no_grad():
    w = torch.tensor([1., 2.], requires_grad=True)
    (w * w).sum().backward()
    with torch.no_grad():
        w.sub_(0.5 * w.grad)                  # an optimizer step
        w[0:1] = 10.
    assert w.tolist() == [10., 0.]
    assert w.is_leaf and w.requires_grad and w._version == 2


def test_inplace_on_non_leaf_records_the_op():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 1
    old = y.grad_fn
    y.mul_(3.)
    assert name(y.grad_fn) == "MulBackward0" and y.grad_fn is not old
    assert y.grad_fn.next_functions[0] == (old, 0)
    y.exp_()
    assert name(y.grad_fn) == "ExpBackward0"
    y.sum().backward()
    close(x.grad, 3 * np.exp([3., 6.]))     # d exp(3x)/dx


def test_inplace_on_view_of_non_leaf_copy_slices():
    a = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    b = a * 1
    mul_node = b.grad_fn
    b[0].mul_(3.)
    assert b.tolist() == [[3., 6.], [3., 4.]]
    assert name(b.grad_fn) == "CopySlices"
    assert b.grad_fn.next_functions[0] == (mul_node, 0)
    assert b._version == 1
    b.sum().backward()
    close(a.grad, [[3., 3.], [1., 1.]])


def test_inplace_on_0d_view_of_non_leaf():
    a = torch.tensor([1., 2., 3.], requires_grad=True)
    b = a * 1
    b[0].mul_(3.)
    b.sum().backward()
    close(a.grad, [3., 1., 1.])
    assert b.tolist() == [3., 2., 3.]


def test_copy_slices_with_strided_view_and_other_input():
    a = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    b = a.clone()
    b.t()[0].exp_()                           # column 0 of b
    b.sum().backward()
    close(a.grad, [[math.e, 1.], [math.e ** 3, 1.]])

    x = torch.tensor([1., 2., 3.], requires_grad=True)
    s = torch.tensor(5., requires_grad=True)
    y = x * 1
    y[1:2] = s * 2
    assert y.tolist() == [1., 10., 3.]
    assert name(y.grad_fn) == "CopySlices"
    assert [name(n) for n, _ in y.grad_fn.next_functions] == ["MulBackward0", "MulBackward0"]
    (y * torch.tensor([1., 2., 3.])).sum().backward()
    close(x.grad, [1., 0., 3.])
    close(s.grad, 4.)                         # 2 * 2


def test_setitem_on_non_leaf_gradients():
    x = torch.tensor([1., 2., 3.], requires_grad=True)
    y = x * 1
    y[0:1] = 10.
    y.sum().backward()
    close(x.grad, [0., 1., 1.])
    x.grad = None
    y = x * 1
    y[0] = 10.                                # 0-d view of a 1-D non-leaf
    y[-1] = y[1] * 4
    assert y.tolist() == [10., 2., 8.]
    y.sum().backward()
    close(x.grad, [0., 5., 0.])               # y1 + 4 y1
    x.grad = None
    y = x * 1
    y[torch.tensor([0, 2])] = 0.
    assert name(y.grad_fn) == "IndexPutBackward0"
    assert y.tolist() == [0., 2., 0.]
    y.sum().backward()
    close(x.grad, [0., 1., 0.])


def test_views_of_modified_base_get_as_strided_grad_fn():
    a = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    b = a * 1
    w = b[1]
    v = b[0]
    v.mul_(3.)
    assert name(w.grad_fn) == "AsStridedBackward0"
    assert name(v.grad_fn) == "AsStridedBackward0"
    assert v._version == b._version == 1
    (v * torch.tensor([1., 10.])).sum().backward()
    close(a.grad, [[3., 30.], [0., 0.]])


def test_version_counter_error():
    x = torch.tensor(2.0, requires_grad=True)
    y = x ** 2; line = here()   # noqa: E702
    with torch.no_grad():
        x.add_(10)
    with pytest.raises(RuntimeError, match=MODIFIED) as e:
        y.backward()
    msg = str(e.value)
    assert "is at version 1; expected version 0 instead" in msg
    assert line in msg and "PowBackward0" in msg


def test_version_counter_error_on_saved_output_names_the_line():
    x = torch.tensor([1., 2., 3.], requires_grad=True)
    y = x.exp(); line = here()  # noqa: E702
    y.add_(1)
    with pytest.raises(RuntimeError, match=re.escape("[llgrad.FloatTensor [3]], which is "
                                                     "output 0 of Exp, is at version "
                                                     "1; expected version 0 instead")) as e:
        y.sum().backward()
    assert line in str(e.value)
    # two in-place ops: version 2
    y = x.exp()
    y.mul_(2).add_(1)
    with pytest.raises(RuntimeError, match="is at version 2; expected version 0 instead"):
        y.sum().backward()


def test_inplace_on_unsaved_tensor_is_fine():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 2                                # MulBackward0 saves x and 2, not y
    y.add_(1.)
    y.sum().backward()
    close(x.grad, [2., 2.])


# ---- autograd.Function --------------------------------------------------------------------------

class MulConst(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_backward(x, y)
        ctx.k = k
        ctx.forward_needs = ctx.needs_input_grad
        return x * y * k

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        ctx.backward_needs = ctx.needs_input_grad
        return (g * y * ctx.k if ctx.needs_input_grad[0] else None,
                g * x * ctx.k if ctx.needs_input_grad[1] else None, None)


def test_function_save_for_backward_and_needs_input_grad():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = torch.tensor([3., 4.])
    z = MulConst.apply(x, y, 2.)
    assert name(z.grad_fn) == "MulConstBackward"
    assert z.grad_fn.needs_input_grad == (True, False, False)
    close(z, [6., 16.])
    z.sum().backward()
    close(x.grad, [6., 8.])
    assert y.grad is None
    assert z.grad_fn.backward_needs == (True, False, False)
    with pytest.raises(RuntimeError, match=FREED):
        z.grad_fn.saved_tensors
    with pytest.raises(RuntimeError, match=FREED):
        z.sum().backward()


def test_function_saved_tensors_are_version_checked():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = torch.tensor([3., 4.])
    z = MulConst.apply(x, y, 2.); line = here()  # noqa: E702
    y.mul_(2.)
    with pytest.raises(RuntimeError, match=MODIFIED) as e:
        z.sum().backward()
    assert "is at version 1; expected version 0 instead" in str(e.value)
    assert line in str(e.value)


def test_function_without_grad_records_nothing():
    x = torch.tensor([1., 2.])
    z = MulConst.apply(x, x, 1.)
    assert z.grad_fn is None and not z.requires_grad
    with torch.no_grad():
        z = MulConst.apply(torch.ones(1, requires_grad=True), x[:1], 1.)
    assert z.grad_fn is None


class AddOne_(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1.)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def test_function_mark_dirty():
    a = torch.tensor([1., 2.], requires_grad=True)
    b = a * 1
    c = AddOne_.apply(b)
    assert c is b                              # modified in place: same object
    assert b.tolist() == [2., 3.]
    assert name(b.grad_fn) == "AddOne_Backward"
    assert b._version == 2                     # add_ and mark_dirty each bump it
    (c * 3).sum().backward()
    close(a.grad, [3., 3.])


def test_function_mark_dirty_on_leaf_raises():
    a = torch.tensor([1., 2.], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used "
                                           "in an in-place operation."):
        AddOne_.apply(a)


class TimesTwoWithIndex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = torch.tensor(np.argsort(x._data))
        m = x * 3
        ctx.mark_non_differentiable(idx, m)
        return x * 2, idx, m

    @staticmethod
    def backward(ctx, g, g_idx, g_m):
        ctx.seen = (g_idx, g_m)
        return g * 2


def test_function_mark_non_differentiable():
    x = torch.tensor([3., 1.], requires_grad=True)
    out, idx, m = TimesTwoWithIndex.apply(x)
    assert out.requires_grad
    assert not idx.requires_grad and not m.requires_grad and m.grad_fn is None
    assert idx.tolist() == [1, 0]
    node = out.grad_fn
    out.sum().backward()
    close(x.grad, [2., 2.])
    g_idx, g_m = node.seen                     # materialized as zeros
    close(g_m, [0., 0.])


class TwoOutputs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, materialize):
        ctx.set_materialize_grads(materialize)
        return x * 1, x * 2

    @staticmethod
    def backward(ctx, g1, g2):
        ctx.seen = (g1, g2)
        return (g1 if g1 is not None else 0) + (g2 * 2 if g2 is not None else 0), None


def test_function_set_materialize_grads():
    x = torch.tensor([1., 1.], requires_grad=True)
    p, q = TwoOutputs.apply(x, True)
    node = p.grad_fn
    p.sum().backward()
    close(node.seen[0], [1., 1.])
    close(node.seen[1], [0., 0.])               # the unused output's grad: zeros
    close(x.grad, [1., 1.])
    x.grad = None
    p, q = TwoOutputs.apply(x, False)
    node = p.grad_fn
    p.sum().backward()
    assert node.seen[1] is None                 # not materialized
    close(x.grad, [1., 1.])
    x.grad = None
    p, q = TwoOutputs.apply(x, False)
    (p + q).sum().backward()
    close(x.grad, [3., 3.])                     # g1 + 2 g2 with g1 = g2 = 1


class WrongCount(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g


class WrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return torch.ones(3)


def test_function_wrong_gradients_raise():
    x = torch.tensor([1., 2.], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"function WrongCountBackward returned an incorrect "
                                           r"number of gradients \(expected 2, got 1\)"):
        WrongCount.apply(x, x).sum().backward()
    with pytest.raises(RuntimeError, match=r"Function WrongShapeBackward returned an invalid "
                                           r"gradient at index 0 - got \[3\] but expected shape "
                                           r"compatible with \[2\]"):
        WrongShape.apply(x).sum().backward()


class ScaleSetup(torch.autograd.Function):
    @staticmethod
    def forward(x, k):                         # no ctx: setup_context style
        return x * x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, k = inputs
        ctx.save_for_backward(x)
        ctx.k = k

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2 * x * ctx.k, None


def test_function_setup_context_style():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = ScaleSetup.apply(x, 3.)
    close(y, [3., 12.])
    assert name(y.grad_fn) == "ScaleSetupBackward"
    y.sum().backward()
    close(x.grad, [6., 12.])


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 5


def test_function_returning_its_input_gets_a_new_tensor():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and y.data_ptr() == x.data_ptr()
    assert name(y.grad_fn) == "IdentityBackward" and x.is_leaf
    y.sum().backward()
    close(x.grad, [5., 5.])


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return grad_out * 2 * x


def test_function_double_backward_through_saved_tensors():
    x = torch.tensor([1., 3.], requires_grad=True)
    g, = torch.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    close(g, [2., 6.])
    g.sum().backward()
    close(x.grad, [2., 2.])


# ---- gradcheck ----------------------------------------------------------------------------------

class WrongSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return g * a                            # missing the factor 2


def test_gradcheck_passes_on_correct_functions():
    x = torch.tensor([0.5, 1.5, -2.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: (a * a).sin(), (x,))
    assert torch.autograd.gradcheck(lambda a, b: (a * b).exp().sum(), (x, w))
    assert torch.autograd.gradcheck(Square.apply, (x,))
    assert torch.autograd.gradcheck(lambda a: a.t() @ a, (x.reshape(3, 1).detach()
                                                           .requires_grad_(),))


def test_gradcheck_raises_on_wrong_backward():
    x = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to "
                                           "input 0"):
        torch.autograd.gradcheck(WrongSquare.apply, (x,))
    assert torch.autograd.gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_gradgradcheck():
    x = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a: (a * a * a).sum(), (x,))


# ---- iterative engine, freeing saved tensors ----------------------------------------------------

@pytest.mark.slow      # (~5 s)
def test_backward_through_100k_op_chain_is_iterative():
    x = torch.tensor([1.], dtype=torch.float64, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0001
    y.backward(torch.ones(1, dtype=torch.float64))
    close(x.grad, [1.0001 ** 100_000], rtol=1e-9)
    del y
    gc.collect()                                # tearing the chain down is fine too


def test_saved_tensors_are_freed_after_backward():
    x = torch.tensor([1., 2.], requires_grad=True)
    h = x * 2
    loss = (h * h).sum()
    buf = weakref.ref(h._data)
    node = loss.grad_fn.next_functions[0][0]
    assert name(node) == "MulBackward0" and node._saved_self is h
    del h
    gc.collect()
    assert buf() is not None                    # the graph keeps the saved intermediate
    loss.backward()
    gc.collect()
    assert buf() is None                        # ... until backward frees it
    close(x.grad, [8., 16.])                    # 2 h * 2
    with pytest.raises(RuntimeError, match=FREED):
        node._saved_self
    with pytest.raises(RuntimeError, match=FREED):
        node._saved_other


def test_saved_tensors_kept_with_retain_graph():
    x = torch.tensor([1., 2.], requires_grad=True)
    h = x * 2
    loss = (h * h).sum()
    buf = weakref.ref(h._data)
    node = loss.grad_fn.next_functions[0][0]
    del h
    loss.backward(retain_graph=True)
    gc.collect()
    assert buf() is not None
    close(node._saved_self, [2., 4.])
    loss.backward()
    gc.collect()
    assert buf() is None
    close(x.grad, [16., 32.])


def test_function_saved_tensors_are_freed():
    x = torch.tensor([1., 2.], requires_grad=True)
    h = x * 1
    y = Square.apply(h)
    buf = weakref.ref(h._data)
    del h
    gc.collect()
    assert buf() is not None
    y.sum().backward()
    gc.collect()
    assert buf() is None


def test_autograd_grad_frees_unless_retained():
    x = torch.tensor(3., requires_grad=True)
    y = x * x
    torch.autograd.grad(y, x, retain_graph=True)
    g, = torch.autograd.grad(y, x)
    close(g, 6.)
    with pytest.raises(RuntimeError, match=FREED):
        torch.autograd.grad(y, x)


# ---- the notes in shared/seeds (torch read as llgrad) -------------------------------------------

def test_notes1_vjp():
    x = torch.tensor([2., 3.], requires_grad=True)
    y = x ** 2
    # 等价于 loss = 0.1 * y[0] + 2.0 * y[1]
    y.backward(torch.tensor([0.1, 2.0]))
    close(x.grad, [0.4, 12.0])
    assert repr(x.grad) == "tensor([ 0.4000, 12.0000])"


def test_notes1_requires_grad():
    x = torch.randn(3, requires_grad=True)
    w = torch.randn(3, requires_grad=False)
    y = x * w
    assert y.requires_grad is True
    assert name(y.grad_fn) == "MulBackward0"
    assert str(y.grad_fn).startswith("<MulBackward0 object at 0x")


def test_notes1_leaf():
    x = torch.randn(3, requires_grad=True)
    assert x.is_leaf is True
    assert x.grad_fn is None


def test_notes1_grad_fn_chain():
    x = torch.tensor(2.0, requires_grad=True)
    a = x * 3
    b = a.relu()
    loss = b.sum()
    assert name(a.grad_fn) == "MulBackward0"
    assert name(b.grad_fn) == "ReluBackward0"
    assert name(loss.grad_fn) == "SumBackward0"
    loss.backward()
    close(x.grad, 3.)                          # leaf tensor 默认保存梯度
    assert x.grad.shape == ()


def test_notes1_saved_self():
    x = torch.randn(5, requires_grad=True)
    y = x.pow(2)
    assert name(y.grad_fn) == "PowBackward0"
    assert y.grad_fn._saved_self is x          # backward 需要的 x


def test_notes1_version_counter():
    x = torch.tensor(2.0, requires_grad=True)
    y = x ** 2
    with torch.no_grad():
        x.add_(10)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.backward()                           # 可能报 in-place modification error


def test_notes1_custom_function_square():
    x = torch.tensor([1., -2., 3.], requires_grad=True)
    y = Square.apply(x)
    close(y, [1., 4., 9.])
    assert name(y.grad_fn) == "SquareBackward"
    y.sum().backward()
    close(x.grad, [2., -4., 6.])


def test_notes1_no_grad_does_not_change_requires_grad():
    x = torch.tensor([1., 2.], requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert x.requires_grad and not y.requires_grad
    z = x * 2                                  # 出了 context，原来的 tensor 仍然可以参与建图
    assert z.requires_grad and name(z.grad_fn) == "MulBackward0"


def test_notes2_backward_matmul_mean():
    w = torch.randn(5, 3, requires_grad=True)
    x = torch.randn(1, 5)
    y = x @ w
    z = y.mean()
    z.backward()
    assert w.grad.shape == (5, 3)
    assert repr(w.grad.shape) == "llgrad.Size([5, 3])"
    # dz/dw[i, j] = x[0, i] / 3
    close(w.grad, np.repeat(vals(x).reshape(5, 1) / 3, 3, axis=1), rtol=1e-5)


def test_notes2_grad_fn_names():
    w = torch.randn(5, 3, requires_grad=True)
    x = torch.randn(1, 5)
    y = x @ w
    z = y.mean()
    assert f"y 源自: {y.grad_fn}".startswith("y 源自: <MmBackward0 object at 0x")
    assert f"{z.grad_fn}".startswith("<MeanBackward0 object at 0x")
    assert f"w.grad_fn: {w.grad_fn}" == "w.grad_fn: None"
    assert f"x.grad_fn: {x.grad_fn}" == "x.grad_fn: None"
    assert z.grad_fn.next_functions == ((y.grad_fn, 0),)
    z.backward()
    assert x.grad is None                       # x 的 requires_grad=False：梯度计算停止
    assert w.grad is not None


def test_notes2_gradient_accumulation():
    w = torch.tensor([1., 2.], requires_grad=True)
    for _ in range(3):                          # 多次正向和反向传播，梯度累积
        (w * w).sum().backward()
    close(w.grad, [6., 12.])
    w.grad.zero_()                              # zero_grad()
    (w * 3).sum().backward()
    close(w.grad, [3., 3.])


def test_notes2_requires_grad_flag_and_no_grad_enable_grad():
    t = torch.ones(2)
    assert not t.requires_grad                  # 直接创建的张量通常默认为 requires_grad=False
    t.requires_grad_(True)
    assert t.requires_grad
    with torch.no_grad():
        p = t * 2
        with torch.enable_grad():
            q = t * 2
    assert not p.requires_grad and q.requires_grad


def test_notes2_detach():
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 3
    d = y.detach()
    assert not d.requires_grad and d.data_ptr() == y.data_ptr()
    (y.sum() + (d * x).sum()).backward()        # no gradient flows back through d
    close(x.grad, [3. + 3., 3. + 6.])


@pytest.mark.parametrize("op", ["sum", "mean", "prod"])
def test_reduction_of_0d_over_a_dim_is_named_as_a_dim_reduction(op):
    # PyTorch: a 0-d tensor's sum(dim=0) is SumBackward1 (over dims), sum() SumBackward0
    x = torch.tensor(2.0, requires_grad=True)
    base = op.capitalize() + "Backward"
    assert type(getattr(x, op)().grad_fn).__name__ == base + "0"
    for kw in ({"dim": 0}, {"dim": -1, "keepdim": True}):
        y = getattr(x, op)(**kw)
        assert type(y.grad_fn).__name__ == base + "1" and y.shape == () and y.item() == 2.0
        (g,) = torch.autograd.grad(y * 3, x)
        assert g.item() == 3.0


def test_top_level_clamp_min_clamp_max_addmm():
    x = torch.tensor([-1.0, 2.0], requires_grad=True)
    assert torch.clamp_min(x, 0).tolist() == [0.0, 2.0]
    assert type(torch.clamp_max(x, 0).grad_fn).__name__ == "ClampMaxBackward0"
    y = torch.addmm(torch.ones(2), torch.ones(3, 4), torch.ones(4, 2), beta=2, alpha=0.5)
    assert y.tolist() == [[4.0, 4.0]] * 3


@pytest.mark.parametrize("backend", ["eager", "llvm", "interpret"])
def test_nll_loss_of_ignored_targets_as_pytorch(backend):
    # PyTorch: every target ignored and reduction='mean' gives a nan loss but zero
    # gradients; an ignored element's loss with reduction='none' is +0.0
    import numpy as np
    import llgrad.nn.functional as F

    def f(x, t, reduction):
        return F.nll_loss(x, t, reduction=reduction)

    g = f if backend == "eager" else torch.compile(f, backend=backend)
    for _ in range(2):                       # (a compiled function's second call is native)
        x = torch.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        t = torch.tensor([-100, -100])
        with np.errstate(invalid="ignore", divide="ignore"):
            loss = g(x, t, "mean")
            loss.backward()
        assert np.isnan(loss.item()) and x.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
        none = g(x, torch.tensor([1, -100]), "none").detach().numpy()
        assert none.tolist() == [1.0, 0.0] and not np.signbit(none[1])
