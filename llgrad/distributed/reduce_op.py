"""ReduceOp: torch.distributed's reduction operators, and the MPI operator for each."""
import enum


class ReduceOp(enum.Enum):
    """torch.distributed.ReduceOp's members (and its numbering). AVG is SUM divided by the
    world size (floating-point tensors only); PREMUL_SUM is not supported."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8

    def __repr__(self):
        return f"<RedOpType.{self.name}: {self.value}>"


_MPI_NAMES = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "SUM", ReduceOp.PRODUCT: "PROD",
              ReduceOp.MIN: "MIN", ReduceOp.MAX: "MAX", ReduceOp.BAND: "BAND",
              ReduceOp.BOR: "BOR", ReduceOp.BXOR: "BXOR"}


def mpi_op(MPI, op, dtype):
    """The MPI operator for op on a NumPy dtype (AVG: MPI.SUM, divided afterwards)."""
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a llgrad.distributed.ReduceOp, not {type(op).__name__}")
    if op not in _MPI_NAMES:
        raise ValueError(f"{op!r} is not supported by llgrad.distributed (MPI backend)")
    if op is ReduceOp.AVG and dtype.kind not in "fc":
        raise ValueError(f"ReduceOp.AVG needs a floating-point tensor, not {dtype}")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype.kind not in "biu":
        raise ValueError(f"{op!r} needs an integer or bool tensor, not {dtype}")
    return getattr(MPI, _MPI_NAMES[op])
