"""torch.autograd's anomaly-mode switches: set_detect_anomaly / detect_anomaly (a context
manager, and set_detect_anomaly also a plain call) and is_anomaly_enabled. llgrad keeps the
flag so that programs that turn it on run; its backward does not add PyTorch's extra checks
(a nan in a backward result is not raised)."""
_state = {"enabled": False, "check_nan": True}


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

    def __enter__(self):
        self.prev = dict(_state)
        _state.update(enabled=True, check_nan=bool(self.check_nan))
        return None
