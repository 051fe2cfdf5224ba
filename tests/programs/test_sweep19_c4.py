"""Sweep 19 (C), part 4: a Neural Turing Machine on the copy task (pytorch-ntm's memory:
content addressing through cosine_similarity and softmax, interpolation, the circular shift
as conv1d over a wrapped copy written row by row into torch.zeros, sharpening by a power;
erase/add writes, the write head before the read head; an LSTM controller; RMSprop with
momentum and clip_grad_value_) and LISTA (ISTA with the Lipschitz constant from eigvalsh and a hand-written soft threshold, then the
unrolled learned version with nn.Softshrink and per-layer learned thresholds in a
ParameterList). Run with PyTorch, with llgrad eagerly and with llgrad.compile
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def ntm_copy(torch, env):
    nn, F = torch.nn, torch.nn.functional
    B, N, M, W, H = 2, 6, 4, 3, 12

    def _split_cols(mat, lengths):
        assert mat.size()[1] == sum(lengths), "Lengths must be summed to num columns"
        l = [0] + list(torch.tensor(lengths).cumsum(0).tolist())
        return [mat[:, s:e] for s, e in zip(l[:-1], l[1:])]

    def _convolve(w, s):
        assert s.size(0) == 3
        t = torch.cat([w[-1:], w, w[:1]])
        return F.conv1d(t.view(1, 1, -1), s.view(1, 1, -1)).view(-1)

    class NTMMemory(nn.Module):
        def __init__(self, N, M):
            super().__init__()
            self.N, self.M = N, M
            self.register_buffer("mem_bias", torch.Tensor(N, M))
            self.mem_bias.copy_(env.rand(N, M) * 0.2 - 0.1)

        def reset(self, batch_size):
            self.batch_size = batch_size
            self.memory = self.mem_bias.clone().repeat(batch_size, 1, 1)

        def read(self, w):
            return torch.matmul(w.unsqueeze(1), self.memory).squeeze(1)

        def write(self, w, e, a):
            self.prev_mem = self.memory
            erase = torch.matmul(w.unsqueeze(-1), e.unsqueeze(1))
            add = torch.matmul(w.unsqueeze(-1), a.unsqueeze(1))
            self.memory = self.prev_mem * (1 - erase) + add

        def address(self, k, beta, g, s, gamma, w_prev):
            k = k.view(self.batch_size, 1, -1)
            wc = F.softmax(beta * F.cosine_similarity(self.memory + 1e-16, k + 1e-16, dim=-1), dim=1)
            wg = g * wc + (1 - g) * w_prev
            result = torch.zeros(wg.size())
            for b in range(self.batch_size):
                result[b] = _convolve(wg[b], s[b])
            w = result ** gamma
            return torch.div(w, torch.sum(w, dim=1).view(-1, 1) + 1e-16)

    class Head(nn.Module):
        def __init__(self, memory, write):
            super().__init__()
            self.memory, self.write = memory, write
            self.lengths = [M, 1, 1, 3, 1] + ([M, M] if write else [])
            self.fc = nn.Linear(H, sum(self.lengths))

        def forward(self, embeddings, w_prev):
            o = self.fc(embeddings)
            parts = _split_cols(o, self.lengths)
            k, beta, g, s, gamma = parts[:5]
            w = self.memory.address(k, F.softplus(beta), torch.sigmoid(g), F.softmax(s, dim=1),
                                    1 + F.softplus(gamma), w_prev)
            if self.write:
                self.memory.write(w, torch.sigmoid(parts[5]), parts[6])
                return None, w
            return self.memory.read(w), w

    class NTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.memory = NTMMemory(N, M)
            self.controller = nn.LSTM(W + 1 + M, H)
            self.read_head = Head(self.memory, False)
            self.write_head = Head(self.memory, True)
            self.fc = nn.Linear(H + M, W)

        def init_sequence(self, batch_size):
            self.memory.reset(batch_size)
            self.state = (torch.zeros(1, batch_size, H), torch.zeros(1, batch_size, H))
            self.reads = torch.zeros(batch_size, M)
            self.w = [torch.zeros(batch_size, N), torch.zeros(batch_size, N)]

        def forward(self, x):
            inp = torch.cat([x, self.reads], dim=1)
            out, self.state = self.controller(inp.unsqueeze(0), self.state)
            out = out.squeeze(0)
            # (write head first: with the read last, the final memory is on the loss's path)
            _, self.w[1] = self.write_head(out, self.w[1])
            self.reads, self.w[0] = self.read_head(out, self.w[0])
            return torch.sigmoid(self.fc(torch.cat([out, self.reads], dim=1)))

    net = env.init(NTM())
    criterion = nn.BCELoss()
    optimizer = torch.optim.RMSprop(net.parameters(), momentum=0.9, alpha=0.95, lr=1e-3)

    def train_batch(X, Y):
        optimizer.zero_grad()
        inp_seq_len, batch_size, _ = X.size()
        net.init_sequence(batch_size)
        for i in range(inp_seq_len):
            net(X[i])
        y_out = []
        for i in range(Y.size(0)):
            y_out.append(net(torch.zeros(batch_size, W + 1)))
        y_out = torch.stack(y_out)
        loss = criterion(y_out, Y)
        loss.backward()
        nn.utils.clip_grad_value_(net.parameters(), 10)
        optimizer.step()
        y_out_binarized = (y_out.clone().data > 0.5).float()
        cost = torch.sum(torch.abs(y_out_binarized - Y.data))
        return loss.item(), cost.item() / batch_size
    train_batch = env.step(train_batch)
    for i in range(4):
        seq = (env.rand(3, B, W) > 0.5).float()
        inp = torch.zeros(4, B, W + 1)
        inp[:3, :, :W] = seq
        inp[3, :, W] = 1.0
        env.rec(f"batch{i}", train_batch(inp, seq.clone()))
    env.rec("params", dict(net.named_parameters()))
    env.rec("memory", net.memory.memory)


def lista(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n, m = 8, 16
    A = env.randn(n, m) / n ** 0.5
    A = A / torch.norm(A, dim=0, keepdim=True)

    def make(B):
        x = env.randn(B, m) * (env.rand(B, m) < 0.2).float()
        return x @ A.T + 0.01 * env.randn(B, n), x

    def soft_threshold(x, thr):
        return torch.sign(x) * torch.clamp(torch.abs(x) - thr, min=0)

    L = torch.linalg.eigvalsh(A.T @ A).max().item()
    y, x_true = make(32)
    lambd = 0.05
    x = torch.zeros(32, m)
    ista_losses = []
    for _ in range(10):
        x = soft_threshold(x + (y - x @ A.T) @ A / L, lambd / L)
        ista_losses.append(F.mse_loss(x, x_true).item())
    env.rec("L", L)
    env.rec("ista", ista_losses)

    class LISTA(nn.Module):
        def __init__(self, A, L, theta, max_iter=4):
            super().__init__()
            self._W = nn.Linear(n, m, bias=False)
            self._S = nn.Linear(m, m, bias=False)
            self.shrinkage = nn.Softshrink(theta)
            self.thetas = nn.ParameterList([nn.Parameter(torch.full((m,), theta))
                                            for _ in range(max_iter - 1)])
            self.max_iter = max_iter
            S = torch.eye(m) - (1 / L) * torch.matmul(A.T, A)
            self._S.weight = nn.Parameter(S)
            self._W.weight = nn.Parameter((1 / L) * A.T.clone())

        def forward(self, y):
            x = self.shrinkage(self._W(y))
            x_history = [x]
            for it in range(self.max_iter - 1):
                z = self._W(y) + self._S(x_history[-1])
                x = F.relu(z - self.thetas[it]) - F.relu(-z - self.thetas[it])
                x_history.append(x)
            return x_history

    net = LISTA(A, L, lambd / L)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)

    def train_step(y, x_true):
        opt.zero_grad()
        xs = net(y)
        loss = sum(F.mse_loss(xk, x_true, reduction="sum") / y.shape[0] for xk in xs[1:])
        loss.backward()
        opt.step()
        return loss, F.mse_loss(xs[-1], x_true)
    train_step = env.step(train_step)
    for i in range(6):
        y, x_true = make(16)
        env.rec(f"step{i}", train_step(y, x_true))
    env.rec("params", list(net.parameters()))
    env.rec("sparsity", (net(y)[-1] == 0).float().mean())


@pytest.mark.parametrize("program", [ntm_copy, lista])
def test_memory_and_unrolled(program):
    run_tutorial(program)
