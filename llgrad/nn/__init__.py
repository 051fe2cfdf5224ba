"""llgrad.nn: Module, Parameter, layers, losses (PyTorch's API), functional and init."""
from . import functional, init, parallel, utils  # noqa: F401
from .module import Module, Parameter  # noqa: F401
from .layers import *  # noqa: F401,F403
from .layers_rnn import GRU, LSTM, RNN, RNNBase  # noqa: F401
from .layers_rnn_cell import GRUCell, LSTMCell, RNNCell, RNNCellBase  # noqa: F401
from .layers_attention import MultiheadAttention  # noqa: F401
from .layers_transformer import (Transformer, TransformerDecoder,  # noqa: F401
                                 TransformerDecoderLayer, TransformerEncoder,
                                 TransformerEncoderLayer)
from .layers_activation import *  # noqa: F401,F403
from .layers_conv_more import *  # noqa: F401,F403
from .layers_loss_more import *  # noqa: F401,F403
from .layers_norm_more import *  # noqa: F401,F403
from .layers_pad import *  # noqa: F401,F403
from .layers_pool import *  # noqa: F401,F403
from .layers_shuffle import *  # noqa: F401,F403
from .layers_param_container import ParameterDict, ParameterList  # noqa: F401
from .parameter import Buffer  # noqa: F401
from .layers_extra import *  # noqa: F401,F403
from .layers_lazy import *  # noqa: F401,F403
from .layers_container import Container  # noqa: F401
from .layers_embedding_bag import EmbeddingBag  # noqa: F401
from .layers_pool_more import *  # noqa: F401,F403
from .layers_3d import *  # noqa: F401,F403
from .layers_adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from .layers_lrn import CrossMapLRN2d  # noqa: F401
from .parallel import DataParallel  # noqa: F401
from . import attention, modules  # noqa: F401,E402  (torch.nn.attention; torch.nn.modules: modules/)
from . import grad  # noqa: F401,E402  (torch.nn.grad: a convolution's input / weight gradients)
from . import common_types  # noqa: F401,E402  (torch.nn.common_types' annotations)
from .factory import canonical_factory_kwargs as factory_kwargs  # noqa: F401,E402
from .linear_cross_entropy import (LinearCrossEntropyLoss,  # noqa: F401,E402
                                   LinearCrossEntropyOptions, linear_cross_entropy)
# (F.linear_cross_entropy: defined beside its module, over F.linear and F.cross_entropy, so
# that functional.py, which they live in, need not import it back)
functional.linear_cross_entropy = linear_cross_entropy
del linear_cross_entropy
