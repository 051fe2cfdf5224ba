"""Reductions, normalisers, scans, matrix products and gather/scatter methods."""
import math
import warnings

import numpy as np

from ..ir import OPS
from ..ir.geometry import broadcasts_to
from ..ir.optable import method_doc
from . import autocast_cast, dtypes
from .dispatch import call, scalar_type_name as tname
from .reduce_args import NO_DIM, dim_given, lse_dims
from .reduce_dtype import cast_for, result_as
from .shapes import broadcast_shapes, norm_dim, norm_dims
from .return_types import named_result
from .tensor import Tensor
from .user_frames import user_stacklevel


return_max, return_min = named_result("max"), named_result("min")


def _def(name, fn):
    fn.__name__ = fn.__qualname__ = name    # (a TypeError names max(), as PyTorch's)
    fn.__doc__ = fn.__doc__ or method_doc(name)     # ("As torch.Tensor.<name>.")
    setattr(Tensor, name, fn)


def _float_only(self, what, given=False):
    if self._dtype._cat < 2:     # (given: the dtype came as an argument)
        raise RuntimeError(f"{what}(): could not infer output dtype. "
                           f"{'Optional' if given else 'Input'} dtype must be either a floating "
                           f"point or complex dtype. Got: {tname(self._dtype)}")


def _rdims(self, dim):
    """norm_dims for a reduction: a 0-d tensor's one dim (0 or -1) is no axis at all, ()
    (NumPy cannot reduce a 0-d array along axis 0); kept apart from None so that the
    grad_fn is named as PyTorch names a reduction over dims (SumBackward1)."""
    dims = norm_dims(dim, self._data.ndim)
    if self._data.ndim == 0:
        return None if dim is None else ()
    if dims is None and dim is not None:        # (dim=(): every dim, named as over dims)
        return tuple(range(self._data.ndim))
    return dims


def sum(self, dim=NO_DIM, keepdim=None, dtype=None):
    t, dim = cast_for(self, dtype), dim_given("sum", dim, keepdim)
    return result_as(t._op("sum", dim=_rdims(self, dim), keepdim=bool(keepdim)), dtype)


def mean(self, dim=NO_DIM, keepdim=None, dtype=None):
    dim, keepdim = dim_given("mean", dim, keepdim), bool(keepdim)
    t = self if dtype is None else self.to(dtype)
    _float_only(t, "mean", dtype is not None)
    if t._dtype is dtypes.float16 and self._dtype is not dtypes.float16:
        # (PyTorch's mean into half sums the input in float32 and rounds the mean once)
        return self.to(dtypes.float32)._op("mean", dim=_rdims(self, dim),
                                           keepdim=keepdim).to(dtypes.float16)
    return t._op("mean", dim=_rdims(self, dim), keepdim=keepdim)


def prod(self, dim=NO_DIM, keepdim=None, dtype=None):
    dim, keepdim = dim_given("prod", dim, keepdim, False), bool(keepdim)
    if isinstance(dim, (tuple, list)):      # (PyTorch's prod takes one dim)
        raise TypeError("prod() received an invalid combination of arguments - got (tuple), "
                        "but expected one of:")
    t = cast_for(self, dtype)
    return result_as(t._op("prod", dim=_rdims(self, dim), keepdim=keepdim), dtype)


def _check_nonempty(self, name, dims, tail=" Specify the reduction dim with the 'dim' argument.",
                    given=None):
    """PyTorch's errors for a max/min-like reduction of nothing: a RuntimeError (amax/amin)
    or IndexError (argmax/argmin) over all of an empty tensor, an IndexError naming the dim
    over an empty dim."""
    if self._data.size == 0 and not dims:
        raise (IndexError if name.startswith("arg") else RuntimeError)(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0.{tail}")
    for d in dims or ():
        if self._data.shape[d] == 0:
            # (amax / amin name the dim as given: -1)
            d = next((g for g in given or () if g % self._data.ndim == d), d)
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _amax_amin(name):
    def f(self, dim=(), keepdim=False):
        seq = dim is None or isinstance(dim, (tuple, list))    # (None: every dim, as PyTorch)
        dims = None if seq and not dim else _rdims(self, dim)   # (not dim != (): np.int32)
        _check_nonempty(self, name, dims, given=list(dim or ()) if seq else [dim])
        return self._op(name, dim=dims, keepdim=keepdim)
    return f


amax, amin = _amax_amin("amax"), _amax_amin("amin")


def _max_min(name, tup):
    def f(self, dim=NO_DIM, keepdim=None, *, other=NO_DIM):    # (other=: PyTorch's name)
        if isinstance(dim, Tensor) or other is not NO_DIM:      # (maximum's / minimum's)
            return getattr(self, name + "imum")(dim if other is NO_DIM else other)
        dim, keepdim = dim_given(name, dim, keepdim, False), bool(keepdim)
        if dim is None:
            if self._data.size == 0:
                raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                                   "input.numel() == 0. Specify the reduction dim with the 'dim' "
                                   "argument.")
            return self._op(name, dim=None, keepdim=False)
        d = norm_dim(dim, self._data.ndim)
        if self._data.ndim:
            _check_nonempty(self, name, (d,))
        return tup(*self._op(name + "_dim", dim=d, keepdim=keepdim))
    return f


