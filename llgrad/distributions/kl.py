"""torch.distributions.kl: kl_divergence(p, q) and register_kl, with PyTorch's formulas for
the pairs of llgrad's distributions; the most specific registered pair of types wins."""
from math import inf

from ..nn.functional import softplus
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import ExponentialFamily
from .normal import Normal

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
