"""Five more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-06): a LLaMA-style language model (RMSNorm, rotary position
embeddings by rotate_half with cos/sin buffers, a SwiGLU MLP, scaled_dot_product_attention with
is_causal; AdamW and clip_grad_norm_), a ConvLSTM next-frame predictor (ndrplz/ConvLSTM_pytorch's
cell: a convolution over cat([x, h]), torch.split into four gates, a Python loop over frames),
and in untuned_models_twelfth_b.py a SIREN fitted to an image's gradients (vsitzmann/siren's
SineLayer and its Poisson fit: autograd.grad of the output by the coordinates with
create_graph=True), an end-to-end memory network (MemN2N: position encoding, temporal encoding,
adjacent weight tying, three hops; SGD with clipping) and a character LM on a hand-written LSTM
cell with peephole connections under a highway network (RMSprop).

    python bench/untuned_models_twelfth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), jax.jit (where written, in
untuned_models_twelfth_jax.py), llgrad eager and llgrad compiled, 1 thread each; the checks,
the timing and its printout are untuned_models_eleventh.py's (main there).
build(lib, name, small=True) makes the tests' smaller versions."""
import os
import sys

import untuned_models_twelfth_b
from untuned_models_fifth import training_step

NAMES = ("llama", "convlstm", "siren", "memn2n", "hwlstm")


def build(lib, name, small=False):
    make = getattr(untuned_models_twelfth_b, "_" + name, None) or globals()["_" + name]
    return training_step(lib, lambda lib: make(lib, small))


def raw(lib, name, small=False):
    """(model, optimizer, loss, extras) of the maker itself (the jax versions start from it)."""
    make = getattr(untuned_models_twelfth_b, "_" + name, None) or globals()["_" + name]
    return make(lib, small)


def _llama(lib, small):
    # (meta-llama's model.py as Hugging Face's modeling_llama writes the rotary embedding:
    # rotate_half and cos/sin buffers; no KV cache, bias-free projections, untied head)
    nn, F = lib.nn, lib.nn.functional
    batch, seq, dim, n_layers, n_heads, vocab = ((2, 8, 16, 1, 2, 13) if small else
                                                 (8, 64, 128, 4, 4, 256))
    head_dim = dim // n_heads
    hidden = 4 * dim * 2 // 3       # (LLaMA's 2/3 of 4*dim, rounded to a multiple of 32)
    hidden = 32 * ((hidden + 31) // 32)

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(lib.ones(dim))

        def _norm(self, x):
            return x * lib.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            return self._norm(x) * self.weight

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return lib.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin):
        return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(dim, n_heads * head_dim, bias=False)
            self.wk = nn.Linear(dim, n_heads * head_dim, bias=False)
            self.wv = nn.Linear(dim, n_heads * head_dim, bias=False)
            self.wo = nn.Linear(n_heads * head_dim, dim, bias=False)

        def forward(self, x, cos, sin):
            bsz, seqlen, _ = x.shape
            xq = self.wq(x).view(bsz, seqlen, n_heads, head_dim).transpose(1, 2)
            xk = self.wk(x).view(bsz, seqlen, n_heads, head_dim).transpose(1, 2)
            xv = self.wv(x).view(bsz, seqlen, n_heads, head_dim).transpose(1, 2)
            xq, xk = apply_rotary_pos_emb(xq, xk, cos, sin)
            out = F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)
            out = out.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
            return self.wo(out)

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)
            self.w3 = nn.Linear(dim, hidden, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class TransformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.feed_forward = FeedForward()
            self.attention_norm = RMSNorm(dim)
            self.ffn_norm = RMSNorm(dim)

        def forward(self, x, cos, sin):
            h = x + self.attention(self.attention_norm(x), cos, sin)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList([TransformerBlock() for _ in range(n_layers)])
            self.norm = RMSNorm(dim)
            self.output = nn.Linear(dim, vocab, bias=False)
            inv_freq = 1.0 / (10000.0 ** (lib.arange(0, head_dim, 2).float() / head_dim))
            freqs = lib.outer(lib.arange(seq).float(), inv_freq)
            emb = lib.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h, self.cos_cached, self.sin_cached)
            return self.output(self.norm(h))

    model = Transformer()
    optimizer = lib.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    tokens = lib.randint(0, vocab, (batch, seq + 1))
    inp, target = tokens[:, :-1], tokens[:, 1:]

    def loss():
        logits = model(inp)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), target.reshape(-1))
    return model, optimizer, loss, {"clip": 1.0, "data": (inp, target)}


