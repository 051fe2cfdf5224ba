"""A compiled function's sizes that vary between calls (torch.compile's automatic dynamic):
what it keeps of them and the steps of `__call__` that use it.

    expecting   around a trace: the sizes the latest entry at another size read, so that
                the user's code is handed SymInts where its reads differ (runtime/size_reads)
    redo_plain  after a trace that handed out SymInts: if its entry does not fit the earlier
                one but in sizes, or the user's code used a size otherwise than as a size,
                the call is put back and traced again with ints; if it fits, the SymInts
                its own writes left in the user's objects become the ints eager leaves
    learn       after a trace kept: its template with the earlier entry (size_templates)
    served      a call at a new size: its entry made from a template, no trace

A function whose code reads its batch size (`B, T, C = x.shape`, then `view(B * T, C)`,
`arange(T)`, `mask[:T, :T]`) is handed the reads that differ from its first trace's as
SymInts in the second: not ints, so every use Python makes of one calls it and is seen
(arithmetic, comparisons re-checked at each size; a use as a plain number, an index,
range(), NumPy, text, a dict key, refuses the template and the call traces again with ints).
LLGRAD_DYNAMIC_SIZES=same: the user's code must read the same sizes in both traces (such a
function traces each size). `torch.compile(dynamic=False)` or LLGRAD_DYNAMIC_SIZES=0: every
size traces."""
import os

from ..runtime import size_reads
from ..runtime.size import Size
from ..runtime.sym_int import SymInt
from . import log
from .entry import Entry
from .size_confirm import confirms
from .size_templates import NoTemplate, _symbol, fit, instantiate, plain
from .snapshot import bound, put_back


class FunctionSizes:
    """Per compiled function: its templates; the expectation of the trace running (its
    SizeReads once made); the template of that trace, fitted early; whether the next trace
    reads plain ints (a redo); how many traces with SymInts were redone (from MAX_REDOS on,
    or once its code used a size as a plain number, it reads plain ints), and how many
    traces that made in all (`redone`: not counted against the recompile limit, nor are the
    `raised` traces: raised, nor the traces with numbers' stand-ins done again with their
    values, `restarted`: symbolic_args.retry)."""
    __slots__ = ("templates", "expectation", "fitted", "plain_next", "redos", "redone",
                 "raised", "restarted")

    def __init__(self):
        self.templates, self.expectation, self.fitted, self.plain_next = [], None, None, False
        self.redos = self.redone = self.raised = self.restarted = 0


# (a trace with SymInts that does not fit may be the sizes' doing, not theirs: a sequence
# as long as a causal mask slices nothing, which at any other length it slices; the next
# pair of sizes may fit, at the cost of one more trace)
MAX_REDOS = 2


def _on(cf):
    return cf.dynamic_sizes and os.environ.get("LLGRAD_DYNAMIC_SIZES") != "0"


def _handing_out():
    return os.environ.get("LLGRAD_DYNAMIC_SIZES") != "same"


def _partner(cf, items):
    """The latest traced entry of cf at another size of one symbol, and that symbol, or None."""
    for other in reversed(cf.entries):
        if isinstance(other, Entry) and other.size_reads is not None:
            try:
                return other, _symbol(other.guard_items, items)
            except NoTemplate:
                continue
    return None


def expecting(cf, items):
    """Around a trace: the reads of the entry at another size it may fit, if any."""
    state = cf._sizes
    state.expectation = state.fitted = None
    plain, state.plain_next = state.plain_next or state.redos >= MAX_REDOS, False
    found = not plain and _handing_out() and _on(cf) and cf.entries and \
        _partner(cf, items)
    state.expectation = size_reads.Expectation(*found) if found else None
    return size_reads.expecting(state.expectation)


def _symbolic(cf):
    e = cf._sizes.expectation
    return e is not None and e.reads is not None and e.reads.symbolic


def retry_plain(cf, exc, snapshot):
    """A trace that handed out SymInts raised: put back what it did; True: call again (it
    traces with ints: the error, if the user's, is raised then, as eager's)."""
    if not _symbolic(cf) or not isinstance(exc, Exception):
        return False
    if log.enabled("recompiles"):
        log.emit("recompiles", "%s: traced again with plain sizes: with sizes as SymInts it "
                 "raised %s: %s", getattr(cf.fn, "__name__", "fn"), type(exc).__name__, exc)
    snapshot.restore()
    cf._sizes.plain_next, cf._sizes.redos = True, MAX_REDOS
    cf._sizes.redone += 1
    return True


