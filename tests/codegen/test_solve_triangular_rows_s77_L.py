"""linalg_solve_triangular's native kernel sums a row's dot products for all its columns at
once (codegen/lowerings/ops_linalg.py: a Cholesky factor's gradient, 256 right-hand sides,
walked X down its columns at 20 ms). Compiled solves (lower, upper, unitriangular, left and
right, float32 and float64) equal eager's, whose values solve the system (A X = B checked in
NumPy), and their gradients too; one trace each, and the kernel's group has its scratch row."""
import numpy as np
import pytest

import llgrad

RNG = np.random.default_rng(771)


def _system(dtype, n=24, k=9, left=True):
    a = RNG.standard_normal((2, n, n)) / n + 2 * np.eye(n)
    b = RNG.standard_normal((2, n, k) if left else (2, k, n))
    return a.astype(dtype), b.astype(dtype)


CASES = [("float64", False, True, False)] + [
    pytest.param(*c, marks=pytest.mark.slow) for c in
    [("float32", False, True, False), ("float32", True, True, False),
     ("float64", True, True, False), ("float32", False, False, False),
     ("float64", False, False, False), ("float64", True, True, True)]]


@pytest.mark.parametrize("dtype,upper,left,unit", CASES)
def test_compiled_solves_and_gradients_equal_eager(dtype, upper, left, unit):
    a_np, b_np = _system(dtype, left=left)

    def run(compile_):
        a = llgrad.tensor(a_np, requires_grad=True)
        b = llgrad.tensor(b_np, requires_grad=True)

        def f(a, b):
            x = llgrad.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)
            (x * x).sum().backward()
            return x.detach()
        fn = compile_(f) if compile_ else f
        x = fn(a, b)
        if compile_:
            fn.wait()
            a.grad = b.grad = None
            x = fn(a, b)
            assert fn.n_traces == 1
        return x.numpy(), a.grad.numpy(), b.grad.numpy()
    want, got = run(None), run(llgrad.compile)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tol)
    # (the oracle: the triangle eager read, times X, gives B back)
    tri = np.triu(a_np) if upper else np.tril(a_np)
    if unit:
        tri = tri - tri * np.eye(a_np.shape[-1]) + np.eye(a_np.shape[-1])
    back = tri @ want[0] if left else want[0] @ tri
    np.testing.assert_allclose(back, b_np, rtol=1e-3 if dtype == "float32" else 1e-10,
                               atol=1e-4 if dtype == "float32" else 1e-11)


def test_the_kernel_solves_rows_in_a_scratch_row():
    from llgrad.codegen.build import plan_graph
    a_np, b_np = _system("float64")
    g = llgrad.trace(lambda a, b: llgrad.linalg.solve_triangular(a, b, upper=False),
                     llgrad.tensor(a_np), llgrad.tensor(b_np))
    plan = plan_graph(g, {})
    grp, = [grp for grp in plan.groups if grp.root.op == "linalg_solve_triangular"]
    assert grp.state.get("row") is not None and grp.state["row"].numel == b_np.shape[-1]
