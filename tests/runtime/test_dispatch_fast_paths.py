"""The eager hot path's shortcuts give what the general code gives: expand's direct view
(ops_shape._broadcast_view) against np.broadcast_to, the nodes' c.<name> / _saved_<name>
fields (node.define_fields, in place of a __getattr__), the user's line kept as (code,
offset) and shown only in the in-place error, and dtype promotion past the same-dtype fast
path of the dispatcher."""
import inspect
import itertools

import numpy as np
import pytest

import llgrad
from llgrad.ir.geometry import expand_strides
from llgrad.ir.ops_shape import _expand
from llgrad.runtime.node import OpNode
from llgrad.runtime.saved_tensor import user_location, user_position, where_str


def _reference_expand(x, size):
    """_expand as it was: broadcast_to, or a writeable as_strided view when nothing repeats
    (with PyTorch's strides for size-1 dims since sweep 14)."""
    out = np.broadcast_to(x, size)
    writeable = x.flags.writeable and (out.size == 0 or all(s or n <= 1 for n, s in
                                                            zip(out.shape, out.strides)))
    return np.lib.stride_tricks.as_strided(
        x, out.shape, expand_strides(x.shape, x.strides, out.shape, x.itemsize),
        writeable=writeable)


def _arrays():
    rng = np.random.default_rng(0)
    for shape in [(), (1,), (3,), (1, 4), (4, 1), (2, 3), (3, 1, 2), (0,), (1, 0)]:
        a = np.asarray(rng.standard_normal(shape).astype(np.float32))
        yield a
        yield np.asfortranarray(a)
        if a.ndim:
            yield a[::-1]
        r = a.copy()
        r.flags.writeable = False
        yield r
        yield np.broadcast_to(a, (2,) + a.shape)


def _sizes(x):
    for lead in range(3):
        for tail in itertools.product(*[(1, 0, 3, -1) if m == 1 else (m, m + 1, -1)
                                        for m in x.shape]):
            for head in itertools.product((1, 2, 0, -1), repeat=lead):
                yield head + tail
    if x.ndim:
        yield x.shape[1:]


def _outcome(f, x, size):
    try:
        out = f(x, size)
    except ValueError as e:
        return ("error", str(e))
    return (out.shape, out.strides, out.flags.writeable, out.tolist(),
            out.__array_interface__["data"][0] if out.size else None)


def test_expand_is_broadcast_to_for_every_layout_and_size():
    for x in _arrays():
        for size in _sizes(x):
            assert _outcome(_expand, x, size) == _outcome(_reference_expand, x, size), \
                (x.shape, x.strides, size)


def test_an_expanded_view_refuses_writes_where_elements_repeat():
    x = llgrad.zeros(1, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.expand(2, 3).add_(1)
    y = x.expand(1, 1, 3)               # nothing repeats: writeable, writes reach x
    y.add_(1)
    assert x.tolist() == [[1.0, 1.0, 1.0]] and y._version == x._version == 1


def test_node_fields_resolve_saved_values_then_attributes():
    x = llgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x.sum(0, keepdim=True)
    fn = y.grad_fn
    assert "__getattr__" not in vars(OpNode)     # (every node attribute read: fast path)
    assert fn.dim == fn._saved_dim and fn.keepdim is True
    p = x.pow(3)
    assert p.grad_fn._saved_self is x and p.grad_fn.exponent == 3
    with pytest.raises(AttributeError, match="'SumBackward1' object has no attribute 'self'"):
        fn.self                     # a name other nodes have, this one does not
    with pytest.raises(AttributeError):
        fn._saved_no_such_name
    with pytest.raises(AttributeError):
        fn.no_such_name
    assert getattr(fn, "alpha", "absent") == "absent"
    p.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        p.grad_fn._saved_self


def test_where_an_op_ran_is_shown_only_in_the_inplace_error():
    line = inspect.currentframe().f_lineno
    w = llgrad.ones(3, requires_grad=True)
    y = w.exp()                                         # line + 2
    assert type(y.grad_fn._where) is tuple              # (code, offset): no line yet
    assert where_str(y.grad_fn._where) == f"test_dispatch_fast_paths.py:{line + 2}"
    y.add_(1)                                           # line + 5
    with pytest.raises(RuntimeError, match=f"ExpBackward0 at test_dispatch_fast_paths.py:"
                                           f"{line + 2} and modified in place at "
                                           f"test_dispatch_fast_paths.py:{line + 5}"):
        y.sum().backward()
    # called as llgrad calls them (from a function of its own), both name the same line
    assert where_str(_from_llgrad(user_position)) == str(_from_llgrad(user_location)) == \
        f"test_dispatch_fast_paths.py:{line + 11}"


def _from_llgrad(f):
    return f()                  # (stands for the llgrad frame user_location skips)


@pytest.mark.parametrize("a, b, want", [
    (np.float32, np.float32, llgrad.float32), (np.float32, np.float64, llgrad.float64),
    (np.int64, np.int64, llgrad.int64), (np.int32, np.int64, llgrad.int64),
    (np.bool_, np.bool_, llgrad.bool)])
def test_promotion_around_the_same_dtype_fast_path(a, b, want):
    x = llgrad.tensor(np.array([1, 2], dtype=a))
    y = llgrad.tensor(np.array([3, 4], dtype=b))
    assert (x * y).dtype == want
    assert x.div(y).dtype == (want if want.is_floating_point else llgrad.float32)
    assert llgrad.cat([x, y]).dtype == want
    with pytest.raises(TypeError, match="must be a Tensor or a number, not str"):
        x.mul("a")              # (x * "a": the operator's NotImplemented, Python's error)
