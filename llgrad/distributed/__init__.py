"""llgrad.distributed: torch.distributed's names on MPI (mpi4py, the optional extra
`pip install 'llgrad[mpi]'`). Start a job with the MPI launcher, `mpiexec -n 2 python
train.py`; each process calls init_process_group(backend="mpi"). mpi4py is imported when
the first process group is made, not by `import llgrad`.

    process_group.py   init / destroy, rank and world size, the abort on a dead rank
    collectives.py     all_reduce, broadcast, all_gather, reduce_scatter, barrier
    work.py            the async_op handle; waiting with a timeout
    reduce_op.py       ReduceOp"""
from .collectives import (all_gather, all_gather_into_tensor, all_reduce,  # noqa: F401
                          barrier, broadcast, reduce_scatter, reduce_scatter_tensor)
from .process_group import (ProcessGroup, destroy_process_group, get_backend,  # noqa: F401
                            get_rank, get_world_size, init_process_group, is_available,
                            is_initialized, is_mpi_available)
from . import process_group as _pg
from .reduce_op import ReduceOp  # noqa: F401
from .work import Work  # noqa: F401


class _Group:
    """torch.distributed.group: group.WORLD is the default process group."""

    @property
    def WORLD(self):
        return _pg._default


group = _Group()
GroupMember = group

__all__ = ["ProcessGroup", "ReduceOp", "Work", "all_gather", "all_gather_into_tensor",
           "all_reduce", "barrier", "broadcast", "destroy_process_group", "get_backend",
           "get_rank", "get_world_size", "group", "init_process_group", "is_available",
           "is_initialized", "is_mpi_available", "reduce_scatter", "reduce_scatter_tensor"]
