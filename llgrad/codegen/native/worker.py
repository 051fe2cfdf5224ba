"""The compile worker: LLVM's code generation in a process of its own, so that llgrad's process
never loads LLVM (~80 MB resident of library and heap that stay once touched), whether its
kernels come from the disk cache (elf.py loads them) or are built now.

The worker is started on the first code generation (worker_main.py, run by path: it imports
nothing of llgrad, only llvmlite), kept for the next ones, and exits when its stdin closes (this
process exits) or after worker_main.IDLE_SECONDS without work; it is started again when
needed. Requests go one at a time (a lock: background builds wait for each other as they do
on LLVM's own lock in-process). Anything that goes wrong with the worker (it cannot start,
dies, or replies with an error) makes the caller run LLVM in-process instead: the same
functions (worker_main.generate), so the same machine code, and LLVM's own error where the
module is at fault. LLGRAD_COMPILE_WORKER=0 keeps all code generation in-process."""
import atexit
import importlib.util
import os
import subprocess
import sys
import threading

from . import timeline, worker_main

ENABLED = os.environ.get("LLGRAD_COMPILE_WORKER", "1") != "0"
_MAIN = os.path.abspath(worker_main.__file__)
_LAUNCH = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
# (isolated, without site: the worker needs only llvmlite, whose directory it is given;
# site's .pth files and an editable install's finder cost ~5 ms of its ~0.1 s of CPU to the
# first reply, and the caller's current directory or PYTHONPATH cannot shadow its imports)
_LAUNCH_BARE = "import runpy, sys; sys.path.append(sys.argv[2]); " \
    "runpy.run_path(sys.argv[1], run_name='__main__')"


def _command():
    """The worker's command line: `python -I -S` with llvmlite's directory where it is found
    as a plain package, else the interpreter as this process was started (site decides)."""
    spec = importlib.util.find_spec("llvmlite")
    origin = spec and spec.origin
    if origin and origin.endswith("__init__.py"):
        # (-I ignores PYTHONDONTWRITEBYTECODE: -B keeps the caller's choice)
        flags = ["-I", "-S"] + (["-B"] if sys.flags.dont_write_bytecode else [])
        return [sys.executable, *flags, "-c", _LAUNCH_BARE, _MAIN,
                os.path.dirname(os.path.dirname(origin))]
    return [sys.executable, "-c", _LAUNCH, _MAIN]

_lock = threading.Lock()
_proc = None
_left_behind = []           # a parent's worker, seen from a forked child: never touched
stats = {"started": 0, "generated": 0, "failed": 0}
_broken = []                # the reason the worker cannot be used in this process, if any
_closed = []                # set at exit: a background build asking then runs LLVM here


def _reset():
    """Stop the worker (the next request starts one) and forget failures and counts."""
    global _proc
    with _lock:
        _stop(_proc)
        _proc = None
        _broken.clear()
        stats.update(started=0, generated=0, failed=0)


def _stop(proc):
    if proc is None:
        return
    try:
        proc.stdin.close()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        proc.kill()
    try:
        proc.stdout.close()
    except OSError:
        pass


def _start():
    timeline.mark("worker start")
    proc = subprocess.Popen(_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, close_fds=True)
    stats["started"] += 1
    return proc


def _ask(request):
    """The worker's reply to request, or None (the caller does it in-process)."""
    global _proc
    if not ENABLED or _broken or _closed:
        return None
    with _lock:
        for attempt in (0, 1):          # (once more with a fresh worker: it may have idled out)
            if _proc is None or _proc.poll() is not None:
                if _proc is not None:
                    _stop(_proc)
                try:
                    _proc = _start()
                except OSError as e:    # (no way to start a process here)
                    _broken.append(f"cannot start: {e}")
                    _proc = None
                    return None
                if _closed:             # (started as _at_exit ran: nothing would stop it)
                    _stop(_proc)
                    _proc = None
                    return None
            try:
                timeline.mark(f"sent {request[0]}")
                worker_main._write(_proc.stdin, request)
                reply = worker_main._read(_proc.stdout)
                timeline.mark(f"reply {request[0]}")
            except (OSError, ValueError, EOFError):
                reply = None
            if reply is not None:
                break
            _stop(_proc)
            _proc = None
        else:
            stats["failed"] += 1
            return None
    if isinstance(reply, tuple) and reply and reply[0] == "error":
        stats["failed"] += 1
        return None
    return reply


def running():
    """Whether this process has a worker (started, not yet exited)."""
    proc = _proc
    return proc is not None and proc.poll() is None


def prestart():
    """Start the worker now, without waiting for it (a build is coming: its Python and LLVM
    load while the build's plan is made), unless one runs or the lock is busy."""
    global _proc
    if not ENABLED or _broken or (_proc is not None and _proc.poll() is None):
        return
    if _lock.acquire(blocking=False):
        try:
            if _proc is None or _proc.poll() is not None:
                if _proc is not None:
                    _stop(_proc)
                _proc = _start()
        except OSError as e:
            _broken.append(f"cannot start: {e}")
            _proc = None
        finally:
            _lock.release()


def describe(avx512):
    """The host's description, asked of the worker's LLVM; None: ask in-process."""
    reply = _ask(("describe", avx512))
    return reply if isinstance(reply, dict) else None


def generate(text, host, mode, keep_ir):
    """(object bytes, IR after optimisation or "") from the worker; None: do it in-process."""
    reply = _ask(("generate", text, host, mode, keep_ir))
    if reply is None:
        return None
    stats["generated"] += 1
    return reply


def worker_timeline():
    """The running worker's marks ([(what, monotonic seconds)], LLGRAD_TIMELINE=1), or []."""
    if _proc is None or _proc.poll() is not None:
        return []
    reply = _ask(("timeline",))
    return reply if isinstance(reply, list) else []


def _at_exit():
    # (the eager and compiled builders are daemon threads: one may still ask for code
    # generation while this process exits; _closed sends it to LLVM in-process instead of
    # to a new worker that nothing would stop)
    global _proc
    _closed.append(True)
    proc, _proc = _proc, None
    _stop(proc)


def _after_fork_in_child():
    global _proc, _lock
    _lock = threading.Lock()            # (a thread of the parent may have held it)
    if _proc is not None:
        _left_behind.append(_proc)      # (the parent's: its pipes are the parent's to close)
    _proc = None


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
