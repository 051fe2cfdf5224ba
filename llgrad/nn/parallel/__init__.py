"""llgrad.nn.parallel: DistributedDataParallel (torch.nn.parallel's), on llgrad.distributed."""
from .distributed import DistributedDataParallel  # noqa: F401

__all__ = ["DistributedDataParallel"]
