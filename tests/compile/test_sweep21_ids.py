"""Identity keys that outlive the object they name: a table keyed by id() must not serve a
new object that took a dead one's address. The address reuse is made certain here by
giving the new object the dead one's id (the module's `id` monkeypatched)."""
import gc

import numpy as np

import llgrad
from llgrad.compile import class_state

_SCALE = llgrad.full((3,), 2.0)
_OTHER = llgrad.ones(3)


def _other(self):
    return _OTHER


def _scale(self):
    return _SCALE


def _step(m, x):
    return x * m.w


def test_a_class_attribute_at_a_dead_ones_address_is_walked(monkeypatch):
    """The methods of the user's classes were cached by the ids of what the classes hold: a
    property replaced (its old object dead) by one at the old address gave the old property's
    getter, so the tensor the new getter reads became a constant of the trace and compiled
    calls replayed its old value after an in-place change."""
    class Model:
        w = property(_other)

    m, x = Model(), llgrad.ones(3)
    first = llgrad.compile(_step)
    first(m, x)
    first(m, x)
    old = id(Model.__dict__["w"])
    del first
    gc.collect()
    Model.w = property(_scale)          # (the old property is dead)
    new = Model.__dict__["w"]
    real_id = id
    monkeypatch.setattr(class_state, "id", lambda o: old if o is new else real_id(o),
                        raising=False)
    cf = llgrad.compile(_step)
    np.testing.assert_allclose(cf(m, x).numpy(), _step(m, x).numpy())
    _SCALE.add_(1.0)
    try:
        np.testing.assert_allclose(cf(m, x).numpy(), _step(m, x).numpy())
    finally:
        _SCALE.sub_(1.0)
