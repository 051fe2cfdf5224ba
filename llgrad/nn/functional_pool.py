"""Average and adaptive pooling, as PyTorch runs them.

avg_pool2d is an op of the table (AvgPool2DBackward0: the window sums of the zero-padded
input divided by PyTorch's counts, llgrad/ir/ops_nn_more.py); avg_pool1d is avg_pool2d over
a unit height, as in PyTorch. The adaptive pools are compositions: PyTorch's windows
(start floor(i*n/o), end ceil((i+1)*n/o)) are equal and disjoint when o divides n, where
the pool is a reshape and a mean, or max_pool2d's op (kernel = stride = n/o: the same
values, indices, NaN and ties); otherwise adaptive_avg_pool2d gathers the windows of
each dim in turn (window_mean: a NaN or inf stays in its windows) and adaptive_max_pool2d
gathers every window (padded to the longest by repeating its last element, which changes
no maximum) and takes the max, its flat indices read from a table by the max's position."""
import numpy as np

from ..ir import OPS
from ..ir.ops_nn_more import pool_out
from ..runtime.creation import tensor as _tensor
from ..runtime import trace_state
from ..runtime.dispatch import call
from ..runtime.dtypes import bfloat16, float16, int64, scalar_type_name
from ..runtime.result_format import in_suggested_format
from ..runtime.node_names import rename
from .functional_activation import floating_only
from ..runtime.vmap_fallback import meta_on_mismatch
from ..runtime.autocast_cast import on_no_list


_AVG_DTYPES = ("float16", "bfloat16", "float32", "float64", "int64")


def _tuple(v, n, name, fn):
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f"{fn}: {name} must either be a single int, or a tuple of "
                               f"{'two' if n == 2 else n} ints")
        return tuple(v)
    return (v,) * n


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """As torch.nn.functional.avg_pool2d."""
    k = _tuple(kernel_size, 2, "kernel_size", "avg_pool2d")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _tuple(stride, 2, "stride", "avg_pool2d")
    p = _tuple(padding, 2, "padding", "avg_pool2d")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if any(v == 0 for v in s):
        raise RuntimeError("stride should not be zero")
    if any(v <= 0 for v in k + s):
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} "
                           f"kW: {k[1]}")
    for pv in p:        # (ATen's pooling_output_shape: else a negative pad crops silently)
        if pv < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pv}")
    for pv, kv in zip(p, k):
        if pv > kv // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pv}, kernel_size={kv} and dilation=1")
    nd = input.dim()
    if nd < 3:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(nd, 1)}, "
                         f"{max(nd, 1) - 1}], but got -3)")
    shape = tuple(input.shape)
    if nd > 4 or shape[-3] == 0 or shape[-2] == 0 or shape[-1] == 0 or (nd == 3 and
                                                                        shape[0] == 0):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
                           f"for input, but got:{list(shape)}")
    c, h, w = shape[-3:]
    oh, ow = (pool_out(n, kv, pv, sv, ceil_mode) for n, kv, pv, sv in zip((h, w), k, p, s))
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{oh}x{ow}). Output size is too small")
    if input.dtype.name not in _AVG_DTYPES:     # (ATen's CPU kernel: floats and int64 only)
        raise NotImplementedError(f'"avg_pool2d" not implemented for '
                                  f"'{scalar_type_name(input.dtype)}'")
    return in_suggested_format(call(OPS["avg_pool2d"], (input,), {
        "kernel_size": k, "stride": s, "padding": p, "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad), "divisor_override": divisor_override}),
        input)


def _check_1d(input, fn):
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for {fn})")


def _one(v, name, fn):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise RuntimeError(f"{fn}() argument '{name}' should contain one int (got {len(v)})")
        return v[0]
    return v


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """As torch.nn.functional.avg_pool1d."""
    _check_1d(input, "avg_pool1d")
    k = _one(kernel_size, "kernel_size", "avg_pool1d")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _one(stride, "stride", "avg_pool1d")
    p = _one(padding, "padding", "avg_pool1d")
    return avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode,
                      count_include_pad).squeeze(-2)


# ---- adaptive pooling ------------------------------------------------------------------------

def _windows(n, o):
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)          # floor(i*n/o), ceil((i+1)*n/o)


