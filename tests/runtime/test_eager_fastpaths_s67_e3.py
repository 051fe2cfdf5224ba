"""The eager dispatcher's shortcuts for the common call (session 67, e3) against PyTorch: the
record loop for all-tensor inputs and its general fallback (a number or None operand, nondiff
arguments), the layout shortcut of elementwise results, add / sub without their alpha layers,
a Linear's bias gradient summed inside the addmm rule, the column-major test read off the
saved array, and the index range checks made with the ufuncs' reduce."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _both(fn):
    return fn(llgrad), fn(torch)


def _names(fn):
    """PyTorch-style names of grad_fn and its next_functions (None for a missing edge)."""
    return (type(fn).__name__,
            tuple(None if f is None else type(f).__name__ for f, _ in fn.next_functions))


def _a(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("case", ["tensors", "number", "clamp_none", "nll_weight", "where"])
def test_node_edges_match_torch(case):
    a, b = _a(0, 4, 3), _a(1, 4, 3)

    def run(lib):
        x = lib.tensor(a, requires_grad=True)
        y = lib.tensor(b, requires_grad=True)
        if case == "tensors":
            return x * y
        if case == "number":
            return x * 2.0
        if case == "clamp_none":
            return x.clamp(min=None, max=y)
        if case == "nll_weight":
            return lib.nn.functional.nll_loss(x.log_softmax(1), lib.tensor([0, 1, 2, 1]),
                                              weight=lib.ones(3))
        return lib.where(x > 0, x, y)
    ours, theirs = _both(run)
    assert _names(ours.grad_fn) == _names(theirs.grad_fn)
    ours.sum().backward()
    theirs.sum().backward()


def test_nondiff_argument_requiring_grad_raises():
    x = llgrad.tensor(_a(2, 4, 3), requires_grad=True)
    w = llgrad.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument"):
        llgrad.nn.functional.nll_loss(x.log_softmax(1), llgrad.tensor([0, 1, 2, 1]), weight=w)


@pytest.mark.parametrize("pair", ["same", "t_left", "t_right", "broadcast", "expanded"])
def test_elementwise_result_layout_matches_torch(pair):
    a, b = _a(3, 4, 4), _a(4, 4, 4)

    def run(lib):
        x, y = lib.tensor(a), lib.tensor(b)
        if pair == "t_left":
            x = x.t()
        elif pair == "t_right":
            y = y.t()
        elif pair == "broadcast":
            y = y[:1]
        elif pair == "expanded":
            y = y[:, :1].expand(4, 4)
        return x * y
    ours, theirs = _both(run)
    assert ours.stride() == theirs.stride()
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("how", ["op", "add", "sub", "add_alpha", "sub_alpha", "radd"])
def test_add_sub_values_and_grad_fn_match_torch(how):
    a, b = _a(5, 6), _a(6, 6)

    def run(lib):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        r = {"op": lambda: x + y - y * 0.5, "add": lambda: x.add(y), "sub": lambda: x.sub(y),
             "add_alpha": lambda: x.add(y, alpha=3), "sub_alpha": lambda: x.sub(y, alpha=0.25),
             "radd": lambda: 2 + x}[how]()
        r.sum().backward()
        return r, x.grad
    (r1, g1), (r2, g2) = _both(run)
    assert type(r1.grad_fn).__name__ == type(r2.grad_fn).__name__
    np.testing.assert_array_equal(r1.detach().numpy(), r2.detach().numpy())
    np.testing.assert_array_equal(g1.numpy(), g2.numpy())


def test_sub_of_bool_tensors_raises_torch_error():
    b = llgrad.tensor([True, False])
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
        b - b
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
        b.sub(b)


@pytest.mark.parametrize("rows", [1, 16])
def test_linear_gradients_and_layouts_match_torch(rows):
    x, w, bias = _a(6, rows, 8), _a(7, 5, 8), _a(8, 5)

    def run(lib):
        lin = lib.nn.Linear(8, 5)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(w))
            lin.bias.copy_(lib.tensor(bias))
        xi = lib.tensor(x, requires_grad=True)
        lin(xi).tanh().sum().backward()
        return lin.weight.grad, lin.bias.grad, xi.grad
    ours, theirs = _both(run)
    for g1, g2 in zip(ours, theirs):
        assert g1.shape == g2.shape and g1.stride() == g2.stride()
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-5, atol=1e-6)


def test_transposed_weight_product_gradient_layout_matches_torch():
    # mm with a column-major operand saved (W.t()): its gradient comes back row-major in W
    a, w = _a(9, 3, 4), _a(10, 6, 4)

    def run(lib):
        x, wt = lib.tensor(a, requires_grad=True), lib.tensor(w, requires_grad=True)
        (x @ wt.t()).sum().backward()
        return wt.grad, x.grad
    ours, theirs = _both(run)
    for g1, g2 in zip(ours, theirs):
        assert g1.stride() == g2.stride()
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [10, -1])
def test_embedding_index_out_of_range_raises(bad):
    emb = llgrad.nn.Embedding(10, 3)
    with pytest.raises(IndexError, match="index out of range in self"):
        emb(llgrad.tensor([1, bad]))
    assert emb(llgrad.tensor([0, 9])).shape == (2, 3)


@pytest.mark.parametrize("bad", [5, -6])
def test_index_put_out_of_range_raises_torch_message(bad):
    def run(lib):
        x = lib.zeros(5)
        try:
            x.index_put_((lib.tensor([0, bad]),), lib.ones(2))
        except IndexError as e:
            return str(e)
        return None
    ours, theirs = _both(run)
    assert ours is not None and theirs is not None
    assert ours == theirs
