"""nn.TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder, TransformerDecoder and
Transformer: PyTorch's modules, names (self_attn, linear1, norm1, dropout1, layers.0, ...),
initialisation and results, written over MultiheadAttention, Linear, LayerNorm and Dropout.

PyTorch's inference fast paths compute the same numbers as its ordinary path, with one
visible difference this file keeps: a TransformerEncoder in eval mode, without autograd, given a
src_key_padding_mask (and no mask) runs on nested tensors and returns zeros at the padded
positions (before its final norm)."""
import copy
import warnings

from ..runtime import autocast_cast, grad_mode
from ..runtime.creation import arange, full
from . import functional as F
from . import init
from .layers import Dropout, GELU, Linear, ReLU
from .layers_attention import MultiheadAttention
from .layers_container import ModuleList
from .layers_norm import LayerNorm
from .functional_multi_head import _canonical_mask, _none_or_dtype
from .module import Module

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """A float (sz, sz) mask: -inf above the diagonal, 0 elsewhere."""
    mask = full((sz, sz), float("-inf"), dtype=dtype, device=device)
    return mask.masked_fill(arange(sz).unsqueeze(1) >= arange(sz), 0.0)


def _get_activation_fn(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _detect_is_causal_mask(mask, is_causal=None):
    """is_causal as given. (PyTorch also compares the mask with the square subsequent mask
    when is_causal is None; the flag is only a hint and the mask is applied either way, so
    no tensor is read for it here: under compile that read would be a value guard.)"""
    return is_causal is True


class TransformerEncoderLayer(Module):
    """As torch.nn.TransformerEncoderLayer (PyTorch's submodule names and initialisation)."""
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(src_mask), "src_mask", src.dtype)
        src_mask = _canonical_mask(src_mask, "src_mask", None, "", src.dtype, check_other=False)
        # PyTorch's fused inference kernel adds each residual in place into the attention's
        # and the feed-forward's outputs: the same numbers as below but under autocast, where
        # those are in its dtype and so is the layer's result
        fused = autocast_cast.state.dtype is not None and self._fused(src)
        x = src
        if self.norm_first:
            x = _add(x, self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal),
                     fused)
            x = _add(x, self._ff_block(self.norm2(x)), fused)
        else:
            x = self.norm1(_add(x, self._sa_block(x, src_mask, src_key_padding_mask, is_causal),
                                fused))
            x = self.norm2(_add(x, self._ff_block(x), fused))
        return x

    def _fused(self, src):
        """Whether PyTorch runs this call in its fused inference kernel (an eval-mode layer
        of its supported form without autograd or hooks)."""
        a = self.self_attn
        if src.dim() != 3 or self.training or not a.batch_first or a.in_proj_bias is None or \
                not a._qkv_same_embed_dim or not self.activation_relu_or_gelu or \
                self.norm1.eps != self.norm2.eps or a.num_heads % 2:
            return False
        if any(m._forward_hooks or m._forward_pre_hooks for m in self.modules()):
            return False
        return not grad_mode.is_grad_enabled() or not (src.requires_grad or any(
            p.requires_grad for p in (a.in_proj_weight, a.in_proj_bias, a.out_proj.weight,
                                      a.out_proj.bias, self.norm1.weight, self.norm1.bias,
                                      self.norm2.weight, self.norm2.bias, self.linear1.weight,
                                      self.linear1.bias, self.linear2.weight,
                                      self.linear2.bias) if p is not None))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


def _add(x, block, fused):
    """x + block, or as the fused kernel's block.add_(x): rounded to block's dtype."""
    return (x + block).to(block.dtype) if fused else x + block


class TransformerDecoderLayer(Module):
    """As torch.nn.TransformerDecoderLayer."""
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) \
            else activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


def _why_not_nested(layer):
    """PyTorch's reason, at construction, that an encoder cannot use nested tensors ("" if it
    can)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True"
                "(use batch_first for better inference performance)")
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


class TransformerEncoder(Module):
    """As torch.nn.TransformerEncoder (in eval mode without autograd, a src_key_padding_mask
    without mask gives zeros at padded positions, as PyTorch's nested-tensor path)."""
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(mask), "mask", src.dtype)
        mask = _canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        is_causal = _detect_is_causal_mask(mask, is_causal)
        self.layers[0]      # (PyTorch reads the first layer first: no layers is an IndexError)
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal,
                         src_key_padding_mask=src_key_padding_mask)
        if self._nested(src, mask, src_key_padding_mask):
            _warn_nested_once()
            # PyTorch's nested-tensor path leaves padded positions at zero
            output = output.masked_fill((src_key_padding_mask != 0).unsqueeze(-1), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _nested(self, src, mask, pad):
        """Whether PyTorch would run this call on nested tensors (its sparsity fast path)."""
        if not getattr(self, "use_nested_tensor", False) or pad is None or mask is not None:
            return False
        first = self.layers[0]
        if first.training or src.dim() != 3:
            return False
        if getattr(self, "mask_check", True) and not _left_aligned(pad):
            return False
        if grad_mode.is_grad_enabled():
            a, n1, n2 = first.self_attn, first.norm1, first.norm2
            params = (a.in_proj_weight, a.in_proj_bias, a.out_proj.weight, a.out_proj.bias,
                      n1.weight, n1.bias, n2.weight, n2.bias, first.linear1.weight,
                      first.linear1.bias, first.linear2.weight, first.linear2.bias)
            if src.requires_grad or any(p is not None and p.requires_grad for p in params):
                return False
        return True


_nested_warned = []


def _warn_nested_once():
    # PyTorch's first nested tensor of the process says this (a C++ warn-once)
    if not _nested_warned:
        _nested_warned.append(True)
        warnings.warn("The PyTorch API of nested tensors is in prototype stage and will change "
                      "in the near future. We recommend specifying layout=torch.jagged when "
                      "constructing a nested tensor, as this layout receives active "
                      "development, has better operator coverage, and works with "
                      "torch.compile.", UserWarning, stacklevel=3)


def _left_aligned(pad):
    """Whether every row of a (B, S) padding mask pads only at its end (a value read: a
    guard under compile; this runs only without autograd, in eval mode)."""
    valid = (pad == 0).to(pad.dtype)
    return bool((valid[:, 1:] <= valid[:, :-1]).all()) if pad.size(1) > 1 else True


class TransformerDecoder(Module):
    """As torch.nn.TransformerDecoder."""
    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        self.layers[0]      # (PyTorch reads the first layer first: no layers is an IndexError)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal)
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """As torch.nn.Transformer."""
    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.dim() == 3
        if is_batched and src.size(0 if self.batch_first else 1) != \
                tgt.size(0 if self.batch_first else 1):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A causal mask (sz x sz: -inf above the diagonal, 0 elsewhere), as
        torch.nn.Transformer.generate_square_subsequent_mask."""
        return _generate_square_subsequent_mask(sz, dtype=dtype, device=device)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
