"""torch.nn.modules.loss's classes, where PyTorch programs import them from."""
from ..layers_extra import (  # noqa: F401
    CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, MarginRankingLoss,
    MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, PoissonNLLLoss,
    SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss)
from ..layers_loss import (  # noqa: F401
    BCEWithLogitsLoss, CrossEntropyLoss, MSELoss, NLLLoss, _Loss, _WeightedLoss)
from ..layers_loss_more import BCELoss, HuberLoss, KLDivLoss, L1Loss, SmoothL1Loss  # noqa: F401
from ..linear_cross_entropy import LinearCrossEntropyLoss  # noqa: F401
