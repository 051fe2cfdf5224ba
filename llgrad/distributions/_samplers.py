"""The samplers behind Gamma, Dirichlet (and Beta), Poisson and Binomial, written with
tensor ops over llgrad's generator (so a traced sampling step replays eager's numbers), and
PyTorch's implicit reparameterisation gradients of the Gamma and Dirichlet samples.

Gamma, Dirichlet, Poisson and Binomial draw as ATen's CPU kernels do, element by element
(ir/torch_gamma.py: PyTorch's samples for a seed; traced, their random ops). The gradient
formulas (standard_gamma_grad_one and
dirichlet_grad_one of ATen's Distributions.h: Taylor series, Rice saddle-point expansions and rational
approximations by region) are computed in float64 for every element and the region's value
selected. rsample puts them on the sample through a zero-valued surrogate: the value is
the sample, the gradient with respect to the concentration is PyTorch's."""
import numpy as np

from ..runtime.creation import ones_like
from ..runtime.dtypes import float64
from ..runtime.functions import digamma, exp, log, sqrt, where
from ..runtime.functions_histogram import binomial as _binomial, poisson as _poisson
from ..runtime.grad_mode import no_grad
from ..runtime.methods_random_more import _sample_dirichlet, _standard_gamma

__all__ = ["standard_gamma", "standard_gamma_grad", "dirichlet_grad", "sample_dirichlet",
           "poisson", "binomial", "gamma_rsample", "dirichlet_rsample"]

def _f32(v):
    return float(np.float32(v))


def standard_gamma(alpha):
    """Gamma(alpha, 1) draws in alpha's shape and dtype, drawn as PyTorch's CPU kernel draws
    them (runtime/methods_random_more._standard_gamma)."""
    with no_grad():
        return _standard_gamma(alpha.detach())


_GAMMA_UV = ((0.16009398, -0.094634809, 0.025146376, -0.0030648343,
              1, 0.32668115, 0.10406089, 0.0014179084),
             (0.53487893, 0.1298071, 0.065735949, -0.0015649758,
              0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
             (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777,
              0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07))


def _nan_to_zero(r):
    return where(r != r, 0.0, r)


def standard_gamma_grad(alpha, x):
    """d x / d alpha for x ~ Gamma(alpha, 1) held at its CDF (torch._standard_gamma_grad)."""
    with no_grad(), np.errstate(all="ignore"):     # (the regions not selected may overflow)
        dt = x.dtype
        a, x = alpha.detach().to(float64), x.detach().to(float64)
        numer, denom = ones_like(x), a
        s1, s2 = numer / denom, numer / (denom * denom)
        for i in range(1, 6):
            numer = numer * (-x / i)
            denom = denom + 1
            s1 = s1 + numer / denom
            s2 = s2 + numer / (denom * denom)
        pow_x_a = x.pow(a)
        pdf = x.pow(a - 1) * exp(-x)
        cdf_a = (log(x) - digamma(a)) * pow_x_a * s1 - pow_x_a * s2
        small = _nan_to_zero(-cdf_a / pdf)
        near = (_f32(0.9) * a <= x) & (x <= _f32(1.1) * a)
        n1 = 1 + 24 * a * (1 + 12 * a)
        n2 = 1440 * a * a + 6 * x * (53 - 120 * x) - 65 * x * x / a + a * (107 + 3600 * x)
        rice_near = n1 * n2 / (1244160 * (a * a) * (a * a))
        den = sqrt(8 * a)
        term2 = den / (a - x)
        term3 = (x - a - a * log(x / a)).pow(-1.5)
        term23 = where(x < a, term2 - term3, term2 + term3)
        term1 = log(x / a) * term23 - sqrt(2 / a) * (a + x) / ((a - x) * (a - x))
        stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
        rice = where(near, rice_near, -stirling * x * term1 / den)
        u, v = log(x / a), log(a)
        cv = [_GAMMA_UV[0][i] + u * (_GAMMA_UV[1][i] + u * _GAMMA_UV[2][i]) for i in range(8)]
        p = cv[0] + v * (cv[1] + v * (cv[2] + v * cv[3]))
        q = cv[4] + v * (cv[5] + v * (cv[6] + v * cv[7]))
        out = where(x < _f32(0.8), small, where(a > 8, rice, exp(p / q)))
        return out.to(dt)


def _beta_grad_alpha_small(x, alpha, beta):
    factor = digamma(alpha) - digamma(alpha + beta) - log(x)
    numer = ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * (i - beta) * x / i
        d = alpha + i
        series = series + numer / d * (factor + 1 / d)
    return _nan_to_zero(x * (1 - x).pow(-beta) * series)


def _beta_grad_beta_small(x, alpha, beta):
    factor = digamma(alpha + beta) - digamma(beta)
    numer, betas, dbetas, series = ones_like(x), ones_like(x), 0.0 * x, factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    return _nan_to_zero(-(1 - x).pow(1 - beta) * series)


def _beta_grad_alpha_mid(x, alpha, beta):
    total = alpha + beta
    mean = alpha / total
    std = sqrt(alpha * beta / (total + 1)) / total
    poly = 47 * x * (beta * beta) * (beta * beta) + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta + alpha * (
            3 * (59 + 180 * beta - 90 * x) * (beta * beta) + alpha * (
                (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (
                    8 * (1 - x) * (135 * beta - 11)))))
    pre_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    pre_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    centre = pre_num / (1 - x) * poly / pre_den
    prefactor = -x / sqrt(2 * alpha * beta / total)
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
                * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    t1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    t1 = t1_num / (sqrt(2 * alpha / beta) * total.pow(1.5) * axbx * axbx)
    t2 = 0.5 * log(alpha / (total * x))
    t3 = sqrt(8 * alpha * beta / total) / (beta * x + alpha * (x - 1))
    t4 = (beta * log(beta / (total * (1 - x))) + alpha * log(alpha / (total * x))).pow(-1.5)
    t1234 = t1 + t2 * (t3 + where(x < mean, t4, -t4))
    far = stirling * prefactor * t1234
    return where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), centre, far)


