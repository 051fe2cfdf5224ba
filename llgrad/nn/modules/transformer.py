"""torch.nn.modules.transformer's classes, where PyTorch programs import them from."""
from ..layers_transformer import (  # noqa: F401
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer)