def _arg(name):
    def f(self, dim=None, keepdim=False):
        if self._dtype is dtypes.bool_:     # (before the dim's check, as PyTorch)
            raise RuntimeError(f"{name}(): does not support bool input")
        d = None if dim is None else norm_dim(dim, self._data.ndim)
        _check_nonempty(self, name, None if d is None or not self._data.ndim else (d,), "")
        return self._op(name, dim=d, keepdim=keepdim)
    return f


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def moment(self, name, dim, unbiased, keepdim, correction, caller=None):
    """var or std (name); caller names the function in the warning (var_mean, std_mean)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if not (self._dtype.is_floating_point or getattr(self._dtype, "is_complex", False)):
        raise RuntimeError(f"{caller or 'std and var'} only support floating point and "
                           "complex dtypes")
    dims, correction = _rdims(self, dim), _correction(unbiased, correction)
    # PyTorch's factor: input numel / output numel, an empty output counting 1 (a (0, 3) warns)
    out = 1 if dims is None else math.prod(np.delete(self._data.shape, dims).tolist())
    if self._data.size / max(out, 1) - correction <= 0:
        warnings.warn(f"{caller or name}(): degrees of freedom is <= 0. Correction should be "
                      "strictly less than the reduction factor (input numel divided by output "
                      "numel).", UserWarning, stacklevel=user_stacklevel())
    return self._op(name, dim=dims, correction=correction, keepdim=keepdim)


def _moment(name):
    def method(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return moment(self, name, dim, unbiased, keepdim, correction)
    method.__name__ = name
    return method


var, std = _moment("var"), _moment("std")


def logsumexp(self, dim, keepdim=False):
    lse_dims(self._data.shape, dim, keepdim)
    t = self if self._dtype.is_floating_point else self.to(dtypes.get_default_dtype())
    return t._op("logsumexp", dim=_rdims(self, dim), keepdim=keepdim)


_TORCH_TYPE = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
               "uint8": "Byte", "bool": "Bool", "complex64": "ComplexFloat",
               "complex128": "ComplexDouble"}


def _normalizer(name):
    def method(self, dim, dtype=None):
        t = self if dtype is None else self.to(dtype)
        d = norm_dim(dim, self._data.ndim)
        if not t._dtype.is_floating_point and t._data.size:     # (PyTorch's kernels and
            last = d == max(t._data.ndim - 1, 0)                # words; none runs for none)
            raise NotImplementedError(f'"{name}{"_lastdim" if last else ""}_kernel_impl" not '
                                      f"implemented for '{_TORCH_TYPE[t._dtype.name]}'")
        return t._op(name, dim=d) if t._dtype.is_floating_point else t.clone()
    method.__name__ = name
    return method


softmax, log_softmax = _normalizer("softmax"), _normalizer("log_softmax")


def no_bool_scan(name, dtype, x):
    """PyTorch's error for a scan to bools (no such kernel; none runs for an empty x)."""
    if dtype is not None and x._data.size and dtypes.to_dtype(dtype) is dtypes.bool_:
        raise NotImplementedError(f"\"{name}_out_cpu\" not implemented for 'Bool'")


def cumsum(self, dim, dtype=None):
    no_bool_scan("cumsum", dtype, self)
    t = cast_for(self, dtype)
    return result_as(t._op("cumsum", dim=norm_dim(dim, self._data.ndim)), dtype)


def _all_any(name):
    def f(self, dim=None, keepdim=False):
        r = (self != 0).contiguous() if isinstance(dim, (tuple, list)) and not dim else \
            self._op(name, dim=_rdims(self, dim), keepdim=keepdim)  # (dim=(): each one's truth)
        return r.to(dtypes.uint8) if self._dtype is dtypes.uint8 else r   # (PyTorch's rule)
    return f


for _n, _f in (("sum", sum), ("mean", mean), ("prod", prod), ("amax", amax), ("amin", amin),
               ("max", _max_min("max", return_max)), ("min", _max_min("min", return_min)),
               ("argmax", _arg("argmax")), ("argmin", _arg("argmin")), ("var", var),
               ("std", std), ("logsumexp", logsumexp), ("softmax", softmax),
               ("log_softmax", log_softmax), ("cumsum", cumsum), ("all", _all_any("all")),
               ("any", _all_any("any"))):
    _def(_n, _f)

