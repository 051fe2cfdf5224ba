"""torch.nn.modules.upsampling's classes, where PyTorch programs import them from."""
from ..layers_pool import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
