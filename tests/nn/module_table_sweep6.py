"""The table of torch.nn module configurations the sweep-6 differential test runs
(tests/nn/test_modules_sweep6.py): for each module class name, constructor configurations
and the inputs forward takes.

An entry is (name, args, kwargs, inputs, opts). args/kwargs may hold callables of the
library (`L(lambda lib: ...)`) for arguments that are tensors or modules. inputs is a list
of specs:
    ("f", shape)            standard normal float32, requires grad ("d": float64)
    ("x", shape)            standard normal float32, no grad
    ("p", shape) ("q", shape)   uniform (0.05, 0.95), with / without grad
    ("b", shape)            0./1. floats;  ("s", shape): -1./1. floats
    ("i", shape, high)      int64 in [0, high)
    ("ls", shape, dim)      log_softmax of a normal along dim, requires grad
    ("c", value)            a constant (NumPy arrays become tensors of their dtype)
opts: "modes" ("train", "eval"), "clone" (forward takes x * 1 so in-place modules can
run), "grad_fn" (False: the outputs' grad_fn names are not compared), "lazy" (torch's
module is initialised by one forward and both lazy modules load its state), "noforward",
"tol", "ctor_error" (torch's constructor raises). Every entry also runs with inputs of a
wrong shape (test_module_wrong_shape_...) unless "wrong_shape" is False.
"fkw": forward's keyword arguments, {name: spec}."""
import itertools

import numpy as np


class L:
    """An argument built per library."""
    def __init__(self, fn):
        self.fn = fn


