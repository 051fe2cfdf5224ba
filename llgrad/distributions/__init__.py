"""torch.distributions: Distribution and its subclasses (Normal, Categorical, Bernoulli, Beta,
Binomial, Cauchy, Chi2, ContinuousBernoulli, Dirichlet, Exponential, FisherSnedecor, Gamma,
GeneralizedPareto, Geometric, Gumbel, HalfCauchy, HalfNormal, Independent, InverseGamma,
Kumaraswamy, LKJCholesky, Laplace, LogNormal, LogisticNormal, LowRankMultivariateNormal,
MixtureSameFamily, Multinomial, MultivariateNormal, NegativeBinomial, OneHotCategorical,
Pareto, Poisson, RelaxedBernoulli, RelaxedOneHotCategorical, StudentT,
TransformedDistribution, Uniform, VonMises, Weibull, Wishart), the transforms, constraints
and their biject_to / transform_to registries, and kl_divergence, with PyTorch's
parametrisations, shapes, validation and formulas. Sampling draws from llgrad's generator
(so the values differ from PyTorch's, as any two generators' do); inside llgrad.compile the
draws are traced and keep the generator's state."""
from . import constraints, transforms  # noqa: F401
from .constraint_registry import biject_to, transform_to  # noqa: F401
from .bernoulli import Bernoulli  # noqa: F401
from .beta import Beta  # noqa: F401
from .binomial import Binomial  # noqa: F401
from . import chi2, exp_family  # noqa: F401  (torch's module names)
from .categorical import Categorical  # noqa: F401
from .cauchy import Cauchy  # noqa: F401
from .continuous_bernoulli import ContinuousBernoulli  # noqa: F401
from .dirichlet import Dirichlet  # noqa: F401
from .distribution import Distribution, ExponentialFamily  # noqa: F401
from .exponential import Exponential  # noqa: F401
from .fishersnedecor import FisherSnedecor  # noqa: F401
from .gamma import Chi2, Gamma  # noqa: F401
from .generalized_pareto import GeneralizedPareto  # noqa: F401
from .geometric import Geometric  # noqa: F401
from .gumbel import Gumbel  # noqa: F401
from .half_cauchy import HalfCauchy  # noqa: F401
from .half_normal import HalfNormal  # noqa: F401
from .independent import Independent  # noqa: F401
from .inverse_gamma import InverseGamma  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from . import kl_more, kl_new  # noqa: F401  (register the pairs of the distributions below)
from .kumaraswamy import Kumaraswamy  # noqa: F401
from .laplace import Laplace  # noqa: F401
from .lkj_cholesky import LKJCholesky  # noqa: F401
from .log_normal import LogNormal  # noqa: F401
from .logistic_normal import LogisticNormal  # noqa: F401
from .lowrank_multivariate_normal import LowRankMultivariateNormal  # noqa: F401
from .mixture_same_family import MixtureSameFamily  # noqa: F401
from .multinomial import Multinomial  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .negative_binomial import NegativeBinomial  # noqa: F401
from .normal import Normal  # noqa: F401
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough  # noqa: F401
from .pareto import Pareto  # noqa: F401
from .poisson import Poisson  # noqa: F401
from .relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli  # noqa: F401
from .relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical  # noqa: F401,E501
from .studentT import StudentT  # noqa: F401
from .transformed_distribution import TransformedDistribution  # noqa: F401
from .transforms import (AbsTransform, AffineTransform, CatTransform,  # noqa: F401
                         ComposeTransform, CorrCholeskyTransform,
                         CumulativeDistributionTransform, ExpTransform, IndependentTransform,
                         LowerCholeskyTransform, PositiveDefiniteTransform, PowerTransform,
                         ReshapeTransform, SigmoidTransform, SoftmaxTransform,
                         SoftplusTransform, StackTransform, StickBreakingTransform,
                         TanhTransform, Transform, identity_transform)
from .uniform import Uniform  # noqa: F401
from .von_mises import VonMises  # noqa: F401
from .weibull import Weibull  # noqa: F401
from .wishart import Wishart  # noqa: F401

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform",
           "Categorical", "Cauchy", "Chi2", "ComposeTransform", "ContinuousBernoulli",
           "CorrCholeskyTransform", "CumulativeDistributionTransform", "Dirichlet",
           "Distribution", "ExpTransform", "Exponential", "ExponentialFamily",
           "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy",
           "HalfNormal", "Independent", "IndependentTransform", "InverseGamma", "Kumaraswamy",
           "LKJCholesky", "Laplace", "LogNormal", "LogisticNormal", "LowRankMultivariateNormal",
           "LowerCholeskyTransform", "MixtureSameFamily", "Multinomial", "MultivariateNormal",
           "NegativeBinomial", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PositiveDefiniteTransform",
           "PowerTransform", "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform",
           "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "StackTransform",
           "StickBreakingTransform", "StudentT", "TanhTransform", "Transform",
           "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart", "biject_to",
           "constraints", "identity_transform", "kl_divergence", "register_kl", "transform_to",
           "transforms"]