def redo_plain(cf, entry, snapshot, inputs):
    """After a trace that handed out SymInts: its template with the earlier entry, or, if
    they do not fit, the call put back (True: call again, traced with ints)."""
    if not _symbolic(cf):
        return False
    entry.bumps = snapshot.bumps(inputs, entry)     # (as the kept path sets it: fitted too)
    try:
        cf._sizes.fitted = fit(cf._sizes.expectation.entry, entry)
        _plain_state(snapshot)
        return False
    except NoTemplate as e:
        if log.enabled("recompiles"):
            log.emit("recompiles", "%s: traced again with plain sizes: %s", entry.name, e)
    snapshot.restore()
    state = cf._sizes
    state.plain_next = True
    state.redos = MAX_REDOS if state.expectation.reads.refused else state.redos + 1
    state.redone += 1
    return True


def _plain_state(snapshot):
    """The SymInts the traced run's own writes left in what the call reaches (`box.n = B`,
    `self.shape = (B, T)`), made the ints an eager run leaves there."""
    for c, _ in snapshot.containers:
        items = c if isinstance(c, (list, dict)) else vars(c)
        for k, v in (enumerate(items) if isinstance(items, list) else list(items.items())):
            new = _plain_value(v)
            if new is not v:
                if isinstance(c, (list, dict)):
                    c[k] = new
                else:
                    setattr(c, k, new)
    for where, _ in snapshot.names:
        v = bound(where)
        new = _plain_value(v)
        if new is not v:
            put_back(where, new)


def _plain_value(v, depth=0):
    if type(v) is SymInt:
        return v.plain()
    if depth < 3 and type(v) in (tuple, list, Size) and any(
            type(x) is SymInt or type(x) in (tuple, list, Size) for x in v):
        new = [_plain_value(x, depth + 1) for x in v]
        if all(a is b for a, b in zip(new, v)):
            return v            # (nothing of a trace's in it: the same object)
        if type(v) is list:
            v[:] = new
            return v
        return type(v)(new)
    return v


def learn(cf, entry, own_key):
    """After a trace kept, before its entry is: its graphs made plain of SymInts, and a
    template of it and the entry its sizes were read against, if they fit (own_key: kept
    under its call's full guard key)."""
    state = cf._sizes
    if entry.size_reads.symbolic:
        plain(entry)
    template, state.fitted = state.fitted, None
    found = template is None and own_key and _on(cf) and _partner(cf, entry.guard_items)
    if found:
        try:
            template = fit(found[0], entry)
        except NoTemplate as e:
            if log.enabled("recompiles"):
                log.emit("recompiles", "%s: new sizes trace again: %s", entry.name, e)
    if own_key and _confirmed(cf, entry):
        return
    if template is not None and own_key:
        state.templates.append(template)


def _confirmed(cf, entry):
    """A trace at a third size: each template that waits for one (an affine rule: two sizes
    fit any) made whole if entry is what it makes at that size, else dropped -> whether one
    was (the new trace's own template, its equal, is then not kept)."""
    state, done = cf._sizes, False
    for t in [t for t in state.templates if not t.confirmed]:
        ok = confirms(t, entry)
        if ok is None:      # (a call of another key: no evidence either way)
            continue
        t.confirmed, done = ok, done or ok
        if not ok:
            state.templates.remove(t)
        if log.enabled("recompiles"):
            log.emit("recompiles", "%s: the trace at a third size %s an affine size template",
                     entry.name, "confirms" if ok else "does not confirm (dropped)")
    return done


def traces_to_limit(cf):
    """The traces that count against cf's recompile limit: a trace done again with plain
    ints, or with its numbers' values, is the same call's (as Dynamo's restarted analysis);
    a trace that raised kept nothing (raised)."""
    return cf.n_traces - cf._sizes.redone - cf._sizes.raised - cf._sizes.restarted


def raised(cf):
    """A traced call raised the user's exception: it kept no entry, so the calls that raise
    (a step skipping a bad batch by raising, caught by its loop) are eager runs, each traced
    again, not recompiles: counted against the limit, a few of them would make every later
    new shape (the epoch's last, shorter batch) run eagerly with the limit's warning."""
    cf._sizes.raised += 1


def served(cf, guards, key, n_own):
    """A call at a new size: its entry made from a template and kept under key -> True."""
    for template in reversed(cf._sizes.templates):
        if key in template.keys or not template.confirmed:
            # (made for this key before, its value guards failed; affine, awaiting a trace)
            continue
        entry = instantiate(template, guards)
        if entry is not None:
            template.keys.add(key)
            cf.entries.append(entry)
            cf._add(key, n_own, entry)
            template.uses += 1
            return True
    return False
