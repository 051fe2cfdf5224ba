"""torch.distributions.ContinuousBernoulli: the continuous relaxation of a Bernoulli on
[0, 1] (Loaiza-Ganem & Cunningham 2019), with PyTorch's Taylor expansions near probs 0.5
and reparameterised samples by its icdf."""
import math
from numbers import Number

from ..nn.functional import binary_cross_entropy_with_logits
from ..runtime.creation import ones_like, rand, zeros_like
from ..runtime.functions import abs as _abs, expm1, ge, gt, le, log, log1p, pow, sqrt, where
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size
from . import constraints
from .distribution import ExponentialFamily
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501),
    validate_args=None), as torch's."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # (checked before the clamp below would hide bad values)
            if validate_args is not None:
                if not self.arg_constraints["probs"].check(self.probs).all():
                    raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    # (PyTorch's torch.max of the two masks: an or, which llgrad.compile lowers natively)
    def _outside_unstable_region(self):
        return le(self.probs, self._lims[0]) | gt(self.probs, self._lims[1])

    def _cut_probs(self):
        return where(self._outside_unstable_region(), self.probs,
                     self._lims[0] * ones_like(self.probs))

    def _cont_bern_log_norm(self):
        cut_probs = self._cut_probs()
        below_half = where(le(cut_probs, 0.5), cut_probs, zeros_like(cut_probs))
        above_half = where(ge(cut_probs, 0.5), cut_probs, ones_like(cut_probs))
        log_norm = log(_abs(log1p(-cut_probs) - log(cut_probs))) - where(
            le(cut_probs, 0.5), log1p(-2.0 * below_half), log(2.0 * above_half - 1.0))
        x = pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (log1p(-cut_probs) - log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * pow(x, 2)) * x
        return where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return sqrt(self.variance)

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        variances = (cut_probs * (cut_probs - 1.0) / pow(1.0 - 2.0 * cut_probs, 2)
                     + 1.0 / pow(log1p(-cut_probs) - log(cut_probs), 2))
        x = pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return where(self._outside_unstable_region(), variances, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return self._param.size()

    def sample(self, sample_shape=Size()):
        u = rand(self._extended_shape(sample_shape), dtype=self.probs.dtype)
        with no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=Size()):
        u = rand(self._extended_shape(sample_shape), dtype=self.probs.dtype)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return (-binary_cross_entropy_with_logits(logits, value, reduction="none")
                + self._cont_bern_log_norm())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = ((pow(cut_probs, value) * pow(1.0 - cut_probs, 1.0 - value) + cut_probs - 1.0)
                / (2.0 * cut_probs - 1.0))
        unbounded_cdfs = where(self._outside_unstable_region(), cdfs, value)
        return where(le(value, 0.0), zeros_like(value),
                     where(ge(value, 1.0), ones_like(value), unbounded_cdfs))

    def icdf(self, value):
        cut_probs = self._cut_probs()
        return where(self._outside_unstable_region(),
                     (log1p(-cut_probs + value * (2.0 * cut_probs - 1.0)) - log1p(-cut_probs))
                     / (log(cut_probs) - log1p(-cut_probs)), value)

    def entropy(self):
        log_probs0 = log1p(-self.probs)
        log_probs1 = log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        out_unst_reg = le(x, self._lims[0] - 0.5) | gt(x, self._lims[1] - 0.5)
        cut_nat_params = where(out_unst_reg, x, (self._lims[0] - 0.5) * ones_like(x))
        log_norm = log(_abs(expm1(cut_nat_params))) - log(_abs(cut_nat_params))
        taylor = 0.5 * x + pow(x, 2) / 24.0 - pow(x, 4) / 2880.0
        return where(out_unst_reg, log_norm, taylor)
