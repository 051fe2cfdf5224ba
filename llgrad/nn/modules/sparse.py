"""torch.nn.modules.sparse's classes, where PyTorch programs import them from."""
from ..layers_embedding_bag import EmbeddingBag  # noqa: F401
from ..layers_norm import Embedding  # noqa: F401
