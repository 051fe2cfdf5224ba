"""Turning what the SummaryWriter is given into NumPy arrays, as torch's _convert_np."""
import numpy as np

from ...runtime.tensor import Tensor


def make_np(x):
    """x as a NumPy array: an array as it is, a Python or NumPy scalar as a 1-element array,
    a tensor detached (a meta tensor, which has no values, as one random number, as PyTorch
    does); anything else raises NotImplementedError."""
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x):
        return np.array([x])
    if isinstance(x, Tensor):
        if getattr(x.device, "type", None) == "meta":
            return np.random.randn(1)
        return x.detach().cpu().numpy()
    raise NotImplementedError(
        f"Got {type(x)}, but numpy array or torch tensor are expected.")
