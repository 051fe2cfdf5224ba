"""Official attention tutorials the other files leave out, nearly verbatim (sweep 22, H2
part C): "Implementing High-Performance Transformers with Scaled Dot Product Attention"
(CausalSelfAttention on a fused c_attn, sdpa_kernel(SDPBackend.MATH), the
torch.nn.attention.bias causal_upper_left / causal_lower_right attention biases, a compiled
sdpa); "Accelerating PyTorch Transformers by replacing nn.Transformer with Nested Tensors
and torch.compile()" with dense tensors (its MultiHeadAttention with a packed projection
checked against nn.MultiheadAttention, the packed / unpacked input projections, a
cross-attention layer with E_q != E_k, trained in a causal decoder block). Programs
`f(torch, env)`, see tutorial_harness.py."""
import importlib


def sdpa_tutorial(torch, env):
    nn = torch.nn
    F = torch.nn.functional
    SDPBackend = torch.nn.attention.SDPBackend
    sdpa_kernel = torch.nn.attention.sdpa_kernel

    query, key, value = env.randn(2, 3, 8, 8), env.randn(2, 3, 8, 8), env.randn(2, 3, 8, 8)
    env.rec("sdpa", F.scaled_dot_product_attention(query, key, value))
    with sdpa_kernel(SDPBackend.MATH):
        env.rec("sdpa math", F.scaled_dot_product_attention(query, key, value))

    class CausalSelfAttention(nn.Module):

        def __init__(self, num_heads: int, embed_dimension: int, bias: bool = False,
                     is_causal: bool = False, dropout: float = 0.0):
            super().__init__()
            assert embed_dimension % num_heads == 0
            # key, query, value projections for all heads, but in a batch
            self.c_attn = nn.Linear(embed_dimension, 3 * embed_dimension, bias=bias)
            # output projection
            self.c_proj = nn.Linear(embed_dimension, embed_dimension, bias=bias)
            # regularization
            self.dropout = dropout
            self.resid_dropout = nn.Dropout(dropout)
            self.num_heads = num_heads
            self.embed_dimension = embed_dimension
            # Perform causal masking
            self.is_causal = is_causal

        def forward(self, x):
            # calculate query, key, values for all heads in batch and move head forward to
            # be the batch dim
            query_projected = self.c_attn(x)

            batch_size = query_projected.size(0)
            embed_dim = query_projected.size(2)
            head_dim = embed_dim // (self.num_heads * 3)

            query, key, value = query_projected.chunk(3, -1)
            query = query.view(batch_size, -1, self.num_heads, head_dim).transpose(1, 2)
            key = key.view(batch_size, -1, self.num_heads, head_dim).transpose(1, 2)
            value = value.view(batch_size, -1, self.num_heads, head_dim).transpose(1, 2)

            if self.training:
                dropout = self.dropout
                is_causal = self.is_causal
            else:
                dropout = 0.0
                is_causal = False

            y = F.scaled_dot_product_attention(query, key, value, attn_mask=None,
                                               dropout_p=dropout, is_causal=is_causal)
            y = y.transpose(1, 2).contiguous().view(batch_size, -1,
                                                    self.num_heads * head_dim)

            y = self.resid_dropout(self.c_proj(y))
            return y

    num_heads = 4
    heads_per_dim = 4
    embed_dimension = num_heads * heads_per_dim
    model = env.init(CausalSelfAttention(num_heads=num_heads, embed_dimension=embed_dimension,
                                         bias=False, is_causal=True, dropout=0.1).eval())
    x = env.randn(3, 6, embed_dimension)
    env.rec("eval out", model(x))
    model.train()
    model.dropout = 0.0
    model.resid_dropout.p = 0.0
    target = env.randn(3, 6, embed_dimension)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, target):
        opt.zero_grad()
        with sdpa_kernel(SDPBackend.MATH):
            loss = F.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(x, target))

    # Using SDPA with attn_bias subclasses
    # (from torch.nn.attention.bias import causal_lower_right, causal_upper_left)
    bias = importlib.import_module(torch.__name__ + ".nn.attention.bias")
    batch_size = 2
    sequence_length_q = 2
    sequence_length_kv = 5
    num_heads = 3
    embed_dimension = 8
    dtype = torch.float32
    query = env.rand(batch_size, num_heads, sequence_length_q, embed_dimension).to(dtype)
    key = env.rand(batch_size, num_heads, sequence_length_kv, embed_dimension).to(dtype)
    value = env.rand(batch_size, num_heads, sequence_length_kv, embed_dimension).to(dtype)

    upper_left_bias = bias.causal_upper_left(sequence_length_q, sequence_length_kv)
    lower_right_bias = bias.causal_lower_right(sequence_length_q, sequence_length_kv)
    assert type(upper_left_bias) == type(lower_right_bias)
    assert issubclass(type(upper_left_bias), torch.Tensor)
    env.rec("biases", (upper_left_bias._materialize(), lower_right_bias._materialize()))

    out_upper_left = F.scaled_dot_product_attention(query, key, value, upper_left_bias)
    out_lower_right = F.scaled_dot_product_attention(query, key, value, lower_right_bias)
    out_is_causal = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    assert torch.allclose(out_upper_left, out_is_causal)
    assert not torch.allclose(out_upper_left, out_lower_right)
    env.rec("bias outs", (out_upper_left, out_lower_right))

    # These attention biases should also be compatible with torch.compile
    compiled_sdpa = env.step(lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, b),
                             fullgraph=True)
    env.rec("compiled upper left", compiled_sdpa(query, key, value, upper_left_bias))
    env.rec("compiled lower right", compiled_sdpa(query, key, value, lower_right_bias))


