"""IR graph -> one LLVM module with one exported entry (build.py), compiled (or found in
the memory and disk caches) into a Kernel.

`supports(graph)` says whether every node has a lowering (and the first that has none);
`lower(graph)` raises Unsupported naming that node otherwise.

`build_lock(key)` makes one build per key at a time; builds of other keys go on beside it
(a forward's Python lowering while its backward's LLVM runs in the compile worker). A
process that forks while another thread holds one (mid-compile) would leave it locked for
good in the child: the child re-initialises them, and the locks of the libraries built
under them (os.register_at_fork below; jit.py makes sure the child never inherits LLVM
mid-call)."""
import contextlib
import gc
import os
import re
import threading
import warnings
import weakref

from . import control  # noqa: F401  (cond, while_loop: their lowerings join the table)
from .build import (Unsupported, blas_available, call_table, emit_plan,  # noqa: F401
                    plan_graph, simplify, supports, unsupported)
from .entry_table import uses_table
from .kernel import TAIL, Kernel
from ..ir.verify import VerifyError
from .lowerings.ops_matmul import small_gemm_bound
from .lowerings.shared_weight_gemm import enabled as shared_weight_gemm
from .native.threadcount import RUN as THREAD_CALL
from .lowerings import gemm
from .lowerings.pool import ensure_pool
from . import prepared, size_params
from .native import disk_only, jit, keys, timeline, worker
from .schedule import concat, copy_into
from .schedule.plan import root_of

# (striped: a lock per key would grow without bound; two keys sharing a stripe only wait)
_build_locks = tuple(threading.Lock() for _ in range(64))


def build_lock(key):
    """The lock a build of cache key `key` (hex) holds."""
    return _build_locks[int(key[:8], 16) % len(_build_locks)]


def lower(graph, *, blas=True, opt=True, clusters=True, release=(), share_sizes=False,
          emitted=None, sibling=None, text=None):
    """Compile graph to a Kernel (raises Unsupported when supports(graph) is False).

    emitted: called (no arguments) once the module is made, as LLVM starts on it in the
    compile worker: this build's Python is done, so another's may run without sharing the
    GIL with it (an entry's backward waits for its forward's: background.py).

    release: positions of inputs the caller lets go of during the call (a backward's saved
    values). Where every read of them comes before the groups that first write some large
    outputs, the entry is split in two (release_split): the launch drops its references
    to those inputs after the first part and only then allocates the late outputs, so the
    saved activations and the big gradients are not all alive at once.

    share_sizes: a graph that differs from one lowered before only in its numbers (a new
    batch size) may run code shared between its sizes (size_params.py), compiled once for
    the family, with its numbers as run-time values; LLGRAD_SHARE_SIZES=0 turns it off.
    sibling: () -> the graph at another size (a size template's traced one): a partner the
    shared code is derived with, so a family's first build is already that code, not a
    build of this size's own first and of the shared code at the next size.

    The code is looked up by its key (the graph's IR text and the options, see
    keys.key_for) in memory and in the disk cache first; a hit skips building the LLVM
    module, optimisation and code generation. The plan the Kernel runs comes from the
    graph, or from the disk cache's entry for the traced graph's text and these options
    (prepared.py): a warm process neither simplifies nor plans; the code's key covers the
    plan, so a hit runs exactly the code that plan describes.

    text: str(graph), where the caller printed it already (printing a 1,000-op graph
    takes ~20 ms)."""
    timeline.mark(f"build start {graph.name}")
    return _lower(graph, blas, opt, clusters, release, share_sizes, emitted or _nothing,
                  sibling, text)


def _nothing():
    pass


_gc_lock = threading.Lock()
_gc_callers = [0, False]        # (lowerings under way, whether the collector was on before)


