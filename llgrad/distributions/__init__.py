"""torch.distributions: Distribution, Categorical, Normal, Bernoulli, Uniform, Independent,
MixtureSameFamily, MultivariateNormal, their constraints and kl_divergence, with PyTorch's
parametrisations, shapes, validation and formulas. Sampling draws from llgrad's generator
(so the values differ from PyTorch's, as any two generators' do); inside llgrad.compile the
draws are traced and keep the generator's state."""
from . import constraints  # noqa: F401
from .bernoulli import Bernoulli  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .distribution import Distribution, ExponentialFamily  # noqa: F401
from .independent import Independent  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .mixture_same_family import MixtureSameFamily  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .normal import Normal  # noqa: F401
from .uniform import Uniform  # noqa: F401

__all__ = ["Bernoulli", "Categorical", "Distribution", "ExponentialFamily", "Independent",
           "MixtureSameFamily", "MultivariateNormal", "Normal", "Uniform", "constraints",
           "kl_divergence", "register_kl"]
