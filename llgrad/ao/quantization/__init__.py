"""torch.ao.quantization's post-training dynamic quantization: quantize_dynamic, the
dynamic qconfigs and their observers."""
from .observer import (MinMaxObserver, ObserverBase, PerChannelMinMaxObserver,  # noqa: F401
                       PlaceholderObserver)
from .qconfig import (QConfig, QConfigDynamic, default_dynamic_qconfig,  # noqa: F401
                      default_dynamic_quant_observer, default_per_channel_weight_observer,
                      default_weight_observer, float16_dynamic_qconfig,
                      per_channel_dynamic_qconfig)
from .quantize import (convert, get_default_dynamic_quant_module_mappings,  # noqa: F401
                       propagate_qconfig_, quantize_dynamic, swap_module)
