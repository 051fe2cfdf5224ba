"""PyTorch's out= keyword of its functions (torch.add(a, b, out=c), torch.max(x, 1,
out=(values, indices))): the result is computed as without it, then written into out
(resized when its shape differs, with PyTorch's warning unless out is empty), and out is
returned. PyTorch's checks come first: no out= while autograd records (an argument requires
grad), and a result dtype out can hold (a factory's values take out's dtype). Each
llgrad.<name> function without an out parameter of its own is wrapped once, after every
module has defined them."""
import functools
import inspect
import sys
import warnings

from . import autocast_cast, creation, functions, grad_mode
from .dispatch import scalar_type_name as tname
from .dtypes import C_NAMES
from ..ir import OPS
from .functions_math import _can_cast
from .inplace import _dense
from .numpy_names import param_names
from .saved_tensor import _internal
from .tensor import Tensor

# the creation functions PyTorch gives out= (their values take out's dtype)
_FACTORIES = ("zeros", "ones", "empty", "full", "arange", "linspace", "eye", "rand", "randn",
              "randint", "randperm")


def _requires_grad(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, Tensor) and t.requires_grad:
                return True
    return False


def _users_level():
    """The stacklevel, for a warnings.warn in _put, of the user's line that called the
    function (PyTorch's warnings name it; once-per-line filters count by it)."""
    f, level = sys._getframe(2), 2
    while f is not None and _internal[f.f_code.co_filename]:
        f, level = f.f_back, level + 1
    return level


# reductions PyTorch computes in out's dtype when no dtype= is given (sum(x, 0, out=int32)),
# and logspace, a creation function outside creation.py
_IN_OUT_DTYPE = ("sum", "prod", "cumsum", "cumprod", "logspace")
# functions PyTorch declares no derivative for: their out= form takes inputs that require
# grad (autograd's check is made by the differentiable ones only)
_NO_DERIVATIVE = frozenset((
    "eq", "ne", "lt", "gt", "le", "ge", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "argmax", "argmin",
    "searchsorted", "bucketize", "histc", "nonzero", "isin"))
# functions whose out must have the result's dtype itself, and PyTorch's words when not
# (a tuple: the words for each of the outputs)
_EXACT = {n: "Expected out tensor to have dtype {r}, but got {o} instead" for n in (
    "argmax", "argmin", "max", "min", "norm", "sum", "prod", "cumsum", "cumprod", "matmul",
    "mm", "bmm", "addmm", "baddbmm", "mv", "sort", "msort", "topk", "softmax", "log_softmax",
    "cross", "gather", "diag", "tril", "triu", "renorm", "aminmax")}
_EXACT.update({n: "Expected the dtype for input and out to match, but got {R} for input's "
                  "dtype and {O} for out's dtype." for n in ("amax", "amin")})
_EXACT.update({n: "Found dtype {O} but expected {R}" for n in (
    "abs", "absolute", "neg", "negative", "clamp", "clip", "clamp_min", "clamp_max", "floor",
    "ceil", "round", "trunc", "fix", "frac", "sign", "sgn", "bitwise_not")})
_EXACT.update({n: "expected scalar_type {R} but found {O}" for n in (
    "cummax", "cummin", "logcumsumexp")})
_EXACT.update({n: n + "(): self and result must have the same scalar type" for n in (
    "index_select", "masked_select")})
_EXACT.update({"where": "Expected out type to be {R} but got {O}",
               "multinomial": "multinomial expects Long tensor out, got: {O}",
               "nan_to_num": "nan_to_num: dtype of out: {O} should be same as input: {R}",
               "dot": "result dtype {O} does not match input dtype {R}",
               "take": "take(): self and out expected to have the same dtype, but got "
                       "self.dtype = {R} and out.dtype = {O}",
               "kthvalue": ("output values must be of same type as input",
                            "output indices must be of scalar type Long")})
_EXACT.update({n: "tensordot: Expected the output tensor to have dtype {R}, but got an output "
                  "tensor with dtype {O}" for n in ("tensordot", "inner")})
_EXACT.update({n: "Expected object of scalar type {R} but got scalar type {O} for argument 'out'"
               for n in ("complex", "polar")})
_EXACT.update({"linalg_vector_norm": _EXACT["max"], "_linalg_slogdet": _EXACT["max"]})
_EXACT.update({"mode": tuple("expected scalar type '{R}' but got '{O}' for %s output" % w
                               for w in ("values", "indices")),
               "frexp": ("torch.frexp() expects mantissa to have dtype {r} but got {o}",
                         "torch.frexp() expects exponent to have int dtype but got {o}")})
_EXACT.update({n: ("Expected tensor for 'values' to have the same type as tensor for argument #2 "
                   "'self'; but type {OT} does not equal {RT} (while checking arguments for "
                   "median)", "Expected tensor for argument #1 'indices' to have scalar type "
                   "Long; but got {OT} instead (while checking arguments for median)")
               for n in ("median", "nanmedian")})
_EXACT.update({n: n + " expected out tensor dtype {R} but got: {O}" for n in (
    "linalg.matrix_norm", "linalg.norm")})


