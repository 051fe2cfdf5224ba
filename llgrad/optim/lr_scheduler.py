"""Learning-rate schedulers with PyTorch's API: construction sets group['initial_lr'] and
takes an initial step; each step() advances last_epoch and writes group['lr']."""
import math
import warnings

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR"]


class LRScheduler:
    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when "
                               "resuming scheduler with last_epoch >= 0.")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True          # the initial step keeps the groups' lr
        self.step()
        self._is_initial = False

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        return self._last_lr

    def get_lr(self):
        raise NotImplementedError

    def _group_lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self, epoch=None):
        self._step_count += 1
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                warnings.warn("The epoch parameter in `scheduler.step()` was not necessary and "
                              "is being deprecated where possible. Please use "
                              "`scheduler.step()` to step the scheduler.", UserWarning,
                              stacklevel=2)
                self.last_epoch = epoch
                values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") \
                    else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = self._group_lrs()

    def _warn_outside_step(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please "
                          "use `get_last_lr()`.", UserWarning, stacklevel=3)


class StepLR(LRScheduler):
    """Multiply each group's lr by gamma every step_size epochs (chainable, as PyTorch)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """eta_min + (base_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2: the closed
    form of PyTorch's recursive schedule (equal to it up to rounding, restarts included)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self._is_initial:
            return self._group_lrs()
        return self._get_closed_form_lr()

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]
