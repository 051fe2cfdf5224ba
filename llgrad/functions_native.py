"""torch.* functions under ATen's names and argument orders that nn.functional computes:
the native_* norms and dropout (their tuples: the result, then the statistics or the mask),
the dropout variants with (input, p, train), embedding_bag (with its bookkeeping outputs),
ctc_loss and the recurrent cells (input, hx, w_ih, w_hh, b_ih, b_hh)."""
import numpy as np

from .nn import functional as F
from .nn.functional_extra import _dropout
from .nn.layers_rnn_cell import gru_step, lstm_step, rnn_step
from .runtime import dtypes, trace_state
from .runtime.creation import ones_like, rand
from .runtime.functions import cat, stack
from .runtime.grad_mode import no_grad
from .runtime.node_names import rename
from .runtime.result_format import formatted
from .runtime.tensor import Tensor

__all__ = ["native_layer_norm", "native_batch_norm", "native_group_norm", "native_dropout",
           "native_norm", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
           "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "embedding_bag",
           "ctc_loss", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "lstm", "gru",
           "rnn_tanh", "rnn_relu"]


def _tensor_arg(x, fn, name="input", pos=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")


def _stats(x, dims, eps):
    """(mean, 1 / sqrt(biased var + eps)) over dims, keepdim, without gradient."""
    with no_grad():
        mean = x.mean(dims, keepdim=True)
        var = (x - mean).square().mean(dims, keepdim=True)
        return mean, (var + eps).rsqrt()


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """As torch.native_layer_norm: (layer_norm's result, mean, rstd), the statistics shaped
    input's leading dims then ones."""
    _tensor_arg(input, "native_layer_norm")
    out = F.layer_norm(input, normalized_shape, weight, bias, eps)
    k = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    nd = input.dim()
    mean, rstd = _stats(input, tuple(range(nd - k, nd)), eps)
    return rename(out, "NativeLayerNormBackward0"), mean, rstd


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """As torch.native_batch_norm: (batch_norm's result, channels_last where the input is,
    save_mean, save_invstd); in evaluation the saved statistics are empty."""
    _tensor_arg(input, "native_batch_norm")
    if training:
        dims = (0,) + tuple(range(2, input.dim()))
        mean, invstd = _stats(input, dims, eps)
        mean, invstd = mean.reshape(-1), invstd.reshape(-1)
    else:
        mean = invstd = input.new_empty((0,))
    out = formatted(lambda: F.aten_batch_norm(input, running_mean, running_var, weight, bias,
                                              training, momentum, eps), input)
    return rename(out, "NativeBatchNormBackward0"), mean, invstd


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):  # noqa: N803 (ATen's)
    """As torch.native_group_norm: (group_norm's result, mean, rstd), each (N, group)."""
    _tensor_arg(input, "native_group_norm")
    out = F.group_norm(input, group, weight, bias, eps)
    # (PyTorch's statistics here are differentiable; the size is counted, not -1, which
    # an empty batch makes ambiguous)
    x = input.reshape(N, group, (C // group) * HxW)
    mean = x.mean(2)
    rstd = (x.var(2, unbiased=False) + eps).rsqrt()
    return rename((out, mean, rstd), "NativeGroupNormBackward0")


def native_dropout(input, p, train):
    """As torch.native_dropout: (input * mask / (1 - p), mask) in training (train True or
    None; the mask a bool tensor drawn from llgrad's generator), else (a copy, all True)."""
    _tensor_arg(input, "native_dropout")
    if train is None or train:
        mask = rand(tuple(input.shape), dtype=input.dtype) >= p
        scale = 0.0 if p >= 1 else 1.0 / (1 - p)
        out = input * mask.to(input.dtype) * scale
    else:
        out, mask = input.clone(), ones_like(input, dtype=dtypes.bool_)
    return rename(out, "NativeDropoutBackward0"), mask


def native_norm(input, *args, **kwargs):
    """As torch.native_norm: PyTorch has it for sparse tensors only, so a CPU tensor raises
    its dispatcher's error."""
    _tensor_arg(input, "native_norm")
    raise NotImplementedError(
        "Could not run 'aten::native_norm' with arguments from the 'CPU' backend. This could "
        "be because the operator doesn't exist for this backend, or was omitted during the "
        "selective/custom build process (if using custom build). If you are a Facebook employee "
        "using PyTorch on mobile, please visit https://fburl.com/ptmfixes for possible "
        "resolutions. 'aten::native_norm' is only available for these backends: [Meta, "
        "SparseCPU].")


def _dropout_fn(name, feature, alpha, inplace):
    def fn(input, p, train):
        _tensor_arg(input, name)
        if not 0 <= p <= 1:
            raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
        return _dropout(input, p, train, inplace, feature, alpha)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"As torch.{name}(input, p, train): {'in-place ' if inplace else ''}"
                  f"{'channel-wise ' if feature else ''}{'alpha ' if alpha else ''}dropout.")
    return fn


alpha_dropout = _dropout_fn("alpha_dropout", False, True, False)
alpha_dropout_ = _dropout_fn("alpha_dropout_", False, True, True)
feature_alpha_dropout = _dropout_fn("feature_alpha_dropout", True, True, False)
feature_alpha_dropout_ = _dropout_fn("feature_alpha_dropout_", True, True, True)
feature_dropout = _dropout_fn("feature_dropout", True, False, False)
feature_dropout_ = _dropout_fn("feature_dropout_", True, False, True)


def _bags(indices, offsets, include_last_offset, n_bags):
    """Each index's bag (torch's offset2bag): bag b spans offsets[b]..offsets[b + 1], the
    last one to the end."""
    starts = np.asarray(offsets._data, np.int64).reshape(-1)[:n_bags]
    pos = np.arange(indices._data.size)
    return np.searchsorted(starts, pos, side="right") - 1


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """As torch.embedding_bag: (F.embedding_bag's result, offset2bag, bag_size,
    max_indices) with modes 0 sum, 1 mean, 2 max, and PyTorch's bookkeeping outputs."""
    if not isinstance(offsets, Tensor):
        raise TypeError(f"embedding_bag(): argument 'offsets' (position 3) must be Tensor, not "
                        f"{type(offsets).__name__}")
    out = F.embedding_bag(indices, weight, offsets, scale_grad_by_freq=scale_grad_by_freq,
                          mode=("sum", "mean", "max")[mode], sparse=sparse,
                          per_sample_weights=per_sample_weights,
                          include_last_offset=include_last_offset, padding_idx=padding_idx)
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable("embedding_bag's bag bookkeeping (it depends on the indices' values)")
    n_bags = offsets.numel() - (1 if include_last_offset else 0)
    idx = np.asarray(indices._data, np.int64).reshape(-1)
    if mode == 0:
        none = np.zeros(n_bags, np.int64)
        return (out, Tensor._from_array(np.zeros(0, np.int64)), Tensor._from_array(none),
                Tensor._from_array(none.copy()))
    bag = _bags(indices, offsets, include_last_offset, n_bags)
    real = idx != (padding_idx if padding_idx is not None else -1 - weight.shape[0])
    size = np.bincount(bag[real], minlength=n_bags)[:n_bags].astype(np.int64)
    if mode == 1:
        max_idx = size.copy()
    else:
        w = np.asarray(weight._data)
        max_idx = np.zeros((n_bags, w.shape[1]), np.int64)
        for b in range(n_bags):
            rows = idx[(bag == b) & real]
            if rows.size:
                max_idx[b] = rows[np.argmax(w[rows], axis=0)]
    return (out, Tensor._from_array(bag.astype(np.int64)), Tensor._from_array(size),
            Tensor._from_array(max_idx))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    """As torch.ctc_loss: F.ctc_loss with ATen's reduction numbers (torch 2.13 binds the
    default as 0, unreduced; 1 mean, 2 sum)."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      {1: "mean", 2: "sum"}.get(reduction, "none"), zero_infinity)


def _cell_checks(fn, input, hx, w_ih, w_hh, gates):
    _tensor_arg(input, fn)
    if fn == "lstm_cell":
        if not isinstance(hx, (tuple, list)):
            raise TypeError(f"lstm_cell(): argument 'hx' (position 2) must be tuple of Tensors, "
                            f"not {type(hx).__name__}")
        h = hx[0]
    else:
        _tensor_arg(hx, fn, "hx", 2)
        h = hx
    hidden = h.shape[-1]
    for name, w in (("weight_ih", w_ih), ("weight_hh", w_hh)):
        if w.shape[0] != gates * hidden:
            what = f"{gates} * hidden_size = {gates * hidden}" if gates > 1 else \
                f"hidden_size = {hidden}"
            raise RuntimeError(f"{name[:-3]}_{name[-2:]} first dim must be {what}, but got "
                               f"{w.shape[0]}")


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """As torch.lstm_cell: one LSTM step, (h', c') from hx = (h, c) (gates i, f, g, o)."""
    _cell_checks("lstm_cell", input, hx, w_ih, w_hh, 4)
    return lstm_step(F.linear(input, w_ih, b_ih), hx[0], hx[1], w_hh.t(), b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """As torch.gru_cell: one GRU step, h' (gates r, z, n)."""
    _cell_checks("gru_cell", input, hx, w_ih, w_hh, 3)
    return rename(gru_step(F.linear(input, w_ih, b_ih), hx, w_hh.t(), b_hh), "AddBackward0")


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """As torch.rnn_tanh_cell: tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    _cell_checks("rnn_tanh_cell", input, hx, w_ih, w_hh, 1)
    return rnn_step(F.linear(input, w_ih, b_ih), hx, w_hh.t(), b_hh, "tanh")


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """As torch.rnn_relu_cell: relu(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    _cell_checks("rnn_relu_cell", input, hx, w_ih, w_hh, 1)
    return rnn_step(F.linear(input, w_ih, b_ih), hx, w_hh.t(), b_hh, "relu")


def _layers(kind, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
            batch_first):
    """ATen's full recurrent layers as steps of the cells: the output of the last layer for
    every time step and each layer's (and direction's) last state(s)."""
    x = input.transpose(0, 1) if batch_first else input
    dirs = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if len(params) != per * num_layers * dirs:
        raise RuntimeError(f"{kind}: expected {per * num_layers * dirs} parameters, got "
                           f"{len(params)}")
    h0 = hx if kind != "lstm" else hx[0]
    finals, cells = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = (layer * dirs + d) * per
            w_ih, w_hh = params[k], params[k + 1]
            b_ih, b_hh = (params[k + 2], params[k + 3]) if has_biases else (None, None)
            h = h0[layer * dirs + d]
            c = hx[1][layer * dirs + d] if kind == "lstm" else None
            gx = F.linear(x, w_ih, b_ih)
            steps = range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])
            ys = [None] * x.shape[0]
            for t in steps:
                if kind == "lstm":
                    h, c = lstm_step(gx[t], h, c, w_hh.t(), b_hh)
                elif kind == "gru":
                    h = gru_step(gx[t], h, w_hh.t(), b_hh)
                else:
                    h = rnn_step(gx[t], h, w_hh.t(), b_hh, kind[4:])
                ys[t] = h
            outs.append(stack(ys))
            finals.append(h)
            cells.append(c)
        x = outs[0] if dirs == 1 else cat(outs, 2)
        if dropout and train and layer < num_layers - 1:
            x = F.dropout(x, dropout, True)
    out = x.transpose(0, 1) if batch_first else x
    if kind == "lstm":
        return out, stack(finals), stack(cells)
    return out, stack(finals)


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """As torch.lstm (the padded form): (output, h_n, c_n) of a stacked LSTM with the
    parameters in nn.LSTM's _flat_weights order (no proj_size)."""
    return _layers("lstm", input, hx, params, has_biases, num_layers, dropout, train,
                   bidirectional, batch_first)


def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """As torch.gru (the padded form): (output, h_n) of a stacked GRU."""
    return _layers("gru", input, hx, params, has_biases, num_layers, dropout, train,
                   bidirectional, batch_first)


def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
             batch_first):
    """As torch.rnn_tanh (the padded form): (output, h_n) of a stacked tanh RNN."""
    return _layers("rnn_tanh", input, hx, params, has_biases, num_layers, dropout, train,
                   bidirectional, batch_first)


def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
             batch_first):
    """As torch.rnn_relu (the padded form): (output, h_n) of a stacked ReLU RNN."""
    return _layers("rnn_relu", input, hx, params, has_biases, num_layers, dropout, train,
                   bidirectional, batch_first)
