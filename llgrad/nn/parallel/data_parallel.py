"""DataParallel: torch.nn.DataParallel as PyTorch runs it on a machine without accelerators,
which is what llgrad is: the wrapped module runs whole in this process (no replicas, no
scatter of the batch), so the forward, gradients and training are the module's own. It is
kept for scripts written for GPUs: `model = nn.DataParallel(model)` works unchanged,
`.module` is the wrapped module, and state_dict keys carry the "module." prefix, so
checkpoints are interchangeable with PyTorch's DataParallel ones. For several processes,
use DistributedDataParallel."""
from ..module import Module

__all__ = ["DataParallel"]


class DataParallel(Module):
    """As torch.nn.DataParallel on the CPU: forward(*inputs, **kwargs) is module(*inputs,
    **kwargs); device_ids is [] (PyTorch's value without accelerators), whatever is passed;
    output_device and dim are accepted and unused, as there."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
