"""torch._foreach_*: an op applied to each tensor of a list (with the matching element of
other lists, or one number or tensor for all), as PyTorch's multi-tensor ops used by
optimisers and the foreach recipes. Out-of-place variants return a tuple of new tensors
(differentiable, op by op); in-place ones (`_` suffix) write each tensor and return the
list given."""
from .runtime.creation import full_like as _full_like
from .runtime.functions import lerp as _lerp, maximum as _maximum, minimum as _minimum
from .runtime.functions import pow as _pow
from .runtime.linalg import vector_norm as _vector_norm
from .runtime.tensor import Tensor as _Tensor

__all__ = []


def _check(first, *others):
    n = len(first)
    if n == 0:
        raise RuntimeError("Tensor list must have at least one tensor.")
    for o in others:
        if isinstance(o, (list, tuple)) and len(o) != n:
            raise RuntimeError(f"Tensor lists must have the same number of tensors, got {n} "
                               f"and {len(o)}")
    return n


def _each(value, n):
    """value as n per-tensor values: a list or tuple is one per tensor; a 1-D tensor given
    as the scalars of a list op is split; a number or a tensor is the same for each."""
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value] * n


def _scalars(value, n):
    """A ternary op's value: a number, a list of numbers, or a 1-D tensor of them."""
    if isinstance(value, _Tensor) and value.dim() == 1 and value.numel() == n:
        return value.tolist()
    return _each(value, n)


def _export(name, fn):
    fn.__name__ = fn.__qualname__ = name
    globals()[name] = fn
    __all__.append(name)


def _unary(op):
    def out_of_place(self):
        _check(self)
        return tuple(getattr(t, op)() for t in self)

    def in_place(self):
        _check(self)
        for t in self:
            getattr(t, op + "_")()
        return self
    out_of_place.__doc__ = f"(t.{op}() for t in self), as torch._foreach_{op}."
    in_place.__doc__ = f"t.{op}_() for t in self, as torch._foreach_{op}_."
    _export(f"_foreach_{op}", out_of_place)
    _export(f"_foreach_{op}_", in_place)


for _op in ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp",
            "expm1", "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg",
            "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan",
            "tanh", "trunc"):
    _unary(_op)


def _binary(op, alpha=False):
    def apply(t, o, kw):
        return getattr(t, op)(o, **kw)

    def out_of_place(self, other, **kw):
        n = _check(self, other)
        return tuple(apply(t, o, kw) for t, o in zip(self, _each(other, n)))

    def in_place(self, other, **kw):
        n = _check(self, other)
        for t, o in zip(self, _each(other, n)):
            getattr(t, op + "_")(o, **kw)
        return self
    out_of_place.__doc__ = (f"(t.{op}(o) for t, o), o from a list, a number or one tensor, "
                            f"as torch._foreach_{op}" + (" (alpha= too)." if alpha else "."))
    in_place.__doc__ = f"t.{op}_(o) for t, o, as torch._foreach_{op}_."
    _export(f"_foreach_{op}", out_of_place)
    _export(f"_foreach_{op}_", in_place)


for _op in ("add", "sub"):
    _binary(_op, alpha=True)
for _op in ("mul", "div", "clamp_min", "clamp_max"):
    _binary(_op)


def _pairwise(name, fn):
    def out_of_place(self, other):
        n = _check(self, other)
        return tuple(fn(t, o if isinstance(o, _Tensor) else _full_like(t, o))
                     for t, o in zip(self, _each(other, n)))
    out_of_place.__doc__ = f"torch._foreach_{name}: {name}(t, o) for each t and o."
    _export(f"_foreach_{name}", out_of_place)


_pairwise("maximum", _maximum)
_pairwise("minimum", _minimum)


def _foreach_maximum_(self, other):
    """torch._foreach_maximum_: each t becomes maximum(t, o)."""
    n = _check(self, other)
    for t, o in zip(self, _each(other, n)):
        t.copy_(_foreach_maximum([t], [o])[0])
    return self