def _convlstm(lib, small):
    # (ndrplz/ConvLSTM_pytorch's ConvLSTMCell and ConvLSTM (batch_first, return_all_layers
    # False) under a 1x1 convolution predicting each next frame; Moving-MNIST-like binary frames)
    nn, F = lib.nn, lib.nn.functional
    batch, frames, size, hidden = (2, 3, 6, [4, 4]) if small else (8, 8, 16, [16, 16])

    class ConvLSTMCell(nn.Module):
        def __init__(self, input_dim, hidden_dim, kernel_size, bias):
            super(ConvLSTMCell, self).__init__()
            self.input_dim = input_dim
            self.hidden_dim = hidden_dim
            self.kernel_size = kernel_size
            self.padding = kernel_size[0] // 2, kernel_size[1] // 2
            self.bias = bias
            self.conv = nn.Conv2d(in_channels=self.input_dim + self.hidden_dim,
                                  out_channels=4 * self.hidden_dim, kernel_size=self.kernel_size,
                                  padding=self.padding, bias=self.bias)

        def forward(self, input_tensor, cur_state):
            h_cur, c_cur = cur_state
            combined = lib.cat([input_tensor, h_cur], dim=1)  # concatenate along channel axis
            combined_conv = self.conv(combined)
            cc_i, cc_f, cc_o, cc_g = lib.split(combined_conv, self.hidden_dim, dim=1)
            i = lib.sigmoid(cc_i)
            f = lib.sigmoid(cc_f)
            o = lib.sigmoid(cc_o)
            g = lib.tanh(cc_g)
            c_next = f * c_cur + i * g
            h_next = o * lib.tanh(c_next)
            return h_next, c_next

        def init_hidden(self, batch_size, image_size):
            height, width = image_size
            return (lib.zeros(batch_size, self.hidden_dim, height, width, device=self.conv.weight.device),
                    lib.zeros(batch_size, self.hidden_dim, height, width, device=self.conv.weight.device))

    class ConvLSTM(nn.Module):
        def __init__(self, input_dim, hidden_dim, kernel_size, num_layers):
            super(ConvLSTM, self).__init__()
            self.num_layers = num_layers
            cell_list = []
            for i in range(0, self.num_layers):
                cur_input_dim = input_dim if i == 0 else hidden_dim[i - 1]
                cell_list.append(ConvLSTMCell(cur_input_dim, hidden_dim[i], kernel_size, True))
            self.cell_list = nn.ModuleList(cell_list)

        def forward(self, input_tensor):
            b, _, _, h, w = input_tensor.size()
            hidden_state = [self.cell_list[i].init_hidden(b, (h, w)) for i in range(self.num_layers)]
            seq_len = input_tensor.size(1)
            cur_layer_input = input_tensor
            for layer_idx in range(self.num_layers):
                h, c = hidden_state[layer_idx]
                output_inner = []
                for t in range(seq_len):
                    h, c = self.cell_list[layer_idx](input_tensor=cur_layer_input[:, t, :, :, :],
                                                     cur_state=[h, c])
                    output_inner.append(h)
                layer_output = lib.stack(output_inner, dim=1)
                cur_layer_input = layer_output
            return layer_output

    class Predictor(nn.Module):
        def __init__(self):
            super().__init__()
            self.convlstm = ConvLSTM(1, hidden, (3, 3), len(hidden))
            self.head = nn.Conv2d(hidden[-1], 1, kernel_size=1)

        def forward(self, x):
            out = self.convlstm(x)
            b, t, c, h, w = out.shape
            return self.head(out.reshape(b * t, c, h, w)).view(b, t, 1, h, w)

    model = Predictor()
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-3)
    # (in the default dtype: a float32 target under a float64 model makes the loss float32)
    clip = (lib.rand(batch, frames + 1, 1, size, size) > 0.8).to(lib.get_default_dtype())
    inputs, targets = clip[:, :-1], clip[:, 1:]

    def loss():
        return F.binary_cross_entropy_with_logits(model(inputs), targets)
    return model, optimizer, loss, {"data": (inputs, targets)}


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    os.environ["PJRT_NPROC"] = "1"                      # (read when jax starts)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false").strip()
    import untuned_models_twelfth_jax
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=raw, jax_models=untuned_models_twelfth_jax)
