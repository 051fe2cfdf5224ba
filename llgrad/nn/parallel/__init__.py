"""llgrad.nn.parallel: DataParallel (the module run in-process, as PyTorch runs it without
accelerators) and DistributedDataParallel (torch.nn.parallel's), on llgrad.distributed."""
from .data_parallel import DataParallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel"]
