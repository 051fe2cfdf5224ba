"""GradScaler, as torch.amp.GradScaler: the loss scaled by a power of two before backward,
the gradients unscaled (and checked for inf / NaN) before the optimiser's step, which is
skipped when one was found, and the scale grown every growth_interval clean steps or backed
off after a bad one. Scaling by powers of two is exact, so a step's numbers are float32's.
For "cuda" (no CUDA device here) it disables itself with PyTorch's warning, and disabled it
passes everything through, as PyTorch's does.

A compiled training step that scales, steps and updates keeps the scaler's Python state as
it found it (update() resets it), so the step is kept; whether an inf was found is a value
guard (a step that finds one traces, or runs, its own way)."""
import warnings
from collections import defaultdict
from enum import Enum

from ..runtime.creation import full, tensor
from ..runtime.dtypes import float32, int32
from ..runtime.functions import where
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh():
    return {"stage": OptState.READY, "found_inf": None}


class GradScaler:
    """GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval,
    enabled): as torch.amp.GradScaler (see the module's docstring)."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if self._enabled and device != "cpu":
            warnings.warn(f"torch.{device}.amp.GradScaler is enabled, but {device.upper()} is "
                          f"not available.  Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale, self._growth_factor = init_scale, growth_factor
        self._backoff_factor, self._growth_interval = backoff_factor, growth_interval
        self._scale = None
        self._growth_tracker = None
        self._per_optimizer_states = defaultdict(_fresh)

    def _lazy_init(self):
        self._scale = full((), self._init_scale, dtype=float32)
        self._growth_tracker = full((), getattr(self, "_init_growth_tracker", 0), dtype=int32)

    def is_enabled(self):
        """Whether the scaler scales (enabled, as constructed)."""
        return self._enabled

    def scale(self, outputs):
        """outputs (a tensor, or tensors in lists / tuples) times the scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._lazy_init()
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        """Divide optimizer's gradients by the scale, in place, noting whether any is inf or
        NaN (at most once per optimizer between update()s)."""
        if not self._enabled:
            return
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        if self._scale is None:
            raise AssertionError("Attempted unscale_ but _scale is None.  This may indicate "
                                 "your script did not use scaler.scale(loss or outputs) "
                                 "earlier in the iteration.")
        inv_scale = self._scale.double().reciprocal().float()
        found = tensor(False)
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.dtype.itemsize < 4 and not p.grad.is_floating_point():
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    found = found | ~p.grad.isfinite().all()
                    p.grad.mul_(inv_scale)
        state["found_inf"] = found
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless an inf / NaN was found in its gradients
        (unscaling them first if unscale_ was not called); returns the step's result."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not state["found_inf"].item():
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """The next scale: new_scale if given, else backed off after an inf / NaN, grown after
        growth_interval clean steps; and every optimizer's record of this step forgotten."""
        if not self._enabled:
            return
        if self._scale is None:
            raise AssertionError("Attempted update but _scale is None.  This may indicate your "
                                 "script did not use scaler.scale(loss or outputs) earlier in "
                                 "the iteration.")
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, float):
                    self._scale.fill_(new_scale)
                else:
                    self._scale.copy_(new_scale)
            else:
                founds = [s["found_inf"] for s in self._per_optimizer_states.values()
                          if s["found_inf"] is not None]
                if not founds:
                    raise AssertionError("No inf checks were recorded prior to update.")
                if any(bool(f.item()) for f in founds):
                    self._scale.mul_(self._backoff_factor)
                    self._growth_tracker.zero_()
                else:       # (tensor arithmetic: a compiled step does not guard the count)
                    grown = self._growth_tracker + 1
                    full_interval = grown == self._growth_interval
                    self._scale.copy_(where(full_interval, self._scale * self._growth_factor,
                                            self._scale))
                    self._growth_tracker.copy_(where(full_interval, grown * 0, grown))
        self._per_optimizer_states = defaultdict(_fresh)

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        """The factor the scale grows by after growth_interval clean steps."""
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        """Set the growth factor."""
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        """The factor the scale shrinks by after a step with an inf / NaN gradient."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        """Set the backoff factor."""
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        """How many clean steps grow the scale."""
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        """Set the growth interval."""
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return 0 if self._growth_tracker is None else self._growth_tracker.item()

    def state_dict(self):
        """The scaler's state (scale, factors, interval, growth tracker), as PyTorch's."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        """Restore the state state_dict() gave."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])