# ---- matrix products ---------------------------------------------------------------------------


_C_TYPES = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "float16": "c10::Half", "float32": "float",
            "float64": "double", "bfloat16": "c10::BFloat16"}


def c_type(d):
    """The C type PyTorch's kernels name a dtype by."""
    return _C_TYPES.get(d.name, d.name)


_BOOL_KERNELS = {"mm": "addmm_impl_cpu_", "self and mat2": "addmm_impl_cpu_",
                 "mv": "addmv_impl_cpu", "bmm": "bmm", "dot": "dot"}


def _same_dtype(a, b, what):
    """PyTorch's dtype check of a product, in the words of the kernel it runs (what): mm's,
    mv's (addmv), bmm's, or a named pair's; bools have no kernel."""
    if a._dtype is b._dtype:
        if a._dtype is dtypes.bool_ and what in _BOOL_KERNELS:
            raise NotImplementedError(f"\"{_BOOL_KERNELS[what]}\" not implemented for 'Bool'")
        return
    if what == "mm":
        msg = (f"expected m1 and m2 to have the same dtype, but got: {c_type(a._dtype)} != "
               f"{c_type(b._dtype)}")
    elif what == "mv":
        msg = (f"addmv input tensors must have the same dtype, but got {tname(b._dtype)}, "
               f"{tname(a._dtype)}, and {tname(b._dtype)}")
    elif what == "bmm":
        msg = f"expected scalar type {tname(a._dtype)} but found {tname(b._dtype)}"
    else:
        msg = (f"{what} must have the same dtype, but got {tname(a._dtype)} and "
               f"{tname(b._dtype)}")
    raise RuntimeError(msg)


def mm(self, mat2):
    self, mat2 = autocast_cast.autocast_lower(self, mat2)
    if self._data.ndim != 2 or mat2._data.ndim != 2:
        raise RuntimeError("self must be a matrix" if self._data.ndim != 2 else
                           "mat2 must be a matrix")
    if self._data.shape[1] != mat2._data.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({self._data.shape[0]}x"
                           f"{self._data.shape[1]} and {mat2._data.shape[0]}x"
                           f"{mat2._data.shape[1]})")
    _same_dtype(self, mat2, "mm")
    return call(OPS["mm"], (self, mat2), {})


def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    self, mat1, mat2 = autocast_cast.autocast_lower(self, mat1, mat2)
    if mat1._data.ndim != 2 or mat2._data.ndim != 2:
        raise RuntimeError("mat1 must be a matrix, got %d-D tensor" % mat1._data.ndim
                           if mat1._data.ndim != 2 else
                           "mat2 must be a matrix, got %d-D tensor" % mat2._data.ndim)
    if mat1._data.shape[1] != mat2._data.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1._data.shape[0]}x"
                           f"{mat1._data.shape[1]} and {mat2._data.shape[0]}x"
                           f"{mat2._data.shape[1]})")
    _same_dtype(self, mat2, "self and mat2")
    _same_dtype(mat1, mat2, "mat1 and mat2")
    shape = (mat1._data.shape[0], mat2._data.shape[1])
    if self._data.ndim > 2:
        raise RuntimeError(f"expand(torch.{self.type().split('.')[-1]}{{{list(self._data.shape)}}}, "
                           f"size={list(shape)}): the number of sizes provided (2) must be "
                           f"greater or equal to the number of dimensions in the tensor "
                           f"({self._data.ndim})")
    if not broadcasts_to(self._data.shape, shape):
        have = (1,) * (2 - self._data.ndim) + self._data.shape
        d = 1 if have[1] not in (1, shape[1]) else 0        # (expand checks from the last)
        raise RuntimeError(f"The expanded size of the tensor ({shape[d]}) must match the "
                           f"existing size ({have[d]}) at non-singleton dimension "
                           f"{d}.  Target sizes: {list(shape)}.  Tensor sizes: "
                           f"{list(self._data.shape)}")
    return call(OPS["addmm"], (self, mat1, mat2), dtypes.int_scales(mat1._dtype, beta, alpha))


def bmm(self, mat2):
    self, mat2 = autocast_cast.autocast_lower(self, mat2)
    if self._data.ndim != 3 or mat2._data.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if self._data.ndim != 3 else
                           "batch2 must be a 3D tensor")
    a, b = self._data.shape, mat2._data.shape
    if a[0] != b[0] or a[2] != b[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a[0]}, {a[2]}] but got: [{b[0]}, {b[1]}].")
    _same_dtype(self, mat2, "bmm")
    return call(OPS["bmm"], (self, mat2), {})