def window_mean(x, dim, n, o):
    """Adaptive average pooling of x's dim (size n) to o windows: x with one zero appended
    along dim, each window gathered along dim itself (no moved copy) padded to the longest
    by that zero, summed and divided by its length, so a NaN or inf reaches its own windows
    only (a matrix of window averages would spread it: 0 * inf is NaN). Four ops: a mask,
    or the longer windows' last elements added apart, would cost more ops eagerly, and the
    backward of the gather (an index_add into the padded x) is the one scatter it needs."""
    start, end = _windows(n, o)
    lens = end - start
    d, shape = dim % x.dim(), tuple(x.shape)
    k = int(lens.max()) if o else 1
    pos = start[:, None] + np.arange(k)                                  # (o, k)
    if o and int(lens.min()) < k:
        pos = np.where(pos < end[:, None], pos, n)      # (n: the appended zero)
        x = call(OPS["constant_pad_nd"], (x,), {"pad": (0, 0) * (len(shape) - 1 - d) + (0, 1),
                                                "value": 0.0})
    win = x.index_select(d, _tensor(pos.reshape(-1)))
    out = win.reshape(shape[:d] + (o, k) + shape[d + 1:]).sum(d + 1)
    return out / _tensor(lens.astype(x.dtype.name).reshape((o,) + (1,) * (len(shape) - 1 - d)))


def _check_list_with_default(output_size, shape):
    """PyTorch's _list_with_default, run before ATen's checks of the input."""
    if isinstance(output_size, (tuple, list)) and len(shape) <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")


def _output_size(output_size, shape, fn):
    if isinstance(output_size, (tuple, list)):     # PyTorch's _list_with_default
        _check_list_with_default(output_size, shape)
        out = tuple(d if v is None else int(v)
                    for v, d in zip(output_size, shape[len(shape) - len(output_size):]))
    else:
        out = (output_size, output_size)
    if len(out) != 2:
        raise RuntimeError(f"{fn}: output_size must be 2")
    if any(v < 0 for v in out):
        raise RuntimeError(f"{fn}: elements of output_size must be greater than or equal to 0 "
                           f"but received {{{out[0]}, {out[1]}}}")
    return out


def _check_2d(input, fn, colon=""):
    if input.dim() not in (3, 4):
        raise RuntimeError(f"{fn}(): Expected 3D or 4D tensor, but got{colon} "
                           f"{list(input.shape)}")


def _even(n, o):
    return o > 0 and n % o == 0


def _check_nonempty(input, fn, first):
    """ATen's check that the pooled dims (from `first` on) are not empty: average pooling
    checks the spatial dims only, max pooling every dim but the first."""
    shape = list(input.shape)
    for i in range(first, len(shape)):
        if shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {shape} with dimension {i} "
                               f"being empty")


