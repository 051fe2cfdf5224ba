"""3-D pooling as torch.nn.functional runs it, with ATen's checks and messages in ATen's order:
max_pool3d (+ with_indices) and avg_pool3d are ops of the table (llgrad/ir/ops_pool3d.py);
the adaptive pools are compositions as the 2-D ones (functional_pool.py): equal disjoint
windows (o divides n) are a reshape and a mean, or max_pool3d's op; otherwise
adaptive_avg_pool3d multiplies by each dim's matrix of window averages and
adaptive_max_pool3d gathers every window (padded to the longest by repeating its last
element) and takes the max. lp_pool3d is PyTorch's composition over avg_pool3d, max_unpool3d
max_unpool2d's scatter over the flattened volume."""
import numpy as np

from ..ir.ops_nn_more import pool_out
from ..ir.ops_pool import out_size
from ..runtime.creation import tensor as _tensor
from ..runtime.dtypes import int64
from ..runtime.node_names import rename
from ..runtime.result_format import in_suggested_format
from .functional_loss import _NAMES
from .functional_pool import _windows, window_max, window_mean
from .functional_pool_more import _lp_pool, _unpool_output_size
from ..runtime.vmap_fallback import meta_on_mismatch
from ..runtime.autocast_cast import float32_list


def _name(t):
    return _NAMES.get(t.dtype.name, t.dtype.name)


def _three(v, fn, what, allow_empty=False):
    if isinstance(v, (tuple, list)):
        if allow_empty and not v:
            return None
        if len(v) == 1:
            return (int(v[0]),) * 3
        if len(v) != 3:
            raise RuntimeError(f"{fn}: {what}")
        return tuple(int(x) for x in v)
    return (int(v),) * 3


def _pool_checks(input, k, s, p, d, ceil_mode, fn, avg):
    """pooling_output_shape's and pool3d_shape_check's checks; returns (od, oh, ow)."""
    if input.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    shape = tuple(input.shape)
    for sv, pv, kv, dv in zip(s, p, k, d):
        if sv == 0:
            raise RuntimeError("stride should not be zero")
        if pv < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pv}")
        if pv > ((kv - 1) * dv + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pv}, kernel_size={kv} and dilation={dv}")
    outs = [pool_out(n, kv, pv, sv, ceil_mode) if avg else
            out_size(n, kv, pv, sv, dv, ceil_mode)
            for n, kv, sv, pv, dv in zip(shape[-3:], k, s, p, d)]
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} kH: "
                           f"{k[1]} kW: {k[2]}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dT: {s[0]} dH: {s[1]} "
                           f"dW: {s[2]}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} "
                           f"dilationH: {d[1]} dilationW: {d[2]}")
    for i, n in enumerate(shape):
        if n <= 0 and not (len(shape) == 5 and i == 0):
            raise RuntimeError(f"{fn}: Expected input's non-batch dimensions to have positive "
                               f"length, but input has a shape of {list(shape)} and non-batch "
                               f"dimension {n} has length zero!")
    t, h, w = shape[-3:]
    if avg and (t < k[0] or h < k[1] or w < k[2]):
        raise RuntimeError(f"input image (T: {t} H: {h} W: {w}) smaller than kernel size (kT: "
                           f"{k[0]} kH: {k[1]} kW: {k[2]})")
    if any(kv // 2 < pv for kv, pv in zip(k, p)):
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"kT: {k[0]} kW: {k[2]} kH: {k[1]} padT: {p[0]} padW: {p[2]} padH: "
                           f"{p[1]}")
    if min(outs) < 1:
        c = shape[-4]
        raise RuntimeError(f"Given input size: ({c}x{t}x{h}x{w}). Calculated output size: "
                           f"({c}x{outs[0]}x{outs[1]}x{outs[2]}). Output size is too small")
    return tuple(outs)


