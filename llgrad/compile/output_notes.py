"""What run.py needs to give a compiled call's results eager's identities: outputs that
are inputs, views of inputs, or the same tensor twice (noted at trace time); and which
inputs each output's eager graph reaches (backward_node.py: a backward through some of
the outputs leaves the .grad of inputs only the others reach None, as eager does)."""
import heapq
import itertools

import numpy as np

from ..runtime import grad_mode
from ..runtime.autograd_function import _Freed
from ..runtime.node import AccumulateGrad, gradient_edge
from ..tracer.errors import TraceError
from . import grad_views
from .guard_expressions import Names
from .log import short_loc, user_line


def rebuild_notes(entry, outs, tensors, result=None, received=(), call=None):
    """What run.py needs to give later calls' results eager's identities and flags.
    result: what the function returned; received: the containers and objects the guard
    walk entered (the arguments' and what the function captures); call: (fn, args,
    kwargs), to name guard paths readably in messages (guard_expressions.Names)."""
    _no_received_containers(result, received)
    grad_views.note(entry, outs, tensors)     # (over the memory of a .grad it set)
    # outputs that are input tensors themselves (`return x`, not x.detach() or a view,
    # which the graph cannot tell apart): later calls return the input too
    where = {id(t): i for i, (_, t) in enumerate(tensors)}
    # a new leaf that requires grad (made with requires_grad=True, by requires_grad_(), as
    # an nn.Parameter): eager's has no backward node and gets a .grad, a compiled call's
    # result would come from the graph
    for k, o in enumerate(outs):
        if o.requires_grad and o._grad_fn is None and o._base is None and id(o) not in where:
            raise TraceError(f"{_output_name(entry, k, call)} is a new leaf that requires grad "
                             "(requires_grad=True, requires_grad_() or an nn.Parameter made "
                             "inside it), which a compiled call cannot make")
    entry.input_outputs = [(k, where[id(o)]) for k, o in enumerate(outs)
                           if id(o) in where and tensors[where[id(o)]][1] is o]
    # outputs that do not require grad: an untracked alias of an input (x.detach()) is the
    # same array as a view made under no_grad (which requires grad), so later calls are
    # told apart here
    entry.plain_alias = [k for k, o in enumerate(outs) if not o.requires_grad]
    # and views made under no_grad of an input (which require grad, with no edge), found
    # again where the array cannot show it (an empty view aliases nothing)
    # (of inputs sharing memory, a root: a view input's place can change between calls
    # where the root's stays, `o.v = x[1]` traced while o.v was x[0] and called with x[2])
    storage = {}
    for i, (_, t) in sorted(enumerate(tensors), key=lambda it: it[1][1]._base is not None):
        storage.setdefault(id(t._storage), i)
    entry.no_grad_views = [(k, storage[id(o._storage)], o._creation) for k, o in enumerate(outs)
                           if o._creation is not None and o.requires_grad
                           and id(o._storage) in storage]
    # and views of an input the graph computes as values of their own (a view written in
    # place, `return x[:, 1].add_(1)`): later calls make them views of the input again
    # (offset in bytes from the input's first element, strides)
    entry.input_views = [(k, storage[id(o._storage)], _ptr(o._data) - _ptr(
        tensors[storage[id(o._storage)]][1]._data), o._data.strides)
        for k, o in enumerate(outs) if id(o._storage) in storage
        and o is not tensors[storage[id(o._storage)]][1]]

    # outputs over an input's memory whose eager base is not that input (`x.detach()`, a
    # view of it): an alias without history, not a view of the input (whose in-place rules
    # differ when the input requires grad); (output, input, whether it is itself a view)
    entry.detached = [(k, storage[id(o._storage)], o._base is not None, False)
                      for k, o in enumerate(outs) if id(o._storage) in storage
                      and _eager_base(o, tensors[storage[id(o._storage)]][1]) is None]
    # and `x.data` (or a view of it): such an alias, under a version counter of its own
    memory = {}                 # (a root input first, as for storage)
    for i, (_, t) in sorted(enumerate(tensors), key=lambda it: it[1][1]._base is not None):
        memory.setdefault(id(t._storage.base), i)
    data = [(k, memory[id(o._storage.base)]) for k, o in enumerate(outs)
            if id(o._storage) not in storage and id(o._storage.base) in memory]
    entry.detached += [(k, i, outs[k]._base is not None, True) for k, i in data]
    # (which the graph computes as a value of its own where the function wrote through it,
    # `return x.data.add_(1)`: made over the input's memory again, as input_views are)
    entry.input_views += [(k, i, _ptr(outs[k]._data) - _ptr(tensors[i][1]._data),
                           outs[k]._data.strides) for k, i in data]

    # outputs over the memory of another output the function made (`z = y.view(-1)` then
    # written in place: the graph computes z and y as values of their own): later calls make
    # them views of it again (offset in bytes from its first element, strides; how eager's
    # relates to it: a view (True), an alias without history such as y.detach() (False), or
    # a view of such an alias, `y.detach()[0]` (None): neither alias requires grad, and
    # writing one in place leaves the other's history alone; or, over a version counter of
    # another output's or its own (`y.data`, `y.data[1:]`), (that output, whether a view))
    # The owner spans the most memory: an alias without history of a part of the tensor
    # (y[0].detach(), `return [r.numpy() for r in y]`) is a buffer of that part only, which
    # another output cannot be a view of (it would read past its end)
    owner, counter = {}, {}     # (by memory; counter: a version counter's first output)
    # (outputs a compiled call gives as numbers or text, `loss.item()` twice: no tensors
    # of the caller's, which memory they share does not matter)
    numbers = set(entry.scalar_outputs) | {k for k, _ in entry.rendered}
    for k, o in enumerate(outs):
        counter.setdefault(id(o._storage), k)
        if o._base is None and id(o._storage.base) not in memory:
            j = owner.setdefault(id(o._storage.base), k)
            if _span(o._data) > _span(outs[j]._data):
                owner[id(o._storage.base)] = k
    entry.output_views = []
    for k, o in enumerate(outs):
        j = owner.get(id(o._storage.base), k)
        if j == k or o is outs[j]:
            continue
        if not _covered(o._data, outs[j]._data):
            if o._data.size and outs[j]._data.size and np.shares_memory(o._data, outs[j]._data):
                raise TraceError("results of the function overlap in memory, neither within "
                                 "the other, which a compiled call cannot make share memory "
                                 "(clone one of them), called at " + short_loc(user_line()))
            continue        # (disjoint parts of one tensor: buffers of their own)
        if o._base is not None and o._base is not outs[j] and o._base.requires_grad and \
                not {j, k} & numbers:
            raise TraceError("a result of the function is a view of a tensor with history "
                             "that it does not return, over the memory of a result without "
                             "history (`return y.detach(), y[1:]`), which a compiled call "
                             "cannot make (clone one of them), called at "
                             f"{short_loc(user_line())}")
        how = o._base is outs[j] or (None if o._base is not None else False)
        if o._storage is not outs[j]._storage:
            how = (counter[id(o._storage)], o._base is not None)
        entry.output_views.append((k, j, _ptr(o._data) - _ptr(outs[j]._data), o._data.strides,
                                   how, outs[j]._data.strides))

    # overlapping views of one tensor the function wrote in place and does not return: the
    # graph computes each as a value of its own, so a write through one after a compiled call
    # would not show through the other
    views = {}
    as_numbers = {id(outs[k]) for k in numbers} - {id(o) for k, o in enumerate(outs)
                                                   if k not in numbers}
    for o in outs:
        if o._base is not None and id(o._storage.base) not in memory and \
                id(o._storage.base) not in owner:
            views.setdefault(id(o._storage.base), []).append(o)
    for group in views.values():
        if any(o._storage.version for o in group) and any(
                a is not b and np.shares_memory(a._data, b._data)
                for a, b in itertools.combinations(group, 2)):
            raise TraceError("results of the function are overlapping views of a tensor it "
                             "writes in place and does not return, which a compiled call "
                             "cannot make share memory (return that tensor too, or clone "
                             f"the views), called at {short_loc(user_line())}")

    # views of one tensor the function does not return that overlap, neither within the
    # other (`return y[1:], y[:, 1]`): a compiled call would make the one a view of the
    # other, starting before it; or views of it and of an alias of it without history
    # (`return y.view(2, 2), y.view(2, 2).detach().t()`), which the graph computes apart
    for group in views.values():
        for a, b in itertools.combinations(group, 2):
            if a._base is not b._base and a._data.size and b._data.size and \
                    np.shares_memory(a._data, b._data) and not {id(a), id(b)} & as_numbers:
                raise TraceError("results of the function are views of a tensor it does "
                                 "not return and of an alias of it without history "
                                 "(detach()), which a compiled call cannot make share "
                                 "memory (clone one of them), called at "
                                 f"{short_loc(user_line())}")
            if a._data.size and b._data.size and np.shares_memory(a._data, b._data) and \
                    not (_within(a._data, b._data) or _within(b._data, a._data)):
                raise TraceError("results of the function are overlapping views of a tensor "
                                 "it does not return, neither within the other, which a "
                                 "compiled call cannot make share memory (return that tensor "
                                 f"too, or clone the views), called at {short_loc(user_line())}")

    # fresh outputs written in place (`return y.relu_()`): their version counter as eager's
    entry.out_versions = [(k, o._storage.version) for k, o in enumerate(outs)
                          if o._storage.version and id(o._storage) not in storage]

    # fresh outputs made under inference_mode inside (or under inference_mode(False) in a
    # call made under it): eager's flag, where a compiled call's take the call's mode
    entry.inference_outs = [(k, o._inference) for k, o in enumerate(outs)
                            if o._inference != grad_mode.state.inference
                            and id(o._storage.base) not in memory]

    # outputs of a function returning several views (unbind, split, chunk) that require
    # grad: eager refuses to write them in place, so a compiled call's refuse it too, with
    # eager's words (the op and output named: runtime/inplace.py)
    entry.multi_views = [(k, (type(o.grad_fn).__name__.rsplit("Backward", 1)[0], o._output_nr))
                         for k, o in enumerate(outs) if o._multi_view and o.requires_grad]

    first = {}
    entry.same_outputs = [(k, first.setdefault(id(o), k)) for k, o in enumerate(outs)
                          if first.setdefault(id(o), k) != k]


