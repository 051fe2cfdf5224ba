"""Summary protocol buffers of the SummaryWriter's numeric records (torch's
tensorboard/summary.py): scalars, tensors, histograms, text, custom-scalar layouts,
precision-recall curves. Images, audio, video and meshes: summary_media.py; hparams:
_hparams.py (both re-exported here, as torch's summary module has them all)."""
import struct

import numpy as np
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData
from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData

from ._convert_np import make_np
from ._hparams import hparams
from .summary_media import audio, draw_boxes, image, image_boxes, make_image, make_video, \
    mesh, video

__all__ = ["half_to_int", "int_to_half", "hparams", "scalar", "histogram_raw", "histogram",
           "make_histogram", "image", "image_boxes", "draw_boxes", "make_image", "video",
           "make_video", "audio", "custom_scalars", "text", "tensor_proto", "pr_curve_raw",
           "pr_curve", "compute_curve", "mesh"]


def half_to_int(f):
    """The bits of f as a float32, read as an int32 (what PyTorch stores in a
    TensorProto's half_val for a half tensor)."""
    return struct.unpack("i", struct.pack("f", f))[0]


def int_to_half(i):
    """The inverse of half_to_int."""
    return struct.unpack("f", struct.pack("i", i))[0]


def _as_list(t):
    return t.flatten().tolist()


def _as_half_bits(t):
    return [half_to_int(v) for v in t.flatten().tolist()]


# llgrad dtype name -> (TensorProto dtype, its value field, the values as a list)
_TENSOR_FIELDS = {
    "float16": ("DT_HALF", "half_val", _as_half_bits),
    "float32": ("DT_FLOAT", "float_val", _as_list),
    "float64": ("DT_DOUBLE", "double_val", _as_list),
    "int8": ("DT_INT8", "int_val", _as_list),
    "uint8": ("DT_UINT8", "uint32_val", _as_list),
    "int16": ("DT_INT16", "int_val", _as_list),
    "int32": ("DT_INT32", "int_val", _as_list),
    "int64": ("DT_INT64", "int64_val", _as_list),
    "bool": ("DT_BOOL", "bool_val", _as_list),
}


def _shape(dims):
    return TensorShapeProto(dim=[TensorShapeProto.Dim(size=d) for d in dims])


def _plugin(name, content=None):
    data = SummaryMetadata.PluginData(plugin_name=name)
    if content is not None:
        data.content = content
    return SummaryMetadata(plugin_data=data)


def scalar(name, tensor, collections=None, new_style=False, double_precision=False):
    """A Summary of one scalar: simple_value, or (new_style) a float (double_precision: a
    double) TensorProto under the scalars plugin. The value must have one element."""
    value = make_np(tensor).squeeze()
    if value.ndim != 0:
        raise AssertionError("Tensor should contain one element (0 dimensions). "
                             f"Was given size: {value.size} and {value.ndim} dimensions.")
    number = float(value)
    if not new_style:
        return Summary(value=[Summary.Value(tag=name, simple_value=number)])
    proto = (TensorProto(double_val=[number], dtype="DT_DOUBLE") if double_precision
             else TensorProto(float_val=[number], dtype="DT_FLOAT"))
    return Summary(value=[Summary.Value(tag=name, tensor=proto, metadata=_plugin("scalars"))])


def tensor_proto(tag, tensor):
    """A Summary holding a whole tensor (an llgrad tensor) as a TensorProto, under the
    tensor plugin."""
    if tensor.numel() * tensor.itemsize >= (1 << 31):
        raise ValueError("tensor is bigger than protocol buffer's hard limit of 2GB in size")
    if tensor.dtype.name not in _TENSOR_FIELDS:
        raise ValueError(f"{tag} has unsupported tensor dtype {tensor.dtype}")
    dtype, field, values = _TENSOR_FIELDS[tensor.dtype.name]
    proto = TensorProto(dtype=dtype, tensor_shape=_shape(tensor.shape),
                        **{field: values(tensor)})
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin("tensor"), tensor=proto)])


def histogram_raw(name, min, max, num, sum, sum_squares, bucket_limits, bucket_counts):
    """A Summary of a histogram given by its statistics and buckets (right edges, counts)."""
    hist = HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                          bucket_limit=bucket_limits, bucket=bucket_counts)
    return Summary(value=[Summary.Value(tag=name, histo=hist)])


def histogram(name, values, bins, max_bins=None):
    """A Summary of the histogram of values (any shape) over bins (np.histogram's)."""
    hist = make_histogram(make_np(values).astype(float), bins, max_bins)
    return Summary(value=[Summary.Value(tag=name, histo=hist)])


