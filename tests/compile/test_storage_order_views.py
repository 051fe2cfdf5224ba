"""Views that read a tensor's storage (as_strided) and the memory of an expanded input, in
compiled code: the IR lays a non-view op's result out contiguous where eager keeps its
input's strides (x.t() * 1), so as_strided reads a copy of the root's memory in eager's
order; an expanded input's memory is its elements at index 0 of the stride-0 dims, which
native code scatters (an overlapping put ran the graph on the interpreter)."""
import numpy as np

import llgrad
from llgrad.codegen.kernel import Kernel


def _native(f):
    (entry,) = f.entries
    assert all(isinstance(k, Kernel) for k in entry.kernels.values()), entry.kernels


def _both(fn, make):
    f = llgrad.compile(fn)
    for _ in range(2):
        f(*make())
    xs = make()
    got = f(*xs)
    got.sum().backward()
    ys = make()
    want = fn(*ys)
    want.sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    for a, b in zip(xs, ys):
        if a.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)
    assert got.stride() == want.stride()
    return f


def test_as_strided_of_a_result_eager_lays_out_transposed():
    f = _both(lambda x: (x.t() * 1).as_strided((2, 2), (2, 1), 1),
              lambda: [llgrad.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)])
    _native(f)


def test_as_strided_of_a_view_of_such_a_result():
    f = _both(lambda x: (x.t() * 2)[1:].as_strided((2, 2), (1, 3), 2),
              lambda: [llgrad.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)])
    _native(f)


def test_an_expanded_input_read_transposed():
    rng = np.random.default_rng(0)
    col, target = rng.uniform(0.1, 0.9, (4, 1)), rng.uniform(0, 1, (3, 4))

    def make():
        x = llgrad.from_numpy(np.broadcast_to(col, (4, 3))).requires_grad_()
        return [x, llgrad.tensor(target)]
    f = _both(lambda x, t: llgrad.nn.functional.binary_cross_entropy(x.t(), t,
                                                                     reduction="none"), make)
    _native(f)
