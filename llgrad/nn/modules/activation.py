"""torch.nn.modules.activation's classes, where PyTorch programs import them from."""
from ..layers import GELU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh  # noqa: F401
from ..layers_activation import (  # noqa: F401
    CELU, ELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, Mish,
    PReLU, RReLU, ReLU6, SELU, Softmin, Softplus, Softshrink, Softsign, Tanhshrink, Threshold)
from ..layers_attention import MultiheadAttention  # noqa: F401
from ..layers_extra import Softmax2d  # noqa: F401
