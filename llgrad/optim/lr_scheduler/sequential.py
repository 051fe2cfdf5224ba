"""SequentialLR: schedulers run one after another, switching at milestones."""
from bisect import bisect_right

from .base import LRScheduler, _update_param_group_val
from .plateau import ReduceLROnPlateau


class SequentialLR(LRScheduler):
    """Run `schedulers` one after another, switching at each of `milestones` (a scheduler
    taking over starts from its epoch 0)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError(f"{self.__class__.__name__} expects at least one scheduler, but "
                             "got no scheduler.")
        for idx, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise TypeError(f"{self.__class__.__name__} at index {idx} should have "
                                "`optimizer` as its attribute.")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(
                    f"{self.__class__.__name__} does not support `ReduceLROnPlateau` scheduler "
                    "as it requires additional kwargs to be specified when calling `step`, but "
                    f"got one at index {idx} in the given schedulers sequence.")
            if optimizer != scheduler.optimizer:
                raise ValueError(
                    f"{self.__class__.__name__} expects all schedulers to belong to the same "
                    f"optimizer, but got scheduler {scheduler.__class__.__name__} at index "
                    f"{idx} has {scheduler.optimizer}, which is different from "
                    f"{optimizer.__class__.__name__}.")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                "than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # reset the learning rates back to initial, undo the schedulers' initial steps and
        # take the first scheduler's initial step again
        for group in self.optimizer.param_groups:
            _update_param_group_val(group, "lr", group["initial_lr"])
        self.recursive_undo()
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched=None):
        """Undo the initial step of the schedulers (and of nested sequences)."""
        scheds = self if sched is None else sched
        if hasattr(scheds, "_schedulers"):
            for s in scheds._schedulers:
                self.recursive_undo(s)
        elif hasattr(scheds, "last_epoch"):
            scheds.last_epoch -= 1

    def step(self):
        """Advance one epoch with the scheduler in charge (a new one starts at its epoch 0)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        # (a copy, where PyTorch shares the scheduler's list: equal numbers, and a compiled
        # step that steps this one writes each slot its own list, attr_writes.py)
        self._last_lr = list(scheduler.get_last_lr())

    def state_dict(self):
        """The state, with each scheduler's own state_dict."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        """Restore state from state_dict(), each scheduler's too."""
        schedulers = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        state_dict["_schedulers"] = schedulers
        for idx, s in enumerate(schedulers):
            self._schedulers[idx].load_state_dict(s)
