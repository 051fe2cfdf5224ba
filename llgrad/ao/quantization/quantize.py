"""torch.ao.quantization.quantize_dynamic: post-training dynamic quantization. Each module
whose type (or dotted name) the qconfig spec names gets that qconfig (children inherit
their parent's), then every such submodule of a mapped type is swapped for its dynamic
quantized counterpart's from_float (the model itself is never swapped, as in PyTorch)."""
import copy
import itertools

from ...nn.layers_attention import NonDynamicallyQuantizableLinear
from ...nn.layers import Linear as FloatLinear
from ...nn.layers_rnn import GRU as FloatGRU, LSTM as FloatLSTM
from ...nn.layers_rnn_cell import GRUCell, LSTMCell, RNNCell
from ...quantized_tensor import qint8
from ...runtime.dtypes import float16
from ..nn.quantized import dynamic as nnqd
from .qconfig import default_dynamic_qconfig, float16_dynamic_qconfig

__all__ = ["quantize_dynamic", "propagate_qconfig_", "convert", "swap_module",
           "get_default_dynamic_quant_module_mappings"]


def get_default_dynamic_quant_module_mappings():
    """float module type -> its dynamic quantized module type (PyTorch's defaults)."""
    return {FloatLinear: nnqd.Linear, NonDynamicallyQuantizableLinear: nnqd.Linear,
            FloatLSTM: nnqd.LSTM, FloatGRU: nnqd.GRU, LSTMCell: nnqd.LSTMCell,
            GRUCell: nnqd.GRUCell, RNNCell: nnqd.RNNCell}


def _default_spec(dtype):
    if dtype is qint8:
        qconfig = default_dynamic_qconfig
    elif dtype is float16:
        qconfig = float16_dynamic_qconfig
    else:
        raise ValueError(f"Don't know how to quantize with default settings for {dtype}. "
                         "Provide full qconfig please")
    return dict.fromkeys((FloatLinear, FloatLSTM, FloatGRU, LSTMCell, RNNCell, GRUCell), qconfig)


def propagate_qconfig_(module, qconfig_dict=None, prepare_custom_config_dict=None):
    """Give each submodule its qconfig: one it already has, else qconfig_dict's entry for its
    dotted name, then for its type, else its parent's."""
    qconfig_dict = qconfig_dict or {}

    def visit(mod, parent_qconfig, prefix):
        qconfig = qconfig_dict.get(type(mod), parent_qconfig)
        qconfig = qconfig_dict.get(prefix, qconfig)
        # (a qconfig the module already has wins, None included, as PyTorch's)
        qconfig = mod.__dict__.get("qconfig", qconfig)
        mod.qconfig = qconfig
        for name, child in mod.named_children():
            visit(child, qconfig, prefix + "." + name if prefix else name)

    visit(module, qconfig_dict.get("", None), "")


def swap_module(mod, mapping, custom_module_class_mapping=None,
                use_precomputed_fake_quant=False):
    """mod's quantized counterpart when it has a qconfig and its type is mapped, else mod;
    its forward hooks are carried over."""
    if getattr(mod, "qconfig", None) is None or type(mod) not in mapping:
        return mod
    new = mapping[type(mod)].from_float(mod)
    for hook in mod._forward_pre_hooks.values():
        new.register_forward_pre_hook(hook)
    for hook in mod._forward_hooks.values():
        new.register_forward_hook(hook)
    return new


def convert(module, mapping=None, inplace=False, remove_qconfig=True, **kwargs):
    """Swap every qconfig'd submodule of a mapped type (children first); the qconfig
    attributes are removed afterwards."""
    if mapping is None:
        mapping = get_default_dynamic_quant_module_mappings()
    if not inplace:
        module = copy.deepcopy(module)

    def visit(mod):
        for name, child in list(mod.named_children()):
            visit(child)
            new = swap_module(child, mapping)
            if new is not child:
                setattr(mod, name, new)

    visit(module)
    if remove_qconfig:
        for m in module.modules():
            m.__dict__.pop("qconfig", None)
    return module


def quantize_dynamic(model, qconfig_spec=None, dtype=qint8, mapping=None, inplace=False):
    """As torch.ao.quantization.quantize_dynamic: a copy of model (model itself when
    inplace) in eval mode whose Linear / LSTM / GRU submodules named by qconfig_spec (a set
    of types or names, quantized with dtype's default qconfig, or a dict to qconfigs;
    default: all of them) are replaced by torch.ao.nn.quantized.dynamic modules."""
    if qconfig_spec is None:
        qconfig_spec = _default_spec(dtype)
    elif isinstance(qconfig_spec, set):
        if dtype is qint8:
            default = default_dynamic_qconfig
        elif dtype is float16:
            default = float16_dynamic_qconfig
        else:
            raise RuntimeError("Unknown dtype specified for quantize_dynamic: ", str(dtype))
        qconfig_spec = dict(zip(qconfig_spec, itertools.repeat(default)))
    if mapping is None:
        mapping = get_default_dynamic_quant_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    propagate_qconfig_(model, qconfig_spec)
    convert(model, mapping, inplace=True)
    return model