@float32_list
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """As torch.nn.functional.max_pool3d; the gradient goes to the first maximum of each window
    (or its last NaN), the indices are flat positions in the (D, H, W) volume."""
    fn = "max_pool3d"
    k = _three(kernel_size, fn, "kernel_size must either be a single int, or a tuple of three "
               "ints")
    s = _three(stride, fn, "stride must either be omitted, a single int, or a tuple of three "
               "ints", True) if stride is not None else None
    p = _three(padding, fn, "padding must either be a single int, or a tuple of three ints")
    d = _three(dilation, fn, "dilation must be either a single int, or a tuple of three ints")
    s = k if s is None else s
    _pool_checks(input, k, s, p, d, ceil_mode, "max_pool3d_with_indices_out_cpu_template()",
                 False)
    if input.dtype.name == "bool":
        raise NotImplementedError('"max_pool3d" not implemented for \'Bool\'')
    res = input._op("max_pool3d_with_indices", kernel_size=k, stride=s, padding=p, dilation=d,
                    ceil_mode=bool(ceil_mode))
    # (channels_last_3d in, channels_last_3d out, as ATen's kernel allocates it)
    res = tuple(in_suggested_format(t, input) for t in res)
    return res if return_indices else res[0]


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """(values, indices) of max_pool3d, whatever return_indices says (as PyTorch's)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


@float32_list
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """As torch.nn.functional.avg_pool3d."""
    fn = "avg_pool3d"
    k = _three(kernel_size, fn, "kernel_size must be a single int, or a tuple of three ints")
    s = _three(stride, fn, "stride must be omitted, a single int, or a tuple of three ints",
               True) if stride is not None else None
    p = _three(padding, fn, "padding must be a single int, or a tuple of three ints")
    s = k if s is None else s
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    _pool_checks(input, k, s, p, (1, 1, 1), ceil_mode, "avg_pool3d()", True)
    if input.dtype.name not in ("float32", "float64", "int64"):
        raise NotImplementedError(f'"avg_pool3d_out_frame" not implemented for '
                                  f"'{_name(input)}'")
    return input._op("avg_pool3d", kernel_size=k, stride=s, padding=p,
                     ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad),
                     divisor_override=None if divisor_override is None
                     else int(divisor_override))


# ---- adaptive pooling ------------------------------------------------------------------------

def _output_size(output_size, input):
    shape = tuple(input.shape)
    if isinstance(output_size, (tuple, list)):      # PyTorch's _list_with_default
        if len(shape) <= len(output_size):
            raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
        return tuple(n if v is None else int(v)
                     for v, n in zip(output_size, shape[len(shape) - len(output_size):]))
    return (int(output_size),) * 3


def _adaptive_checks(input, fn, colon):
    shape = tuple(input.shape)
    for i in range(1, len(shape)):
        if shape[i] <= 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(shape)} with dimension "
                               f"{i} being empty")
    if input.dim() not in (4, 5):
        raise RuntimeError(f"{fn}(): Expected 4D or 5D tensor, but got{colon} {list(shape)}")


def _check_floating(input, fn):
    if not input.is_floating_point():
        raise NotImplementedError(f'"{fn}_cpu" not implemented for \'{_name(input)}\'')


def _even(n, o):
    return o > 0 and n % o == 0


@float32_list
@meta_on_mismatch
def adaptive_avg_pool3d(input, output_size):
    """As torch.nn.functional.adaptive_avg_pool3d."""
    out = _output_size(output_size, input)
    if len(out) != 3:
        raise RuntimeError("adaptive_avg_pool3d: output_size must be 3")
    if any(v < 0 for v in out):
        raise RuntimeError("adaptive_avg_pool3d: elements of output_size must be greater than "
                           f"or equal to 0 but received {{{out[0]}, {out[1]},{out[2]}}}")
    _adaptive_checks(input, "adaptive_avg_pool3d", "")
    _check_floating(input, "adaptive_avg_pool3d")
    shape = tuple(input.shape)
    lead, dims = shape[:-3], shape[-3:]
    if out == (1, 1, 1):
        return input.mean((-3, -2, -1), keepdim=True)
    if out == dims:
        # (a new tensor, as PyTorch's, not the input itself; row-major as ATen's kernel
        # allocates it, channels_last_3d input or not)
        res = input.clone(memory_format="contiguous_format")
    elif all(_even(n, o) for n, o in zip(dims, out)):
        x = input.reshape(lead + sum(((o, n // o) for n, o in zip(dims, out)), ()))
        res = x.mean((-5, -3, -1))
    else:
        # (bfloat16 and float16 as PyTorch's kernel: window means in float32, rounded once)
        res = input.float() if input.dtype.name in ("bfloat16", "float16") else input
        for axis, (n, o) in zip((-3, -2, -1), zip(dims, out)):
            if n != o:
                res = window_mean(res, axis, n, o)
        # (the matmuls leave a dim they skipped out of place: row-major, as ATen's result)
        res = res.contiguous().to(input.dtype)
    return rename(res, "AdaptiveAvgPool3DBackward0")


@float32_list
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """As torch.nn.functional.adaptive_max_pool3d (indices: flat positions in the volume)."""
    out = _output_size(output_size, input)
    _adaptive_checks(input, "adaptive_max_pool3d", ":")
    if len(out) != 3:
        raise RuntimeError("adaptive_max_pool3d(): internal error: output_size.size() must be 3")
    shape = tuple(input.shape)
    if any(v < 0 for v in out):
        bad = next(v for v in out if v < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: "
                           f"{list(shape[:-3] + out)}")
    _check_floating(input, "adaptive_max_pool3d")
    lead, dims = shape[:-3], shape[-3:]
    if all(_even(n, o) for n, o in zip(dims, out)):   # equal disjoint windows: max_pool3d's
        k = tuple(n // o for n, o in zip(dims, out))
        res = input._op("max_pool3d_with_indices", kernel_size=k, stride=k, padding=(0, 0, 0),
                        dilation=(1, 1, 1), ceil_mode=False)
        rename(res[0], "AdaptiveMaxPool3DBackward0")
        return res if return_indices else res[0]
    tables, win = [], input
    for axis, (n, o) in zip((-3, -2, -1), zip(dims, out)):
        start, end = _windows(n, o)
        k = int((end - start).max()) if o else 1
        rows = np.minimum(start[:, None] + np.arange(k), end[:, None] - 1)      # (o, k)
        tables.append(rows)
        win = win.index_select(axis, _tensor(rows.reshape(-1)))
    (od, kd), (oh, kh), (ow, kw) = (t.shape for t in tables)
    nl = len(lead)
    win = win.reshape(lead + (od, kd, oh, kh, ow, kw))
    perm = tuple(range(nl)) + tuple(nl + i for i in (0, 2, 4, 1, 3, 5))
    best, at = window_max(win.permute(perm).reshape(lead + (od, oh, ow, kd * kh * kw)))
    rename(best, "AdaptiveMaxPool3DBackward0")
    if not return_indices:
        return best
    h, w = dims[1:]
    rd, rh, rw = tables
    flat = (rd[:, None, None, :, None, None] * h + rh[None, :, None, None, :, None]) * w \
        + rw[None, None, :, None, None, :]
    table = _tensor(flat.reshape(od, oh, ow, kd * kh * kw).astype(np.int64), device=input.device)
    idx = table.expand(lead + (od, oh, ow, kd * kh * kw)).gather(-1, at.unsqueeze(-1))
    return best, idx.squeeze(-1).to(int64)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """(values, indices) of adaptive_max_pool3d, whatever return_indices says (as
    PyTorch's)."""
    return adaptive_max_pool3d(input, output_size, True)


# ---- lp_pool3d, max_unpool3d -------------------------------------------------------------------

def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """As torch.nn.functional.lp_pool3d: (sum over each window of x^p)^(1/p); p = inf is the
    maximum of |x|."""
    kd, kw, kh = _three(kernel_size, "lp_pool3d", "kernel_size must be an int or a triple")
    return _lp_pool(max_pool3d, avg_pool3d, kd * kw * kh, input, norm_type, kernel_size,
                    stride, ceil_mode)


@float32_list
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """As torch.nn.functional.max_unpool3d: max_pool3d's partial inverse, each value put back
    at its index (from return_indices=True) and zeros elsewhere."""
    k = _three(kernel_size, "max_unpool3d", "kernel_size must be an int or a triple")
    s = _three(stride, "max_unpool3d", "stride must be an int or a triple") \
        if stride is not None else k
    p = _three(padding, "max_unpool3d", "padding must be an int or a triple")
    od, oh, ow = (int(v) for v in _unpool_output_size(input, k, s, p, output_size))
    if indices.dtype != int64:
        raise RuntimeError("elements in indices should be type int64")
    if input.dim() not in (4, 5):
        raise RuntimeError("Input to max_unpooling3d should be a 4d or 5d Tensor, but got a "
                           f"tensor with {input.dim()} dimensions.")
    if tuple(input.shape) != tuple(indices.shape):
        raise RuntimeError("Expected shape of indices to be same as that of the input tensor ("
                           f"{list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    for i in range(1, input.dim()):
        if input.shape[i] <= 0:
            raise RuntimeError(f"max_unpooling3d_forward_out_cpu(): Expected input to have "
                               f"non-zero size for non-batch dimensions, but got "
                               f"{list(input.shape)} with dimension {i} being empty.")
    if min(s) <= 0:
        raise RuntimeError(f"strides should be greater than zero, but got stride: {list(s)}")
    if not input.is_floating_point():
        raise NotImplementedError(f"\"max_unpool3d\" not implemented for '{_name(input)}'")
    data = indices._data
    if isinstance(data, np.ndarray) and data.size:  # (a batched tensor under vmap has no values)
        bad = data[(data < 0) | (data >= od * oh * ow)]
        if bad.size:    # (PyTorch's loop keeps the last invalid index it meets)
            raise RuntimeError(f"Found an invalid max index: {int(bad.reshape(-1)[-1])} (output "
                               f"volumes are of size {od}x{oh}x{ow})")
    lead = tuple(input.shape[:-3])
    src = input.reshape(lead + (-1,))
    res = input.new_zeros(lead + (od * oh * ow,)).scatter(-1, indices.reshape(lead + (-1,)), src)
    return rename(res.view(lead + (od, oh, ow)), "MaxUnpool3DBackward0")

