"""In-place view ops: x.unsqueeze_(d), squeeze_, t_, transpose_ (swapdims_, swapaxes_) change
x's own shape and strides, as in PyTorch: the version counter is bumped, a leaf that
requires grad may not be changed, and x's history continues through the view's backward
(PyTorch's in-place names: UnsqueezeBackward1, SqueezeBackward3/4/5, TBackward1,
TransposeBackward1).

Traced, x takes the view's value. On an input of the compiled function that requires no
grad (the name-generation tutorial's `target_line_tensor.unsqueeze_(-1)`) the tracer notes
the op, and compiled calls give the input the same view after the call
(compile/input_reshapes.py); on any other tensor over an input's memory the call runs
eagerly (a warning naming the line)."""
from . import grad_mode, trace_state
from .inplace import _check_inplace, _move_retention
from .methods import _def
from .methods_views import squeeze, t, transpose, unsqueeze
from .node import node_class
from .saved_tensor import user_location

def _in_place(view, name_shift):
    def method(self, *args, **kwargs):
        _check_inplace(self, (self,))
        tracer, replayed = trace_state.state.tracer, False
        if tracer is not None and id(self._storage) in tracer.inputs:
            if not self._requires_grad and all(type(a) is int for a in args + tuple(
                    kwargs.values())):
                tracer.input_reshapes.append((self, view, args, kwargs))
                replayed = True
            else:
                tracer.graph_break(f"{method.__name__}() changes the shape of an input of the "
                                   "compiled function, which a compiled call cannot replay")
        retained = (self._grad_fn, self._output_nr) if self._retains_grad else None
        v = view(self, *args, **kwargs)
        value = tracer.value_of(v) if tracer is not None and tracer.knows(v) else None
        self._data = v._data
        if v._creation is not None and self._base is not None:   # (the grad mode a view
            self._creation = v._creation        # was made in: a tensor that is no view has none)
        fn = v.grad_fn if grad_mode.state.grad_enabled else None
        if fn is not None:
            name, number = type(fn).__name__.rsplit("Backward", 1)
            fn.__class__ = node_class(f"{name}Backward{int(number) + name_shift}")
            self._grad_fn, self._output_nr, self._requires_grad = fn, v._output_nr, True
        self._storage.version += 1
        self._storage.write_loc = user_location()
        if self._base is not None:
            self._view_version = self._storage.version
        if value is not None:
            tracer.inplace_view(self, value, memory=not replayed)
        if retained is not None and self._grad_fn is not retained[0]:
            _move_retention(self, *retained)
        return self
    return method


for _name, _view, _shift in (("unsqueeze_", unsqueeze, 1), ("squeeze_", squeeze, 3),
                             ("t_", t, 1), ("transpose_", transpose, 1),
                             ("swapdims_", transpose, 1), ("swapaxes_", transpose, 1)):
    _def(_name, _in_place(_view, _shift))