def _output_name(entry, k, call=None):
    """How a message names output k: a returned one by its place among the results; one
    after them by what the function stored it in (`m.extra = nn.Parameter(...)`), which
    is no result of the function's."""
    if k < entry.n_returned:
        return f"result {k} of the function"
    paths = sorted(p for p in entry.written if not p.startswith("structure of "))
    if paths and call is not None:
        readable = Names(*call)
        paths = [readable(p) or p for p in paths]
    where = f" ({', '.join(paths)})" if paths else ""
    return f"a tensor the function stores in an object it reaches{where}"


def _no_received_containers(result, received):
    """A list or dict the call was given or reaches, returned (`return loss, self.history`):
    eager returns that very object, which the caller may write to; a compiled call builds
    its results' containers anew, so such a call runs eagerly."""
    ids = {id(c) for c in received if isinstance(c, (list, dict))}
    stack = [result]
    while ids and stack:
        v = stack.pop()
        if isinstance(v, (list, dict)) and id(v) in ids:
            raise TraceError(f"the function returns a {type(v).__name__} it was given or "
                             "reaches (its argument, or one its objects or captured "
                             "variables hold), which a compiled call would return a copy of "
                             f"(return a new one: list(...), dict(...)), called at "
                             f"{short_loc(user_line())}")
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())


