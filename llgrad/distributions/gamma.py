"""torch.distributions.Gamma: Gamma(concentration, rate), with reparameterised samples whose
gradient w.r.t. the concentration is PyTorch's implicit one (_samplers.py), drawn from
llgrad's generator."""
from numbers import Number

from ..runtime.dtype_info import finfo
from ..runtime.functions import digamma, lgamma, log, xlogy
from ..runtime.creation import tensor
from ..runtime.tensor import Size, Tensor
from . import constraints
from ._samplers import gamma_rsample
from ._special import gammainc
from .distribution import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Gamma", "Chi2"]


class Gamma(ExponentialFamily):
    """Gamma(concentration, rate, validate_args=None), as torch's."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, Number) and isinstance(rate, Number):
            batch_shape = Size()
        else:
            batch_shape = self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Gamma, batch_shape, _instance, "concentration", "rate")

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        value = gamma_rsample(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=finfo(value.dtype).tiny)

    def log_prob(self, value):
        if not isinstance(value, Tensor):
            value = tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return (xlogy(self.concentration, self.rate) + xlogy(self.concentration - 1, value)
                - self.rate * value - lgamma(self.concentration))

    def entropy(self):
        return (self.concentration - log(self.rate) + lgamma(self.concentration)
                + (1.0 - self.concentration) * digamma(self.concentration))

    @property
    def _natural_params(self):
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y):
        return lgamma(x + 1) + (x + 1) * log(-y.reciprocal())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)


class Chi2(Gamma):
    """Chi2(df, validate_args=None): Gamma(df / 2, 1 / 2), as torch's."""
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2