def _unpool_indices(shape, k):
    """Indices of a strided pool's maxima: one element of each window."""
    dims = shape[2:]
    out = [d // k for d in dims]
    idx = np.zeros(shape[:2] + tuple(out), np.int64)
    for pos in itertools.product(*[range(o) for o in out]):
        flat = 0
        for d, p in zip(dims, pos):
            flat = flat * d + p * k + (p % 2)
        idx[(slice(None), slice(None)) + pos] = flat
    return idx


def _lengths():
    return [("ls", (6, 2, 5), 2), ("c", np.array([[1, 2, 2], [3, 1, 0]], np.int64)),
            ("c", np.array([6, 5], np.int64)), ("c", np.array([3, 2], np.int64))]


_MLM_TARGET = np.array([[3, 0, -1, 1], [0, 1, 2, 3]], np.int64)


def _act(name, *args, shape=(3, 4), **kw):
    return (name, args, kw, [("f", shape)], {})


ACTIVATIONS = [
    _act("ELU"), _act("ELU", 0.5), _act("CELU", 0.7), _act("GELU"),
    _act("GELU", approximate="tanh"), _act("GLU"), _act("GLU", dim=0, shape=(4, 3)),
    _act("Hardshrink", 0.3), _act("Hardsigmoid"), _act("Hardswish"), _act("Hardtanh", -0.5, 0.7),
    _act("LeakyReLU", 0.2), _act("LogSigmoid"), _act("LogSoftmax", dim=1),
    _act("LogSoftmax", dim=0), _act("Mish"), _act("PReLU"),
    _act("PReLU", 4, 0.1, shape=(2, 4, 3)), _act("ReLU"), _act("ReLU6"), _act("SELU"),
    _act("SiLU"), _act("Sigmoid"), _act("Softmax", dim=-1), _act("Softmax2d", shape=(2, 3, 2, 2)),
    _act("Softmax2d", shape=(3, 2, 2)), _act("Softmin", 1), _act("Softplus", beta=2, threshold=1),
    _act("Softshrink", 0.4), _act("Softsign"), _act("Tanh"), _act("Tanhshrink"),
    _act("Threshold", 0.1, 20.0), _act("Identity"), _act("Identity", 3, unused=1),
    ("RReLU", (0.1, 0.3), {}, [("f", (3, 4))], {"modes": ("eval",)}),
    ("ReLU", (), {"inplace": True}, [("f", (3, 4))], {"clone": True}),
    ("ELU", (), {"inplace": True}, [("f", (3, 4))], {"clone": True}),
    ("Hardtanh", (), {"inplace": True}, [("f", (3, 4))], {"clone": True}),
    ("LeakyReLU", (0.1, True), {}, [("f", (3, 4))], {"clone": True}),
    ("SiLU", (True,), {}, [("f", (3, 4))], {"clone": True}),
    ("Threshold", (0.1, 2.0, True), {}, [("f", (3, 4))], {"clone": True}),
]

DROPOUTS = [(n, (0.0,), {}, [("f", s)], {}) for n, s in [
    ("Dropout", (3, 4)), ("Dropout1d", (2, 3, 4)), ("Dropout2d", (2, 3, 2, 2)),
    ("Dropout3d", (2, 3, 2, 2, 2)), ("AlphaDropout", (3, 4)), ("FeatureAlphaDropout", (2, 3, 4))]
] + [(n, (0.5,), {}, [("f", s)], {"modes": ("eval",)}) for n, s in [
    ("Dropout", (3, 4)), ("Dropout2d", (2, 3, 2, 2)), ("AlphaDropout", (3, 4))]]

CONVS = [
    ("Conv1d", (3, 4, 3), {}, [("f", (2, 3, 7))], {}),
    ("Conv1d", (3, 4, 3), {"stride": 2, "padding": 1}, [("f", (2, 3, 8))], {}),
    ("Conv1d", (3, 4, 3), {"padding": 2, "padding_mode": "reflect"}, [("f", (2, 3, 7))], {}),
    ("Conv1d", (3, 4, 3), {"padding": 1, "padding_mode": "replicate"}, [("f", (2, 3, 7))], {}),
    ("Conv1d", (3, 4, 3), {"padding": 2, "padding_mode": "circular"}, [("f", (2, 3, 7))], {}),
    ("Conv1d", (3, 4, 3), {"dilation": 2, "bias": False}, [("f", (3, 7))], {}),
    ("Conv1d", (4, 6, 3), {"groups": 2, "padding": "same"}, [("f", (2, 4, 7))], {}),
    ("Conv1d", (4, 4, 2), {"groups": 4, "padding": "valid"}, [("f", (2, 4, 7))], {}),
    ("Conv2d", (3, 4, (2, 3)), {}, [("f", (2, 3, 6, 7))], {}),
    ("Conv2d", (3, 4, 3), {"stride": (2, 1), "padding": (1, 2)}, [("f", (2, 3, 6, 7))], {}),
    ("Conv2d", (3, 4, 3), {"padding": 1, "padding_mode": "reflect"}, [("f", (1, 3, 5, 6))], {}),
    ("Conv2d", (3, 4, 3), {"padding": (1, 2), "padding_mode": "replicate"},
     [("f", (1, 3, 5, 6))], {}),
    ("Conv2d", (3, 4, 3), {"padding": 1, "padding_mode": "circular", "stride": 2},
     [("f", (1, 3, 5, 6))], {}),
    ("Conv2d", (4, 2, 3), {"groups": 2, "dilation": 2, "bias": False}, [("f", (2, 4, 6, 6))], {}),
    ("Conv2d", (3, 4, (3, 2)), {"padding": "same", "dilation": (1, 2)}, [("f", (3, 5, 6))], {}),
    ("Conv3d", (2, 3, 2), {}, [("f", (2, 2, 4, 5, 4))], {}),
    ("Conv3d", (2, 4, 3), {"stride": 2, "padding": 1, "groups": 2}, [("f", (1, 2, 4, 5, 4))], {}),
    ("Conv3d", (2, 3, 3), {"padding": 1, "padding_mode": "reflect"}, [("f", (1, 2, 3, 4, 4))], {}),
    ("Conv3d", (2, 3, 3), {"padding": 1, "padding_mode": "replicate", "bias": False},
     [("f", (2, 3, 4, 4))], {}),
    ("Conv3d", (2, 3, 3), {"padding": 1, "padding_mode": "circular"}, [("f", (1, 2, 3, 4, 4))], {}),
    ("ConvTranspose1d", (3, 4, 3), {}, [("f", (2, 3, 5))], {}),
    ("ConvTranspose1d", (3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1},
     [("f", (2, 3, 5))], {}),
    ("ConvTranspose1d", (4, 6, 3), {"groups": 2, "dilation": 2, "bias": False},
     [("f", (4, 5))], {}),
    ("ConvTranspose2d", (3, 4, (2, 3)), {"stride": (2, 1), "padding": (0, 1)},
     [("f", (2, 3, 4, 5))], {}),
    ("ConvTranspose2d", (4, 2, 3), {"groups": 2, "output_padding": 1, "stride": 2, "dilation": 1},
     [("f", (1, 4, 3, 3))], {}),
    ("ConvTranspose3d", (2, 3, 2), {"stride": 2}, [("f", (1, 2, 2, 3, 2))], {}),
    ("ConvTranspose3d", (2, 2, 3), {"padding": 1, "groups": 2, "bias": False},
     [("f", (2, 2, 3, 3))], {}),
]

LINEAR = [
    ("Linear", (5, 4), {}, [("f", (3, 5))], {}),
    ("Linear", (5, 4), {"bias": False}, [("f", (2, 3, 5))], {}),
    ("Linear", (5, 4), {}, [("f", (5,))], {}),
    ("Linear", (0, 4), {}, [("f", (3, 0))], {}),
    ("Bilinear", (3, 4, 5), {}, [("f", (2, 3)), ("f", (2, 4))], {}),
    ("Bilinear", (3, 4, 5), {"bias": False}, [("f", (2, 2, 3)), ("f", (2, 2, 4))], {}),
    ("Flatten", (), {}, [("f", (2, 3, 4))], {}),
    ("Flatten", (0, 1), {}, [("f", (2, 3, 4))], {}),
    ("Unflatten", (1, (2, 3)), {}, [("f", (2, 6))], {}),
    ("Unflatten", (-1, (2, -1)), {}, [("f", (2, 6))], {}),
    ("Embedding", (10, 3), {}, [("i", (2, 4), 10)], {}),
    ("Embedding", (10, 3), {"padding_idx": 0}, [("c", np.array([[0, 1, 0, 3]]))], {}),
    ("Embedding", (10, 3), {"max_norm": 1.0}, [("i", (2, 4), 10)], {}),
    ("Embedding", (10, 3), {"max_norm": 0.5, "norm_type": 1.0, "scale_grad_by_freq": True},
     [("c", np.array([[1, 1, 2], [3, 1, 9]]))], {}),
    ("Embedding", (10, 3), {"padding_idx": -1}, [("c", np.array([9, 1, 9]))], {}),
    ("EmbeddingBag", (10, 3), {}, [("i", (2, 4), 10)], {}),
    ("EmbeddingBag", (10, 3), {"mode": "sum", "padding_idx": 2},
     [("c", np.array([1, 2, 4, 5, 4, 3])), ("c", np.array([0, 2, 2]))], {}),
    ("EmbeddingBag", (10, 3), {"mode": "max"},
     [("c", np.array([1, 2, 4, 5, 4, 3])), ("c", np.array([0, 3]))], {}),
    ("EmbeddingBag", (10, 3), {"mode": "mean", "include_last_offset": True},
     [("c", np.array([1, 2, 4, 5, 4, 3])), ("c", np.array([0, 3, 6]))], {}),
    ("EmbeddingBag", (10, 3), {"mode": "sum"},
     [("c", np.array([1, 2, 4, 5])), ("c", np.array([0, 1])), ("p", (4,))], {}),
]

NORMS = [
    ("BatchNorm1d", (4,), {}, [("f", (3, 4))], {}),
    ("BatchNorm1d", (4,), {}, [("f", (3, 4, 5))], {}),
    ("BatchNorm1d", (4,), {"affine": False, "momentum": None}, [("f", (3, 4, 2))], {}),
    ("BatchNorm1d", (4,), {"track_running_stats": False, "eps": 1e-3}, [("f", (3, 4))], {}),
    ("BatchNorm2d", (3,), {"momentum": 0.3}, [("f", (2, 3, 2, 2))], {}),
    ("BatchNorm2d", (3,), {"affine": False, "track_running_stats": False},
     [("f", (2, 3, 2, 2))], {}),
    ("BatchNorm3d", (2,), {}, [("f", (2, 2, 2, 2, 3))], {}),
    ("InstanceNorm1d", (4,), {}, [("f", (2, 4, 5))], {}),
    ("InstanceNorm1d", (4,), {"affine": True, "track_running_stats": True}, [("f", (2, 4, 5))], {}),
    ("InstanceNorm1d", (4,), {}, [("f", (4, 5))], {}),
    ("InstanceNorm2d", (3,), {"affine": True}, [("f", (2, 3, 3, 2))], {}),
    ("InstanceNorm2d", (3,), {"track_running_stats": True, "momentum": None},
     [("f", (2, 3, 3, 2))], {}),
    ("InstanceNorm3d", (2,), {"affine": True, "eps": 1e-2}, [("f", (2, 2, 2, 3, 2))], {}),
    ("GroupNorm", (2, 4), {}, [("f", (2, 4, 3))], {}),
    ("GroupNorm", (2, 4), {"affine": False, "eps": 1e-3}, [("f", (2, 4, 3, 2))], {}),
    ("GroupNorm", (1, 3), {}, [("f", (2, 3))], {}),
    ("LayerNorm", (5,), {}, [("f", (3, 5))], {}),
    ("LayerNorm", ([4, 5],), {"elementwise_affine": False}, [("f", (3, 4, 5))], {}),
    ("LayerNorm", (5,), {"bias": False, "eps": 1e-2}, [("f", (2, 3, 5))], {}),
    ("RMSNorm", (5,), {}, [("f", (3, 5))], {}),
    ("RMSNorm", ([4, 5],), {"eps": 1e-3}, [("f", (3, 4, 5))], {}),
    ("RMSNorm", (5,), {"elementwise_affine": False}, [("f", (3, 5))], {}),
    ("LocalResponseNorm", (3,), {}, [("f", (2, 5, 4, 4))], {}),
    ("LocalResponseNorm", (2, 1e-3, 0.5, 2.0), {}, [("f", (2, 5, 4))], {}),
    ("CrossMapLRN2d", (3,), {}, [("f", (2, 5, 4, 4))], {}),
    ("CrossMapLRN2d", (4, 1e-2, 0.5, 2.0), {}, [("f", (2, 7, 2, 3))], {}),
    ("CrossMapLRN2d", (5,), {}, [("f", (1, 3, 2, 2))], {}),
    ("SyncBatchNorm", (3,), {}, [("f", (2, 3, 4))], {"modes": ("eval",)}),
]

POOLS = [
    ("MaxPool1d", (3,), {}, [("f", (2, 3, 8))], {}),
    ("MaxPool1d", (3, 2, 1), {"dilation": 2, "ceil_mode": True}, [("f", (2, 3, 9))], {}),
    ("MaxPool1d", (2,), {"return_indices": True}, [("f", (3, 8))], {}),
    ("MaxPool2d", (2,), {}, [("f", (2, 3, 4, 5))], {}),
    ("MaxPool2d", ((3, 2), (2, 1), 1), {"ceil_mode": True, "return_indices": True},
     [("f", (1, 2, 5, 5))], {}),
    ("MaxPool2d", (3,), {"stride": 1, "dilation": 2}, [("f", (2, 6, 6))], {}),
    ("MaxPool3d", (2,), {}, [("f", (1, 2, 4, 4, 4))], {}),
    ("MaxPool3d", (3, 2, 1), {"return_indices": True, "ceil_mode": True},
     [("f", (1, 2, 5, 4, 4))], {}),
    ("AvgPool1d", (3,), {}, [("f", (2, 3, 8))], {}),
    ("AvgPool1d", (3, 2, 1), {"ceil_mode": True, "count_include_pad": False},
     [("f", (2, 3, 8))], {}),
    ("AvgPool2d", (2,), {}, [("f", (2, 3, 4, 5))], {}),
    ("AvgPool2d", (3, 2, 1), {"divisor_override": 2, "ceil_mode": True}, [("f", (1, 2, 5, 5))], {}),
    ("AvgPool2d", ((2, 3),), {"count_include_pad": False, "padding": 1}, [("f", (2, 5, 5))], {}),
    ("AvgPool3d", (2,), {}, [("f", (1, 2, 4, 4, 4))], {}),
    ("AvgPool3d", (3, 2, 1), {"count_include_pad": False, "ceil_mode": True},
     [("f", (1, 2, 5, 4, 4))], {}),
    ("LPPool1d", (2, 3), {}, [("p", (2, 3, 7))], {}),
    ("LPPool1d", (1.5, 2, 1), {"ceil_mode": True}, [("p", (2, 3, 7))], {}),
    ("LPPool2d", (2, 2), {}, [("p", (2, 3, 4, 5))], {}),
    ("LPPool2d", (3, (2, 3), 1), {}, [("p", (2, 4, 5))], {}),
    ("LPPool3d", (2, 2), {}, [("p", (1, 2, 4, 4, 4))], {}),
    ("AdaptiveAvgPool1d", (3,), {}, [("f", (2, 3, 7))], {}),
    ("AdaptiveAvgPool2d", ((2, 3),), {}, [("f", (2, 3, 5, 7))], {}),
    ("AdaptiveAvgPool2d", ((None, 3),), {}, [("f", (3, 5, 7))], {}),
    ("AdaptiveAvgPool3d", (2,), {}, [("f", (1, 2, 3, 5, 4))], {}),
    ("AdaptiveMaxPool1d", (3,), {}, [("f", (2, 3, 7))], {}),
    ("AdaptiveMaxPool1d", (3, True), {}, [("f", (2, 3, 7))], {}),
    ("AdaptiveMaxPool2d", ((2, 3),), {"return_indices": True}, [("f", (2, 3, 5, 7))], {}),
    ("AdaptiveMaxPool2d", ((None, 2),), {}, [("f", (2, 3, 5, 7))], {}),
    ("AdaptiveMaxPool3d", (2,), {}, [("f", (1, 2, 3, 5, 4))], {}),
    ("MaxUnpool1d", (2,), {}, [("f", (2, 3, 4)), ("c", _unpool_indices((2, 3, 8), 2))], {}),
    ("MaxUnpool2d", (2,), {}, [("f", (1, 2, 2, 3)), ("c", _unpool_indices((1, 2, 4, 6), 2))], {}),
    ("MaxUnpool2d", (2, 2, 0), {}, [("f", (1, 2, 2, 3)), ("c", _unpool_indices((1, 2, 4, 6), 2)),
                                   ("c", [5, 7])], {}),
    ("MaxUnpool3d", (2,), {}, [("f", (1, 2, 2, 2, 1)),
                               ("c", _unpool_indices((1, 2, 4, 4, 2), 2))], {}),
]

PADS = [
    ("ConstantPad1d", (2, 1.5), {}, [("f", (2, 3, 4))], {}),
    ("ConstantPad1d", ((1, 2), -1.0), {}, [("f", (3, 4))], {}),
    ("ConstantPad2d", ((1, 2, 0, 1), 0.5), {}, [("f", (2, 3, 4))], {}),
    ("ConstantPad3d", (1, 2.0), {}, [("f", (1, 2, 2, 3, 2))], {}),
    ("ZeroPad1d", ((1, 2),), {}, [("f", (2, 3, 4))], {}),
    ("ZeroPad2d", (2,), {}, [("f", (2, 3, 4))], {}),
    ("ZeroPad2d", ((1, -1, 2, 0),), {}, [("f", (2, 3, 4))], {}),
    ("ZeroPad3d", ((1, 0, 0, 1, 1, 1),), {}, [("f", (1, 2, 2, 3, 2))], {}),
    ("ReflectionPad1d", (2,), {}, [("f", (2, 3, 4))], {}),
    ("ReflectionPad2d", ((1, 2, 0, 1),), {}, [("f", (2, 3, 4))], {}),
    ("ReflectionPad3d", (1,), {}, [("f", (1, 2, 2, 3, 2))], {}),
    ("ReplicationPad1d", ((3, 1),), {}, [("f", (2, 3, 4))], {}),
    ("ReplicationPad2d", (2,), {}, [("f", (1, 2, 3, 4))], {}),
    ("ReplicationPad3d", ((1, 0, 2, 1, 0, 1),), {}, [("f", (1, 2, 2, 3, 2))], {}),
    ("CircularPad1d", (2,), {}, [("f", (2, 3, 4))], {}),
    ("CircularPad2d", ((1, 2, 0, 1),), {}, [("f", (1, 2, 3, 4))], {}),
    ("CircularPad3d", (1,), {}, [("f", (1, 2, 2, 3, 2))], {}),
]

SHAPE_OPS = [
    ("PixelShuffle", (2,), {}, [("f", (1, 8, 3, 3))], {}),
    ("PixelUnshuffle", (2,), {}, [("f", (2, 4, 6))], {}),
    ("ChannelShuffle", (2,), {}, [("f", (1, 4, 2, 2))], {}),
    ("Upsample", (), {"scale_factor": 2}, [("f", (1, 2, 3))], {}),
    ("Upsample", (), {"scale_factor": 2, "mode": "linear"}, [("f", (1, 2, 3))], {}),
    ("Upsample", (), {"size": (4, 5), "mode": "bilinear", "align_corners": True},
     [("f", (1, 2, 3, 3))], {}),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "bicubic"}, [("f", (1, 2, 3, 3))], {}),
    ("Upsample", (), {"scale_factor": (2, 1, 2), "mode": "trilinear"},
     [("f", (1, 1, 2, 2, 2))], {}),
    ("Upsample", (), {"size": 5, "mode": "nearest-exact"}, [("f", (1, 2, 3))], {}),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}, [("f", (1, 2, 2, 3))], {}),
    ("UpsamplingBilinear2d", ((4, 5),), {}, [("f", (1, 2, 2, 3))], {}),
    ("Fold", ((4, 5), 2), {}, [("f", (1, 12, 12))], {}),
    ("Fold", ((4, 5), (2, 3)), {"stride": 1, "padding": 1, "dilation": 1},
     [("f", (2, 12, 20))], {}),
    ("Unfold", (2,), {}, [("f", (2, 3, 4, 5))], {}),
    ("Unfold", ((2, 3),), {"dilation": (1, 2), "padding": 1, "stride": 2},
     [("f", (1, 2, 4, 5))], {}),
    ("CosineSimilarity", (), {}, [("f", (3, 4)), ("f", (3, 4))], {}),
    ("CosineSimilarity", (0, 1e-3), {}, [("f", (3, 4)), ("f", (3, 1))], {}),
    ("PairwiseDistance", (), {}, [("f", (3, 4)), ("f", (3, 4))], {}),
    ("PairwiseDistance", (1.0, 1e-3, True), {}, [("f", (3, 4)), ("f", (1, 4))], {}),
]

