"""torch.special's Bessel and Airy functions, orthogonal polynomials and Hurwitz zeta over
the ops of llgrad/ir/ops_special_bessel.py (PyTorch has no Tensor methods or torch.* names
for them: only torch.special's). Integer and bool inputs give the default float dtype; the
two-argument ones take a tensor or a number for either argument, broadcast."""
from .ir.optable import OPS
from .runtime.arg_names import bind
from .runtime.dispatch import call
from .runtime.out_args import with_out
from .runtime.tensor import Tensor

BESSEL = ("airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
          "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
          "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0")
SCALED_I = ("i0e", "i1", "i1e")
POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")
# (PyTorch's schemas name the input of these x, of the rest of BESSEL and SCALED_I self)
X_NAMED = ("airy_ai", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "spherical_bessel_j0")
_HALF = {"float16": "Half", "bfloat16": "BFloat16"}


def _no_half(name, *xs):
    for x in xs:
        if isinstance(x, Tensor) and x.dtype.name in _HALF:
            raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                      f"'{_HALF[x.dtype.name]}'")


def _unary(name, op):
    def run(input):
        if not isinstance(input, Tensor):
            raise TypeError(f"special_{name}(): argument 'input' (position 1) must be Tensor, "
                            f"not {type(input).__name__}")
        if op == "special_bessel":
            _no_half(name, input)
        return call(OPS[op], (input,), {"fn": name})

    if name in X_NAMED:      # (by PyTorch's name: x=, not input=)
        def fn(*args, out=None, **named):
            return run(*bind(name, ("x",), args, named))
    else:
        def fn(input, *, out=None):
            return run(input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"As torch.special.{name}."
    # (out= as PyTorch's: the cast check, a resize of a wrong shape, and autograd's refusal
    # for the functions that have a derivative)
    return with_out(fn, "special_" + name, grad_check=op == "scaled_bessel_i")


def _binary(name, op, first, second, number=None):
    number = number or first

    def fn(*args, out=None, **named):       # (first, second: PyTorch's names, x= and n=)
        input, other = bind(name, (first, second), args, named)
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            raise TypeError(f"special_{name}() received an invalid combination of arguments - "
                            f"got ({type(input).__name__}, {type(other).__name__}), but "
                            f"expected one of:\n * (Tensor {first}, Tensor {second}, *, Tensor "
                            f"out = None)\n * (Number {number}, Tensor {second}, *, Tensor out "
                            f"= None)\n * (Tensor {first}, Number {second}, *, Tensor out = "
                            "None)\n")
        _no_half(name, input, other)
        attrs = {"fn": name} if op == "orthogonal_polynomial" else {}
        return call(OPS[op], (input, other), attrs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"As torch.special.{name}({first}, {second})."
    return with_out(fn, "special_" + name, grad_check=op == "zeta")


FUNCTIONS = {n: _unary(n, "special_bessel") for n in BESSEL}
FUNCTIONS.update({n: _unary(n, "scaled_bessel_i") for n in SCALED_I})
FUNCTIONS.update({n: _binary(n, "orthogonal_polynomial", "x", "n") for n in POLYNOMIALS})
FUNCTIONS["zeta"] = _binary("zeta", "zeta", "input", "other", "self")
