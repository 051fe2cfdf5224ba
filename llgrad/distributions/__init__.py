"""torch.distributions: Distribution, Categorical, Normal, Bernoulli, their constraints and
kl_divergence, with PyTorch's parametrisations, shapes, validation and formulas. Sampling
draws from llgrad's generator (so the values differ from PyTorch's, as any two generators'
do); inside llgrad.compile the draws are traced and keep the generator's state."""
from . import constraints  # noqa: F401
from .bernoulli import Bernoulli  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .distribution import Distribution, ExponentialFamily  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .normal import Normal  # noqa: F401

__all__ = ["Bernoulli", "Categorical", "Distribution", "ExponentialFamily", "Normal",
           "constraints", "kl_divergence", "register_kl"]