RNNS = [
    ("RNN", (4, 5), {}, [("f", (3, 2, 4))], {}),
    ("RNN", (4, 5, 2), {"nonlinearity": "relu", "bias": False},
     [("f", (3, 2, 4)), ("f", (2, 2, 5))],
     {}),
    ("RNN", (4, 5), {"batch_first": True, "bidirectional": True}, [("f", (2, 3, 4))], {}),
    ("RNN", (4, 5), {}, [("f", (3, 4))], {}),
    ("LSTM", (4, 5), {}, [("f", (3, 2, 4))], {}),
    ("LSTM", (4, 5, 2), {"dropout": 0.0, "bidirectional": True}, [("f", (3, 2, 4))], {}),
    ("LSTM", (4, 5), {"proj_size": 3, "batch_first": True}, [("f", (2, 3, 4))], {}),
    ("LSTM", (4, 5), {"num_layers": 2, "proj_size": 2, "bidirectional": True}, [("f", (3, 4))], {}),
    ("GRU", (4, 5), {}, [("f", (3, 2, 4)), ("f", (1, 2, 5))], {}),
    ("GRU", (4, 5, 2), {"batch_first": True, "bias": False, "bidirectional": True},
     [("f", (2, 3, 4))], {}),
    ("RNNCell", (4, 5), {}, [("f", (2, 4))], {}),
    ("RNNCell", (4, 5), {"nonlinearity": "relu", "bias": False},
     [("f", (2, 4)), ("f", (2, 5))], {}),
    ("RNNCell", (4, 5), {}, [("f", (4,))], {}),
    # (llgrad's cell is one fused node, ThnnFusedLstmCellBackward0; torch's CPU cell ends in
    # a mul (h) and an add (c))
    ("LSTMCell", (4, 5), {}, [("f", (2, 4))], {"grad_fn": False}),
    ("LSTMCell", (4, 5), {"bias": False}, [("f", (4,))], {}),
    ("GRUCell", (4, 5), {}, [("f", (2, 4)), ("f", (2, 5))], {}),
    ("GRUCell", (4, 5), {}, [("f", (4,))], {}),
]