@contextlib.contextmanager
def _gc_paused():
    """Python's cyclic collector off while a graph is planned and emitted (a decorator of
    those steps, not around LLVM's build, which a background build's caller waits seconds
    for while the user's thread allocates): they make some 10^5 objects, each allocation
    counting toward a full collection over the whole heap (the traced graphs, the model),
    which took 40% of a lowering's time. The last of concurrent pauses puts the collector
    back as the first found it."""
    with _gc_lock:
        if _gc_callers[0] == 0:
            _gc_callers[1] = gc.isenabled()
            gc.disable()
        _gc_callers[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_callers[0] -= 1
            if _gc_callers[0] == 0 and _gc_callers[1]:
                gc.enable()


def _lower(graph, blas, opt, clusters, release, share_sizes, emitted, sibling=None, text=None):
    traced = graph
    graph, plan, split, key, name, family = _prepare_cached(graph, blas, opt, clusters,
                                                            release, text)
    also = (name + TAIL,) if split else ()
    bind = None
    with disk_only.held(build_lock(key)):   # one build per key, even from several threads
        # (an entry on disk that lacks a symbol is treated as missing: built again)
        compiled = jit.lookup(key, name, before_load=_pool_if_threaded, also=also)
        built = compiled is None
        if built:
            partner = sibling and (sibling, blas, opt, clusters, release)
            shared, was_emitted = _shared(plan, split, name, key, family, also, opt,
                                          emitted, partner) if share_sizes else (None, False)
            if shared is None:
                if was_emitted:     # (a plan is emitted once: its groups' states keep what the
                    # first emission made, as a region's function and its slots)
                    graph, plan, split = _prepare(traced, blas, opt, clusters, release)[:3]
                mod = _emit(plan, name, split)
                emitted()
                compiled = jit.compile_module(mod, [name, *also], opt=opt, key=key)
            else:
                compiled, name, bind, built = shared
        if bind is None and share_sizes:    # (weakly: a function that is gone frees it)
            jit.jit().size_families.remember(family, key, (weakref.ref(traced), blas, opt,
                                                           clusters, release))
    kernel = Kernel(traced, plan, compiled, name, split, bind=bind)
    kernel.cache_key, kernel.built_llvm = key, built
    kernel.shares_sizes = bind is not None
    kernel.size_table = bind.table if bind is not None else None     # (for dumps)
    return kernel


@_gc_paused()
def _prepare_cached(graph, blas, opt, clusters, release, text=None):
    """_prepare's tuple, from the disk cache where an earlier process made it
    (prepared.py)."""
    settings = (f"blas={blas and blas_available()};small_gemm={small_gemm_bound()};"
                f"opt={opt};clusters={clusters};release={tuple(release)};"
                f"concat={concat.ENABLED};copy_into={copy_into.ENABLED};"
                f"shared_weight={shared_weight_gemm()}")
    pre = prepared.key_of(graph, settings, text)
    found = prepared.load(pre)
    if found is not None and not prepared.CHECK:
        return found
    if found is None:       # (a build is likely: LLVM's process starts while this plans)
        worker.prestart()
    timeline.mark(f"plan start {graph.name}")
    with gemm.libraries_asked() as libraries:
        made = _prepare(graph, blas, opt, clusters, release)
    timeline.mark("plan end")
    if found is None:
        prepared.store(pre, made, libraries)
    elif found[3] != made[3]:
        raise AssertionError(f"llgrad: the prepared {graph.name} in the disk cache plans "
                             f"otherwise than preparing it now (LLGRAD_CHECK_PREPARED)")
    return found or made


@_gc_paused()
def _prepare(graph, blas, opt, clusters, release):
    """The graph native code computes, its plan, the release split, the cache key, the
    entry's name and the family key (the key without the graph's numbers)."""
    graph = simplify(graph)      # (composites expanded: ir/decompose.py)
    bad = unsupported(graph)
    if bad is not None:
        raise Unsupported(*bad)
    options = {"blas": blas and blas_available(), "small_gemm": small_gemm_bound()}
    plan = plan_graph(graph, options, clusters)
    split = release_split(plan, release)
    if uses_table(plan):        # (the table is data: made on a cache hit as well)
        plan.call_table = call_table(plan, split and split[0])
    text = str(graph)
    settings = (f"blas={options['blas']};small_gemm={options['small_gemm']};opt={opt};"
                f"shared_weight={shared_weight_gemm()};")
    key = keys.key_for(text, f"{settings}split={split and split[0]};{plan.describe()}")
    # (the family: the same graph but for its numbers, grouped the same way: a plan whose
    # groups change with size, as at batch 1, starts a family of its own)
    groups = ";".join(f"{g.loop}:{' '.join(n.op for n in g.members)}" for g in plan.groups)
    family = keys.key_for(size_params.family_text(text), size_params.family_text(
        f"{settings}split={split and split[0]};{groups}"))
    name = f"llgrad_{re.sub(r'[^0-9A-Za-z_]', '_', graph.name)[:40]}_{key[:16]}"
    return graph, plan, split, key, name, family


@_gc_paused()
def _emit(plan, name, split, shared=False):
    """The module of a plan; shared: in the form code shared between sizes takes (every
    loop that may thread has its run-time thread count, parallel.py)."""
    mod = jit.new_module(name)
    mod.threads_by_size = shared
    emit_plan(mod, plan, name, split=split and split[0], table=uses_table(plan))
    if THREAD_CALL in mod.globals:
        ensure_pool()
    return mod


def _shared(plan, split, name, key, family, also, opt, emitted, partner=None):
    """((compiled, entry name, bind, built) of code shared with the family's other sizes
    (size_params.py), or None: specialise; whether plan was emitted). partner: (graph
    maker, options) of the graph at another size (lower's sibling)."""
    families = jit.jit().size_families
    if os.environ.get("LLGRAD_SHARE_SIZES", "1") == "0" or families.refused(family):
        return None, False
    lasts = [(k, args) for k, args in families.last(family) if k != key]
    templates = families.templates(family)
    if partner is not None:     # (first: the same function at another size)
        lasts = [(None, partner)] + lasts
    if not templates and not lasts:
        return None, False
    mod = _emit(plan, name, split, shared=True)
    for t in templates:
        compiled = t.compiled
        table = _matched(t, mod, name) if compiled is not None else None
        if table is not None:
            return (compiled, t.name, _binder(t, compiled, table), False), True
    for _, (graph_ref, *options) in lasts:  # (the most recent size first: a template of
        made = _derived(mod, name, graph_ref(), options)    # this size's class)
        if made is not None:
            break
    else:
        return None, True
    t, tkey = made
    entries = [name, name + size_params.SETTER, *also]
    try:
        compiled = jit.lookup(tkey, name, before_load=_pool_if_threaded, also=entries[1:])
        built = compiled is None
        if built:
            emitted()
            compiled = jit.compile_module(mod, entries, opt=opt, key=tkey)
    except Exception as e:      # (LLVM refused a parameter where it wants a constant)
        families.refuse(family)
        warnings.warn(f"llgrad: sizes not shared for {name}: {e}", RuntimeWarning)
        return None, True
    t.compiled = compiled
    families.add(family, t)
    return (compiled, t.name, _binder(t, compiled, size_params.base_table(t)), built), True


def _derived(mod, name, graph, options):
    """(the Template of mod against graph, another size's, and its key), or None."""
    if graph is None:
        return None
    try:
        _, plan, split, _, _, _ = _prepare(graph, *options)
    except (Unsupported, VerifyError):  # (a graph typed under another default dtype: its
        return None                     # int * 2.5 is float32 there, float64 now)
    return _template(mod, _emit(plan, name, split, shared=True), name)


@_gc_paused()
def _matched(template, mod, name):
    return size_params.match(template, mod, name)


@_gc_paused()
def _template(mod, previous, name):
    """(the Template made of mod, where it differs from previous in numbers only, and its
    cache key), or None."""
    positions = size_params.derive(mod, name, previous, name)
    if positions is None:
        return None
    t = size_params.parametrize(mod, name, positions)
    return t, keys.key_for(str(mod), "sizes")


def _binder(template, compiled, table):
    setter = Kernel._native_fn(compiled.address(template.name + size_params.SETTER))

    def bind(fn):
        return size_params.bind(fn, setter, table, template.lock)
    bind.table = table
    return bind


def _pool_if_threaded(code):
    """A kernel that starts threads gets the pool's (pool.py), if its code (the object
    file's bytes, where the symbol's name is, or its IR text) calls for them: built before
    the kernel's code is linked, and only then (most kernels never thread)."""
    if (THREAD_CALL.encode() if isinstance(code, (bytes, bytearray))
            else THREAD_CALL) in code:
        ensure_pool()


def _reinit_locks_in_child():
    for lock in (*_build_locks, gemm._lock, _gc_lock):
        lock._at_fork_reinit()
    if _gc_callers[0]:          # (a lowering on another thread of the parent: not here)
        _gc_callers[0] = 0
        if _gc_callers[1]:
            gc.enable()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_locks_in_child)


