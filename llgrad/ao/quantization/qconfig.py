"""torch.ao.quantization's QConfig and the dynamic qconfigs: which observer picks a
module's activation and weight quantization."""
from collections import namedtuple

from ...quantized_tensor import per_channel_symmetric, per_tensor_symmetric, qint8, quint8
from ...runtime.dtypes import float16
from .observer import MinMaxObserver, PerChannelMinMaxObserver, PlaceholderObserver

__all__ = ["QConfig", "QConfigDynamic", "default_dynamic_qconfig",
           "per_channel_dynamic_qconfig", "float16_dynamic_qconfig"]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """A module's quantization: factories of its activation and weight observers."""
    __slots__ = ()


QConfigDynamic = QConfig
default_dynamic_quant_observer = PlaceholderObserver.with_args(
    dtype=quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_weight_observer = MinMaxObserver.with_args(dtype=qint8, qscheme=per_tensor_symmetric)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=qint8, qscheme=per_channel_symmetric)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                  weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float16_dynamic_qconfig = QConfig(
    activation=PlaceholderObserver.with_args(dtype=float16, is_dynamic=True),
    weight=PlaceholderObserver.with_args(dtype=float16))
