"""Lists the program grows between the calls of a compiled function, where the function's
code and the user's functions the guard walk follows only append to them: a Keras-style
History callback held by the trainer whose bound train_step is compiled, the loop's
`cb.on_train_batch_end(self, logs)` appending each loss to `History.losses`.

The guard walk guards a list by its items, so each call after the list grew looked new: a
trace per call, then eager calls at the recompile limit. A list a traced run grows is
marked by appended_lists.py; one grown between calls is marked the same way here, when a
call no entry serves finds it longer than the last such call did, with its first items
the same structure, and appended_lists.only_appended holds for it (wherever that code names
the list, the next thing is `.append` or `.extend`: nothing reads its length or items). A
marked list is guarded without its items; a traced run that reads it or changes it
otherwise runs eagerly (appended_lists.grown), as for the lists a step appends to."""
from . import appended_lists, symbolic_args
from .attr_writes import Slots

_PREFIX = "structure of "


def newly_grown(cf, guards, args, kwargs):
    """Note the structures of the lists in a call's guards (a call no entry serves); mark
    those that grew since the last such call and that the code only appends to; True if
    one was marked (the caller collects the call again)."""
    seen, grown = cf._numbers_seen, set()
    for path, g in guards:
        if type(path) is not str or not path.startswith(_PREFIX) or type(g) is not tuple or \
                len(g) != 2 or g[0] is not list:
            continue
        before = seen.get(("list", path))
        seen[("list", path)] = g
        if before is not None and len(g[1]) > len(before[1]) and \
                g[1][:len(before[1])] == before[1]:
            grown.add(path[len(_PREFIX):])
    if not grown:
        return False
    slots = Slots(cf.fn, args, kwargs)
    lists = [(holder, tuple(root[1] for root, steps, _ in slots.handles.get(id(holder), ())
                            if root[0] == "arg" and not steps))
             for holder, _, _, path, _ in slots.places
             if type(holder) is list and path in grown and
             not appended_lists.marked(holder, path, cf._dynamic) and
             appended_lists.only_appended(slots, holder)]
    if not lists:
        return False
    before = cf._dynamic
    appended_lists.mark(cf, lists, symbolic_args._forget_fast_paths)
    return cf._dynamic != before
