"""A traced run that changes an attribute of a class the function reads by name
(`State.hidden = ...`, `Counter.n += 1`) is not kept as compiled code; the warning names
the attribute and its two values, as for a class read through an object
(test_class_change_text_s68.py), not the class's whole namespace."""
import warnings

import numpy as np

import llgrad


def test_a_changed_attribute_of_a_captured_class_is_named_in_the_warning():
    class Counter:
        n = 0

    def f(x):
        Counter.n += 1
        return x * 2

    compiled = llgrad.compile(f)
    x = llgrad.ones(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(10):
            out = compiled(x)
    np.testing.assert_array_equal(out.numpy(), np.full(3, 2.0, np.float32))
    assert Counter.n == 10          # (every call ran the user's code, as eager)
    text = " ".join(str(w.message) for w in caught)
    assert "Counter.n == 7 (now 8)" in text, text
    assert "__module__" not in text and "getset_descriptor" not in text, text


def test_a_compiled_module_is_named_by_its_class_in_warnings():
    """torch.compile(model)'s "running eagerly" warning names the module's class, as its
    recompile-limit warning does (a module has no __name__: it read `llgrad.compile(fn)`)."""
    class GradCamNet(llgrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = llgrad.nn.Conv2d(1, 2, 3, padding=1)
            self.saved = []

        def forward(self, x):
            h = self.conv(x)
            h.register_hook(self.saved.append)      # (a hook made inside the compiled call)
            return h.mean((1, 2, 3))

    model = llgrad.compile(GradCamNet())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(llgrad.ones(2, 1, 4, 4)).sum().backward()
    text = " ".join(str(w.message) for w in caught)
    assert "llgrad.compile(GradCamNet): running eagerly" in text, text
    assert len(model.saved) == 1 and tuple(model.saved[0].shape) == (2, 2, 4, 4)
