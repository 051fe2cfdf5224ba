"""Deprecation warnings that PyTorch raises from C++ (or from the function the user called)
name the user's line, whatever wrappers llgrad puts between (runtime/user_frames.py)."""
import warnings

import pytest

import llgrad

F = llgrad.nn.functional
CALLS = {
    "cross without dim": lambda: llgrad.cross(llgrad.randn(3, 3), llgrad.randn(3, 3)),
    "softmax without dim": lambda: F.softmax(llgrad.randn(3, 4)),
    "dropout2d of a 3-D input": lambda: F.dropout2d(llgrad.randn(3, 4, 4)),
    "upsample": lambda: F.upsample(llgrad.randn(1, 1, 2, 2), scale_factor=2),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_warning_names_the_callers_line(name):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        CALLS[name]()
    assert w, name
    assert all(x.filename == __file__ for x in w), [(x.filename, x.lineno) for x in w]
