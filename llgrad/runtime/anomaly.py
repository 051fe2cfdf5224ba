"""torch.autograd's anomaly-mode switches: set_detect_anomaly / detect_anomaly (a context
manager, and set_detect_anomaly also a plain call) and is_anomaly_enabled; while it is on
(with check_nan), the engine raises PyTorch's error at the first backward node whose result
holds a nan (check_nan)."""
import warnings

import numpy as np

from .saved_tensor import where_str

_state = {"enabled": False, "check_nan": True}


def check_nan(node, outs):
    """PyTorch's anomaly check of a node's results (outs): the error (the engine warns,
    failed)."""
    for i, g in enumerate(outs):
        if g is not None and g._dtype.is_floating_point and np.isnan(g._data).any():
            raise RuntimeError(f"Function '{type(node).__name__}' returned nan values in its "
                               f"{i}th output.")


def failed(node):
    """In anomaly mode, PyTorch's warning for any error raised while the engine ran a node
    (its hooks, its backward, the nan check): it names the node and its forward op's line."""
    where = getattr(node, "_where", None)
    warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that "
                  "caused the error:\n" + (f"  {where_str(where)}" if where else ""),
                  UserWarning, stacklevel=3)


def is_anomaly_enabled():
    """As torch.is_anomaly_enabled: whether anomaly mode is on."""
    return _state["enabled"]


def is_anomaly_check_nan_enabled():
    """As torch.is_anomaly_check_nan_enabled."""
    return _state["check_nan"]


class set_detect_anomaly:
    """As torch.autograd.set_detect_anomaly(mode, check_nan=True): on at the call, the
    previous setting back when used as a context manager exits."""

    def __init__(self, mode, check_nan=True):
        self.prev = dict(_state)
        _state.update(enabled=bool(mode), check_nan=bool(check_nan))

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _state.update(self.prev)
        return False


class detect_anomaly(set_detect_anomaly):
    """As torch.autograd.detect_anomaly(check_nan=True): on inside the with block."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = None
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self):
        self.prev = dict(_state)
        _state.update(enabled=True, check_nan=bool(self.check_nan))
        return None
