"""llgrad.utils.tensorboard: torch.utils.tensorboard's SummaryWriter writing TensorBoard
event files (needs the `tensorboard` package: `pip install llgrad[tensorboard]`).

As in PyTorch, importing this module imports `tensorboard` (so it raises ImportError when
tensorboard is missing, or older than 1.15) and the records are tensorboard's own protocol
buffers written through its EventFileWriter; inputs may be llgrad tensors, NumPy arrays or
Python numbers. add_graph draws the graph llgrad's tracer records (llgrad's IR ops, scoped
by module) where PyTorch draws TorchScript's."""
import re

import tensorboard


def _release(version):
    """The leading numbers of a version string: "2.21.0rc1" -> (2, 21, 0)."""
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])


if not hasattr(tensorboard, "__version__") or _release(tensorboard.__version__) < (1, 15):
    raise ImportError("TensorBoard logging requires TensorBoard version 1.15 or above")

del tensorboard

from tensorboard.summary.writer.record_writer import RecordWriter  # noqa: E402

from .writer import FileWriter, SummaryWriter  # noqa: E402

__all__ = ["FileWriter", "RecordWriter", "SummaryWriter"]