ATTENTION = [
    ("MultiheadAttention", (8, 2), {}, [("f", (3, 2, 8))] * 3, {}),
    ("MultiheadAttention", (8, 2), {"batch_first": True, "bias": False},
     [("f", (2, 3, 8)), ("f", (2, 4, 8)), ("f", (2, 4, 8))], {}),
    ("MultiheadAttention", (8, 2), {"kdim": 5, "vdim": 6, "add_bias_kv": True,
                                    "add_zero_attn": True},
     [("f", (3, 2, 8)), ("f", (4, 2, 5)), ("f", (4, 2, 6))], {}),
    ("MultiheadAttention", (8, 1), {}, [("f", (3, 8))] * 3, {}),
    ("TransformerEncoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0},
     [("f", (3, 2, 8))], {}),
    ("TransformerEncoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0,
                                         "norm_first": True, "activation": "gelu",
                                         "batch_first": True, "bias": False},
     [("f", (2, 3, 8))], {}),
    ("TransformerDecoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0},
     [("f", (3, 2, 8)), ("f", (4, 2, 8))], {}),
    ("TransformerDecoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0,
                                         "norm_first": True, "batch_first": True},
     [("f", (2, 3, 8)), ("f", (2, 4, 8))], {}),
    ("TransformerEncoder", (L(lambda lib: lib.nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0)), 2), {}, [("f", (3, 2, 8))], {}),
    ("TransformerEncoder", (L(lambda lib: lib.nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0)), 1),
     {"norm": L(lambda lib: lib.nn.LayerNorm(8)), "enable_nested_tensor": False},
     [("f", (3, 2, 8))], {}),
    ("TransformerDecoder", (L(lambda lib: lib.nn.TransformerDecoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0)), 2), {}, [("f", (3, 2, 8)), ("f", (4, 2, 8))], {}),
    ("Transformer", (), {"d_model": 8, "nhead": 2, "num_encoder_layers": 1,
                         "num_decoder_layers": 1, "dim_feedforward": 16, "dropout": 0.0},
     [("f", (4, 2, 8)), ("f", (3, 2, 8))], {}),
]


