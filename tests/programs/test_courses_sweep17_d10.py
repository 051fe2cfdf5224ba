"""Sweep 17 (D), part 10: 'Let's build GPT' and build-nanogpt: the averaging trick three
ways, per-head modules with tril buffers, loss accumulation and clip_grad_norm_ with a
warm-up cosine lr, top-k sampling with a seeded device generator and gather, HellaSwag's
masked per-token losses; and UvA tutorial 7's GCN and GAT layers (edges from nonzero(),
index_select of flattened node features, einsum attention logits written into a -9e15 matrix
by a boolean mask, a compiled training step over both). See tutorial_harness.py."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def gpt_dev(torch, env):
    """'Let's build GPT': the averaging trick three ways, a Head with a tril buffer, and
    build-nanogpt's sampling (topk 50 of the probabilities, multinomial with a device
    generator, gather) and HellaSwag scoring (shifted per-token losses masked and summed)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1337)
    B, T, C = 4, 8, 2
    x = torch.randn(B, T, C)
    xbow = torch.zeros((B, T, C))
    for b in range(B):
        for t in range(T):
            xprev = x[b, :t + 1]
            xbow[b, t] = torch.mean(xprev, 0)
    wei = torch.tril(torch.ones(T, T))
    wei = wei / wei.sum(1, keepdim=True)
    xbow2 = wei @ x
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros((T, T))
    wei = wei.masked_fill(tril == 0, float('-inf'))
    wei = F.softmax(wei, dim=-1)
    xbow3 = wei @ x
    env.rec("xbow", (xbow, xbow2, xbow3))
    # (the loop's means and the matmul differ in the last bits, by summation order: whether
    # allclose's rtol=1e-5 holds at an element near zero is rounding, PyTorch's own or ours)
    env.rec("allclose", (torch.allclose(xbow, xbow2), torch.allclose(xbow, xbow3)), cross=False)
    a = torch.tril(torch.ones(3, 3))
    a = a / torch.sum(a, 1, keepdim=True)
    b = torch.randint(0, 10, (3, 2)).float()
    env.rec("a@b", (a, b, a @ b))

    class Head(nn.Module):
        def __init__(self, n_embd, head_size, block_size, dropout=0.0):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)
            self.value = nn.Linear(n_embd, head_size, bias=False)
            self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
            self.dropout = nn.Dropout(dropout)
        def forward(self, x):
            B, T, C = x.shape
            k = self.key(x)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
            wei = F.softmax(wei, dim=-1)
            wei = self.dropout(wei)
            v = self.value(x)
            return wei @ v

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_heads, head_size, n_embd, block_size):
            super().__init__()
            self.heads = nn.ModuleList([Head(n_embd, head_size, block_size) for _ in range(num_heads)])
            self.proj = nn.Linear(head_size * num_heads, n_embd)
        def forward(self, x):
            out = torch.cat([h(x) for h in self.heads], dim=-1)
            return self.proj(out)

    class LM(nn.Module):
        def __init__(self, vocab_size=20, n_embd=16, block_size=8):
            super().__init__()
            self.block_size = block_size
            self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
            self.position_embedding_table = nn.Embedding(block_size, n_embd)
            self.sa = MultiHeadAttention(4, n_embd // 4, n_embd, block_size)
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab_size)
            self.apply(self._init_weights)
        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                std = 0.02
                if hasattr(module, 'NANOGPT_SCALE_INIT'):
                    std *= (2 * 2) ** -0.5
                torch.nn.init.normal_(module.weight, mean=0.0, std=std)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        def forward(self, idx, targets=None):
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)
            pos_emb = self.position_embedding_table(torch.arange(T, device=idx.device))
            x = tok_emb + pos_emb
            x = self.sa(x)
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                loss = None
            else:
                B, T, C = logits.shape
                logits = logits.view(B * T, C)
                targets = targets.view(B * T)
                loss = F.cross_entropy(logits, targets)
            return logits, loss

    model = LM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    data = torch.randint(0, 20, (200,))

    def get_lr(it, warmup_steps=2, max_steps=6, max_lr=1e-2, min_lr=1e-3):
        if it < warmup_steps:
            return max_lr * (it + 1) / warmup_steps
        if it > max_steps:
            return min_lr
        decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)
        assert 0 <= decay_ratio <= 1
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (max_lr - min_lr)

    def micro(x, y):
        logits, loss = model(x, y)
        loss = loss / 2
        loss.backward()
        return loss
    micro = env.step(micro)
    for step in range(6):
        optimizer.zero_grad()
        loss_accum = 0.0
        for micro_step in range(2):
            ix = torch.randint(len(data) - 8, (4,))
            x = torch.stack([data[i:i + 8] for i in ix])
            y = torch.stack([data[i + 1:i + 9] for i in ix])
            loss = micro(x, y)
            loss_accum += loss.detach()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        optimizer.step()
        env.rec(f"step {step}", (loss_accum.item(), norm.item(), lr))
    model.eval()
    num_return_sequences, max_length = 3, 8
    tokens = torch.tensor([1, 2, 3], dtype=torch.long)
    tokens = tokens.unsqueeze(0).repeat(num_return_sequences, 1)
    xgen = tokens
    sample_rng = torch.Generator(device='cpu')
    sample_rng.manual_seed(42 + 0)
    while xgen.size(1) < max_length:
        with torch.no_grad():
            logits, loss = model(xgen)
            logits = logits[:, -1, :]
            probs = F.softmax(logits, dim=-1)
            topk_probs, topk_indices = torch.topk(probs, 5, dim=-1)
            ix = torch.multinomial(topk_probs, 1, generator=sample_rng)
            xcol = torch.gather(topk_indices, -1, ix)
            xgen = torch.cat((xgen, xcol), dim=1)
    env.rec("xgen", xgen)
    env.rec("rng state", sample_rng.get_state())
    # HellaSwag: 4 endings, the one of least average loss over its own tokens
    tokens = torch.randint(0, 20, (4, 8))
    mask = torch.zeros(4, 8, dtype=torch.long)
    for i, n in enumerate([3, 5, 2, 4]):
        mask[i, 8 - n:] = 1
    with torch.no_grad():
        logits, _ = model(tokens)
    shift_logits = (logits[..., :-1, :]).contiguous()
    shift_tokens = (tokens[..., 1:]).contiguous()
    flat_shift_logits = shift_logits.view(-1, shift_logits.size(-1))
    flat_shift_tokens = shift_tokens.view(-1)
    shift_losses = F.cross_entropy(flat_shift_logits, flat_shift_tokens, reduction='none')
    shift_losses = shift_losses.view(tokens.size(0), -1)
    shift_mask = (mask[..., 1:]).contiguous()
    masked_shift_losses = shift_losses * shift_mask
    sum_loss = masked_shift_losses.sum(dim=1)
    avg_loss = sum_loss / shift_mask.sum(dim=1)
    env.rec("hellaswag", (sum_loss, avg_loss, sum_loss.argmin().item(), avg_loss.argmin().item()))