SPLIT_MIN_BYTES = 1 << 18


def _and_parents(b):
    """b and the buffers it is a block of (a slice is written through them: concat.py)."""
    while b is not None:
        yield b
        b = b.parent


def release_split(plan, release):
    """(first group of the tail, slots of the outputs the tail allocates, released input
    positions) or None: the tail starts after the last group that reads a released input;
    its late outputs are those no group before it touches. An input a result is made from
    (returned, or a view of it returned) or that is written in place is never let go of.
    None where a check precedes a write in place: a failed check returns from the first
    part only, and the tail would still write."""
    if not release or plan.stacks or plan.lengths or (plan.flags and plan.in_place):
        return None
    kept = {id(plan.buffers[root_of(v)]) for v in plan.escaping} | \
        {id(plan.buffers[plan.graph.inputs[k]]) for k in plan.graph.mutated}
    bufs = {id(plan.buffers[v]): k for k, v in enumerate(plan.graph.inputs)
            if k in release and v in plan.buffers and id(plan.buffers[v]) not in kept}
    touched = [{id(x) for b in plan.group_buffers(g) for x in _and_parents(b)}
               for g in plan.groups]
    # (set against set: the smaller one is iterated; a loop over bufs for every group was
    # quadratic in an unrolled loop's backward)
    ids = set(bufs)
    reads = [i for i, t in enumerate(touched) if not t.isdisjoint(ids)]
    start = reads[-1] + 1 if reads else 0
    if start == 0 or start >= len(plan.groups):
        return None
    early = set().union(*touched[:start])
    late = [b for b in plan.outputs if id(b) not in early]
    released = sorted(set(bufs.values()))
    freed = sum(plan.buffers[plan.graph.inputs[k]].nbytes for k in released)
    if sum(b.nbytes for b in late) < SPLIT_MIN_BYTES or freed < SPLIT_MIN_BYTES:
        return None
    return start, tuple(b.slot for b in late), tuple(released)
