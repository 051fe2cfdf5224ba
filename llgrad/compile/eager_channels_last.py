"""Eager batch norm and 1x1 convolutions on channels-last activations without the NCHW round
trip: a channels_last (N, C, H, W) array (a permuted NHWC input, and every convolution and
batch-norm result after it, as ATen lays them out) is the row-major (N*H*W, C) matrix of its
memory, on which

- batch norm (batch_norm, batch_norm_with_stats: the forward in eval and in training) is
  batch norm of that 2-D input, per column: its shaped kernel for the 2-D shape (eager_shaped's
  build of the op's lowering) on the view, whose (N*H*W, C) result viewed back is the
  channels_last result in_suggested_format makes (no copy of the input in, none of the
  result out);
- a 1x1 convolution of stride 1, no padding, one group, is one product with the weight's
  (O, C) matrix transposed (plus the bias), its (N*H*W, O) result channels_last as above;
- its weight's gradient (convolution_backward_weight) is sum over images of g's (O, H*W)
  rows times the image's (H*W, C) block (one product where g is channels_last too), the
  (O, C, 1, 1) C-contiguous result the kernel gives.

Where eager_shaped.kernel_operand copied the operand to NCHW and in_suggested_format copied
the result back (the stacked hourglass's 3 steps: 543 layout copies -> 192, 2121 operands
through kernel_operand -> 1680). The products run at any size (NumPy's BLAS), the batch
norm from its kernel's eager_min_elements. The forwards give a channels_last result only
inside result_format.formatted (F.conv2d, the batch norms), whose in_suggested_format would
lay it out so, and not under a trace; c_order keeps it (optable.kept). Results are those of
the NCHW path within float rounding, laid out as it lays them out. `run` answers None where
this does not apply (another op, layout or attribute: the NCHW path runs). 3x3 convolutions
keep the round trip (a graph of permute, convolution, permute lowered, or an NHWC im2col in
NumPy, ran no faster), as does batch_norm_backward of a row-major gradient."""
import numpy as np

from ..ir import optable
from ..ir.np_matmul import matmul
from ..runtime import result_format, trace_state

_BN = ("batch_norm", "batch_norm_with_stats")
stats = {"calls": 0}
_tstate = trace_state.state
OPS = frozenset(_BN + ("convolution", "convolution_backward_weight"))


def channels_last(a):
    """Whether a is a 4-D array laid out channels_last and not C-contiguous (one that is
    both, with a unit dim, runs as it is)."""
    if not isinstance(a, np.ndarray) or a.ndim != 4 or a.flags.c_contiguous:
        return False
    return a.transpose(0, 2, 3, 1).flags.c_contiguous and a.flags.aligned


def _rows(a):
    """The (N*H*W, C) row-major view of a channels_last a (N, C, H, W)."""
    return a.transpose(0, 2, 3, 1).reshape(-1, a.shape[1])


def _back(m, shape):
    """The (N, C, H, W) channels_last view of m, an (N*H*W, C) row-major matrix."""
    n, c, h, w = shape
    return m.reshape(n, h, w, c).transpose(0, 3, 1, 2)


def run(op, arrays, attrs, shaped):
    """op on arrays on the channels_last forms above, or None. shaped(op, arrays, attrs) is
    eager_shaped.run (the 2-D batch norm's kernel)."""
    out = _run(op, arrays, attrs, shaped)
    stats["calls"] += out is not None
    return out


def _run(op, arrays, attrs, shaped):
    name = op.name
    if name == "convolution_backward_weight":
        return _conv1x1_weight(*arrays, **attrs)
    if not getattr(result_format.allowed, "on", False) or _tstate.tracer is not None:
        return None     # (a caller that does not lay the result out so; a trace, whose
                        # types are the NCHW results and their layout copies)
    if name in _BN:
        x = arrays[0]
        if not channels_last(x) or x.shape[0] * x.shape[2] * x.shape[3] < 2:
            return None     # (one value per channel: the 4-D path's error or NaN)
        out = shaped(op, [_rows(x)] + list(arrays[1:]), attrs)
        if out is None:
            return None
        if name == "batch_norm":
            return _kept(_back(out, x.shape))
        return (_kept(_back(out[0], x.shape)),) + tuple(out[1:])
    out = _conv1x1(*arrays, **attrs)
    return None if out is None else _kept(out)


def _kept(a):
    """a, which dispatch's c_order is to keep channels_last."""
    optable.kept[0] = a
    return a


def _plain_1x1(w_shape, stride, padding, groups):
    return tuple(w_shape[2:]) == (1, 1) and tuple(stride) == (1, 1) and \
        tuple(padding) == (0, 0) and groups == 1


def _conv1x1(x, w, b, stride, padding, dilation, groups):
    if not channels_last(x) or not isinstance(w, np.ndarray) or w.ndim != 4 or \
            w.dtype != x.dtype or not _plain_1x1(w.shape, stride, padding, groups) or \
            w.shape[1] != x.shape[1] or \
            (b is not None and (not isinstance(b, np.ndarray) or b.dtype != x.dtype)):
        return None
    o = w.shape[0]
    out = matmul(_rows(x), w.reshape(o, -1).T)
    if b is not None:
        out += b.reshape(1, o)
    return _back(out, (x.shape[0], o) + x.shape[2:])


def _conv1x1_weight(g, x, weight_size, stride, padding, dilation, groups):
    if not channels_last(x) or not isinstance(g, np.ndarray) or g.dtype != x.dtype or \
            not _plain_1x1(weight_size, stride, padding, groups) or g.ndim != 4 or \
            tuple(g.shape[2:]) != tuple(x.shape[2:]) or weight_size[1] != x.shape[1]:
        return None
    n, o = g.shape[:2]
    if channels_last(g):
        gw = matmul(_rows(g).T, _rows(x))
    else:
        x3 = x.transpose(0, 2, 3, 1).reshape(n, -1, x.shape[1])     # (N, H*W, C) views
        g3 = np.ascontiguousarray(g).reshape(n, o, -1)
        gw = matmul(g3, x3).sum(0) if n > 1 else matmul(g3[0], x3[0])
    return np.ascontiguousarray(gw, dtype=g.dtype).reshape(tuple(weight_size))
