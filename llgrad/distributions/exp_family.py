"""torch.distributions.exp_family: ExponentialFamily (defined with Distribution in
distribution.py)."""
from .distribution import ExponentialFamily

__all__ = ["ExponentialFamily"]
