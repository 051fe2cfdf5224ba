"""llgrad.multiprocessing, as torch.multiprocessing: Python's multiprocessing (llgrad's
tensors are NumPy arrays, pickled as copies, but those share_memory_ moved to shared memory
reach another process as that memory: runtime/process_sharing.py), the sharing-strategy
settings scripts set, and spawn(fn, args, nprocs).

A distributed job runs on MPI here (`mpiexec -n N python train.py`, llgrad.distributed): a
process spawn() starts is a job of one rank of its own, so init_process_group there sees a
world of 1 and says so."""
import multiprocessing as _mp
import traceback
from multiprocessing import *  # noqa: F401,F403 (torch.multiprocessing re-exports it)
from multiprocessing import get_context

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = ["file_descriptor"]

__all__ = list(getattr(_mp, "__all__", [])) + [
    "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies", "spawn",
    "start_processes", "ProcessRaisedException", "ProcessExitedException"]


def get_all_sharing_strategies():
    return set(_STRATEGIES)


def get_sharing_strategy():
    return _strategy[0]


def set_sharing_strategy(new_strategy):
    """Kept for scripts that set it: shared memory always travels as a file descriptor."""
    if new_strategy not in _STRATEGIES:
        raise AssertionError(f"invalid sharing strategy {new_strategy!r}")
    _strategy[0] = new_strategy


class ProcessRaisedException(Exception):
    """A spawned process raised: its traceback is the message, as torch's."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


class ProcessExitedException(Exception):
    def __init__(self, msg, error_index, error_pid, exit_code):
        super().__init__(msg)
        self.error_index, self.pid, self.exit_code = error_index, error_pid, exit_code


def _wrap(fn, i, args, errors):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:                   # noqa: BLE001 (sent to the parent, raised there)
        errors.put((i, traceback.format_exc()))
        raise SystemExit(1)


class ProcessContext:
    def __init__(self, processes, errors):
        self.processes, self.error_queue = processes, errors

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        """True once every process ended; raises (as torch) the first failure."""
        for p in self.processes:
            p.join(timeout)
        if any(p.is_alive() for p in self.processes):
            return False
        if not self.error_queue.empty():
            i, tb = self.error_queue.get()
            for p in self.processes:
                if p.is_alive():
                    p.terminate()
            raise ProcessRaisedException(f"\n\n-- Process {i} terminated with the following "
                                         f"error:\n{tb}", i, self.processes[i].pid)
        for i, p in enumerate(self.processes):
            if p.exitcode:
                raise ProcessExitedException(f"process {i} terminated with exit code "
                                             f"{p.exitcode}", i, p.pid, p.exitcode)
        return True


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run fn(i, *args) in nprocs processes (i = 0 .. nprocs - 1), as
    torch.multiprocessing.start_processes: joined (a ProcessContext otherwise)."""
    ctx = get_context(start_method)
    errors = ctx.SimpleQueue()
    processes = [ctx.Process(target=_wrap, args=(fn, i, args, errors), daemon=daemon)
                 for i in range(nprocs)]
    for p in processes:
        p.start()
    context = ProcessContext(processes, errors)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """As torch.multiprocessing.spawn (start_processes with the spawn method)."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
