"""The IR layer: the op table, typed SSA graphs, printer/parser, verifier, passes and the
reference interpreter. Imports nothing from the rest of llgrad and never imports llvmlite."""
from .optable import OPS, OpDef, defop  # noqa: F401
from . import ops_elementwise, ops_pow, ops_select, ops_copy, ops_reduce  # noqa: F401,E402
from . import ops_shape, ops_data_movement, ops_index, ops_nn, ops_random  # noqa: F401,E402
from . import ops_batch_norm  # noqa: F401,E402  (batch_norm, batch_norm_backward)
from . import ops_activations, ops_losses, ops_nn_more  # noqa: F401,E402
from . import ops_tensor, ops_linalg, ops_sort, ops_fill, ops_conv  # noqa: F401,E402
from . import ops_pool  # noqa: F401,E402  (max_pool2d_with_indices)
from . import ops_rnn  # noqa: F401,E402  (fused_lstm_cell, fused_gru_cell)
from . import ops_rnn_layer  # noqa: F401,E402  (lstm_layer: a whole LSTM layer)
from . import ops_special, ops_bitwise  # noqa: F401,E402  (asin..polygamma; bitwise, gcd)
from . import ops_fill_more  # noqa: F401,E402  (random_, exponential_, ..., normal(tensors))
from . import ops_matrix  # noqa: F401,E402  (linalg_inv_ex, linalg_det, linalg_slogdet)
from . import ops_conv3d, ops_pool3d  # noqa: F401,E402  (convolution3d; 3-D pooling)
from . import ops_linalg_solve, ops_linalg_spectral  # noqa: F401,E402  (solve, lu, qr, svd)
from . import ops_linalg_ldl  # noqa: F401,E402  (linalg_ldl_factor_ex, linalg_ldl_solve)
from . import ops_special_bessel  # noqa: F401,E402  (Bessel, polynomials, zeta)
from . import ops_complex, ops_fft  # noqa: F401,E402  (view_as_real, complex, ...; fft)
from . import ops_ctc  # noqa: F401,E402  (ctc_loss, ctc_loss_backward)
from .graph import Graph, Guard, Node, TensorType, Value  # noqa: F401,E402
from .builder import Builder  # noqa: F401,E402
from . import printer  # noqa: F401,E402  (Graph.__str__)
from .interpret import interpret  # noqa: F401,E402
from .parser import parse_graph  # noqa: F401,E402
from .passes import cse, dce  # noqa: F401,E402
from .verify import VerifyError, verify  # noqa: F401,E402
from .ops_control import CONTROL  # noqa: F401,E402
