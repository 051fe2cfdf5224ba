"""Helpers of the llgrad.func tests: the torch oracle (skipped cleanly without torch),
conversions both ways, pytree comparison, float64 finite differences and the torch error of
a call (to compare messages)."""
import numpy as np
import pytest

import llgrad
from llgrad.func.pytree import tree_flatten, tree_unflatten


def load_torch():
    return pytest.importorskip("torch")


def to_torch(tree, torch):
    flat, spec = tree_flatten(tree)
    return _torch_unflatten([torch.tensor(np.array(x.detach().numpy()))
                             if isinstance(x, llgrad.Tensor) else x for x in flat], spec, torch)


def _torch_unflatten(leaves, spec, torch):
    # llgrad's pytree rebuilds tuples/lists/dicts alike for both libraries
    return tree_unflatten(leaves, spec)


def leaves_np(tree):
    """The tensors of a pytree (llgrad's or torch's) as NumPy arrays, in order."""
    out = []
    for x in tree_flatten(tree)[0]:
        if isinstance(x, llgrad.Tensor):
            out.append(np.array(x.detach().numpy()))
        elif hasattr(x, "detach"):
            out.append(x.detach().numpy())
    return out


def assert_trees_close(a, b, atol=1e-10, rtol=1e-7):
    sa, sb = tree_flatten(a)[1], tree_flatten(b)[1]
    assert repr(sa) == repr(sb), (sa, sb)
    la, lb = leaves_np(a), leaves_np(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x.shape == y.shape, (x.shape, y.shape)
        np.testing.assert_allclose(x, y, atol=atol, rtol=rtol)


def rand(*shape, seed=0, dtype=np.float64):
    return llgrad.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def fd_grad(f, x, eps=1e-6):
    """Central differences of a scalar function of one float64 tensor."""
    base = x.detach().numpy().astype(np.float64)
    g = np.zeros(base.size)
    flat = base.reshape(-1)
    for i in range(base.size):
        up, down = flat.copy(), flat.copy()
        up[i] += eps
        down[i] -= eps
        fu = f(llgrad.tensor(up.reshape(base.shape))).item()
        fd = f(llgrad.tensor(down.reshape(base.shape))).item()
        g[i] = (fu - fd) / (2 * eps)
    return g.reshape(base.shape)


def fd_jacobian(f, x, eps=1e-6):
    """Central differences of a tensor function of one float64 tensor: out.shape + x.shape."""
    base = x.detach().numpy().astype(np.float64)
    flat = base.reshape(-1)
    cols = []
    for i in range(base.size):
        up, down = flat.copy(), flat.copy()
        up[i] += eps
        down[i] -= eps
        cols.append((f(llgrad.tensor(up.reshape(base.shape))).numpy()
                     - f(llgrad.tensor(down.reshape(base.shape))).numpy()) / (2 * eps))
    j = np.stack(cols, axis=-1)
    return j.reshape(j.shape[:-1] + base.shape)


def error_of(fn):
    """(type name, message) of what fn() raises."""
    try:
        fn()
    except Exception as e:          # noqa: BLE001 - the test compares what was raised
        return type(e).__name__, str(e)
    raise AssertionError("no error raised")


def same_message(ours, theirs):
    """torch's message with its library names read as llgrad's."""
    return ours == theirs.replace("torch.Size", "llgrad.Size").replace("torch.", "llgrad.")
