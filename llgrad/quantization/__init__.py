"""torch.quantization: the older name of torch.ao.quantization (the same objects)."""
from ..ao.quantization import *  # noqa: F401,F403
from ..ao.quantization import (MinMaxObserver, ObserverBase, PerChannelMinMaxObserver,  # noqa: F401
                               PlaceholderObserver, QConfig, QConfigDynamic, convert,
                               default_dynamic_qconfig, default_dynamic_quant_observer,
                               default_per_channel_weight_observer, default_weight_observer,
                               float16_dynamic_qconfig, get_default_dynamic_quant_module_mappings,
                               per_channel_dynamic_qconfig, propagate_qconfig_,
                               quantize_dynamic, swap_module)
