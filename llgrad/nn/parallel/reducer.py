"""DistributedDataParallel's gradient reducer: parameters grouped into buckets (reverse
registration order, by dtype, the first bucket small so communication starts early, the
rest up to bucket_cap_mb, as torch's Reducer makes them); a parameter's
post-accumulate-grad hook copies its .grad into its bucket, and the bucket whose last
gradient arrived starts a non-blocking all-reduce (MPI Iallreduce), buckets in index order
on every rank, while the backward goes on computing the earlier layers' gradients. When the
last bucket has started, the hook waits for all of them and writes the averaged gradients
back into .grad, so they are there before backward() returns.

The class keeps its state in __slots__: llgrad.compile's guard walk sees the reducer as one
object (guarded by identity), not as tensors and numbers to guard."""
import time

import numpy as np

from ...distributed import process_group as pg
from ...distributed.work import wait_requests
from ...runtime.node import AccumulateGrad
from ...runtime.tensor import Tensor

FIRST_BUCKET_BYTES = 1024 * 1024        # torch's dist._DEFAULT_FIRST_BUCKET_BYTES

_UNFINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss. You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `llgrad.nn.parallel.DistributedDataParallel`, and by "
    "making sure all `forward` function outputs participate in calculating loss. "
    "Parameter indices which did not receive grad for rank {rank}: {missing}")


class Bucket:
    __slots__ = ("params", "dtype", "flat", "views", "pending", "request")

    def __init__(self, params, indices, dtype):
        self.params = indices
        self.dtype = dtype
        n = sum(params[i]._data.size for i in indices)
        self.flat = np.zeros(n, dtype)
        self.views, o = [], 0
        for i in indices:
            shape = params[i]._data.shape
            size = params[i]._data.size
            self.views.append(self.flat[o:o + size].reshape(shape))
            o += size
        self.pending = len(indices)
        self.request = None


def assign_buckets(params, cap_bytes, first_bytes=FIRST_BUCKET_BYTES):
    """[[param index]]: reverse order, one dtype per bucket; the first bucket closes at
    first_bytes, later ones at cap_bytes (a parameter larger than a cap is a bucket)."""
    open_, limits, done = {}, {}, []
    for i in reversed(range(len(params))):
        a = params[i]._data
        key = a.dtype
        cur = open_.setdefault(key, [[], 0])
        cur[0].append(i)
        cur[1] += a.nbytes
        limit = limits.setdefault(key, first_bytes)
        if cur[1] >= limit:
            done.append(cur[0])
            open_[key] = [[], 0]
            limits[key] = cap_bytes
    done += [c[0] for c in open_.values() if c[0]]
    return sorted(done, key=lambda b: -b[0])     # in the order their gradients come


