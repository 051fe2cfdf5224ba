"""Native builds off the caller's thread: a call never waits for LLVM.

With the llvm backend, the first call that needs an entry's native code (the call after the
trace) hands the entry to one worker thread, which lowers and compiles its forward while a
second thread does its backward (`beside`: LLVM runs in the compile worker's process, so
one graph's Python lowering goes on while the other's code is generated). Until the
forward's code is ready, calls run the function eagerly, exactly as they would without
compile (run.py), so the caller goes on at eager speed while LLVM works on the other
core; calls switch to the entry at the first call after its forward was built. A backward
whose code is not ready yet runs on the IR interpreter (the reference native code is tested
against): a native forward and an interpreted backward fit together, both keep the same
saved values.

LLGRAD_COMPILE=sync builds on the calling thread instead, before the call runs (benchmarks
that time steady state; tests that inspect kernels right after a call); the backward is
built beside the forward there too, and its first call waits for it. `wait(entry)` waits
for an entry's build (dumps and explain show native code).

A build that fails runs the graph on the interpreter for good, with a warning naming the
error at the next call; warnings of the build itself (a graph not lowered to LLVM) are given
then too, on the caller's thread (where its warning filters apply), not the worker's. One
worker serves all entries, in the order they asked; after os.fork the child starts its own
when it next needs one (a build the parent had under way is queued again).

While a build runs, the interpreter's switch interval is SWITCH_SECONDS (0.5 ms, not 5 ms):
the caller's thread gives the GIL up at every NumPy call on a large array, the worker takes
it, and the caller waited up to the whole interval to get it back (measured: the first
steps of a training loop ~25% slower while the worker lowered its graph; half of that is
gone at 0.5 ms). The interval the process had is put back when no build runs."""
import os
import queue
import sys
import threading
import traceback

_lock = threading.Lock()
_state = {"queue": None, "worker": None, "generation": 0, "last": None,
          "beside": set()}      # (sync's backward builds under way: wait_all waits for them)
_local = threading.local()          # .building: this thread is the worker; .job: its build


def enabled(entry):
    """Whether entry's graphs build in the background (else on the caller's thread): not
    when they were compiled before by a process sharing the disk cache (a hint left
    there), as loading them takes less than running calls eagerly meanwhile."""
    return entry.backend.name == "llvm" and \
        os.environ.get("LLGRAD_COMPILE", "background") != "sync" and \
        not getattr(_local, "building", False) and not _compiled_before(entry)


def _graphs(entry):
    return ("forward",) if entry.backward is None else ("forward", "backward")


def graph_text(entry, which):
    """entry's `which` graph as text, printed once: the hint's key and the key of its
    prepared plan (codegen/prepared.py) are both made from it (~20 ms at 1,000 ops)."""
    text = entry._cache_hints.get(("text", which))
    if text is None:
        text = entry._cache_hints[("text", which)] = str(getattr(entry, which))
    return text


def _hint(entry, which):
    name = entry._cache_hints.get(which)
    if name is None:
        from ..codegen.native.keys import key_for
        name = entry._cache_hints[which] = key_for(graph_text(entry, which),
                                                   "compiled before")
    return name


def _compiled_before(entry):
    if entry._compiled_before is None:
        from ..codegen.native import cache, host, jit
        # (a host not described in the cache yet: nothing was built into it on this
        # machine, and the key would wait for LLVM's description)
        entry._compiled_before = (jit.made() or host.known()) and \
            all(cache.seen(_hint(entry, which)) for which in _graphs(entry))
    return entry._compiled_before


def built(entry, which):
    """Leave the hint that entry's `which` graph was compiled (native code built)."""
    from ..codegen.native import cache
    cache.mark_seen(_hint(entry, which))


class Job:
    """An entry's build: done once both graphs have a run (native, or the interpreter's
    after a failure); error is the failure's text and notes the build's warnings until
    they are reported."""
    __slots__ = ("entry", "done", "error", "notes", "generation", "forward_emitted")

    def __init__(self, entry, generation):
        self.entry, self.error, self.notes, self.generation = entry, None, [], generation
        self.done = threading.Event()
        # (set when the forward's module goes to LLVM, or its build ends: the backward's
        # Python waits for it rather than share the GIL with the forward's, whose code
        # the first native call needs first)
        self.forward_emitted = threading.Event()


def forward_emitted(entry):
    """The forward's Python lowering of entry is done (its module is with LLVM, or its
    build ended): its backward's build, waiting beside it, may start."""
    job = entry._build_job
    if job is not None:
        job.forward_emitted.set()


def request(entry, build):
    """Queue entry's build if it is not built, queued or under way; its Job (or None when
    every graph already has its run). build(entry, which, interpreter=False) makes and
    keeps a graph's run (backends.build_now)."""
    if entry._forward_run is not None and (entry.backward is None or
                                           entry._backward_run is not None):
        return None
    with _lock:
        job = entry._build_job
        if job is not None and job.generation == _state["generation"]:
            return job
        job = entry._build_job = Job(entry, _state["generation"])
        q = _state["queue"]
        if q is None or _state["worker"] is None or not _state["worker"].is_alive():
            q = _state["queue"] = queue.SimpleQueue()
            worker = threading.Thread(target=_work, args=(q, build), name="llgrad-compile",
                                      daemon=True)
            _state["worker"] = worker
            worker.start()
        q.put(job)
        _state["last"] = job
    from ..codegen.native import worker
    worker.prestart()
    return job


def wait(entry):
    """Wait for entry's build, if one is queued or under way."""
    job = entry._build_job
    if job is not None and job.generation == _state["generation"]:
        job.done.wait()