def _ptr(a):
    return a.__array_interface__["data"][0]


def _covered(a, b):
    """Whether every byte of array a is a byte of one of b's elements (b's compiled buffer
    has b's layout, and the bytes between its elements are not b's: y[:, 1:] holds no
    element of y[1:])."""
    if not _within(a, b):
        return False
    if a.size == 0 or b.flags.c_contiguous or b.flags.f_contiguous:
        return True
    lo, hi = np.lib.array_utils.byte_bounds(b)
    if hi - lo > _MASK_LIMIT:       # (not proven: a part of its own, or the call eagerly)
        return False
    mask = np.zeros(hi - lo, np.bool_)
    as_strided = np.lib.stride_tricks.as_strided
    as_strided(mask[_ptr(b) - lo:], b.shape + (b.itemsize,), b.strides + (1,))[...] = True
    return bool(as_strided(mask[_ptr(a) - lo:], a.shape + (a.itemsize,),
                           a.strides + (1,)).all())


_MASK_LIMIT = 1 << 26      # bytes of a strided owner's span _covered maps byte by byte


def _span(a):
    lo, hi = np.lib.array_utils.byte_bounds(a)
    return hi - lo


def _within(a, b):
    """Whether array a's bytes lie within b's span (strides are never negative here)."""
    lo, hi = np.lib.array_utils.byte_bounds(b)
    a_lo, a_hi = np.lib.array_utils.byte_bounds(a)
    return lo <= a_lo and a_hi <= hi


def _eager_base(o, t):
    """t where output o (over input t's storage) is t or a view of it as eager makes one,
    None where eager's o is a detached alias or a view of one."""
    if o is t or o._base is t or (o._base is not None and o._base is t._base):
        return t
    return None