# PyTorch's own words (and error type) for a result out cannot hold
_CAST_WORDS = {"ldexp": (RuntimeError, "ldexp can't be cast to the desired output type {O}"),
               "cat": (TypeError, "torch.cat(): input types can't be cast to the desired "
                                  "output type {O}")}
# (the stacks write through PyTorch's cat)
_CAST_WORDS.update(dict.fromkeys(("concat", "concatenate", "stack", "hstack", "vstack", "dstack",
                                  "column_stack"), _CAST_WORDS["cat"]))


def _check_exact(name, r, out, k):
    if name in _EXACT and r._dtype is not out._dtype:
        words = _EXACT[name]
        raise RuntimeError((words if isinstance(words, str) else words[k]).format(
            r=C_NAMES[r._dtype.name], o=C_NAMES[out._dtype.name], R=tname(r._dtype),
            O=tname(out._dtype), RT=f"llgrad.{tname(r._dtype)}Tensor",
            OT=f"llgrad.{tname(out._dtype)}Tensor"))


def _check_out(out, r, factory, name, k):
    _check_exact(name, r, out, k)
    if not factory and not _can_cast(r._dtype, out._dtype):
        error, words = _CAST_WORDS.get(name, (RuntimeError, "result type {R} can't be cast to "
                                                             "the desired output type {O}"))
        raise error(words.format(R=tname(r._dtype), O=tname(out._dtype)))


def _write(out, r, factory, name=None):
    if isinstance(out, (tuple, list)):
        # (every out checked before any is written: PyTorch's sort(x, out=(v, wrong_i))
        # leaves v as it was)
        for k, (o, x) in enumerate(zip(out, r)):
            _check_out(o, x, factory, name, k)
        for o, x in zip(out, r):
            _put(o, x)
        # (PyTorch returns its named tuple of the outs: torch.sort(x, out=(v, i)).values)
        return type(r)(*out) if hasattr(r, "_fields") else out
    _check_out(out, r, factory, name, 0)
    return _put(out, r)


def _put(out, r):
    """r written into out (checked), out resized to r's shape first."""
    shape = tuple(r._data.shape)
    if tuple(out._data.shape) != shape:
        if out._data.size:
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out._data.shape)}, which does not match the required output "
                          f"shape {list(shape)}. This behavior is deprecated, and in a future "
                          "PyTorch release outputs will not be resized unless they have zero "
                          "elements. You can explicitly reuse an out tensor t by resizing it, "
                          "inplace, to zero elements with t.resize_(0).", UserWarning,
                          stacklevel=_users_level())
        _resize_out(out, shape)
    with grad_mode.no_grad():
        out.copy_(r)
    return out


def _wrap(fn, name, factory, grad_check=True):
    @functools.wraps(fn)
    def f(*args, **kwargs):
        if not kwargs or kwargs.get("out") is None:
            kwargs.pop("out", None)
            return fn(*args, **kwargs)
        out = kwargs.pop("out")
        _numbers_for_tensors(name, args, kwargs)
        # (an out that requires grad counts too; a factory is named by its ATen op)
        if grad_check and name not in _NO_DERIVATIVE and grad_mode.state.grad_enabled and \
                _requires_grad(args + (out,), kwargs):
            raise RuntimeError(f"{'aten::' if factory else ''}{name}(): functions with out=... arguments don't support "
                               "automatic differentiation, but one of the arguments requires "
                               "grad.")
        _check_overlap(name, out, args, kwargs)
        if (factory or name in _IN_OUT_DTYPE) and kwargs.get("dtype") is None and \
                isinstance(out, Tensor):
            kwargs["dtype"] = out.dtype
        with autocast_cast.suspended():     # (PyTorch's out= forms are on no autocast list)
            r = fn(*args, **kwargs)
        if name in _RANGES and isinstance(out, Tensor):
            r = _range_into(out, r, name)
        if name in _LIST_OUTS:
            if len(out) != len(r):
                raise RuntimeError(_LIST_OUTS[name].format(len(r), len(out)))
            with grad_mode.no_grad():   # (copied as they are: PyTorch resizes none of them)
                for o, x in zip(out, r):
                    o.copy_(x)
            return None         # (PyTorch's functions with a list out= return None)
        return _write(out, r, factory, name)
    return f


# functions whose Python-number operands PyTorch takes only without out= (its out overloads
# take Tensors): where's named parameters, or the ones whose first argument is a number
_TENSORS_WITH_OUT = {"where": ((1, "input"), (2, "other"))}
_FIRST_TENSOR_WITH_OUT = frozenset(("remainder", "bitwise_and", "bitwise_or", "bitwise_xor",
                                    "bitwise_left_shift", "bitwise_right_shift", "bucketize"))


