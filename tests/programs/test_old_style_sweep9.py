"""Code in the older PyTorch style that PyTorch still runs: the deprecated number-first
overloads of add/sub/addcmul/addcdiv (one warning per process, as PyTorch's
TORCH_WARN_ONCE), reduction='elementwise_mean', Variable(volatile=True), the
deprecation warnings of the functional.upsample family, and the old-style tutorial programs
of programs_sweep9_d.py."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
import programs_sweep9_d as d  # noqa: E402
from llgrad.runtime import functions_settings  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

CALLS = [
    ("add_", lambda t, x, g: x.add_(-0.1, g)),
    ("add", lambda t, x, g: x.add(2, g)),
    ("torch.add", lambda t, x, g: t.add(x, 2, g)),
    ("sub_", lambda t, x, g: x.sub_(0.5, g)),
    ("sub", lambda t, x, g: x.sub(3, g)),
    ("addcmul_", lambda t, x, g: x.addcmul_(0.5, g, g + 1)),
    ("addcmul", lambda t, x, g: x.addcmul(0.5, g, g)),
    ("torch.addcmul", lambda t, x, g: t.addcmul(x, 0.5, g, g)),
    ("addcdiv_", lambda t, x, g: x.addcdiv_(-0.25, g, g + 2)),
    ("addcdiv", lambda t, x, g: x.addcdiv(2, g, g + 3)),
]


def _run(lib, fn):
    x = lib.tensor([1.0, -2.0, 3.0])
    g = lib.tensor([0.5, 0.25, -1.0])
    # (warn-always: both libraries' once-per-process warning is then each call's, whatever
    # ran before in this process, e.g. docstring examples calling these overloads)
    always = lib.is_warn_always_enabled()
    lib.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn(lib, x, g)
    finally:
        lib.set_warn_always(always)
    return out.numpy(), x.numpy(), [str(w.message).split("\n")[0] for w in caught]


@pytest.mark.parametrize("name,fn", CALLS, ids=[c[0] for c in CALLS])
def test_deprecated_number_first_overload(name, fn):
    functions_settings._reset()
    torch.set_warn_always(True)     # (torch warns once per process, like llgrad after reset)
    try:
        t_out, t_x, t_warn = _run(torch, fn)
    finally:
        torch.set_warn_always(False)
    l_out, l_x, l_warn = _run(llgrad, fn)
    np.testing.assert_allclose(l_out, t_out, rtol=1e-6)
    np.testing.assert_allclose(l_x, t_x, rtol=1e-6)
    # (the same warnings; torch may repeat one after other code in the process ran its
    # examples: compared as sets)
    assert set(l_warn) == set(t_warn)


def test_deprecated_overload_warns_once_per_process():
    functions_settings._reset()
    x, g = llgrad.ones(3), llgrad.ones(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.add_(1, g)
        x.sub_(1, g)
        x.addcmul_(1, g, g)
    assert len(caught) == 1 and caught[0].filename == __file__


def test_addcmul_with_three_tensors_raises_as_torch():
    for lib in (torch, llgrad):
        x = lib.ones(3)
        with pytest.raises(TypeError, match=r"addcmul\(\) takes 2 positional arguments but 3 "
                                            r"were given"):
            x.addcmul(x, x, x)


@pytest.mark.parametrize("name", ["upsample", "upsample_nearest", "upsample_bilinear"])
def test_functional_upsample_deprecation_message(name):
    msgs = []
    for lib in (torch, llgrad):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            getattr(lib.nn.functional, name)(lib.ones(1, 1, 2, 2), scale_factor=2)
        msgs.append([(w.category, str(w.message)) for w in caught])
    assert msgs[1] == msgs[0]


LOSSES = [
    ("mse_loss", lambda t: (t.tensor([1.0, 2.0]), t.tensor([0.0, 0.5]))),
    ("cross_entropy", lambda t: (t.tensor([[1.0, 2.0, 0.5], [0.1, 0.2, 0.3]]),
                                 t.tensor([0, 2]))),
    ("binary_cross_entropy_with_logits", lambda t: (t.tensor([1.0, -2.0]),
                                                    t.tensor([0.0, 1.0]))),
    ("kl_div", lambda t: (t.tensor([-1.0, -2.0]), t.tensor([0.3, 0.7]))),
    ("smooth_l1_loss", lambda t: (t.tensor([1.0, 2.0]), t.tensor([0.0, 0.5]))),
]


@pytest.mark.parametrize("name,args", LOSSES, ids=[c[0] for c in LOSSES])
def test_reduction_elementwise_mean_is_mean_with_a_warning(name, args):
    """PyTorch 0.4's reduction='elementwise_mean' (PyTorch warns and takes the mean)."""
    res = []
    for lib in (torch, llgrad):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = getattr(lib.nn.functional, name)(*args(lib), reduction="elementwise_mean")
        res.append((float(out), [str(w.message) for w in caught]))
    assert res[1][1] == res[0][1]
    assert res[1][0] == pytest.approx(res[0][0], rel=1e-6)


def test_variable_volatile_warns_and_refuses_requires_grad():
    for lib in (torch, llgrad):
        with pytest.warns(UserWarning, match=r"^volatile was removed and now has no effect\. "
                                             r"Use `with torch\.no_grad\(\):` instead\.$"):
            v = lib.autograd.Variable(lib.ones(2), volatile=True)
        assert not v.requires_grad
        with pytest.raises(ValueError, match="Variable can't be volatile and require_grad at "
                                             "the same time!"), \
                pytest.warns(UserWarning, match="volatile"):
            lib.autograd.Variable(lib.ones(2), requires_grad=True, volatile=True)


@pytest.mark.parametrize("program", [
    pytest.param(d.old_style_sgd_variable, marks=pytest.mark.slow),     # (~2 s)
    d.old_style_adamw], ids=lambda f: f.__name__)
def test_program(program):
    run_tutorial(program)