def dot(self, tensor):
    if self._data.ndim != 1 or tensor._data.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {self._data.ndim}D and "
                           f"{tensor._data.ndim}D tensors")
    if self._dtype is not tensor._dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{tname(self._dtype)} and {tname(tensor._dtype)}")
    if self._data.shape != tensor._data.shape:
        raise RuntimeError("inconsistent tensor size, expected tensor [%d] and src [%d] to have "
                           "the same number of elements, but got %d and %d elements respectively"
                           % (self._data.shape[0], tensor._data.shape[0], self._data.shape[0],
                              tensor._data.shape[0]))
    _same_dtype(self, tensor, "dot")
    return call(OPS["dot"], (self, tensor), {})


def mv(self, vec):
    if self._data.ndim != 2 or vec._data.ndim != 1 or self._data.shape[1] != vec._data.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({self._data.shape[0] if self._data.ndim else 0}), "
                           f"mat ({'x'.join(map(str, self._data.shape))}), vec "
                           f"({'x'.join(map(str, vec._data.shape))})")
    _same_dtype(self, vec, "mv")
    return call(OPS["mv"], (self, vec), {})


def _mismatch(xs, ys, a, b, folds=True):
    """PyTorch's error for x @ y whose inner sizes differ (xs, ys: the shapes once a 1-D
    operand is a matrix; a, b: the operands' ranks): the folded mm's or mv's, else, once
    the batch dims broadcast (their error first), bmm's over their product."""
    k, k2 = xs[-1], ys[-2]
    if a >= 3 and b <= 2 and folds:
        rows = math.prod(xs[:-1])
        if b == 2:
            return f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k} and {k2}x{ys[-1]})"
        return f"size mismatch, got input ({rows}), mat ({rows}x{k}), vec ({k2})"
    batch = math.prod(broadcast_shapes(xs[:-2], ys[:-2]))
    return (f"Expected size for first two dimensions of batch2 tensor to be: [{batch}, {k}] "
            f"but got: [{batch}, {k2}].")


def matmul(self, other):
    self, other = autocast_cast.autocast_lower(self, other)
    if not isinstance(other, Tensor):
        raise TypeError(f"matmul(): argument 'other' must be Tensor, not {type(other).__name__}")
    a, b = self._data.ndim, other._data.ndim
    if a == 0 or b == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a}D and {b}D")
    if a == 1 and b == 1:
        return dot(self, other)
    if a == 2 and b == 1:
        return mv(self, other)
    if a == 2 and b == 2:
        return mm(self, other)
    if a == 1 and b == 2:
        # PyTorch: unsqueeze(0), mm, then squeeze_(0) on the product (SqueezeBackward4)
        r = mm(self.unsqueeze(0), other)._op("squeeze_", dim=0)
        r._base = None            # squeezed in place: the product itself, not a view
        r._creation = None
        return r
    if a <= 2 and b >= 3:
        _same_dtype(self, other, "bmm")
    if a == 2 and b >= 3 and self.requires_grad:
        # PyTorch folds when the matrix requires grad (else it broadcasts it to bmm):
        # (other^T @ self^T)^T, made contiguous (CloneBackward0)
        return matmul(other.mT, self.t()).mT.contiguous()
    # an operand with >= 3 dims: PyTorch folds or broadcasts to bmm and ends with
    # _unsafe_view, so the result's grad_fn is UnsafeViewBackward0 (also for 1-D operands)
    x = self.unsqueeze(0) if a == 1 else self
    y = other.unsqueeze(-1) if b == 1 else other
    if a >= 3 and b >= 3:       # (PyTorch broadcasts the batch dims before bmm checks k)
        broadcast_shapes(self._data.shape[:-2], other._data.shape[:-2])
    if x._data.shape[-1] != y._data.shape[-2]:
        if a == 1 and self.requires_grad:       # (folded as above, to an mv)
            raise RuntimeError(_mismatch(other.mT.shape, (self.shape[0], 1), 3, 1))
        # (PyTorch folds only a tensor whose leading dims view as one without a copy)
        st, sh = self.stride(), self._data.shape
        folds = other.requires_grad or self._data.size == 0 or a < 3 or all(
            st[i] == st[i + 1] * sh[i + 1] for i in range(a - 2))
        raise RuntimeError(_mismatch(x._data.shape, y._data.shape, a, b, folds))
    _same_dtype(self, other, "mm" if b <= 2 and a >= 3 and b != 1 else "mv" if b == 1 else "bmm")
    r = call(OPS["matmul"], (x, y), {})
    if a == 1 or b == 1:
        shape = r._data.shape[:-2] + ((r._data.shape[-1],) if a == 1 else (r._data.shape[-2],))
        r = r._op("_unsafe_view", shape=shape)
    return r


for _n, _f in (("mm", mm), ("addmm", addmm), ("bmm", bmm), ("dot", dot), ("mv", mv), ("matmul", matmul),
               ("__matmul__", matmul)):
    _def(_n, _f)
_def("__rmatmul__", lambda self, other: matmul(other, self))
