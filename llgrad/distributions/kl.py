"""torch.distributions.kl: kl_divergence(p, q) and register_kl, with PyTorch's formulas for
the pairs of llgrad's distributions; the most specific registered pair of types wins."""
import math
from math import inf

from ..nn.functional import softplus
from ..runtime.functions import broadcast_shapes
from ..runtime.functions_linalg_solve import solve_triangular
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import ExponentialFamily
from .independent import Independent
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis, _batch_trace_XXT
from .normal import Normal
from .uniform import Uniform
from .utils import _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}


def register_kl(type_p, type_q):
    """A decorator registering fn(p, q) as KL(p || q) for p of type_p, q of type_q."""
    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        return fun
    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    # (the pair nearest to the types by their MROs)
    best = min(matches, key=lambda pq: (type_p.__mro__.index(pq[0]), type_q.__mro__.index(pq[1])))
    return _KL_REGISTRY[best]


def kl_divergence(p, q):
    """KL(p || q), batched over the distributions' batch shape."""
    fun = _dispatch_kl(type(p), type(q))
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fun(p, q)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1[q.probs == 0] = inf
    t1[p.probs == 0] = 0
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2[q.probs == 1] = inf
    t2[p.probs == 1] = 0
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t[(q.probs == 0).expand_as(t)] = inf
    t[(p.probs == 0).expand_as(t)] = 0
    return t.sum(-1)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    result[(q.low > p.low) | (q.high < p.high)] = inf
    return result


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    p_tril, q_tril = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = (q_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - p_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    combined_batch_shape = broadcast_shapes(q_tril.shape[:-2], p_tril.shape[:-2])
    n = p.event_shape[0]
    q_scale_tril = q_tril.expand(combined_batch_shape + (n, n))
    p_scale_tril = p_tril.expand(combined_batch_shape + (n, n))
    term2 = _batch_trace_XXT(solve_triangular(q_scale_tril, p_scale_tril, upper=False))
    term3 = _batch_mahalanobis(q_tril, (q.loc - p.loc))
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    # (PyTorch computes a Bregman divergence for two of one family; llgrad's families all
    # have their own formula above)
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential "
                                  "families cannot                             be computed "
                                  "using Bregman divergences")
    raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                              f"{p.__class__.__name__} and q type {q.__class__.__name__}")
