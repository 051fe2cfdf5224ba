"""Sweep 19 (C), part 5: recurrent models of the last two years as their minimal
re-implementations write them: mamba-minimal (in_proj split, a depthwise causal conv1d cut to
length, the selective scan with exp(delta A) and the input-dependent B, C through einsum in a
Python loop over time, RMSNorm with rsqrt, an LM head tied to the embedding) and an xLSTM
mLSTM layer (exponential input gates stabilised by a running max of log-gates, the matrix
memory updated by outer products, the normaliser bounded below by 1 with torch.maximum).
Run with PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def mamba_minimal(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, d_model, d_state, d_conv, expand = 12, 8, 4, 3, 2
    d_inner = expand * d_model
    dt_rank = math.ceil(d_model / 16)

    class RMSNorm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class MambaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(d_model, d_inner * 2, bias=False)
            self.conv1d = nn.Conv1d(d_inner, d_inner, kernel_size=d_conv, groups=d_inner,
                                    padding=d_conv - 1, bias=True)
            self.x_proj = nn.Linear(d_inner, dt_rank + d_state * 2, bias=False)
            self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
            A = torch.arange(1, d_state + 1).repeat(d_inner, 1)
            self.A_log = nn.Parameter(torch.log(A))
            self.D = nn.Parameter(torch.ones(d_inner))
            self.out_proj = nn.Linear(d_inner, d_model, bias=False)

        def forward(self, x):
            (b, l, d) = x.shape
            x_and_res = self.in_proj(x)
            (x, res) = x_and_res.split(split_size=[d_inner, d_inner], dim=-1)
            x = x.transpose(1, 2)
            x = self.conv1d(x)[:, :, :l]
            x = x.transpose(1, 2)
            x = F.silu(x)
            y = self.ssm(x)
            y = y * F.silu(res)
            return self.out_proj(y)

        def ssm(self, x):
            (d_in, n) = self.A_log.shape
            A = -torch.exp(self.A_log.float())
            D = self.D.float()
            x_dbl = self.x_proj(x)
            (delta, B, C) = x_dbl.split(split_size=[dt_rank, n, n], dim=-1)
            delta = F.softplus(self.dt_proj(delta))
            return self.selective_scan(x, delta, A, B, C, D)

        def selective_scan(self, u, delta, A, B, C, D):
            (b, l, d_in) = u.shape
            n = A.shape[1]
            deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
            deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
            x = torch.zeros((b, d_in, n), device=deltaA.device)
            ys = []
            for i in range(l):
                x = deltaA[:, i] * x + deltaB_u[:, i]
                y = torch.einsum("bdn,bn->bd", x, C[:, i, :])
                ys.append(y)
            y = torch.stack(ys, dim=1)
            return y + u * D

    class ResidualBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.mixer = MambaBlock()
            self.norm = RMSNorm(d_model)

        def forward(self, x):
            return self.mixer(self.norm(x)) + x

    class Mamba(nn.Module):
        def __init__(self, n_layer=2):
            super().__init__()
            self.embedding = nn.Embedding(V, d_model)
            self.layers = nn.ModuleList([ResidualBlock() for _ in range(n_layer)])
            self.norm_f = RMSNorm(d_model)
            self.lm_head = nn.Linear(d_model, V, bias=False)
            self.lm_head.weight = self.embedding.weight

        def forward(self, input_ids):
            x = self.embedding(input_ids)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm_f(x))

    model = env.init(Mamba())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    data = env.randint(0, V, (3, 9))

    def train_step(data):
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss{i}", train_step(data))
    env.rec("params", dict(model.named_parameters()))
    with torch.no_grad():
        ids = data[:1, :3]
        for _ in range(4):
            nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    env.rec("greedy", ids)


def xlstm_mlstm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D, NH, T, B = 8, 2, 6, 3
    DH = D // NH

    class mLSTMLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_q = nn.Linear(D, D)
            self.W_k = nn.Linear(D, D)
            self.W_v = nn.Linear(D, D)
            self.W_i = nn.Linear(D, NH)
            self.W_f = nn.Linear(D, NH)
            self.W_o = nn.Linear(D, D)
            self.ln = nn.GroupNorm(NH, D)
            nn.init.constant_(self.W_f.bias, 3.0)

        def forward(self, x):
            Bn, T, _ = x.shape
            q = self.W_q(x).view(Bn, T, NH, DH)
            k = self.W_k(x).view(Bn, T, NH, DH) / math.sqrt(DH)
            v = self.W_v(x).view(Bn, T, NH, DH)
            i_tilde, f_tilde = self.W_i(x), self.W_f(x)
            o = torch.sigmoid(self.W_o(x))
            C = x.new_zeros(Bn, NH, DH, DH)
            n = x.new_zeros(Bn, NH, DH)
            m = x.new_full((Bn, NH), float("-inf"))
            hs = []
            for t in range(T):
                log_f = F.logsigmoid(f_tilde[:, t])
                m_new = torch.maximum(log_f + m, i_tilde[:, t])
                i_gate = torch.exp(i_tilde[:, t] - m_new)
                f_gate = torch.exp(log_f + m - m_new)
                kt, vt, qt = k[:, t], v[:, t], q[:, t]
                C = f_gate[..., None, None] * C + i_gate[..., None, None] * (vt[..., :, None] @ kt[..., None, :])
                n = f_gate[..., None] * n + i_gate[..., None] * kt
                num = (C @ qt[..., None]).squeeze(-1)
                den = torch.maximum((n * qt).sum(-1, keepdim=True).abs(), torch.exp(-m_new)[..., None])
                hs.append((num / den).reshape(Bn, D))
                m = m_new
            h = torch.stack(hs, dim=1)
            h = self.ln(h.transpose(1, 2)).transpose(1, 2)
            return o * h

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(5, D)
            self.block = mLSTMLayer()
            self.norm = nn.LayerNorm(D)
            self.out = nn.Linear(D, 3)

        def forward(self, x):
            h = self.inp(x)
            h = h + self.block(self.norm(h))
            return self.out(h[:, -1])

    model = env.init(Classifier())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    X, y = env.randn(B, T, 5), env.randint(0, 3, (B,))

    def train_step(X, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"loss{i}", train_step(X, y))
    env.rec("params", dict(model.named_parameters()))


@pytest.mark.parametrize("program", [mamba_minimal, xlstm_mlstm])
def test_recurrent_2024(program):
    run_tutorial(program)
