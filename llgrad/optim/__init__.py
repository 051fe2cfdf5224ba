"""llgrad.optim: PyTorch's optimizers (single-tensor "for-loop" update rules) and schedulers."""
from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
