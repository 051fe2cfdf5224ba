"""JAX-style functional transforms: grad, value_and_grad and vjp, compiled as one graph
(forward and backward together). They nest: inside an outer transform the inner gradient
is taken with create_graph, so the outer one differentiates through it."""
from __future__ import annotations
import weakref
from typing import TYPE_CHECKING

from ..runtime import grad_mode
from ..runtime.autograd_api import grad as autograd_grad
from .compiled_function import CompiledFunction
from ..runtime.tensor import Tensor
from ..tracer.pytree import flatten, unflatten

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def _argnums(argnums, nargs):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -nargs <= n < nargs:
            raise ValueError(f"argnums {n} is out of range for a function of {nargs} "
                             "positional arguments")
    return tuple(n % nargs for n in nums)


def _differentiable(x, what):
    if not isinstance(x, Tensor) or not x._dtype.is_floating_point:
        raise TypeError(f"{what} must be a floating-point tensor, got "
                        f"{getattr(x, 'dtype', type(x).__name__)}")
    # inside an outer transform x already requires grad: keep its history (nesting)
    return x if x.requires_grad else x.detach().requires_grad_(True)


def _joint(fn, argnums, has_aux, with_value):
    def joint(*args, **kwargs):
        nums = _argnums(argnums, len(args))
        args = list(args)
        # an outer transform hands in tensors that require grad: differentiate through us
        nested = any(isinstance(a, Tensor) and a.requires_grad for a in args)
        for n in nums:
            args[n] = _differentiable(args[n], f"argument {n}")
        with grad_mode.enable_grad():
            out = fn(*args, **kwargs)
            value, aux = (out if has_aux else (out, None))
            if not isinstance(value, Tensor) or value._data.size != 1:
                raise TypeError("grad requires a function returning a scalar tensor, got "
                                f"{type(value).__name__}"
                                f"{' of shape ' + str(tuple(value.shape)) if isinstance(value, Tensor) else ''}")
            # a value that does not depend on the arguments (the inner gradient of x * 2,
            # a constant) has zero gradients, as in torch.func.grad and JAX, where
            # autograd.grad would raise that it does not require grad
            grads = autograd_grad(value, [args[n] for n in nums], create_graph=nested,
                                  allow_unused=True) if value.requires_grad else \
                (None,) * len(nums)
        grads = tuple(g if g is not None else args[n].new_zeros(args[n].shape)
                      for g, n in zip(grads, nums))
        g = grads[0] if isinstance(argnums, int) else grads
        if not nested:          # results of a gradient computation, not part of a graph
            value = value.detach()
            leaves, tree = flatten(aux)
            aux = unflatten(tree, [x.detach() if isinstance(x, Tensor) else x
                                   for _, x in leaves])
        if not with_value:
            return (g, aux) if has_aux else g
        return ((value, aux) if has_aux else value), g
    joint.__name__ = f"grad_{getattr(fn, '__name__', 'f')}"
    # what CompiledFunction converts (tracer/convert.py): the user's function, not this
    # wrapper, whose ifs are llgrad's own Python; rewrap puts a converted fn back in
    joint._llgrad_inner = fn
    joint._llgrad_rewrap = lambda f: _joint(f, argnums, has_aux, with_value)
    return joint


def grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         backend: str | None = None) -> CompiledFunction:
    """The gradient of a scalar function with respect to argument(s) argnums (a tensor, or
    a tuple for a tuple of argnums), JAX's grad (as torch.func.grad): fn and its backward
    are compiled as one graph. has_aux: fn returns (value, aux) and the result is (grad,
    aux). Transforms nest (grad of grad) for higher order."""
    return CompiledFunction(_joint(fn, argnums, has_aux, False), backend)


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   backend: str | None = None) -> CompiledFunction:
    """(fn's value, its gradient), computed by one compiled graph, as JAX's value_and_grad
    (torch.func.grad_and_value gives them the other way round); arguments as grad's."""
    return CompiledFunction(_joint(fn, argnums, has_aux, True), backend)


_compiled = weakref.WeakKeyDictionary()     # fn -> CompiledFunction, for vjp


def _reset():
    _compiled.clear()


def vjp(fn: Callable, *primals: Tensor) -> tuple[object, Callable]:
    """(fn(*primals), vjp_fn) where vjp_fn(cotangents) returns one gradient per primal, as
    torch.func.vjp; fn is compiled (one llgrad.compile per fn, kept while fn lives)."""
    cf = _compiled.get(fn)
    if cf is None:
        cf = _compiled[fn] = CompiledFunction(fn)
    xs = [_differentiable(p, f"primal {i}") for i, p in enumerate(primals)]
    out = cf(*xs)

    def vjp_fn(cotangents):
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        cts = list(cotangents) if isinstance(cotangents, (tuple, list)) else [cotangents]
        grads = autograd_grad(outs, xs, cts, retain_graph=True, allow_unused=True,
                              create_graph=grad_mode.state.grad_enabled and any(
                                  p.requires_grad for p in primals))
        return tuple(g if g is not None else x.new_zeros(x.shape) for g, x in zip(grads, xs))
    return out, vjp_fn