def _loss(name, args, kw, inputs, **opts):
    return (name, args, kw, inputs, opts)


LOSSES = []
for red in ("mean", "sum", "none"):
    LOSSES += [
        _loss("L1Loss", (), {"reduction": red}, [("f", (3, 4)), ("x", (3, 4))]),
        _loss("MSELoss", (), {"reduction": red}, [("f", (3, 4)), ("f", (3, 4))]),
        _loss("BCELoss", (), {"reduction": red}, [("p", (3, 4)), ("q", (3, 4))]),
        _loss("BCEWithLogitsLoss", (), {"reduction": red}, [("f", (3, 4)), ("b", (3, 4))]),
        _loss("CrossEntropyLoss", (), {"reduction": red}, [("f", (3, 5)), ("i", (3,), 5)]),
        _loss("NLLLoss", (), {"reduction": red}, [("ls", (3, 5), 1), ("i", (3,), 5)]),
        _loss("KLDivLoss", (), {"reduction": red}, [("ls", (3, 5), 1), ("q", (3, 5))]),
        _loss("HuberLoss", (), {"reduction": red, "delta": 0.5}, [("f", (3, 4)), ("x", (3, 4))]),
        _loss("SmoothL1Loss", (), {"reduction": red, "beta": 0.5}, [("f", (3, 4)), ("x", (3, 4))]),
        _loss("SoftMarginLoss", (), {"reduction": red}, [("f", (3, 4)), ("s", (3, 4))]),
        _loss("MarginRankingLoss", (), {"reduction": red, "margin": 0.2},
              [("f", (5,)), ("f", (5,)), ("s", (5,))]),
        _loss("HingeEmbeddingLoss", (), {"reduction": red, "margin": 0.5},
              [("f", (3, 4)), ("s", (3, 4))]),
        _loss("CosineEmbeddingLoss", (), {"reduction": red, "margin": 0.1},
              [("f", (3, 4)), ("f", (3, 4)), ("s", (3,))]),
        _loss("MultiMarginLoss", (), {"reduction": red}, [("f", (3, 5)), ("i", (3,), 5)]),
        _loss("MultiLabelMarginLoss", (), {"reduction": red},
              [("f", (2, 4)), ("c", _MLM_TARGET)]),
        _loss("MultiLabelSoftMarginLoss", (), {"reduction": red}, [("f", (3, 4)), ("b", (3, 4))]),
        _loss("PoissonNLLLoss", (), {"reduction": red}, [("f", (3, 4)), ("q", (3, 4))]),
        _loss("GaussianNLLLoss", (), {"reduction": red},
              [("f", (3, 4)), ("x", (3, 4)), ("p", (3, 4))]),
        _loss("TripletMarginLoss", (), {"reduction": red},
              [("f", (3, 4)), ("f", (3, 4)), ("f", (3, 4))]),
        _loss("TripletMarginWithDistanceLoss", (), {"reduction": red},
              [("f", (3, 4)), ("f", (3, 4)), ("f", (3, 4))]),
        _loss("CTCLoss", (), {"reduction": red}, _lengths()),
    ]
