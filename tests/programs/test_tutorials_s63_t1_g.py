"""Sweep 63 (t1), file g: tutorial and paper-reference programs run with PyTorch, with
llgrad eagerly and with llgrad compiling each whole training step through
tutorial_harness.py (the same per-step losses, parameters and gradients, no llgrad
warning, compiled code for every step).

- instance discrimination with a memory bank (Wu et al.'s NPID, LinearAverage): a
  non-parametric softmax over the bank of normalised features (a buffer) by the
  repository's autograd.Function, whose backward reads T and momentum by .item(),
  scales grad_output in place and writes the bank's momentum update by index_copy_
  (its gradInput.resize_as_(x), a no-op, used to make the step run eagerly:
  tests/compile/test_resize_noop_s63_t1.py);
- sliding-window local attention with overlapping key chunks made by as_strided (the
  chunking of HF's Longformer: windows of 2w keys with stride w over the padded keys),
  the band mask, the gradient accumulated over the overlapping windows;
- Graph WaveNet (Wu et al.): a self-adaptive adjacency softmax(relu(E1 E2^T)), diffusion
  convolution over its powers (torch.linalg.matrix_power), a gated dilated temporal
  Conv2d, and the repository's masked MAE (mask of nonzero labels, normalised, NaNs
  zeroed by torch.where)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def npid_memory_bank(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_data, d_in, low_dim, batch, T, momentum = 24, 10, 6, 8, 0.1, 0.5

    class LinearAverageOp(torch.autograd.Function):
        """The repository's op (verbatim but for the names): the bank is updated in the
        backward, after the gradient that reads it."""
        @staticmethod
        def forward(self, x, y, memory, params):
            T = params[0].item()
            out = torch.mm(x.data, memory.t())
            out.div_(T)     # batch_size * outputSize
            self.save_for_backward(x, memory, y, params)
            return out

        @staticmethod
        def backward(self, gradOutput):
            x, memory, y, params = self.saved_tensors
            T = params[0].item()
            momentum = params[1].item()
            gradOutput.data.div_(T)
            gradInput = torch.mm(gradOutput.data, memory)
            gradInput.resize_as_(x)
            weight_pos = memory.index_select(0, y.data.view(-1)).resize_as_(x)
            weight_pos.mul_(momentum)
            weight_pos.add_(torch.mul(x.data, 1 - momentum))
            w_norm = weight_pos.pow(2).sum(1, keepdim=True).pow(0.5)
            updated_weight = weight_pos.div(w_norm)
            memory.index_copy_(0, y, updated_weight)
            return gradInput, None, None, None

    class LinearAverage(nn.Module):
        def __init__(self, inputSize, outputSize, T=0.07, momentum=0.5):
            super().__init__()
            stdv = 1 / (inputSize / 3) ** 0.5
            self.nLem = outputSize
            self.register_buffer("params", torch.tensor([T, momentum]))
            self.register_buffer("memory",
                                 torch.rand(outputSize, inputSize).mul_(2 * stdv).add_(-stdv))

        def forward(self, x, y):
            return LinearAverageOp.apply(x, y, self.memory, self.params)

    net = env.init(nn.Sequential(nn.Linear(d_in, 16), nn.ReLU(), nn.Linear(16, low_dim)))
    lemniscate = env.init(LinearAverage(low_dim, n_data, T, momentum))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.03, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()

    def train_step(inputs, indexes):
        optimizer.zero_grad()
        features = F.normalize(net(inputs), dim=1)
        outputs = lemniscate(features, indexes)
        loss = criterion(outputs, indexes)
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    data = env.randn(n_data, d_in)
    for it in range(6):
        perm = env.tensor(env.np.permutation(n_data)[:batch].astype("int64"))
        env.rec(f"step {it}", step(data[perm] + 0.05 * env.randn(batch, d_in), perm))
    env.rec("grads", _grads(net))
    env.rec("memory", lemniscate.memory)
    env.rec("params", dict(net.state_dict()))


def sliding_window_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    vocab, d, heads, w, seq, batch = 20, 16, 2, 3, 12, 3
    hd = d // heads

    def chunk_windows(x, w):
        """(B, L, D) keys -> (B, L / w, 2w, D): window c covers keys [(c - 1) w, (c + 1) w)
        of the sequence, as overlapping views of the left-padded keys."""
        B, L, D = x.shape
        x = F.pad(x, (0, 0, w, 0))                   # (w zero keys on the left)
        size = (B, L // w, 2 * w, D)
        stride = (x.stride(0), w * x.stride(1), x.stride(1), x.stride(2))
        return x.as_strided(size=size, stride=stride)

    class LocalAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d, bias=False)    # (a key bias: zero gradient)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            B, L, _ = x.shape
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            q, k, v = (t.reshape(B, L, heads, hd).transpose(1, 2).reshape(B * heads, L, hd)
                       for t in (q, k, v))
            qc = q.reshape(B * heads, L // w, w, hd)                  # (query chunks)
            kc, vc = chunk_windows(k, w), chunk_windows(v, w)
            scores = torch.einsum("bcxd,bcyd->bcxy", qc, kc) / hd ** 0.5
            qpos = torch.arange(L).view(L // w, w, 1)
            kpos = (torch.arange(L // w) * w - w).view(-1, 1, 1) \
                + torch.arange(2 * w).view(1, 1, -1)
            band = (kpos <= qpos) & (kpos > qpos - w - 1) & (kpos >= 0)   # (causal, width w+1)
            scores = scores.masked_fill(~band, float("-inf"))
            out = torch.einsum("bcxy,bcyd->bcxd", scores.softmax(-1), vc)
            out = out.reshape(B, heads, L, hd).transpose(1, 2).reshape(B, L, d)
            return self.proj(out)

    class LocalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = LocalAttention()
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.head = nn.Linear(d, vocab)

        def forward(self, tokens):
            x = self.emb(tokens)
            x = x + self.attn(self.ln1(x))
            x = x + self.ff(self.ln2(x))
            return self.head(x)

    model = env.init(LocalLM())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def train_step(tokens):
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:])
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        start = env.randint(0, vocab, (batch, 1))
        env.rec(f"step {it}", step((start + torch.arange(seq + 1) * 2) % vocab))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def graph_wavenet(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_nodes, c_in, res, T_in, emb_dim, order, batch = 5, 1, 8, 6, 4, 2, 4

    def masked_mae(preds, labels, null_val=0.0):
        mask = labels != null_val
        mask = mask.float()
        mask = mask / torch.mean(mask)
        mask = torch.where(torch.isnan(mask), torch.zeros_like(mask), mask)
        loss = torch.abs(preds - labels) * mask
        loss = torch.where(torch.isnan(loss), torch.zeros_like(loss), loss)
        return torch.mean(loss)

    class GWNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.start_conv = nn.Conv2d(c_in, res, kernel_size=(1, 1))
            self.nodevec1 = nn.Parameter(torch.randn(n_nodes, emb_dim))
            self.nodevec2 = nn.Parameter(torch.randn(emb_dim, n_nodes))
            self.filter_convs = nn.ModuleList()
            self.gate_convs = nn.ModuleList()
            self.gconv = nn.ModuleList()
            self.bn = nn.ModuleList()
            for dilation in (1, 2):
                self.filter_convs.append(nn.Conv2d(res, res, (1, 2), dilation=dilation))
                self.gate_convs.append(nn.Conv2d(res, res, (1, 2), dilation=dilation))
                self.gconv.append(nn.Conv2d((order + 1) * res, res, (1, 1)))
                self.bn.append(nn.BatchNorm2d(res))
            self.end_conv = nn.Conv2d(res, 1, (1, T_in - 3))

        def diffusion(self, x, adp):
            out = [x]
            for k in range(1, order + 1):
                a_k = torch.linalg.matrix_power(adp, k)
                out.append(torch.einsum("ncvl,vw->ncwl", x, a_k).contiguous())
            return torch.cat(out, dim=1)

        def forward(self, x):                   # x: (batch, c_in, nodes, time)
            x = self.start_conv(x)
            adp = F.softmax(F.relu(torch.mm(self.nodevec1, self.nodevec2)), dim=1)
            for i in range(2):
                residual = x
                gated = torch.tanh(self.filter_convs[i](residual)) \
                    * torch.sigmoid(self.gate_convs[i](residual))
                x = self.gconv[i](self.diffusion(gated, adp))
                x = x + residual[:, :, :, -x.size(3):]
                x = self.bn[i](x)
            return self.end_conv(F.relu(x))     # (batch, 1, nodes, 1)

    model = env.init(GWNet())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = masked_mae(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5)
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    series = torch.sin(torch.arange(40.0).view(1, -1) * 0.3 + torch.arange(n_nodes).view(-1, 1))
    for it in range(5):
        starts = [env.choice(40 - T_in - 1) for _ in range(batch)]
        x = torch.stack([series[:, s:s + T_in] for s in starts]).unsqueeze(1)
        y = torch.stack([series[:, s + T_in:s + T_in + 1] for s in starts]).unsqueeze(1)
        y = y * (env.rand(batch, 1, n_nodes, 1) > 0.2).float()     # (missing values: 0)
        env.rec(f"step {it}", step(x + 0.05 * env.randn(*x.shape), y))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {
    "npid_memory_bank": npid_memory_bank,
    "sliding_window_attention": sliding_window_attention,
    "graph_wavenet": graph_wavenet,
}


# (over ~1 s each on an idle machine, most of it cold compile)
SLOW = {'sliding_window_attention', 'graph_wavenet'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    _, _, compiled = run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces == 1, (cf.fn.__name__, cf.n_traces)