def reach_masks(outs, inputs):
    """Per output (traced, requiring grad), a bit mask of the inputs its eager graph
    reaches (bit j: inputs[j]), found over grad_fn.next_functions; None for one output
    (a backward through it reaches all that any does)."""
    if len(outs) < 2:
        return None
    where = {}
    for j, t in enumerate(inputs):
        e = gradient_edge(t)
        if e is not None:
            where[id(e[0])] = where.get(id(e[0]), 0) | (1 << j)
    memo = {}

    def mask(node):         # (iterative: graphs deeper than Python's recursion limit)
        stack = [(node, False)]
        while stack:
            n, done = stack.pop()
            if id(n) in memo:
                continue
            if id(n) in where:
                memo[id(n)] = where[id(n)]
                continue
            children = [c for c, _ in getattr(n, "next_functions", ()) if c is not None]
            if done:
                m = 0
                for c in children:
                    m |= memo.get(id(c), 0)
                memo[id(n)] = m
            else:
                stack.append((n, True))
                stack.extend((c, False) for c in children if id(c) not in memo)
        return memo[id(node)]

    out = []
    for o in outs:
        e = gradient_edge(o)
        out.append(0 if e is None else mask(e[0]))
    return out


def leaf_order(outs, inputs):
    """The positions of `inputs` in the order eager's engine makes their gradient edges'
    nodes ready in a backward from all of outs: a leaf's AccumulateGrad (its hooks, its
    .grad) runs as soon as it is ready, so a hook that raises, or reads another leaf's .grad,
    sees the leaves before it done and those after not. None where that is their order."""
    edges = [gradient_edge(t) for t in inputs]
    roots = list(dict.fromkeys(e[0] for e in map(gradient_edge, outs) if e is not None))
    deps, seen, stack = {}, set(roots), list(roots)
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is not None:
                deps[child] = deps.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
    ready = itertools.count(-(1 << 62))     # (the engine's: leaves first, in turn)
    def key(n):
        return next(ready) if type(n) is AccumulateGrad else -n._seq
    heap = [(key(n), k, n) for k, n in enumerate(roots) if not deps.get(n)]
    heapq.heapify(heap)
    tie = itertools.count(len(roots))
    done = []
    while heap:
        _, _, node = heapq.heappop(heap)
        done.append(node)
        for child, _ in node.next_functions:
            if child is not None:
                deps[child] -= 1
                if not deps[child]:
                    heapq.heappush(heap, (key(child), next(tie), child))
    at = {n: k for k, n in enumerate(done)}
    order = sorted(range(len(inputs)), key=lambda j: (
        at.get(edges[j][0], len(done)) if edges[j] is not None else len(done), j))
    return None if order == sorted(order) else tuple(order)


def leaf_made_inside(outs, inputs, first_node):
    """Whether the eager graph of some result reaches a leaf that requires grad made inside
    the traced function (requires_grad=True, an nn.Parameter) and no input that requires
    grad: the compiled graph differentiates by its inputs only, so such a result would not
    require grad (eager's does). (One that reaches an input too requires grad and gets the
    inputs' gradients right: the inside leaf's own is seen by no one.)"""
    stop = {id(e[0]) for e in map(gradient_edge, inputs) if e is not None}
    given = {id(t) for t in inputs}
    for e in map(gradient_edge, outs):
        stack, seen, inside = [e[0]] if e is not None else [], set(), False
        while stack:
            n = stack.pop()
            if id(n) in stop:
                break
            if id(n) in seen or getattr(n, "_seq", first_node) < first_node:
                continue
            seen.add(id(n))
            # (an input made not to require grad inside is not one)
            inside |= type(n) is AccumulateGrad and id(n.variable) not in given
            stack.extend(c for c, _ in getattr(n, "next_functions", ()) if c is not None)
        else:
            if inside:
                return True
    return False


def dead(node):
    """Whether a backward from node raises before reaching any leaf, as eager's does: every
    path passes a released node with saved values (`return a + b` of backpropagated losses).
    None, a leaf's (an input returned as itself), is not: a backward reaches that leaf."""
    if node is None:
        return False
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        released = getattr(n, "_freed", None)     # (a backward ran through it)
        if released is None:
            saved = getattr(n, "_saved", True)  # (an autograd.Function's: its saved
            # tensors become _Freed markers when a backward releases it)
            released = saved is None or isinstance(saved, list) and any(
                isinstance(s, _Freed) for s in saved)
        if n is not None and id(n) not in seen and not (released and (
                n is node or getattr(n, "_saved", None) != {})):
            if isinstance(n, AccumulateGrad):
                return False
            seen.add(id(n))
            todo.extend(f for f, _ in n.next_functions)
    return True