_DIRICHLET_C = np.array([
    [[[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
     [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
     [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]]],
    [[[1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
     [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
     [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]]]])


def dirichlet_grad(x, alpha, total):
    """PyTorch's torch._dirichlet_grad: the scaled reparameterised gradient of Beta(alpha,
    total - alpha) draws x."""
    with no_grad(), np.errstate(all="ignore"):
        dt = x.dtype
        # (the small-x series in the input's dtype, as ATen's scalar_t arithmetic)
        xs, alphas, totals = (t.detach().to(dt) for t in (x, alpha, total))
        betas = totals - alphas
        boundary = (totals * xs * (1 - xs)).to(float64)
        small_a = _beta_grad_alpha_small(xs, alphas, betas).to(float64)
        small_b = _beta_grad_beta_small(1 - xs, betas, alphas).to(float64)
        x, alpha, total = (t.detach().to(float64) for t in (x, alpha, total))
        beta = total - alpha
        u = log(x)
        a = log(alpha) - u
        b = log(total) - a
        pq = []
        for k in range(2):
            acc = 0.0
            for i, pu in enumerate((1.0, u, u * u)):
                for j, pa in enumerate((1.0, a, a * a)):
                    c = _DIRICHLET_C[k, i, j]
                    acc = acc + pu * pa * (c[0] + b * (c[1] + b * (c[2] + b * c[3])))
            pq.append(acc)
        approx = x * (digamma(total) - digamma(alpha)) / beta
        out = pq[0] / pq[1] * approx
        out = where((alpha > 6) & (beta > 6), _beta_grad_alpha_mid(x, alpha, beta), out)
        out = where((x >= 0.5) & (boundary < 0.75), -small_b, out)
        out = where((x <= 0.5) & (boundary < 2.5), small_a, out)
        return out.to(dt)


def sample_dirichlet(concentration):
    """Dirichlet draws over the last dim, drawn as PyTorch's CPU kernel draws them
    (runtime/methods_random_more._sample_dirichlet)."""
    with no_grad():
        return _sample_dirichlet(concentration.detach())


def gamma_rsample(concentration):
    """Gamma(concentration, 1) draws whose gradient w.r.t. concentration is PyTorch's."""
    x = standard_gamma(concentration)
    if not concentration.requires_grad:
        return x
    grad = standard_gamma_grad(concentration, x)
    return x + (concentration - concentration.detach()) * grad


def dirichlet_rsample(concentration):
    """Dirichlet draws x whose vector-Jacobian product w.r.t. concentration is PyTorch's:
    g -> grad * (g - sum(x * g))."""
    x = sample_dirichlet(concentration)
    if not concentration.requires_grad:
        return x
    total = concentration.detach().sum(-1, True).expand_as(concentration)
    grad = dirichlet_grad(x, concentration, total)
    delta = (concentration - concentration.detach()) * grad
    return x + delta - x * delta.sum(-1, True)


def poisson(rate):
    """Poisson(rate) draws in rate's shape and dtype, drawn as torch.poisson draws them."""
    with no_grad():
        return _poisson(rate.detach())


def binomial(count, prob):
    """Binomial(count, prob) draws, drawn as torch.binomial draws them."""
    with no_grad():
        return _binomial(count.detach(), prob.detach())
