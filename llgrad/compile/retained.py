"""retain_grad() inside a compiled training step (Karpathy's makemore: every layer's
`self.out.retain_grad()` before `loss.backward()`, the gradients' statistics read after the
step). The traced backward fills the retained tensors' .grad as eager's engine does; a
retained tensor the call gives back (returned, or put into an object: attr_writes.py) gets
that gradient as an extra output of the graph, which compiled calls set as its .grad.

Only in a call that ran its own backward through the tensor (its graph freed): a backward
after the call would have to fill it, which compiled code does not (entry.py: the call runs
eagerly, as for a hook made inside)."""
from ..runtime.tensor import Tensor


def retained_outputs(entry, tracer, outs, n_extra):
    """The .grad of the results retain_grad() was called on inside the traced run, as extra
    outputs after n_extra others; sets entry.retained [(output, position after n_fn_out, or
    ("out", j): the grad is output j itself, or None)]."""
    entry.retained = []
    extra = []
    for k, o in enumerate(outs):
        fn = o._grad_fn if isinstance(o, Tensor) and o._retains_grad else None
        if fn is None or fn._seq < tracer.first_node:
            continue
        g = o._grad
        j = next((j for j, x in enumerate(outs) if x is g), None) if g is not None else None
        if g is None:
            entry.retained.append((k, None))
        elif j is not None:
            entry.retained.append((k, ("out", j)))
        else:
            entry.retained.append((k, n_extra + len(extra)))
            extra.append(g)
    return extra


def assign_retained(entry, results, outs):
    """A compiled call's results given retained gradients, as eager's run leaves them."""
    for k, pos in entry.retained:
        r = results[k]
        r._retains_grad = True
        if pos is None:
            r._grad = None
        elif isinstance(pos, tuple):
            r._grad = results[pos[1]]
        else:
            r._grad = Tensor._from_array(outs[entry.n_fn_out + pos])
