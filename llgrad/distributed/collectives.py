"""torch.distributed's collectives on MPI's non-blocking ones (Iallreduce, Ibcast,
Iallgather, Ireduce_scatter_block, Ibarrier): results are written into the given tensors
in place (their version counters move, as any in-place write's do); async_op=True returns
a Work whose wait() finishes the call, else the call waits (with the group's timeout:
work.py). A contiguous tensor's own memory is handed to MPI (zero-copy); another is copied
to a contiguous buffer and back."""
from __future__ import annotations
import numpy as np

from ..runtime import trace_state
from ..runtime.tensor import Tensor
from . import process_group as pg
from .reduce_op import ReduceOp, mpi_op
from .work import Work


def _untraced(what):
    """A collective is a side effect a compiled call could not replay: inside
    llgrad.compile the call runs eagerly (a graph break)."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.graph_break(f"llgrad.distributed.{what} (a collective between processes)")


def _tensor(t, what):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: expected a llgrad.Tensor, not {type(t).__name__}")
    return t


def _buffer(t):
    """(the C-contiguous array MPI reads and writes, whether it is a copy of t's data)."""
    a = t._data
    if a.flags.c_contiguous:
        return a, False
    return np.ascontiguousarray(a), True


def _store(t, arr, copied):
    """The collective wrote arr: into t (if arr was a copy), and t's version moves."""
    if copied:
        t._data[...] = arr
    t._storage.version += 1


def _run(requests, finish, what, group, async_op, result):
    work = Work(requests, finish, what, group, result)
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: pg.ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Reduce tensor over every rank, in place (ReduceOp.SUM / AVG / PRODUCT / MIN / MAX /
    BAND / BOR / BXOR)."""
    _untraced("all_reduce")
    g = pg.default_group(group)
    _tensor(tensor, "all_reduce")
    buf, copied = _buffer(tensor)
    MPI = pg.mpi()
    req = g.comm.Iallreduce(MPI.IN_PLACE, buf, op=mpi_op(MPI, op, buf.dtype))

    def finish():
        if op is ReduceOp.AVG:
            np.divide(buf, g.size(), out=buf)
        _store(tensor, buf, copied)
    return _run([req], finish, "all_reduce", g, async_op, [tensor])


def broadcast(tensor: Tensor, src: int, group: pg.ProcessGroup | None = None,
              async_op: bool = False) -> Work | None:
    """Copy rank src's tensor into every other rank's tensor, in place."""
    _untraced("broadcast")
    g = pg.default_group(group)
    _tensor(tensor, "broadcast")
    if not 0 <= int(src) < g.size():
        raise ValueError(f"broadcast: src {src} is not a rank of a group of {g.size()}")
    buf, copied = _buffer(tensor)
    req = g.comm.Ibcast(buf, root=int(src))

    def finish():
        if g.rank() != int(src):
            _store(tensor, buf, copied)
    return _run([req], finish, "broadcast", g, async_op, [tensor])


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: pg.ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """tensor_list[r] receives rank r's tensor (every rank's tensor has one shape)."""
    _untraced("all_gather")
    g = pg.default_group(group)
    _tensor(tensor, "all_gather")
    if len(tensor_list) != g.size():
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors; the group "
                         f"has {g.size()} ranks")
    for t in tensor_list:
        _tensor(t, "all_gather")
        if t._data.shape != tensor._data.shape or t._data.dtype != tensor._data.dtype:
            raise ValueError("all_gather: every tensor in tensor_list must have the input's "
                             f"shape and dtype ({tuple(tensor.shape)}, {tensor.dtype})")
    send = np.ascontiguousarray(tensor._data)
    recv = np.empty((g.size(),) + send.shape, send.dtype)
    req = g.comm.Iallgather(send, recv)

    def finish():
        for t, part in zip(tensor_list, recv):
            t._data[...] = part
            t._storage.version += 1
    return _run([req], finish, "all_gather", g, async_op, list(tensor_list))


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor,
                           group: pg.ProcessGroup | None = None,
                           async_op: bool = False) -> Work | None:
    """output_tensor (world_size * input's first dim, or world_size stacked inputs) gets
    every rank's input, in rank order."""
    _untraced("all_gather_into_tensor")
    g = pg.default_group(group)
    _tensor(input_tensor, "all_gather_into_tensor")
    _tensor(output_tensor, "all_gather_into_tensor")
    if output_tensor.numel() != g.size() * input_tensor.numel():
        raise ValueError("all_gather_into_tensor: the output must have world_size times the "
                         "input's elements")
    send = np.ascontiguousarray(input_tensor._data)
    buf, copied = _buffer(output_tensor)
    req = g.comm.Iallgather(send, buf)
    return _run([req], lambda: _store(output_tensor, buf, copied), "all_gather_into_tensor",
                g, async_op, [output_tensor])


def reduce_scatter(output: Tensor, input_list: list[Tensor], op: ReduceOp = ReduceOp.SUM,
                   group: pg.ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """output (on rank r) = the reduction over ranks of their input_list[r]."""
    _untraced("reduce_scatter")
    g = pg.default_group(group)
    _tensor(output, "reduce_scatter")
    if len(input_list) != g.size():
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors; the "
                         f"group has {g.size()} ranks")
    for t in input_list:
        _tensor(t, "reduce_scatter")
        if t._data.shape != output._data.shape or t._data.dtype != output._data.dtype:
            raise ValueError("reduce_scatter: every tensor in input_list must have the "
                             f"output's shape and dtype ({tuple(output.shape)}, "
                             f"{output.dtype})")
    send = np.stack([np.asarray(t._data) for t in input_list]) if input_list else None
    return _reduce_scatter(output, send, op, g, async_op, "reduce_scatter")


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM,
                          group: pg.ProcessGroup | None = None,
                          async_op: bool = False) -> Work | None:
    """output (on rank r) = the reduction over ranks of the r-th of world_size equal
    chunks of their input."""
    _untraced("reduce_scatter_tensor")
    g = pg.default_group(group)
    _tensor(output, "reduce_scatter_tensor")
    _tensor(input, "reduce_scatter_tensor")
    if input.numel() != g.size() * output.numel():
        raise ValueError("reduce_scatter_tensor: the input must have world_size times the "
                         "output's elements")
    return _reduce_scatter(output, np.ascontiguousarray(input._data), op, g, async_op,
                           "reduce_scatter_tensor")


def _reduce_scatter(output, send, op, g, async_op, what):
    buf, copied = _buffer(output)
    MPI = pg.mpi()
    req = g.comm.Ireduce_scatter_block(send, buf, op=mpi_op(MPI, op, buf.dtype))

    def finish():
        if op is ReduceOp.AVG:
            np.divide(buf, g.size(), out=buf)
        _store(output, buf, copied)
    return _run([req], finish, what, g, async_op, [output])


def barrier(group: pg.ProcessGroup | None = None, async_op: bool = False,
            device_ids: object = None) -> Work | None:
    """Wait until every rank reached its barrier."""
    _untraced("barrier")
    g = pg.default_group(group)
    return _run([g.comm.Ibarrier()], None, "barrier", g, async_op, [])
