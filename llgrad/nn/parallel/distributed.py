"""DistributedDataParallel: torch.nn.parallel.DistributedDataParallel on llgrad.distributed
(MPI). One process per replica, each with the whole model and its own share of the batch:

- at construction, the parameters and buffers of rank 0 are broadcast to every rank (and
  the ranks are checked to hold the same parameter shapes);
- each forward broadcasts rank 0's buffers first (BatchNorm statistics), as torch does with
  broadcast_buffers=True;
- in the backward, gradients are averaged over the ranks by bucketed non-blocking
  all-reduces that overlap the rest of the backward (reducer.py); they are in .grad when
  backward() returns;
- no_sync() skips the all-reduce: gradients accumulate locally until the first backward
  after the context.

Inside llgrad.compile, the forward of a DistributedDataParallel is a graph break (the call
runs eagerly, with one warning): its all-reduce runs from backward hooks, and its buffer
broadcast is a collective, which compiled code does not replay. To compile the model's
forward and backward, wrap the compiled model instead: DistributedDataParallel(
llgrad.compile(model)) runs its compiled graphs, and the gradient all-reduce eagerly from
the hooks as the compiled backward's gradients reach the parameters."""
import contextlib
import zlib

import numpy as np

from ...distributed import process_group as pg
from ...distributed.work import wait_requests
from ...runtime import grad_mode, trace_state
from ...runtime.tensor import Tensor
from ..module import Module
from .reducer import FIRST_BUCKET_BYTES, Reducer

__all__ = ["DistributedDataParallel"]


def _tensors_in(obj, out):
    """The tensors in a forward's output (tensors, and lists, tuples, dicts of them)."""
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors_in(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors_in(x, out)
    return out


class DistributedDataParallel(Module):
    """module replicated on every rank of the process group; gradients averaged in the
    backward. bucket_cap_mb: the size of a gradient bucket (default 25; the first bucket
    is 1 MiB, or bucket_cap_mb if smaller, as in torch). find_unused_parameters: find, at each forward, the parameters
    its output does not depend on, so their buckets need not wait for them.
    device_ids, output_device, dim, check_reduction, gradient_as_bucket_view, static_graph
    are accepted for torch's scripts and have no effect (CPU tensors only)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, **kwargs):
        super().__init__()
        compiled = None
        if isinstance(getattr(module, "_orig_mod", None), Module):
            # DDP(llgrad.compile(model)): forward and backward compiled, the gradient
            # all-reduce run by the hooks when the compiled backward's gradients arrive
            compiled, module = module, module._orig_mod
        if not isinstance(module, Module):
            raise TypeError("DistributedDataParallel wraps a llgrad.nn.Module, not "
                            f"{type(module).__name__}")
        group = pg.default_group(process_group)
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        self._call = _Call(compiled)        # (slotted: the guard walk does not enter it)
        self.process_group = group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = bool(find_unused_parameters)
        self.bucket_cap_mb = 25 if bucket_cap_mb is None else bucket_cap_mb
        self.dim = dim
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        _verify_same_model(module, group)
        _sync_module_states(module, group)
        cap = int(self.bucket_cap_mb * 1024 * 1024)
        self._reducer = Reducer(params, group, cap, self.find_unused_parameters,
                                min(cap, FIRST_BUCKET_BYTES))
        self._hook_handles = [p.register_post_accumulate_grad_hook(self._reducer.hook(i))
                              for i, p in enumerate(params)]

    def forward(self, *inputs, **kwargs):
        """Run the module (broadcasting buffers from rank 0 first, when asked) and
        prepare this step's gradient all-reduce. Inside llgrad.compile it is a graph
        break: the step runs eagerly (compile the module inside DDP instead)."""
        tracer = trace_state.state.tracer
        if tracer is not None:
            tracer.graph_break("DistributedDataParallel's forward (its gradient all-reduce "
                               "runs from backward hooks and its buffer broadcast is a "
                               "collective, which a compiled call would not replay)")
        sync = grad_mode.state.grad_enabled and self.require_backward_grad_sync
        if sync:
            self._reducer.prepare()
        else:
            self._reducer.cancel()
        if self.broadcast_buffers and self.require_forward_param_sync:
            _broadcast_buffers(self.module, self.process_group)
        fn = self._call.fn
        out = (self.module if fn is None else fn)(*inputs, **kwargs)
        if sync:
            self.require_forward_param_sync = True
            if self.find_unused_parameters:
                self._reducer.mark_unused(_tensors_in(out, []))
        else:
            self.require_forward_param_sync = False
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Forwards inside the context make backwards that do not all-reduce: gradients
        accumulate on each rank, and the first synchronised backward after it averages
        the sums."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def extra_repr(self):
        """The world size and bucket size."""
        return f"world_size={self.process_group.size()}, bucket_cap_mb={self.bucket_cap_mb}"


class _Call:
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn


def _verify_same_model(module, group):
    """Every rank must hold parameters of the same names, shapes and dtypes."""
    text = repr([(n, tuple(p.shape), str(p.dtype)) for n, p in module.named_parameters()])
    mine = np.array([zlib.crc32(text.encode())], np.int64)
    every = np.empty(group.size(), np.int64)
    wait_requests([group.comm.Iallgather(mine, every)],
                  "DistributedDataParallel's model check", group)
    differ = [r for r in range(group.size()) if every[r] != every[0]]
    if differ:
        raise RuntimeError(f"DistributedDataParallel: ranks {differ} hold parameters of other "
                           f"names, shapes or dtypes than rank 0 (rank {group.rank()}: "
                           f"{text[:200]})")


def _broadcast(tensors, group, what):
    """rank 0's values of tensors, into every rank's (one Ibcast per dtype)."""
    by_dtype = {}
    for t in tensors:
        by_dtype.setdefault(t._data.dtype, []).append(t)
    reqs, flats = [], []
    for dtype, ts in by_dtype.items():
        flat = np.concatenate([t._data.reshape(-1) for t in ts]) if len(ts) > 1 else \
            np.ascontiguousarray(ts[0]._data).reshape(-1)
        if flat.base is not None or flat is ts[0]._data:
            flat = flat.copy()
        reqs.append(group.comm.Ibcast(flat, root=0))
        flats.append((flat, ts))
    wait_requests(reqs, what, group)
    if group.rank() == 0:
        return
    for flat, ts in flats:
        o = 0
        for t in ts:
            n = t._data.size
            t._data[...] = flat[o:o + n].reshape(t._data.shape)
            t._storage.version += 1
            o += n


def _sync_module_states(module, group):
    tensors = [p for p in module.parameters()] + [b for b in module.buffers()]
    if tensors and group.size() > 1:
        _broadcast(tensors, group, "DistributedDataParallel's broadcast of rank 0's "
                                   "parameters")


def _broadcast_buffers(module, group):
    buffers = [b for b in module.buffers() if b is not None]
    if buffers and group.size() > 1:
        _broadcast(buffers, group, "DistributedDataParallel's broadcast of rank 0's buffers")