LOSSES += [
    _loss("BCELoss", (), {"weight": L(lambda lib: lib.tensor([1.0, 2.0, 0.5, 0.0]))},
          [("p", (3, 4)), ("q", (3, 4))]),
    _loss("BCEWithLogitsLoss", (), {"pos_weight": L(lambda lib: lib.tensor([1.0, 2.0, 0.5, 3.0])),
                                    "weight": L(lambda lib: lib.tensor([[0.5], [1.0], [2.0]]))},
          [("f", (3, 4)), ("q", (3, 4))]),
    _loss("CrossEntropyLoss", (), {"weight": L(lambda lib: lib.tensor([1.0, 2.0, 0.5, 0.0, 1.0])),
                                   "ignore_index": 2},
          [("f", (4, 5)), ("c", np.array([0, 2, 1, 3]))]),
    _loss("CrossEntropyLoss", (), {"label_smoothing": 0.1}, [("f", (4, 5)), ("i", (4,), 5)]),
    _loss("CrossEntropyLoss", (), {"label_smoothing": 0.2, "reduction": "sum",
                                   "weight": L(lambda lib: lib.tensor([1.0, 2.0, 0.5]))},
          [("f", (2, 3, 4)), ("i", (2, 4), 3)]),
    _loss("CrossEntropyLoss", (), {"label_smoothing": 0.2, "ignore_index": 0, "reduction": "none"},
          [("f", (2, 3, 2, 2)), ("i", (2, 2, 2), 3)]),
    _loss("CrossEntropyLoss", (), {}, [("f", (3, 4)), ("q", (3, 4))]),
    _loss("CrossEntropyLoss", (), {"label_smoothing": 0.3,
                                   "weight": L(lambda lib: lib.tensor([1.0, 2.0, 0.5, 1.5]))},
          [("f", (3, 4)), ("q", (3, 4))]),
    _loss("CrossEntropyLoss", (), {}, [("f", (5,)), ("c", np.array(3))]),
    _loss("NLLLoss", (), {"weight": L(lambda lib: lib.tensor([1.0, 2.0, 0.5, 0.0, 1.0])),
                          "ignore_index": 1}, [("ls", (4, 5), 1), ("c", np.array([0, 1, 1, 3]))]),
    _loss("NLLLoss", (), {"reduction": "none"}, [("ls", (2, 5, 3), 1), ("i", (2, 3), 5)]),
    _loss("NLLLoss2d", (), {}, [("ls", (2, 5, 3, 2), 1), ("i", (2, 3, 2), 5)]),
    _loss("KLDivLoss", (), {"reduction": "batchmean", "log_target": True},
          [("ls", (3, 5), 1), ("ls", (3, 5), 1)]),
    _loss("MultiMarginLoss", (), {"p": 2, "margin": 0.5,
                                  "weight": L(lambda lib: lib.tensor([1.0, 2.0, 0.5, 0.3, 1.0]))},
          [("f", (3, 5)), ("i", (3,), 5)]),
    _loss("MultiMarginLoss", (), {}, [("f", (5,)), ("c", np.array(2))]),
    _loss("MultiLabelSoftMarginLoss", (),
          {"weight": L(lambda lib: lib.tensor([1.0, 2.0, 0.5, 0.3]))},
          [("f", (3, 4)), ("b", (3, 4))]),
    _loss("PoissonNLLLoss", (), {"log_input": False, "full": True}, [("p", (3, 4)), ("q", (3, 4))]),
    _loss("PoissonNLLLoss", (), {"full": True, "eps": 1e-4}, [("f", (3, 4)), ("c", np.array(
        [[0.0, 1.0, 2.0, 5.0]] * 3, np.float32))]),
    _loss("GaussianNLLLoss", (), {"full": True, "eps": 1e-3},
          [("f", (3, 4)), ("x", (3, 4)), ("p", (3, 1))]),
    _loss("GaussianNLLLoss", (), {}, [("f", (3, 4)), ("x", (3, 4)), ("p", (3,))]),
    _loss("TripletMarginLoss", (), {"margin": 0.5, "p": 1, "swap": True, "eps": 1e-3},
          [("f", (3, 4)), ("f", (3, 4)), ("f", (3, 4))]),
    _loss("TripletMarginWithDistanceLoss", (), {
        "distance_function": L(lambda lib: lib.nn.PairwiseDistance(p=1)), "margin": 2.0,
        "swap": True}, [("f", (3, 4)), ("f", (3, 4)), ("f", (3, 4))]),
    _loss("CTCLoss", (), {"blank": 4, "zero_infinity": True},
          [("ls", (3, 2, 5), 2), ("c", np.array([[1, 2, 2], [3, 1, 0]], np.int64)),
           ("c", np.array([3, 2], np.int64)), ("c", np.array([3, 2], np.int64))]),
    _loss("AdaptiveLogSoftmaxWithLoss", (8, 10, [4, 8]), {}, [("f", (3, 8)), ("i", (3,), 10)]),
    _loss("AdaptiveLogSoftmaxWithLoss", (8, 10, [3, 6]), {"div_value": 2.0, "head_bias": True},
          [("f", (8,)), ("c", np.array(7))]),
]

LAZY = [
    ("LazyLinear", (4,), {}, [("f", (3, 5))], {"lazy": True}),
    ("LazyConv1d", (4, 3), {}, [("f", (2, 3, 7))], {"lazy": True}),
    ("LazyConv2d", (4, 3), {"padding": 1}, [("f", (2, 3, 5, 5))], {"lazy": True}),
    ("LazyConv3d", (2, 2), {}, [("f", (1, 2, 3, 3, 3))], {"lazy": True}),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2}, [("f", (2, 3, 4))], {"lazy": True}),
    ("LazyConvTranspose2d", (4, 3), {}, [("f", (2, 3, 3, 3))], {"lazy": True}),
    ("LazyConvTranspose3d", (2, 2), {}, [("f", (1, 2, 2, 2, 2))], {"lazy": True}),
    ("LazyBatchNorm1d", (), {}, [("f", (3, 4))], {"lazy": True}),
    ("LazyBatchNorm2d", (), {"affine": False}, [("f", (2, 3, 2, 2))], {"lazy": True}),
    ("LazyBatchNorm3d", (), {}, [("f", (2, 2, 2, 2, 2))], {"lazy": True}),
    ("LazyInstanceNorm1d", (), {"affine": True}, [("f", (2, 4, 5))], {"lazy": True}),
    ("LazyInstanceNorm2d", (), {"track_running_stats": True}, [("f", (2, 3, 3, 2))],
     {"lazy": True}),
    ("LazyInstanceNorm3d", (), {"affine": True}, [("f", (2, 2, 2, 3, 2))], {"lazy": True}),
]

CONTAINERS = [
    ("Sequential", (L(lambda lib: lib.nn.Linear(3, 4)), L(lambda lib: lib.nn.ReLU()),
                    L(lambda lib: lib.nn.Linear(4, 2))), {}, [("f", (2, 3))], {}),
    ("ModuleList", ([L(lambda lib: lib.nn.Linear(3, 4)), L(lambda lib: lib.nn.ReLU())],), {}, [],
     {"noforward": True}),
    ("ModuleDict", ({"a": L(lambda lib: lib.nn.Linear(3, 4)), "b": L(lambda lib: lib.nn.Tanh())},),
     {}, [], {"noforward": True}),
    ("ParameterList", ([L(lambda lib: lib.nn.Parameter(lib.ones(2, 3))),
                        L(lambda lib: lib.nn.Parameter(lib.zeros(3)))],), {}, [],
     {"noforward": True}),
    ("ParameterDict", ({"w": L(lambda lib: lib.nn.Parameter(lib.ones(2, 3)))},), {}, [],
     {"noforward": True}),
    ("Module", (), {}, [], {"noforward": True}),
]

