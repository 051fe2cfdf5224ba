"""Sweep 21b (F): the official "Extending torch.func with autograd.Function" tutorial and
the "Extending PyTorch" note's Tensor-like type, run with PyTorch and with llgrad
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21b_f as a  # noqa: E402
from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "func_numpy_sort": a.func_numpy_sort,
    "tensor_like_type": pytest.param(a.tensor_like_type, marks=pytest.mark.xfail(
        strict=True, reason="__torch_function__ is not supported: llgrad's functions take "
        "only tensors and numbers, and do not dispatch to a Tensor-like argument's class")),
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, SLOW))
def test_program(name, program):
    run_tutorial(program, **TOL.get(name, {}))


def test_numpy_of_a_tensor_requiring_grad_under_no_grad():
    """torch refuses .numpy() of a tensor requiring grad only while grad mode is on: an
    autograd.Function's forward (grad off) takes its inputs to NumPy, as the torch.func
    tutorial's NumpySort does."""
    import llgrad
    for lib in (torch, llgrad):
        x = lib.ones(2, requires_grad=True)
        with lib.no_grad():
            assert x.numpy().tolist() == [1.0, 1.0]
        with pytest.raises(RuntimeError, match="requires grad"):
            x.numpy()