def transformer_building_blocks(torch, env):
    nn = torch.nn
    F = torch.nn.functional

    class MultiHeadAttention(nn.Module):
        def __init__(self, E_q: int, E_k: int, E_v: int, E_total: int, nheads: int,
                     dropout: float = 0.0, bias=True, device=None, dtype=None):
            factory_kwargs = {"device": device, "dtype": dtype}
            super().__init__()
            self.nheads = nheads
            self.dropout = dropout
            self._qkv_same_embed_dim = E_q == E_k and E_q == E_v
            if self._qkv_same_embed_dim:
                self.packed_proj = nn.Linear(E_q, E_total * 3, bias=bias, **factory_kwargs)
            else:
                self.q_proj = nn.Linear(E_q, E_total, bias=bias, **factory_kwargs)
                self.k_proj = nn.Linear(E_k, E_total, bias=bias, **factory_kwargs)
                self.v_proj = nn.Linear(E_v, E_total, bias=bias, **factory_kwargs)
            E_out = E_q
            self.out_proj = nn.Linear(E_total, E_out, bias=bias, **factory_kwargs)
            assert E_total % nheads == 0, "Embedding dim is not divisible by nheads"
            self.E_head = E_total // nheads
            self.bias = bias

        def forward(self, query, key, value, attn_mask=None, is_causal=False):
            # Step 1. Apply input projection
            if self._qkv_same_embed_dim:
                if query is key and key is value:
                    result = self.packed_proj(query)
                    query, key, value = torch.chunk(result, 3, dim=-1)
                else:
                    q_weight, k_weight, v_weight = torch.chunk(
                        self.packed_proj.weight, 3, dim=0
                    )
                    if self.bias:
                        q_bias, k_bias, v_bias = torch.chunk(
                            self.packed_proj.bias, 3, dim=0
                        )
                    else:
                        q_bias, k_bias, v_bias = None, None, None
                    query, key, value = (
                        F.linear(query, q_weight, q_bias),
                        F.linear(key, k_weight, k_bias),
                        F.linear(value, v_weight, v_bias),
                    )
            else:
                query = self.q_proj(query)
                key = self.k_proj(key)
                value = self.v_proj(value)

            # Step 2. Split heads and prepare for SDPA
            # (N, L_t, E_total) -> (N, L_t, nheads, E_head) -> (N, nheads, L_t, E_head)
            query = query.unflatten(-1, [self.nheads, self.E_head]).transpose(1, 2)
            key = key.unflatten(-1, [self.nheads, self.E_head]).transpose(1, 2)
            value = value.unflatten(-1, [self.nheads, self.E_head]).transpose(1, 2)

            # Step 3. Run SDPA
            attn_output = F.scaled_dot_product_attention(
                query, key, value, attn_mask=attn_mask, dropout_p=self.dropout,
                is_causal=is_causal)
            # (N, nheads, L_t, E_head) -> (N, L_t, nheads, E_head) -> (N, L_t, E_total)
            attn_output = attn_output.transpose(1, 2).flatten(-2)

            # Step 4. Apply output projection
            attn_output = self.out_proj(attn_output)
            return attn_output

    N, L, E_q, E_total, nheads = 3, 5, 16, 16, 4
    torch.manual_seed(0)
    mha_layer = MultiHeadAttention(E_q, E_q, E_q, E_total, nheads, dropout=0.0, bias=True)
    vanilla_mha_layer = nn.MultiheadAttention(E_q, nheads, dropout=0.0, batch_first=True,
                                              bias=True)
    # ``nn.MultiheadAttention`` uses a non conventional initialization for layers, so do
    # this for exact parity :(
    mha_layer.out_proj.weight = nn.Parameter(vanilla_mha_layer.out_proj.weight.clone().detach())
    mha_layer.packed_proj.weight = nn.Parameter(vanilla_mha_layer.in_proj_weight.clone().detach())
    mha_layer.out_proj.bias = nn.Parameter(vanilla_mha_layer.out_proj.bias.clone().detach())
    mha_layer.packed_proj.bias = nn.Parameter(vanilla_mha_layer.in_proj_bias.clone().detach())

    x = env.randn(N, L, E_q)
    mem = env.randn(N, L + 2, E_q)
    new_out = mha_layer(x, x, x)
    vanilla_out, _ = vanilla_mha_layer(x, x, x, need_weights=False)
    assert torch.allclose(new_out, vanilla_out, atol=1e-5)
    cross_new = mha_layer(x, mem, mem)
    cross_vanilla, _ = vanilla_mha_layer(x, mem, mem, need_weights=False)
    assert torch.allclose(cross_new, cross_vanilla, atol=1e-5)
    causal = nn.Transformer.generate_square_subsequent_mask(L)
    causal_vanilla, _ = vanilla_mha_layer(x, x, x, attn_mask=causal, need_weights=False,
                                          is_causal=True)
    env.rec("parity", (new_out, cross_new, causal_vanilla, mha_layer(x, x, x, is_causal=True)))

    class InputProjection(nn.Module):
        def __init__(self, E_q, E_total, bias=False, device=None, dtype=None):
            factory_kwargs = {"device": device, "dtype": dtype}
            super().__init__()
            self.q_proj = nn.Linear(E_q, E_total, bias=bias, **factory_kwargs)
            self.k_proj = nn.Linear(E_q, E_total, bias=bias, **factory_kwargs)
            self.v_proj = nn.Linear(E_q, E_total, bias=bias, **factory_kwargs)

        def forward(self, x):
            return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    class PackedInputProjection(nn.Module):
        def __init__(self, E_q, E_total, bias=False, device=None, dtype=None):
            factory_kwargs = {"device": device, "dtype": dtype}
            super().__init__()
            self.packed_proj = nn.Linear(E_q, E_total * 3, bias=bias, **factory_kwargs)

        def forward(self, query):
            return torch.chunk(self.packed_proj(query), 3, dim=-1)

    in_proj = InputProjection(E_q, E_total)
    packed_in_proj = PackedInputProjection(E_q, E_total)
    with torch.no_grad():
        packed_in_proj.packed_proj.weight.copy_(torch.cat(
            [in_proj.q_proj.weight, in_proj.k_proj.weight, in_proj.v_proj.weight]))
    unpacked = in_proj(x)
    packed = packed_in_proj(x)
    env.rec("projections", (unpacked, packed))

    # a decoder block: causal self-attention, cross-attention with E_k != E_q, an MLP
    class DecoderBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(E_q)
            self.self_attn = MultiHeadAttention(E_q, E_q, E_q, E_total, nheads)
            self.ln2 = nn.LayerNorm(E_q)
            self.cross_attn = MultiHeadAttention(E_q, 12, 12, E_total, nheads)
            self.mlp = nn.Sequential(nn.Linear(E_q, 32), nn.GELU(), nn.Linear(32, E_q))

        def forward(self, x, memory):
            h = self.ln1(x)
            x = x + self.self_attn(h, h, h, is_causal=True)
            x = x + self.cross_attn(self.ln2(x), memory, memory)
            return x + self.mlp(x)

    block = env.init(DecoderBlock())
    memory = env.randn(N, 4, 12)
    target = env.randn(N, L, E_q)
    # (SGD: the key projection's bias gets a gradient of rounding noise only (softmax ignores
    # a per-query constant), which Adam would scale up to full steps)
    opt = torch.optim.SGD(block.parameters(), lr=0.1, momentum=0.9)

    def step(x, memory, target):
        opt.zero_grad()
        loss = F.mse_loss(block(x, memory), target)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step)
    for i in range(3):
        env.rec(f"loss {i}", step(x, memory, target))
    env.rec("state", block.state_dict())