_F64 = L(lambda lib: lib.float64)
_KPM = np.array([[False, False, True, True], [False, False, False, True]])
_CAUSAL3 = np.triu(np.full((3, 3), -np.inf, np.float32), 1)
_MASK34 = np.array([[0.0, -1.0, 0.5, -np.inf], [0.0, 0.0, 0.0, 0.0], [-np.inf, 1.0, 0.0, 0.0]],
                   np.float32)

MORE = [
    ("Linear", (5, 4), {"dtype": _F64}, [("d", (3, 5))], {}),
    ("Conv2d", (2, 3, 3), {"dtype": _F64, "padding": 1}, [("d", (1, 2, 4, 4))], {}),
    ("BatchNorm1d", (3,), {"dtype": _F64}, [("d", (4, 3))], {}),
    ("LSTM", (3, 4), {"dtype": _F64, "batch_first": True}, [("d", (2, 3, 3))], {}),
    ("GRU", (3, 4), {"dtype": _F64}, [("d", (3, 2, 3))], {}),
    ("LayerNorm", (4,), {"dtype": _F64}, [("d", (2, 4))], {}),
    ("Embedding", (10, 3), {"dtype": _F64}, [("i", (2, 4), 10)], {}),
    ("MultiheadAttention", (8, 2), {}, [("f", (3, 2, 8)), ("f", (4, 2, 8)), ("f", (4, 2, 8))],
     {"fkw": {"key_padding_mask": ("c", _KPM), "attn_mask": ("c", _MASK34)}}),
    ("MultiheadAttention", (8, 2), {"batch_first": True},
     [("f", (2, 3, 8)), ("f", (2, 4, 8)), ("f", (2, 4, 8))],
     {"fkw": {"key_padding_mask": ("c", _KPM), "need_weights": ("c", True),
              "average_attn_weights": ("c", False)}}),
    ("MultiheadAttention", (8, 2), {}, [("f", (3, 2, 8))] * 3,
     {"fkw": {"attn_mask": ("c", _CAUSAL3), "is_causal": ("c", True),
              "need_weights": ("c", False)}}),
    ("MultiheadAttention", (8, 2), {}, [("f", (3, 2, 8))] * 3,
     {"fkw": {"attn_mask": ("c", np.triu(np.ones((3, 3), bool), 1))}}),
    ("TransformerEncoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0},
     [("f", (4, 2, 8))], {"fkw": {"src_key_padding_mask": ("c", _KPM)}}),
    ("TransformerEncoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0,
                                         "batch_first": True},
     [("f", (2, 3, 8))], {"fkw": {"src_mask": ("c", _CAUSAL3), "is_causal": ("c", True)},
                          # (left: torch's inference fast path, taken here under no_grad,
                          # words the error of a wrong d_model its own way)
                          "wrong_shape": False}),
    ("TransformerDecoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0},
     [("f", (3, 2, 8)), ("f", (4, 2, 8))],
     {"fkw": {"tgt_mask": ("c", _CAUSAL3), "memory_key_padding_mask": ("c", _KPM)}}),
    ("Transformer", (), {"d_model": 8, "nhead": 2, "num_encoder_layers": 1,
                         "num_decoder_layers": 1, "dim_feedforward": 16, "dropout": 0.0,
                         "batch_first": True, "norm_first": True},
     [("f", (2, 4, 8)), ("f", (2, 3, 8))],
     {"fkw": {"tgt_mask": ("c", _CAUSAL3), "src_key_padding_mask": ("c", _KPM),
              "tgt_is_causal": ("c", True)}}),
    ("TransformerEncoder", (L(lambda lib: lib.nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0)), 2), {"enable_nested_tensor": False},
     [("f", (4, 2, 8))], {"fkw": {"src_key_padding_mask": ("c", _KPM)}}),
    ("Embedding", (10, 3), {"_freeze": True}, [("i", (2, 4), 10)], {}),
    ("EmbeddingBag", (10, 3), {"mode": "max", "padding_idx": 0},
     [("c", np.array([[0, 1, 2], [0, 0, 3]]))], {}),
    ("BatchNorm2d", (3,), {"momentum": None, "eps": 1e-3}, [("f", (1, 3, 1, 2))], {}),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True, "momentum": 0.5},
     [("f", (3, 5))], {}),
    ("GroupNorm", (3, 6), {"eps": 0.1}, [("f", (2, 6, 2, 2))], {}),
    ("PReLU", (3,), {"init": 0.1}, [("f", (2, 3, 2))], {}),
    ("Softplus", (0.5, 2.0), {}, [("f", (3, 4))], {}),
    ("MaxPool2d", (2,), {"return_indices": True}, [("f", (1, 1, 4, 4))], {}),
    ("AvgPool1d", (2,), {"stride": 1, "padding": 1, "count_include_pad": True},
     [("f", (1, 2, 5))], {}),
]

