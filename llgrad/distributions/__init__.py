"""torch.distributions: Distribution, Categorical, Normal, Bernoulli, Uniform, Independent,
MixtureSameFamily, MultivariateNormal, Beta, Gamma, Chi2, Dirichlet, Exponential, Laplace,
LogNormal, OneHotCategorical, Poisson, Binomial, Geometric, StudentT, TransformedDistribution
and its transforms, their constraints and kl_divergence, with PyTorch's
parametrisations, shapes, validation and formulas. Sampling draws from llgrad's generator
(so the values differ from PyTorch's, as any two generators' do); inside llgrad.compile the
draws are traced and keep the generator's state."""
from . import constraints, transforms  # noqa: F401
from .bernoulli import Bernoulli  # noqa: F401
from .beta import Beta  # noqa: F401
from .binomial import Binomial  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .dirichlet import Dirichlet  # noqa: F401
from .distribution import Distribution, ExponentialFamily  # noqa: F401
from .exponential import Exponential  # noqa: F401
from .gamma import Chi2, Gamma  # noqa: F401
from .geometric import Geometric  # noqa: F401
from .independent import Independent  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from . import kl_more  # noqa: F401  (registers the pairs of the distributions below)
from .laplace import Laplace  # noqa: F401
from .log_normal import LogNormal  # noqa: F401
from .mixture_same_family import MixtureSameFamily  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .normal import Normal  # noqa: F401
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough  # noqa: F401
from .poisson import Poisson  # noqa: F401
from .studentT import StudentT  # noqa: F401
from .transformed_distribution import TransformedDistribution  # noqa: F401
from .transforms import (AffineTransform, ComposeTransform, ExpTransform,  # noqa: F401
                         SigmoidTransform, TanhTransform, Transform)
from .uniform import Uniform  # noqa: F401

__all__ = ["AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Chi2",
           "ComposeTransform", "Dirichlet", "Distribution", "ExpTransform", "Exponential",
           "ExponentialFamily", "Gamma", "Geometric", "Independent", "Laplace", "LogNormal",
           "MixtureSameFamily", "MultivariateNormal", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Poisson", "SigmoidTransform", "StudentT",
           "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "constraints",
           "kl_divergence", "register_kl", "transforms"]