def _foreach_minimum_(self, other):
    """torch._foreach_minimum_: each t becomes minimum(t, o)."""
    n = _check(self, other)
    for t, o in zip(self, _each(other, n)):
        t.copy_(_foreach_minimum([t], [o])[0])
    return self


def _foreach_pow(self, exponent):
    """torch._foreach_pow: t ** e for each t (a number base: base ** t for each t)."""
    if not isinstance(self, (list, tuple)):
        _check(exponent)
        return tuple(_pow(self, t) for t in exponent)
    n = _check(self, exponent)
    return tuple(t.pow(e) for t, e in zip(self, _each(exponent, n)))


def _foreach_pow_(self, exponent):
    """torch._foreach_pow_: each t becomes t ** e."""
    n = _check(self, exponent)
    for t, e in zip(self, _each(exponent, n)):
        t.pow_(e)
    return self


def _ternary(op):
    def out_of_place(self, tensor1, tensor2, value=1):
        n = _check(self, tensor1, tensor2)
        return tuple(getattr(t, op)(a, b, value=v) for t, a, b, v in
                     zip(self, tensor1, tensor2, _scalars(value, n)))

    def in_place(self, tensor1, tensor2, value=1):
        n = _check(self, tensor1, tensor2)
        for t, a, b, v in zip(self, tensor1, tensor2, _scalars(value, n)):
            getattr(t, op + "_")(a, b, value=v)
        return self
    out_of_place.__doc__ = f"torch._foreach_{op}: t.{op}(a, b, value=v) for each t."
    in_place.__doc__ = f"torch._foreach_{op}_: t.{op}_(a, b, value=v) for each t."
    _export(f"_foreach_{op}", out_of_place)
    _export(f"_foreach_{op}_", in_place)


_ternary("addcmul")
_ternary("addcdiv")


def _foreach_lerp(self, tensors1, weight):
    """torch._foreach_lerp: lerp(t, end, w) for each t, w a number, numbers or tensors."""
    n = _check(self, tensors1, weight)
    return tuple(_lerp(t, e, w) for t, e, w in zip(self, tensors1, _each(weight, n)))


def _foreach_lerp_(self, tensors1, weight):
    """torch._foreach_lerp_: each t becomes lerp(t, end, w)."""
    n = _check(self, tensors1, weight)
    for t, e, w in zip(self, tensors1, _each(weight, n)):
        t.lerp_(e, w)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    """torch._foreach_norm: the vector norm of each tensor (0-d tensors)."""
    _check(self)
    return tuple(_vector_norm(t, ord, dtype=dtype) for t in self)


def _foreach_powsum(self, ord=2, dtype=None):
    """torch._foreach_powsum: sum(|t| ** ord) of each tensor."""
    _check(self)
    return tuple((t if dtype is None else t.to(dtype)).abs().pow(ord).sum() for t in self)


def _foreach_max(self):
    """torch._foreach_max: the largest element of each tensor."""
    _check(self)
    return tuple(t.max() for t in self)


def _foreach_mm(self, other):
    """torch._foreach_mm: a @ b for each pair."""
    _check(self, other)
    return tuple(a.mm(b) for a, b in zip(self, other))


def _foreach_clone(self):
    """torch._foreach_clone: a clone of each tensor."""
    _check(self)
    return tuple(t.clone() for t in self)


def _foreach_copy_(self, src, non_blocking=False):
    """torch._foreach_copy_: each t becomes a copy of its src."""
    _check(self, src)
    for t, s in zip(self, src):
        t.copy_(s)
    return self


def _foreach_zero_(self):
    """torch._foreach_zero_: each tensor becomes zeros."""
    _check(self)
    for t in self:
        t.zero_()
    return self


__all__ += ["_foreach_maximum_", "_foreach_minimum_", "_foreach_pow", "_foreach_pow_",
            "_foreach_lerp", "_foreach_lerp_", "_foreach_norm", "_foreach_powsum",
            "_foreach_max", "_foreach_mm", "_foreach_clone", "_foreach_copy_", "_foreach_zero_"]