MORE2 = [
    ("ConvTranspose2d", (2, 3, 3), {"stride": 2}, [("f", (1, 2, 3, 3))],
     {"fkw": {"output_size": ("c", [8, 8])}}),
    ("ConvTranspose1d", (2, 3, 3), {"stride": 3, "padding": 1}, [("f", (1, 2, 4))],
     {"fkw": {"output_size": ("c", [12])}}),
    ("MaxUnpool1d", (2,), {}, [("f", (2, 3, 4)), ("c", _unpool_indices((2, 3, 8), 2))],
     {"fkw": {"output_size": ("c", [9])}}),
    ("Upsample", (), {"scale_factor": 1.7, "mode": "bilinear", "recompute_scale_factor": True},
     [("f", (1, 2, 3, 3))], {}),
    ("Upsample", (), {"scale_factor": 0.5, "mode": "area"}, [("f", (1, 2, 4, 6))], {}),
    ("Upsample", (), {"size": (3, 5), "mode": "nearest"}, [("f", (1, 2, 4, 3))], {}),
    ("Upsample", (), {"scale_factor": 2, "mode": "bicubic", "align_corners": True},
     [("f", (1, 1, 3, 2))], {}),
    ("GELU", (), {"approximate": "tanh"}, [("d", (3, 4))], {}),
    ("Hardtanh", (0.2, 0.2), {}, [("f", (3, 4))], {"ctor_error": True}),
    ("Threshold", (-0.5, -2.0), {}, [("f", (3, 4))], {}),
    ("Softmax", (), {}, [("f", (2, 3, 4))], {}),
    ("LogSoftmax", (), {}, [("f", (3, 4))], {}),
    ("Softmin", (), {}, [("f", (2, 2, 3, 4))], {}),
    ("LPPool2d", (float("inf"), 2), {}, [("f", (1, 2, 4, 4))], {}),
    ("AvgPool3d", (2,), {"divisor_override": 3}, [("f", (1, 2, 2, 4, 4))], {}),
    ("Embedding", (10, 3), {"max_norm": 1.0}, [("i", (5,), 10)], {"modes": ("eval",)}),
    ("BatchNorm1d", (4,), {"track_running_stats": False}, [("f", (3, 4))], {"modes": ("eval",)}),
    ("InstanceNorm2d", (3,), {"track_running_stats": True}, [("f", (2, 3, 2, 2))],
     {"modes": ("eval",)}),
    ("CTCLoss", (), {}, [("ls", (6, 2, 5), 2), ("c", np.array([1, 2, 2, 3, 1], np.int64)),
                         ("c", np.array([6, 5], np.int64)), ("c", np.array([3, 2], np.int64))]),
    ("CTCLoss", (), {"reduction": "sum"}, [("ls", (6, 5), 1), ("c", np.array([1, 2], np.int64)),
                                          ("c", np.array(6)), ("c", np.array(2))]),
    ("BCEWithLogitsLoss", (), {"pos_weight": L(lambda lib: lib.tensor([[1.0], [2.0], [0.5]]))},
     [("f", (2, 3, 4)), ("q", (2, 3, 4))]),
    ("KLDivLoss", (), {"reduction": "mean"}, [("ls", (3, 5), 1), ("q", (3, 5))]),
    ("L1Loss", (), {}, [("f", (3, 4)), ("x", (4,))]),
    ("MSELoss", (), {"reduction": "none"}, [("f", (4,)), ("x", (3, 4))]),
    ("HuberLoss", (), {"reduction": "sum", "delta": 2.0}, [("f", (3, 1)), ("x", (1, 4))]),
    ("NLLLoss", (), {"reduction": "none", "ignore_index": 0},
     [("ls", (2, 3, 2, 2, 2), 1), ("i", (2, 2, 2, 2), 3)]),
    ("NLLLoss", (), {}, [("ls", (2, 3, 0), 1), ("i", (2, 0), 3)]),
    ("CrossEntropyLoss", (), {"reduction": "none"}, [("f", (0, 3)), ("i", (0,), 3)]),
    ("CrossEntropyLoss", (), {}, [("f", (3,)), ("q", (3,))]),
    ("MultiLabelMarginLoss", (), {}, [("f", (4,)), ("c", np.array([3, 0, -1, 1]))]),
    ("CosineEmbeddingLoss", (), {}, [("f", (4,)), ("f", (4,)), ("c", np.array(-1.0, np.float32))]),
    ("MarginRankingLoss", (), {}, [("f", (3, 1)), ("f", (1, 4)), ("s", (3, 4))]),
    ("TripletMarginLoss", (), {"p": 3.0}, [("f", (4,)), ("f", (4,)), ("f", (4,))]),
    ("GaussianNLLLoss", (), {"reduction": "none"}, [("f", (3, 4)), ("x", (3, 4)), ("p", (3, 1))]),
    ("PoissonNLLLoss", (), {"log_input": True, "full": True, "reduction": "sum"},
     [("f", (3, 4)), ("c", np.array([[0.0, 1.0, 2.0, 5.0]] * 3, np.float32))]),
    ("SoftMarginLoss", (), {}, [("f", (3, 4)), ("s", (4,))]),
    ("HingeEmbeddingLoss", (), {},
     [("f", (5,)), ("c", np.array([1.0, -1, 1, -1, -1], np.float32))]),
    ("MultiMarginLoss", (), {"reduction": "none", "margin": 2.0}, [("f", (3, 5)), ("i", (3,), 5)]),
    ("SmoothL1Loss", (), {"beta": 0.0}, [("f", (3, 4)), ("x", (3, 4))]),
    ("BCELoss", (), {"reduction": "none"}, [("p", (3,)), ("b", (3,))]),
    ("PairwiseDistance", (float("inf"),), {}, [("f", (4,)), ("f", (4,))]),
    ("CosineSimilarity", (-1,), {}, [("f", (2, 3, 4)), ("f", (4,))]),
    ("Unfold", (3,), {"padding": 1}, [("f", (3, 4, 4))], {}),
    ("Fold", (3, 2), {}, [("f", (8, 4))], {}),
    ("Bilinear", (3, 3, 2), {}, [("f", (3,)), ("f", (3,))]),
    ("RNN", (3, 4), {"num_layers": 3, "nonlinearity": "relu", "bidirectional": True},
     [("f", (2, 2, 3)), ("f", (6, 2, 4))]),
    ("LSTM", (3, 4), {"proj_size": 2}, [("f", (2, 2, 3)), ("f", (1, 2, 2)), ("f", (1, 2, 4))]),
]
MORE2 = [e if len(e) == 5 else e + ({},) for e in MORE2]

TABLE = (ACTIVATIONS + DROPOUTS + CONVS + LINEAR + NORMS + POOLS + PADS + SHAPE_OPS + RNNS
         + ATTENTION + LOSSES + LAZY + CONTAINERS + MORE + MORE2)

# torch.nn module classes the table leaves out, and why
SKIPPED = {
    "Container": "deprecated alias of Module",
    "DataParallel": "CUDA only (tests/nn/test_data_parallel.py)",
    "RNNBase": "the base class of RNN/LSTM/GRU", "RNNCellBase": "the base of the cells",
    "FractionalMaxPool2d": "random windows", "FractionalMaxPool3d": "random windows",
    "LinearCrossEntropyLoss": "new in torch 2.13, not in llgrad",
}
