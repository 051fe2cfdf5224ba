"""Learning-rate schedulers with PyTorch's API (torch.optim.lr_scheduler): construction sets
group['initial_lr'] and takes an initial step; each step() advances last_epoch and writes
group['lr']. A learning rate held in a tensor (`SGD(params, lr=llgrad.tensor(0.1))`) is
updated in place with fill_, as PyTorch does: a compiled training step reads it as an input
at each call and does not re-trace when the schedule changes it.

Modules: base (LRScheduler and the group helpers), formulas (the schedulers whose lr is a
formula of the epoch), cyclic (multiplying, polynomial, cyclic and restarting schedules, and
ChainedScheduler), plateau (ReduceLROnPlateau), sequential (SequentialLR), one_cycle
(OneCycleLR)."""
from .cyclic import (ChainedScheduler, ConstantLR, CosineAnnealingWarmRestarts,  # noqa: F401
                     CyclicLR, MultiplicativeLR, PolynomialLR)
from .base import EPOCH_DEPRECATION_WARNING, LRScheduler, _LRScheduler  # noqa: F401
from .formulas import (CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR,  # noqa: F401
                       MultiStepLR, StepLR)
from .one_cycle import OneCycleLR  # noqa: F401
from .plateau import ReduceLROnPlateau  # noqa: F401
from .sequential import SequentialLR  # noqa: F401

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "LinearLR", "ExponentialLR",
           "SequentialLR", "CosineAnnealingLR", "ReduceLROnPlateau", "OneCycleLR", "MultiplicativeLR",
           "ConstantLR", "PolynomialLR", "CyclicLR", "CosineAnnealingWarmRestarts",
           "ChainedScheduler"]

# (PyTorch's schedulers all live in torch.optim.lr_scheduler, and d2l tells them from its own
# by `scheduler.__module__ == lr_scheduler.__name__`)
for _cls in (LRScheduler, _LRScheduler, ChainedScheduler, ConstantLR, CosineAnnealingWarmRestarts,
             CyclicLR, MultiplicativeLR, PolynomialLR, CosineAnnealingLR, ExponentialLR, LambdaLR,
             LinearLR, MultiStepLR, StepLR, OneCycleLR, ReduceLROnPlateau, SequentialLR):
    _cls.__module__ = __name__
del _cls
