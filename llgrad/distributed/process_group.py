"""The default process group on MPI: init_process_group (rank and world size from the MPI
launcher, `mpiexec -n N`), its queries, destroy_process_group, and the job-wide abort when
a rank dies of an uncaught exception. mpi4py (and so MPI itself) is imported only here, when
a process group is first made: `import llgrad` does not load it."""
from __future__ import annotations
import datetime
import importlib.util
import os
import sys
import time

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)    # torch's default for CPU backends
_BACKENDS = ("mpi", "gloo")     # gloo: taken as MPI, so a torch CPU script ports unchanged

_default = None        # the default ProcessGroup, once init_process_group ran
_MPI = None


def mpi():
    """mpi4py's MPI module, imported on first use (MPI_Init happens then)."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise RuntimeError(
                "llgrad.distributed needs mpi4py and an MPI library: pip install "
                "'llgrad[mpi]' (or: pip install mpi4py mpich)") from e
        _MPI = MPI
    return _MPI


class ProcessGroup:
    """A group of processes (here: a duplicate of MPI_COMM_WORLD, so llgrad's collectives
    never match a user's own MPI calls)."""

    def __init__(self, comm, backend, timeout_s):
        self.comm = comm
        self.backend = backend
        self.timeout_s = timeout_s
        self._rank, self._size = comm.Get_rank(), comm.Get_size()

    def rank(self):
        """This process's rank in the group."""
        return self._rank

    def size(self):
        """The number of processes in the group."""
        return self._size

    def name(self):
        """The backend's name ('MPI')."""
        return self.backend.upper()

    def __repr__(self):
        return f"<llgrad.distributed.ProcessGroup {self.backend} rank {self._rank} of " \
               f"{self._size}>"


def is_available() -> bool:
    """Whether the MPI backend can be used (mpi4py is installed)."""
    return importlib.util.find_spec("mpi4py") is not None


def is_mpi_available() -> bool:
    """Whether the MPI backend can be used (mpi4py is installed), as
    torch.distributed.is_mpi_available."""
    return is_available()


def is_initialized() -> bool:
    """Whether init_process_group has been called (and not destroyed), as
    torch.distributed.is_initialized."""
    return _default is not None


def _timeout_seconds(timeout):
    if timeout is None:
        env = os.environ.get("LLGRAD_DIST_TIMEOUT")
        return float(env) if env else DEFAULT_TIMEOUT.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: datetime.timedelta | float | None = None, world_size: int = -1,
                       rank: int = -1, store: object = None, group_name: str = "",
                       pg_options: object = None, device_id: object = None) -> None:
    """Join the job started by the MPI launcher (`mpiexec -n 2 python train.py`): rank and
    world size come from MPI. backend: "mpi" (or None; "gloo" is taken as "mpi"). timeout:
    how long a collective may wait for the other ranks (a timedelta; default 30 minutes,
    or LLGRAD_DIST_TIMEOUT seconds) before it raises. world_size / rank, when given, must
    be MPI's. An uncaught exception on any rank then aborts the whole job (MPI_Abort), so
    the other ranks do not wait for it."""
    global _default
    if _default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = "mpi" if backend is None else str(backend).lower()
    if name not in _BACKENDS:
        raise ValueError(f"llgrad.distributed supports the 'mpi' backend (on mpi4py), not "
                         f"{backend!r}")
    if init_method not in (None, "env://") and not str(init_method).startswith("env://"):
        raise ValueError("llgrad.distributed takes its ranks from the MPI launcher; "
                         f"init_method {init_method!r} is not supported")
    MPI = mpi()
    comm = MPI.COMM_WORLD.Dup()
    size, me = comm.Get_size(), comm.Get_rank()
    if world_size not in (-1, None) and int(world_size) != size:
        comm.Free()
        raise ValueError(f"init_process_group: world_size={world_size}, but the MPI job has "
                         f"{size} processes (start it with mpiexec -n {world_size})")
    if rank not in (-1, None) and int(rank) != me:
        comm.Free()
        raise ValueError(f"init_process_group: rank={rank}, but MPI gave this process rank "
                         f"{me}")
    _default = ProcessGroup(comm, "mpi", _timeout_seconds(timeout))
    if size > 1:
        _install_abort_hook()
    return None


def default_group(group=None):
    """The group a collective runs on (group None: the default one), checked."""
    g = _default if group is None else group
    if g is None:
        raise ValueError("Default process group has not been initialized, please make sure "
                         "to call init_process_group.")
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"group must be a llgrad.distributed ProcessGroup, not "
                        f"{type(g).__name__}")
    return g


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in group (default: the default group), as
    torch.distributed.get_rank."""
    return default_group(group).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of processes in group, as torch.distributed.get_world_size."""
    return default_group(group).size()


def get_backend(group: ProcessGroup | None = None) -> str:
    """The backend of group ('mpi'), as torch.distributed.get_backend."""
    return default_group(group).backend


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Leave the process group (MPI itself stays initialised until the process exits, so a
    later init_process_group works)."""
    global _default
    g = default_group(group)
    if g is _default:
        _default = None
        _remove_abort_hook()
    g.comm.Free()


# ---- one rank's uncaught exception ends the job ------------------------------------------
_previous_hook = None


def _abort_hook(exc_type, exc, tb):
    (_previous_hook or sys.__excepthook__)(exc_type, exc, tb)
    g = _default
    if g is not None and g.size() > 1:
        sys.stderr.write(f"llgrad.distributed: rank {g.rank()} of {g.size()} stopped with "
                         f"an uncaught {exc_type.__name__}; aborting the job (MPI_Abort) so "
                         "the other ranks do not wait for it\n")
        sys.stderr.flush()
        sys.stdout.flush()
        time.sleep(0.3)     # (the launcher forwards the output before it kills the job)
        mpi().COMM_WORLD.Abort(1)


def _install_abort_hook():
    global _previous_hook
    if sys.excepthook is not _abort_hook:
        _previous_hook = sys.excepthook
        sys.excepthook = _abort_hook


def _remove_abort_hook():
    global _previous_hook
    if sys.excepthook is _abort_hook:
        sys.excepthook = _previous_hook or sys.__excepthook__
    _previous_hook = None
