"""torch.special's Bessel, Airy and orthogonal-polynomial functions and the Hurwitz zeta:
four elementwise ops, each a family named by its `fn` attribute (special_bessel.py,
special_polynomials.py compute them as PyTorch's kernels do). Compiled code calls their
NumPy implementations back (native_host, codegen/lowerings/host_call.py): these are rare
functions of long series, not worth native loops of their own.

Derivatives are PyTorch's (tools/autograd/derivatives.yaml): i0e, i1 and i1e have theirs,
zeta has one in q only (in x PyTorch raises at backward); the others have none (their
results never require grad, as PyTorch's). scaled_bessel_i's fn "i0" (I0, torch.i0's
values) serves i1's derivative, differentiable again."""
from .optable import defop
from .special_bessel import np_bessel
from .special_polynomials import np_hurwitz_zeta, np_polynomial

_EPS = {"float16": 2.0 ** -10, "float32": 2.0 ** -23, "float64": 2.0 ** -52}
_I_NODES = {"i0": "I0Backward0", "i0e": "SpecialI0EBackward0", "i1": "SpecialI1Backward0",
            "i1e": "SpecialI1EBackward0"}


def _scaled_i_vjp(c, g):
    x, r = c.self, c.result
    if c.fn == "i0":            # (i1's derivative needs I0 differentiable: I0' = I1)
        return (g * x._op("scaled_bessel_i", fn="i1"),)
    if c.fn == "i0e":
        return (g * (x._op("scaled_bessel_i", fn="i1e") - x.sgn() * r),)
    # PyTorch's i1_backward / i1e_backward: 0.5 where |x| <= eps (the formula's 0 / 0)
    eps = _EPS.get(x.dtype.name, 2.0 ** -23)
    not_tiny = x.abs() > eps
    safe = x.where(not_tiny, eps)
    if c.fn == "i1":
        d = safe._op("scaled_bessel_i", fn="i0") - r * safe.reciprocal()
    else:
        d = safe._op("scaled_bessel_i", fn="i0e") - r * (safe.sgn() + safe.reciprocal())
    return (g * d.where(not_tiny, 0.5),)


# (no derivative: the results of a tensor that requires grad do not require it)
defop("special_bessel", np_bessel, kind="elementwise", promote=(0,), float_out=True,
      cost=40, native_host=True)
defop("scaled_bessel_i", np_bessel, vjp=_scaled_i_vjp,
      grad_fn=lambda inputs, attrs: _I_NODES[attrs["fn"]], save=("self", "result"),
      kind="elementwise", promote=(0,), float_out=True, cost=40, native_host=True)
defop("orthogonal_polynomial", np_polynomial, args=("self", "n"), kind="elementwise",
      promote=(0, 1), float_out=True, cost=40, native_host=True)


def _zeta_vjp(c, g):
    if c.needs(0):
        raise NotImplementedError("the derivative for 'zeta' is not implemented.")
    x, q = c.self, c.other
    # PyTorch's: grad * -x * zeta(x + 1, q) (x a Python number stays one)
    if isinstance(x, (int, float)):
        return (None, g * -x * q.new_full((), x + 1.0)._op("zeta", q))
    return (None, g * -x * (x + 1.0)._op("zeta", q))


def _zeta_node(inputs, attrs):
    x, q = inputs
    return "SpecialZetaBackward" + ("1" if isinstance(x, (int, float)) else
                                    "2" if isinstance(q, (int, float)) else "0")


defop("zeta", np_hurwitz_zeta, vjp=_zeta_vjp, grad_fn=_zeta_node, args=("self", "other"),
      save=("self", "other"), kind="elementwise", promote=(0, 1), float_out=True, cost=40,
      native_host=True)