@on_no_list
@meta_on_mismatch
def adaptive_avg_pool2d(input, output_size):
    """As torch.nn.functional.adaptive_avg_pool2d."""
    _check_list_with_default(output_size, input.shape)
    _check_nonempty(input, "adaptive_avg_pool2d", max(input.dim() - 2, 1))
    _check_2d(input, "adaptive_avg_pool2d")
    oh, ow = _output_size(output_size, input.shape, "adaptive_avg_pool2d")
    floating_only(input, "adaptive_avg_pool2d")
    shape = tuple(input.shape)
    h, w = shape[-2:]
    if (oh, ow) == (1, 1) and h and w:
        return input.mean((-2, -1), keepdim=True)
    if (oh, ow) == (h, w):
        # (a new tensor, as PyTorch's, not the input itself; row-major whatever the input's
        # layout but channels_last, made so below, as ATen's kernel allocates it)
        out = input.clone(memory_format="contiguous_format")
    elif _even(h, oh) and _even(w, ow):
        out = input.reshape(shape[:-2] + (oh, h // oh, ow, w // ow)).mean((-3, -1))
    else:
        # (bfloat16 and float16 as PyTorch's kernel: window means in float32, rounded once)
        out = input.float() if input.dtype in (bfloat16, float16) else input
        # (rows first: window_mean gathers whole rows, then the fewer rows' columns)
        for dim, (n, o) in ((-2, (h, oh)), (-1, (w, ow))):
            if n != o:
                out = window_mean(out, dim, n, o)
        out = out.to(input.dtype)
    # (channels_last in, channels_last out, as ATen's kernel allocates it)
    return in_suggested_format(rename(out, "AdaptiveAvgPool2DBackward0"), input)


@meta_on_mismatch
def adaptive_avg_pool1d(input, output_size):
    """As torch.nn.functional.adaptive_avg_pool1d."""
    _check_1d(input, "adaptive_avg_pool1d")
    o = _one(output_size, "output_size", "adaptive_avg_pool1d")
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


@meta_on_mismatch
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """As torch.nn.functional.adaptive_max_pool2d."""
    _check_list_with_default(output_size, input.shape)
    _check_nonempty(input, "adaptive_max_pool2d", 1)
    _check_2d(input, "adaptive_max_pool2d", ":")
    oh, ow = _output_size(output_size, input.shape, "adaptive_max_pool2d")
    floating_only(input, "adaptive_max_pool2d")
    shape = tuple(input.shape)
    lead, (h, w) = shape[:-2], shape[-2:]
    if h and w and _even(h, oh) and _even(w, ow):   # equal disjoint windows: max_pool2d's
        k = (h // oh, w // ow)
        res = input._op("max_pool2d_with_indices", kernel_size=k, stride=k, padding=(0, 0),
                        dilation=(1, 1), ceil_mode=False)
        rename(res[0], "AdaptiveMaxPool2DBackward0")
        values, idx = (in_suggested_format(t, input) for t in res)
        return (values, idx) if return_indices else values
    (sh, eh), (sw, ew) = _windows(h, oh), _windows(w, ow)
    kh = int((eh - sh).max()) if oh else 1
    kw = int((ew - sw).max()) if ow else 1
    rows = np.minimum(sh[:, None] + np.arange(kh), eh[:, None] - 1)        # (oh, kh)
    cols = np.minimum(sw[:, None] + np.arange(kw), ew[:, None] - 1)        # (ow, kw)
    win = input.index_select(-2, _tensor(rows.reshape(-1))) \
        .index_select(-1, _tensor(cols.reshape(-1)))
    nl = len(lead)
    win = win.reshape(lead + (oh, kh, ow, kw))
    perm = tuple(range(nl)) + (nl, nl + 2, nl + 1, nl + 3)
    best, at = window_max(win.permute(perm).reshape(lead + (oh, ow, kh * kw)))
    rename(best, "AdaptiveMaxPool2DBackward0")
    values = in_suggested_format(best, input)
    if not return_indices:
        return values
    flat = rows[:, None, :, None] * w + cols[None, :, None, :]              # (oh, ow, kh, kw)
    table = _tensor(flat.reshape(oh, ow, kh * kw).astype(np.int64))
    idx = table.expand(lead + (oh, ow, kh * kw)).gather(-1, at.unsqueeze(-1))
    return values, in_suggested_format(idx.squeeze(-1).to(int64), input)


def window_max(win):
    """The maximum over win's last dimension and its position, as ATen's adaptive max pools
    scan a window (val > max || isnan(val)): the first of tied maxima, but the last NaN
    (Tensor.max's index is the first NaN). The value is gathered at that position, so the
    gradient goes where PyTorch's does."""
    k = win.shape[-1]
    data = win._data
    if trace_state.state.tracer is None and isinstance(data, np.ndarray) and \
            not np.isnan(data).any():       # (eagerly, no NaN: Tensor.max's first maximum)
        res = win.max(-1)
        return res.values, res.indices
    at = win.detach().max(-1).indices
    pos = _tensor(np.arange(1, k + 1), device=win.device)     # (meta under a meta input)
    last_nan = (win.detach().isnan().to(int64) * pos).amax(-1) - 1
    at = last_nan.where(last_nan >= 0, at)
    return win.gather(-1, at.unsqueeze(-1)).squeeze(-1), at


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """As torch.nn.functional.adaptive_max_pool1d."""
    _check_1d(input, "adaptive_max_pool1d")
    _check_nonempty(input, "adaptive_max_pool1d", 1)
    o = _one(output_size, "output_size", "adaptive_max_pool1d")
    r = adaptive_max_pool2d(input.unsqueeze(-2), (1, o), return_indices)
    if return_indices:
        return r[0].squeeze(-2), r[1].squeeze(-2)
    return r.squeeze(-2)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """(values, indices) of adaptive_max_pool1d, whatever return_indices says (as
    PyTorch's)."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """(values, indices) of adaptive_max_pool2d, whatever return_indices says (as
    PyTorch's)."""
    return adaptive_max_pool2d(input, output_size, True)
