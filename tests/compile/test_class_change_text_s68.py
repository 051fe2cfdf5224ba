"""A traced run that changes a class attribute (`type(self).calls += 1`) is not kept as
compiled code; the warning names the attribute and its two values, not the class's whole
namespace (readable._class_change)."""
import warnings

import numpy as np

import llgrad
import llgrad.nn as nn


def test_a_changed_class_attribute_is_named_in_the_warning():
    class Net(nn.Module):
        calls = 0

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            type(self).calls += 1
            return self.lin(x)
    model = Net()
    compiled = llgrad.compile(model)
    x = llgrad.ones(2, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(10):
            out = compiled(x)
    np.testing.assert_allclose(out.detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    assert Net.calls == 11          # (every call ran the user's code, as eager)
    text = " ".join(str(w.message) for w in caught)
    assert "Net.calls == 7 (now 8)" in text, text
    assert "__module__" not in text
