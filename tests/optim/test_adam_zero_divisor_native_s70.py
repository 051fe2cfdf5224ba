"""beta1 == 1 makes Adam's step size lr / 0: PyTorch's step writes the moments, then raises
ZeroDivisionError. Eager's native Adam loop (compile/eager_optim.py), once built, computed
the step size before writing anything: the same error with the moments left unwritten (a
state half-changed otherwise than PyTorch's), so the result depended on whether an earlier
step of the process had built the loop."""
import numpy as np
import pytest

import llgrad
from llgrad.compile.eager_builds import wait
from llgrad.optim import _eager_adam

torch = pytest.importorskip("torch")


def _zero_divisor_state(T, n):
    w = T.nn.Parameter(T.ones(n))
    opt = T.optim.Adam([w], lr=0.1)
    opt.param_groups[0]["betas"] = (1.0, 0.999)
    (w * T.ones(n)).sum().backward()
    with pytest.raises(ZeroDivisionError):
        opt.step()
    return {k: np.asarray(v.detach().numpy()).copy() for k, v in opt.state[w].items()}, \
        w.detach().numpy().copy()


def test_native_adam_loop_leaves_the_state_pytorchs_step_leaves():
    n = max(_eager_adam._NATIVE_MIN, 8)
    w = llgrad.nn.Parameter(llgrad.ones(n))        # (a step that builds the native loop)
    opt = llgrad.optim.Adam([w], lr=0.1)
    for _ in range(2):
        (w * 2).sum().backward()
        opt.step()
        wait()
    for size in (3, n):
        got, got_w = _zero_divisor_state(llgrad, size)
        want, want_w = _zero_divisor_state(torch, size)
        assert sorted(got) == sorted(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        np.testing.assert_array_equal(got_w, want_w)
