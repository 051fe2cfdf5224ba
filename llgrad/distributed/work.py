"""Work: the handle an `async_op=True` collective returns, and the one place every
collective (and DDP's gradient buckets) waits for MPI requests: by polling Test with a
deadline, so a rank whose peer died or never made the same call raises a clear error
instead of hanging forever."""
import time

from . import process_group as pg

_SPIN_S = 0.002        # poll without sleeping this long, then sleep between polls
_SLEEP_S = 5e-5


def wait_requests(requests, what, group, timeout=None):
    """Wait until every MPI request in `requests` completes, or raise RuntimeError after
    `timeout` seconds (default: the group's timeout). Polling Test also drives MPI's
    progress (MPICH advances non-blocking collectives inside MPI calls)."""
    if not requests:
        return
    MPI = pg.mpi()
    if MPI.Request.Testall(requests):
        return
    limit = group.timeout_s if timeout is None else float(timeout)
    start = time.monotonic()
    spin_until, deadline = start + _SPIN_S, start + limit
    while True:
        if MPI.Request.Testall(requests):
            return
        now = time.monotonic()
        if now > deadline:
            raise RuntimeError(
                f"llgrad.distributed: {what} timed out after {limit:g} s on rank "
                f"{group.rank()} of {group.size()}: another rank failed, exited, or did "
                "not make the same collective call (an uncaught error aborts the whole job)")
        if now > spin_until:
            time.sleep(_SLEEP_S)


class Work:
    """torch.distributed's Work: wait() blocks until the collective finished (its result
    written into the tensors), is_completed() asks without blocking."""

    def __init__(self, requests, finish, what, group, result=()):
        self._requests = list(requests)
        self._finish = finish          # run once, after the requests completed
        self._what = what
        self._group = group
        self._result = list(result)
        self._done = False

    def _complete(self):
        if not self._done:
            self._done = True
            self._requests = []
            if self._finish is not None:
                self._finish()
                self._finish = None

    def wait(self, timeout=None):
        """Block until done (timeout: a datetime.timedelta or seconds; default the process
        group's). Returns True, as torch's Work.wait does."""
        if not self._done:
            if timeout is not None and hasattr(timeout, "total_seconds"):
                timeout = timeout.total_seconds()
            wait_requests(self._requests, self._what, self._group, timeout)
            self._complete()
        return True

    def is_completed(self):
        """Whether the collective has finished (without waiting), as torch's
        Work.is_completed."""
        if not self._done and pg.mpi().Request.Testall(self._requests):
            self._complete()
        return self._done

    def is_success(self):
        """Whether the collective has finished successfully, as torch's Work.is_success."""
        return self.is_completed()

    def result(self):
        """The output tensors (after wait())."""
        return self._result

    def __repr__(self):
        state = "completed" if self._done else "pending"
        return f"<llgrad.distributed.Work {self._what} ({state})>"