class Reducer:
    __slots__ = ("params", "group", "buckets", "bucket_of", "slot_of", "find_unused",
                 "expect", "ready", "next_launch", "used", "last_wait_s", "last_reduce_s",
                 "__weakref__")

    def __init__(self, params, group, cap_bytes, find_unused, first_bytes=FIRST_BUCKET_BYTES):
        self.params = params
        self.group = group
        self.find_unused = find_unused
        self.buckets = [Bucket(params, idx, params[idx[0]]._data.dtype)
                        for idx in assign_buckets(params, cap_bytes, first_bytes)]
        self.bucket_of, self.slot_of = {}, {}
        for b, bucket in enumerate(self.buckets):
            for k, i in enumerate(bucket.params):
                self.bucket_of[i], self.slot_of[i] = b, k
        self.expect = False             # a forward prepared this backward's all-reduce
        self.ready = [False] * len(params)
        self.next_launch = 0
        self.used = None                # find_unused: parameters this rank's graph reaches
        self.last_wait_s = 0.0          # the last backward's wait for the all-reduce
        self.last_reduce_s = 0.0        # and its time from the first launch to the end

    # ---- each iteration ------------------------------------------------------------------
    def prepare(self):
        """A forward whose backward must all-reduce (grad mode on, outside no_sync)."""
        if self.expect and any(self.ready):     # (a forward with no backward is fine)
            missing = [i for i, r in enumerate(self.ready) if not r]
            if missing:
                raise RuntimeError(_UNFINISHED.format(rank=self.group.rank(),
                                                      missing=missing))
        self._reset()
        self.expect = True

    def cancel(self):
        """A forward outside sync (no_sync, or grad mode off): its backward does not
        all-reduce."""
        self._reset()

    def _reset(self):
        self.expect = False
        self.ready = [False] * len(self.params)
        self.next_launch = 0
        self.used = None
        for b in self.buckets:
            b.pending = len(b.params)
            b.request = None

    def mark_unused(self, outputs):
        """find_unused_parameters: the parameters the outputs' graph does not reach are
        ready now (they contribute zeros, and keep their .grad if no rank used them)."""
        reached, seen = set(), set()
        stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
        stack += [t._acc for t in outputs if t.grad_fn is None and t._acc is not None]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if type(node) is AccumulateGrad:
                v = node.variable
                if v is not None:
                    reached.add(id(v))
                continue
            stack.extend(n for n, _ in node.next_functions)
        self.used = np.array([id(p) in reached for p in self.params], np.uint8)
        for i in np.flatnonzero(self.used == 0):
            self.mark_ready(int(i))

    def hook(self, index):
        def post_accumulate_grad_hook(param):
            self.mark_ready(index)
        return post_accumulate_grad_hook

    def mark_ready(self, i):
        if not self.expect:
            return
        if self.ready[i]:
            raise RuntimeError(
                f"Expected to mark a variable ready only once (parameter index {i}). This "
                "happens when a parameter's gradient reaches it twice in one iteration "
                "(a second backward through the same forward, or reentrant backward).")
        self.ready[i] = True
        bucket = self.buckets[self.bucket_of[i]]
        g = self.params[i]._grad
        view = bucket.views[self.slot_of[i]]
        if g is None:
            view[...] = 0
        else:
            np.copyto(view, g._data)
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch_ready()
        else:
            self._progress()

    def _progress(self):
        """Let MPI advance the all-reduces in flight (MPICH progresses inside MPI calls)."""
        reqs = [b.request for b in self.buckets[:self.next_launch]]
        if reqs:
            pg.mpi().Request.Testall(reqs)

    def _launch_ready(self):
        MPI = pg.mpi()
        while self.next_launch < len(self.buckets) and \
                self.buckets[self.next_launch].pending == 0:
            b = self.buckets[self.next_launch]
            if self.next_launch == 0:
                self.last_reduce_s = time.perf_counter()
            b.request = self.group.comm.Iallreduce(MPI.IN_PLACE, b.flat, op=MPI.SUM)
            self.next_launch += 1
        if self.next_launch == len(self.buckets):
            self._finish()

    def _finish(self):
        """Every bucket started: wait for them, then average into .grad."""
        t0 = time.perf_counter()
        wait_requests([b.request for b in self.buckets],
                      "DistributedDataParallel's gradient all-reduce", self.group)
        globally_used = None
        if self.used is not None:
            req = self.group.comm.Iallreduce(pg.mpi().IN_PLACE, self.used, op=pg.mpi().MAX)
            wait_requests([req], "DistributedDataParallel's unused-parameter check",
                          self.group)
            globally_used = self.used
        t1 = time.perf_counter()
        self.last_wait_s = t1 - t0
        self.last_reduce_s = t1 - self.last_reduce_s
        size = self.group.size()
        for b in self.buckets:
            np.divide(b.flat, size, out=b.flat)
            for i, view in zip(b.params, b.views):
                if globally_used is not None and not globally_used[i]:
                    continue
                p = self.params[i]
                g = p._grad
                if g is None:
                    p.grad = Tensor._from_array(view.copy())
                else:
                    np.copyto(g._data, view)
                    g._storage.version += 1
        self.expect = False

    def bucket_sizes(self):
        """[(number of parameters, bytes)] per bucket, in launch order."""
        return [(len(b.params), b.flat.nbytes) for b in self.buckets]

    def wait_pending(self):
        """Wait for buckets still in flight (a backward that ended early)."""
        reqs = [b.request for b in self.buckets if b.request is not None]
        wait_requests(reqs, "DistributedDataParallel's gradient all-reduce", self.group)