def make_histogram(values, bins, max_bins=None):
    """A HistogramProto of values: np.histogram's counts (merged down to at most max_bins
    buckets), trimmed to the nonzero ones plus one empty bucket on the left, since
    TensorBoard stores only each bucket's right edge."""
    if values.size == 0:
        raise ValueError("The input has no element.")
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        group = len(counts) // max_bins
        short = len(counts) % group
        if short:
            counts = np.pad(counts, [[0, group - short]], mode="constant", constant_values=0)
        counts = counts.reshape(-1, group).sum(axis=-1)
        merged = np.empty((counts.size + 1,), limits.dtype)
        merged[:-1] = limits[:-1:group]
        merged[-1] = limits[-1]
        limits = merged
    # support of the histogram: from the first bucket holding a value to the last
    occupied = np.cumsum(counts > 0)
    first, last = np.searchsorted(occupied, [0, occupied[-1] - 1], side="right")
    first, stop = int(first), int(last) + 1
    counts = counts[first - 1:stop] if first > 0 else np.concatenate([[0], counts[:stop]])
    limits = limits[first:stop + 1]
    if counts.size == 0 or limits.size == 0:
        raise ValueError("The histogram is empty, please file a bug report.")
    return HistogramProto(min=values.min(), max=values.max(), num=len(values),
                          sum=values.sum(), sum_squares=values.dot(values),
                          bucket_limit=limits.tolist(), bucket=counts.tolist())


def text(tag, text):
    """A Summary of a string under the text plugin (tag gets "/text_summary")."""
    proto = TensorProto(dtype="DT_STRING", string_val=[text.encode(encoding="utf_8")],
                        tensor_shape=_shape([1]))
    meta = _plugin("text", TextPluginData(version=0).SerializeToString())
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=meta,
                                        tensor=proto)])


def custom_scalars(layout):
    """A Summary of the custom-scalars plugin's layout: {category: {chart title:
    ["Multiline" or "Margin", tags]}} (a margin chart takes 3 tags: value, lower, upper)."""
    categories = []
    for category, charts in layout.items():
        made = []
        for title, spec in charts.items():
            kind, tags = spec[0], spec[1]
            if kind == "Margin":
                if len(tags) != 3:
                    raise AssertionError("len(tags) != 3")
                series = layout_pb2.MarginChartContent.Series(value=tags[0], lower=tags[1],
                                                              upper=tags[2])
                made.append(layout_pb2.Chart(
                    title=title, margin=layout_pb2.MarginChartContent(series=[series])))
            else:
                made.append(layout_pb2.Chart(
                    title=title, multiline=layout_pb2.MultilineChartContent(tag=tags)))
        categories.append(layout_pb2.Category(title=category, chart=made))
    proto = TensorProto(dtype="DT_STRING", tensor_shape=TensorShapeProto(),
                        string_val=[layout_pb2.Layout(category=categories).SerializeToString()])
    return Summary(value=[Summary.Value(tag="custom_scalars__config__", tensor=proto,
                                        metadata=_plugin("custom_scalars"))])


def _pr_summary(tag, data, num_thresholds):
    content = PrCurvePluginData(version=0, num_thresholds=num_thresholds).SerializeToString()
    proto = TensorProto(dtype="DT_FLOAT", float_val=data.reshape(-1).tolist(),
                        tensor_shape=_shape(data.shape[:2]))
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin("pr_curves", content),
                                        tensor=proto)])


def pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds=127, weights=None):
    """A Summary of a precision-recall curve given by its six rows of counts and rates
    (num_thresholds capped at 127, as in PyTorch)."""
    return _pr_summary(tag, np.stack((tp, fp, tn, fn, precision, recall)),
                       min(num_thresholds, 127))


def pr_curve(tag, labels, predictions, num_thresholds=127, weights=None):
    """A Summary of the precision-recall curve of binary labels against predictions in
    [0, 1] (num_thresholds capped at 127)."""
    num_thresholds = min(num_thresholds, 127)
    return _pr_summary(tag, compute_curve(labels, predictions, num_thresholds, weights),
                       num_thresholds)


def compute_curve(labels, predictions, num_thresholds=None, weights=None):
    """The 6 x num_thresholds rows tp, fp, tn, fn, precision, recall: predictions bucketed
    by threshold, counts summed from the highest threshold down (TensorBoard's pr_curve)."""
    weights = 1.0 if weights is None else weights
    buckets = np.int32(np.floor(predictions * (num_thresholds - 1)))
    positive = labels.astype(np.float64)

    def counts(w):
        return np.histogram(buckets, bins=num_thresholds, range=(0, num_thresholds - 1),
                            weights=w)[0]

    tp = np.cumsum(counts(positive * weights)[::-1])[::-1]
    fp = np.cumsum(counts((1.0 - positive) * weights)[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(1e-7, tp + fp)
    recall = tp / np.maximum(1e-7, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall))