def uva_gnn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(42)

    class GCNLayer(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            self.projection = nn.Linear(c_in, c_out)
        def forward(self, node_feats, adj_matrix):
            num_neighbours = adj_matrix.sum(dim=-1, keepdims=True)
            node_feats = self.projection(node_feats)
            node_feats = torch.bmm(adj_matrix, node_feats)
            node_feats = node_feats / num_neighbours
            return node_feats

    class GATLayer(nn.Module):
        def __init__(self, c_in, c_out, num_heads=1, concat_heads=True, alpha=0.2):
            super().__init__()
            self.num_heads = num_heads
            self.concat_heads = concat_heads
            if self.concat_heads:
                assert c_out % num_heads == 0
                c_out = c_out // num_heads
            self.projection = nn.Linear(c_in, c_out * num_heads)
            self.a = nn.Parameter(torch.Tensor(num_heads, 2 * c_out))
            self.leakyrelu = nn.LeakyReLU(alpha)
            nn.init.xavier_uniform_(self.projection.weight.data, gain=1.414)
            nn.init.xavier_uniform_(self.a.data, gain=1.414)
        def forward(self, node_feats, adj_matrix, print_attn_probs=False):
            batch_size, num_nodes = node_feats.size(0), node_feats.size(1)
            node_feats = self.projection(node_feats)
            node_feats = node_feats.view(batch_size, num_nodes, self.num_heads, -1)
            edges = adj_matrix.nonzero(as_tuple=False)
            node_feats_flat = node_feats.view(batch_size * num_nodes, self.num_heads, -1)
            edge_indices_row = edges[:, 0] * num_nodes + edges[:, 1]
            edge_indices_col = edges[:, 0] * num_nodes + edges[:, 2]
            a_input = torch.cat([
                torch.index_select(input=node_feats_flat, index=edge_indices_row, dim=0),
                torch.index_select(input=node_feats_flat, index=edge_indices_col, dim=0)], dim=-1)
            attn_logits = torch.einsum('bhc,hc->bh', a_input, self.a)
            attn_logits = self.leakyrelu(attn_logits)
            attn_matrix = attn_logits.new_zeros(adj_matrix.shape + (self.num_heads,)).fill_(-9e15)
            attn_matrix[adj_matrix[..., None].repeat(1, 1, 1, self.num_heads) == 1] = attn_logits.reshape(-1)
            attn_probs = F.softmax(attn_matrix, dim=2)
            node_feats = torch.einsum('bijh,bjhc->bihc', attn_probs, node_feats)
            if self.concat_heads:
                node_feats = node_feats.reshape(batch_size, num_nodes, -1)
            else:
                node_feats = node_feats.mean(dim=2)
            return node_feats, attn_probs

    node_feats = torch.arange(8, dtype=torch.float32).view(1, 4, 2)
    adj_matrix = torch.Tensor([[[1, 1, 0, 0], [1, 1, 1, 1], [0, 1, 1, 1], [0, 1, 1, 1]]])
    layer = GCNLayer(c_in=2, c_out=2)
    layer.projection.weight.data = torch.Tensor([[1., 0.], [0., 1.]])
    layer.projection.bias.data = torch.Tensor([0., 0.])
    with torch.no_grad():
        env.rec("gcn", layer(node_feats, adj_matrix))
    layer = GATLayer(2, c_out=2, num_heads=2)
    layer.projection.weight.data = torch.Tensor([[1., 0.], [0., 1.]])
    layer.projection.bias.data = torch.Tensor([0., 0.])
    layer.a.data = torch.Tensor([[-0.2, 0.3], [0.1, -0.1]])
    with torch.no_grad():
        env.rec("gat", layer(node_feats, adj_matrix))
    gat = GATLayer(3, 8, num_heads=2)
    gcn = GCNLayer(8, 3)
    opt = torch.optim.Adam(list(gat.parameters()) + list(gcn.parameters()), lr=1e-2)
    x = torch.randn(2, 5, 3)
    adj = (torch.rand(2, 5, 5) > 0.5).float()
    adj = ((adj + adj.transpose(1, 2) + torch.eye(5)) > 0).float()
    y = torch.randint(0, 3, (2, 5))
    def step(x, adj, y):
        h, attn = gat(x, adj)
        out = gcn(F.elu(h), adj)
        loss = F.cross_entropy(out.reshape(-1, 3), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, attn
    step = env.step(step)
    for i in range(3):
        env.rec(f"step {i}", step(x, adj, y))
    env.rec("params", [gat.a, gat.projection.weight, gcn.projection.weight])


@pytest.mark.parametrize("program", [gpt_dev, uva_gnn])
def test_program(program):
    run_tutorial(program)
