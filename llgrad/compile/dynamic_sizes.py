"""A compiled function's sizes that vary between calls (torch.compile's automatic dynamic):
what it keeps of them and the steps of `__call__` that use it.

    expecting   around a trace: the sizes the latest entry at another size read, so that
                the user's code is handed SymInts where its reads differ (runtime/size_reads)
    redo_plain  after a trace that handed out SymInts: if its entry does not fit the earlier
                one but in sizes, the SymInts may have run it otherwise (they are not plain
                ints to every library): the call is put back and traced again with ints
    learn       after a trace kept: its template with the earlier entry (size_templates)
    served      a call at a new size: its entry made from a template, no trace

By default the user's code must read the same sizes in both traces (a function that reads
its batch size, `B, T, C = x.shape`, traces each size); LLGRAD_DYNAMIC_SIZES=reads hands
the reads that differ out as SymInts, an experiment: SymInt is an int subclass, and the uses
CPython makes of an int without calling it (a list indexed by it, range(), NumPy, `0.5 * B`)
are not seen, so a template may stand for a size whose Python would have gone otherwise
(tests/compile/test_size_templates_s67_sz_python.py). `torch.compile(dynamic=False)` or
LLGRAD_DYNAMIC_SIZES=0: every size traces."""
import os

from ..runtime import size_reads
from . import log
from .entry import Entry
from .size_templates import NoTemplate, _symbol, fit, instantiate, plain


class FunctionSizes:
    """Per compiled function: its templates; the expectation of the trace running (its
    SizeReads once made); the template of that trace, fitted early; whether the next trace
    reads plain ints (a redo); and how many traces with SymInts were redone (from
    MAX_REDOS on, or once its code used a size as a plain number, it reads plain ints)."""
    __slots__ = ("templates", "expectation", "fitted", "plain_next", "redos")

    def __init__(self):
        self.templates, self.expectation, self.fitted, self.plain_next = [], None, None, False
        self.redos = 0


MAX_REDOS = 1


def _on(cf):
    return cf.dynamic_sizes and os.environ.get("LLGRAD_DYNAMIC_SIZES") != "0"


def _handing_out():
    return os.environ.get("LLGRAD_DYNAMIC_SIZES") == "reads"


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
    snapshot.restore()
    cf._sizes.plain_next, cf._sizes.redos = True, MAX_REDOS
    return True


def redo_plain(cf, entry, snapshot, inputs):
    """After a trace that handed out SymInts: its template with the earlier entry, or, if
    they do not fit, the call put back (True: call again, traced with ints)."""
    if not _symbolic(cf):
        return False
    entry.bumps = snapshot.bumps(inputs, entry)     # (as the kept path sets it: fitted too)
    try:
        cf._sizes.fitted = fit(cf._sizes.expectation.entry, entry)
        return False
    except NoTemplate as e:
        if log.enabled("recompiles"):
            log.emit("recompiles", "%s: traced again with plain sizes: %s", entry.name, e)
    snapshot.restore()
    state = cf._sizes
    state.plain_next = True
    state.redos = MAX_REDOS if state.expectation.reads.refused else state.redos + 1
    return True


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
    if template is not None and own_key:
        state.templates.append(template)


def served(cf, guards, key, n_own):
    """A call at a new size: its entry made from a template and kept under key -> True."""
    for template in reversed(cf._sizes.templates):
        if key in template.keys:    # (made for this key before, its value guards failed)
            continue
        entry = instantiate(template, guards)
        if entry is not None:
            template.keys.add(key)
            cf.entries.append(entry)
            cf._add(key, n_own, entry)
            template.uses += 1
            return True
    return False
