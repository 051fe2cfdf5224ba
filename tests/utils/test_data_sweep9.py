"""Sweep 9: DataLoader's warnings as an iterator starts (pin_memory with no accelerator, the
deprecated pin_memory_device), against torch: the same script run with each library."""
import warnings

import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _warnings(lib):
    out = []
    for kw in ({}, {"pin_memory": True}, {"pin_memory": True, "pin_memory_device": "cpu"},
               {"pin_memory_device": "cpu"}):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            batches = [b.tolist() for b in lib.utils.data.DataLoader(range(5), batch_size=2, **kw)]
        out.append((batches, [(x.category.__name__, str(x.message)) for x in w]))
    return out


def test_pin_memory_warnings_as_torch():
    assert _warnings(llgrad) == _warnings(torch)
