"""A compiled training step whose backward runs hooks on its input leaves (a parameter's
`register_hook`, its post-accumulate-grad hook: gradient clipping, masking, scaling).

Walking every tensor's hooks on every call would make a function whose results the caller
differentiates (where the engine runs the hooks, outside the compiled code) trace again
whenever a hook comes or goes, and give it the hooks' captured tensors as inputs. So the guard
walk leaves them out until a trace of the function reaches them in a backward of its own
(backward_hooks.hooks_allowed raises UnguardedLeafHooks): that call's effects are put back and
from then on the walk guards each input's hooks by identity and walks what they read as the
function's own reads (guards.WALK_HOOKS, _walk_hooks), so the trace runs them into the graph
and a changed hook, or a global it reads, traces again, and their Python effects on what
they reach are checked as the function's are (snapshot.py, side_effects.py) and replayed as
its are (attr_writes.Slots walks what they read too: leaf_hook_reads)."""
from ..runtime import backward_hooks
from ..runtime.backward_hooks import UnguardedLeafHooks
from .function_reads import captured_reads
from .guards import WALK_HOOKS


def retry_with_hooks(cf, error, snapshot):
    """True (the caller collects the call again) when error is a trace of compiled function
    cf reaching input leaves' hooks its guard walk leaves out: the traced run's effects put
    back, the walk takes hooks from now on."""
    if not isinstance(error, UnguardedLeafHooks) or WALK_HOOKS in cf._dynamic:
        return False
    snapshot.restore()
    cf._dynamic = cf._dynamic | {WALK_HOOKS}
    return True


def leaf_hook_reads(t, seen, funcs):
    """[(where, the guard walk's path, value)] of what the plain-function hooks of tensor t
    read from closure cells and globals, as _walk_hooks walks them (attr_writes.Slots: a
    post-accumulate-grad hook's `log.append(p.grad)` is a write compiled calls replay);
    each hook not in seen (ids) is added to it and to funcs."""
    fns = backward_hooks.leaf_hooks(t)
    out = []
    for f in () if fns is None else fns[0] + fns[1]:
        if id(f) not in seen:
            seen.add(id(f))
            funcs.append(f)
            out += [(where, f"captured {path}", v)
                    for where, v, kind, path in captured_reads(f)[1] if kind == "root"]
    return out
