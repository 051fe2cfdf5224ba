"""torch.nn.modules.rnn's classes, where PyTorch programs import them from."""
from ..layers_rnn import GRU, LSTM, RNN, RNNBase  # noqa: F401
from ..layers_rnn_cell import GRUCell, LSTMCell, RNNCell, RNNCellBase  # noqa: F401