def _numbers_for_tensors(name, args, kwargs):
    """PyTorch's TypeError for a Python number where an out= form takes a Tensor."""
    for k, param in _TENSORS_WITH_OUT.get(name, ()):
        v = args[k] if k < len(args) else kwargs.get(param)
        if isinstance(v, (bool, int, float, complex)):
            raise TypeError(f"{name}(): argument '{param}' (position {k + 1}) must be Tensor, "
                            f"not {type(v).__name__}")
    if name in _FIRST_TENSOR_WITH_OUT and args and isinstance(args[0], (bool, int, float)):
        got = ", ".join("Tensor" if isinstance(a, Tensor) else type(a).__name__ for a in args)
        raise TypeError(f"{name}() received an invalid combination of arguments - got "
                        f"({got}, out=Tensor), but expected one of:")


# functions whose out may share no memory with an input (PyTorch's assert_no_overlap); an
# elementwise op's may share all of it (the same layout) but not part (assert_no_partial_overlap)
_NO_OVERLAP = frozenset(("gather", "index_select", "cat", "concat", "concatenate", "stack",
                         "take", "masked_select", "kthvalue"))
_NO_PARTIAL_OVERLAP = frozenset(("cumsum", "cumprod", "logcumsumexp", "bernoulli"))


def _check_overlap(name, out, args, kwargs):
    """PyTorch's error for an out= that shares memory with an input, judged as its
    get_overlap_status judges (dense layouts only)."""
    op = OPS.get(name)
    if name not in _NO_OVERLAP and name not in _NO_PARTIAL_OVERLAP and (
            op is None or op.kind != "elementwise"):
        return
    outs = out if isinstance(out, (tuple, list)) else (out,)
    ins = [t for a in list(args) + list(kwargs.values())
           for t in (a if isinstance(a, (list, tuple)) else (a,)) if isinstance(t, Tensor)]
    for o in outs:
        a = o._data if isinstance(o, Tensor) else None
        if a is None or not a.size or not _dense(a):
            continue
        a0 = a.__array_interface__["data"][0]
        for x in ins:
            b = x._data
            if x._storage is not o._storage or not b.size or not _dense(b):
                continue
            b0 = b.__array_interface__["data"][0]
            full = a0 == b0 and a.nbytes == b.nbytes and a.ndim == b.ndim and all(
                sa == sb for sa, sb, n in zip(a.strides, b.strides, a.shape) if n != 1)
            if a0 < b0 + b.nbytes and b0 < a0 + a.nbytes and (not full or name in _NO_OVERLAP):
                raise RuntimeError("unsupported operation: some elements of the input tensor "
                                   "and the written-to tensor refer to a single memory "
                                   "location. Please clone() the tensor before performing "
                                   "the operation.")


_RANGES = ("arange", "range", "linspace", "logspace")
_LIST_OUTS = {n: w + " expected an out= argument of size {}, got size {}" for n, w in (
    ("split_copy", "split_copy_Tensor_out()"), ("unbind_copy", "unbind_copy_int_out"),
    ("split_with_sizes_copy", "split_with_sizes_copy_out"))}


def _range_into(out, r, name):
    """r as PyTorch's range factories write it into out: in out's shape when the counts
    agree, else out is resized to r's (arange with its own warning, the others silently)."""
    n = r._data.size
    if out._data.size == n:
        return r.reshape(out.shape)
    if name in ("arange", "range") and out._data.size:
        warnings.warn(f"The number of elements in the out tensor of shape "
                      f"{list(out._data.shape)} is {out._data.size} which does not match the "
                      f"computed number of elements {n}. Note that this may occur as a result "
                      f"of rounding error. The out tensor will be resized to a tensor of shape "
                      f"({n},).", UserWarning, stacklevel=_users_level())
    _resize_out(out, (n,))
    return r


def _resize_out(out, shape):
    """out.resize_(shape) without its version bump: the write that follows makes the one
    bump PyTorch's resize-and-write gives."""
    out.resize_(shape)
    if out._base is None:
        out._storage.version -= 1


# functions with an out parameter of their own that copies without PyTorch's resize and
# checks: wrapped all the same (the wrapper takes out= before they see it)
_OWN_OUT = frozenset(("tensordot", "chain_matmul", "bitwise_and", "bitwise_or", "bitwise_xor",
                      "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm", "bitwise_not",
                      "atan2", "arctan2", "polygamma", "inverse", "cholesky_solve",
                      "cholesky_inverse", "lu_solve", "cholesky"))


def with_out(fn, name, grad_check=True):
    """fn (a function whose out parameter is unused) with PyTorch's out=: its checks
    (autograd's when grad_check; the dtype words of name), the resize and the write."""
    return _wrap(fn, name, False, grad_check)


def _takes_out(fn, name=None):
    return "out" in param_names(fn) and name not in _OWN_OUT


def wrap_out_args():
    done = {}           # (an aliased function gets one wrapper under all its names)
    for name in list(functions.__all__):
        fn = getattr(functions, name, None)
        if not inspect.isfunction(fn) or _takes_out(fn, name):
            continue
        if id(fn) not in done:
            done[id(fn)] = _wrap(fn, name, False)
        functions.export(done[id(fn)], name)
    for name in _FACTORIES:
        fn = getattr(creation, name)
        if not _takes_out(fn):
            setattr(creation, name, _wrap(fn, name, True))
