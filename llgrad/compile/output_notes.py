"""What run.py needs to give a compiled call's results eager's identities: outputs that
are inputs, views of inputs, or the same tensor twice (noted at trace time)."""


def rebuild_notes(entry, outs, tensors):
    """What run.py needs to give later calls' results eager's identities and flags."""
    # outputs that are input tensors themselves (`return x`, not x.detach() or a view,
    # which the graph cannot tell apart): later calls return the input too
    where = {id(t): i for i, (_, t) in enumerate(tensors)}
    entry.input_outputs = [(k, where[id(o)]) for k, o in enumerate(outs)
                           if id(o) in where and tensors[where[id(o)]][1] is o]
    # outputs that do not require grad: an untracked alias of an input (x.detach()) is the
    # same array as a view made under no_grad (which requires grad), so later calls are
    # told apart here
    entry.plain_alias = [k for k, o in enumerate(outs) if not o.requires_grad]
    # and views made under no_grad of an input (which require grad, with no edge), found
    # again where the array cannot show it (an empty view aliases nothing)
    storage = {id(t._storage): i for i, (_, t) in enumerate(tensors)}
    entry.no_grad_views = [(k, storage[id(o._storage)]) for k, o in enumerate(outs)
                           if o._creation is not None and o.requires_grad
                           and id(o._storage) in storage]
    # and views of an input the graph computes as values of their own (a view written in
    # place, `return x[:, 1].add_(1)`): later calls make them views of the input again
    # (offset in bytes from the input's first element, strides)
    entry.input_views = [(k, storage[id(o._storage)], _ptr(o._data) - _ptr(
        tensors[storage[id(o._storage)]][1]._data), o._data.strides)
        for k, o in enumerate(outs) if id(o._storage) in storage
        and o is not tensors[storage[id(o._storage)]][1]]

    first = {}
    entry.same_outputs = [(k, first.setdefault(id(o), k)) for k, o in enumerate(outs)
                          if first.setdefault(id(o), k) != k]


def _ptr(a):
    return a.__array_interface__["data"][0]