def wait_all():
    """Wait for every build queued so far (one worker takes them in order: the last one
    queued ends after all the others), and for sync's backward builds beside a forward;
    tests wait so that no build outlives its test."""
    with _lock:
        jobs = [_state["last"], *_state["beside"]]
    for job in jobs:
        if job is not None and job.generation == _state["generation"]:
            job.done.wait()


def defer(message):
    """On the worker, keep a warning of the build for the caller's thread (True); else
    False (the caller warns now)."""
    job = getattr(_local, "job", None)
    if job is None:
        return False
    with _lock:
        job.notes.append(message)
    return True


def pending(entry):
    """Whether entry's build has a failure or warnings not reported yet."""
    job = entry._build_job
    return job is not None and (job.error is not None or bool(job.notes))


def reports(entry):
    """(the warnings, the failure's text or None) of entry's background build, once."""
    job = entry._build_job
    if job is None or (job.error is None and not job.notes):
        return [], None
    with _lock:
        notes, error = job.notes, job.error
        job.notes, job.error = [], None
    return notes, error


SWITCH_SECONDS = 0.0005
_switch = {"builds": 0, "saved": None}


def quick_switches(on):
    """A build starts (on) or ends: the switch interval is SWITCH_SECONDS while any runs
    (this worker's or eager_native's), and what it was before once none does (unless
    someone set another meanwhile)."""
    with _lock:
        if on:
            _switch["builds"] += 1
            if _switch["builds"] == 1 and sys.getswitchinterval() > SWITCH_SECONDS:
                _switch["saved"] = sys.getswitchinterval()
                sys.setswitchinterval(SWITCH_SECONDS)
            return
        _switch["builds"] -= 1
        saved = _switch["saved"]
        if _switch["builds"] == 0 and saved is not None:
            _switch["saved"] = None
            if abs(sys.getswitchinterval() - SWITCH_SECONDS) < 1e-6:
                sys.setswitchinterval(saved)


class _Beside(threading.Thread):
    """entry's backward built on a thread of its own, as a part of job (its warnings are
    job's); error: what the build raised, or None."""

    def __init__(self, entry, job, build_now, owns_job=False):
        super().__init__(name="llgrad-compile-backward", daemon=True)
        self.entry, self.job, self.build_now, self.error = entry, job, build_now, None
        self.owns_job = owns_job        # (sync's: the job is done when this build is)

    def run(self):
        _local.building, _local.job = True, self.job
        try:
            self.job.forward_emitted.wait()
            self.build_now(self.entry, "backward")
        except Exception as e:         # noqa: BLE001 (the job's own handling follows)
            self.error = e
        finally:
            if self.owns_job:
                self.job.entry = None
                with _lock:
                    _state["beside"].discard(self.job)
                self.job.done.set()
                quick_switches(False)
            self.entry = self.job = _local.job = None


def _needs_backward(entry):
    return entry.backward is not None and entry._backward_run is None and \
        entry.backend.name == "llvm"


def beside(entry, build_now):
    """On LLGRAD_COMPILE=sync's forward build: start entry's backward build on a thread
    beside it (a Job: `wait(entry)`, at the backward's first call, waits for it). A
    failure there is left for that call, which builds the backward itself and meets it."""
    if not _needs_backward(entry):
        return
    with _lock:
        job = entry._build_job
        if job is not None and job.generation == _state["generation"] and \
                not job.done.is_set():
            return
        job = entry._build_job = Job(entry, _state["generation"])
        _state["beside"].add(job)
    quick_switches(True)
    _Beside(entry, job, build_now, owns_job=True).start()


def _work(q, build_now):
    _local.building = True
    while True:
        job = q.get()
        entry, _local.job = job.entry, job
        quick_switches(True)
        try:
            other = _Beside(entry, job, build_now) if _needs_backward(entry) else None
            if other is not None:
                other.start()
            try:
                if entry._forward_run is None:
                    build_now(entry, "forward")
            finally:
                job.forward_emitted.set()
                if other is not None:
                    other.join()
            if other is not None and other.error is not None:
                raise other.error
            if entry.backward is not None and entry._backward_run is None:
                build_now(entry, "backward")
        except Exception as e:         # noqa: BLE001 (any failure: the interpreter instead)
            error = "".join(traceback.format_exception_only(type(e), e)).strip()
            with _lock:
                job.error = error
            for which in ("forward", "backward"):
                if getattr(entry, f"_{which}_run") is None and \
                        (which == "forward" or entry.backward is not None):
                    build_now(entry, which, interpreter=True)
        finally:
            quick_switches(False)
            job.entry = _local.job = None   # (the entry no longer reachable from its job)
            job.done.set()
        del job, entry          # (not kept alive by this thread until the next build)


def _drop_half_imported():
    """Forget the modules of llgrad and LLVM's binding that the parent's worker was still
    importing when the process forked: the child holds their half-run bodies with no thread
    to finish them, and its own build failed on a name not yet defined ("partially
    initialized module"); forgotten, the child's build imports them afresh."""
    for name, m in list(sys.modules.items()):
        if name.startswith(("llgrad.", "llvmlite")) and \
                getattr(getattr(m, "__spec__", None), "_initializing", False):
            del sys.modules[name]


def _after_fork_in_child():
    global _lock
    _lock = threading.Lock()
    if _switch["builds"]:           # (a build was under way on another thread of the parent)
        _drop_half_imported()
    if _switch["saved"] is not None and _switch["builds"]:     # (no build runs here)
        sys.setswitchinterval(_switch["saved"])
    _switch.update(builds=0, saved=None)
    _state["queue"] = _state["worker"] = _state["last"] = None
    _state["beside"] = set()
    _state["generation"] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
