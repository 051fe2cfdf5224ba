"""DistributedDataParallel on 2 ranks: 20 steps with a per-rank batch B equal one process's
steps on the global batch 2B; no_sync accumulation; a compiled training step equals the
eager one; buffers broadcast; unused parameters."""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llgrad  # noqa: E402
import llgrad.distributed as dist  # noqa: E402
import llgrad.nn as nn  # noqa: E402
import llgrad.nn.functional as F  # noqa: E402
from llgrad.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from report import check, close, say  # noqa: E402

dist.init_process_group("mpi")
R, N = dist.get_rank(), dist.get_world_size()
B, D, H, C = 8, 6, 16, 4


def mlp(seed):
    llgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh(),
                         nn.Linear(H, C))


def batch(step, n):
    rng = np.random.default_rng(100 + step)
    x = rng.standard_normal((n, D)).astype(np.float32)
    y = rng.integers(0, C, n).astype(np.int64)
    return llgrad.from_numpy(x), llgrad.from_numpy(y)


def params(m):
    return [p.detach().numpy().copy() for p in m.parameters()]


# ---- construction: rank 0's parameters everywhere -------------------------------------
model = mlp(seed=R)                 # different on each rank before DDP
ddp = DDP(model, bucket_cap_mb=0.0002)    # ~200 bytes: several buckets
check("several buckets", len(ddp._reducer.buckets) > 2, str(ddp._reducer.bucket_sizes()))
close("parameters broadcast from rank 0", np.concatenate([p.ravel() for p in params(model)]),
      np.concatenate([p.ravel() for p in params(mlp(seed=0))]))
order = [i for b in ddp._reducer.buckets for i in b.params]
check("buckets in reverse registration order", order == sorted(order, reverse=True),
      str(order))

# ---- 20 steps on 2 ranks (batch B each) == 1 process on 2B ----------------------------
ref = mlp(seed=0)
opt = llgrad.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
ref_opt = llgrad.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
for step in range(20):
    x, y = batch(step, N * B)
    opt.zero_grad()
    F.cross_entropy(ddp(x[R * B:(R + 1) * B]), y[R * B:(R + 1) * B]).backward()
    opt.step()
    ref_opt.zero_grad()
    F.cross_entropy(ref(x), y).backward()
    ref_opt.step()
for k, (a, b) in enumerate(zip(params(model), params(ref))):
    close(f"20 DDP steps == global batch, parameter {k}", a, b, 2e-5)
check("DDP waited for its all-reduce", ddp._reducer.last_wait_s >= 0.0)

# ---- Adam, one bucket (default cap) ----------------------------------------------------
model2 = mlp(seed=10 + R)
ddp2 = DDP(model2)
ref2 = mlp(seed=10)
opt2 = llgrad.optim.Adam(ddp2.parameters(), lr=0.01)
ref_opt2 = llgrad.optim.Adam(ref2.parameters(), lr=0.01)
for step in range(5):
    x, y = batch(step, N * B)
    opt2.zero_grad()
    F.cross_entropy(ddp2(x[R * B:(R + 1) * B]), y[R * B:(R + 1) * B]).backward()
    opt2.step()
    ref_opt2.zero_grad()
    F.cross_entropy(ref2(x), y).backward()
    ref_opt2.step()
close("Adam, one bucket", np.concatenate([p.ravel() for p in params(model2)]),
      np.concatenate([p.ravel() for p in params(ref2)]), 2e-5)

# ---- no_sync: local accumulation, averaged by the next synchronised backward ----------
model3 = mlp(seed=20)
ddp3 = DDP(model3, bucket_cap_mb=0.0005)
x1, y1 = batch(50, N * B)
x2, y2 = batch(51, N * B)
mine = slice(R * B, (R + 1) * B)
with ddp3.no_sync():
    F.cross_entropy(ddp3(x1[mine]), y1[mine]).backward()
local = [llgrad.autograd.grad(F.cross_entropy(model3(x1[mine]), y1[mine]),
                              list(model3.parameters()))]
close("no_sync leaves local gradients", np.concatenate([p.grad.numpy().ravel()
                                                        for p in model3.parameters()]),
      np.concatenate([g.numpy().ravel() for g in local[0]]), 1e-6)
F.cross_entropy(ddp3(x2[mine]), y2[mine]).backward()
ref3 = mlp(seed=20)
want = [np.zeros_like(p) for p in params(ref3)]
for r in range(N):
    part = slice(r * B, (r + 1) * B)
    g1 = llgrad.autograd.grad(F.cross_entropy(ref3(x1[part]), y1[part]), list(ref3.parameters()))
    g2 = llgrad.autograd.grad(F.cross_entropy(ref3(x2[part]), y2[part]), list(ref3.parameters()))
    for w, a, b in zip(want, g1, g2):
        w += (a.numpy() + b.numpy()) / N
close("no_sync accumulation then sync == mean of the ranks' sums",
      np.concatenate([p.grad.numpy().ravel() for p in model3.parameters()]),
      np.concatenate([w.ravel() for w in want]), 1e-6)

# ---- a compiled training step == the eager step ---------------------------------------


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


compiled_step = llgrad.compile(train_step)
m_eager, m_comp = mlp(seed=30), mlp(seed=30)
d_eager, d_comp = DDP(m_eager, bucket_cap_mb=0.0005), DDP(m_comp, bucket_cap_mb=0.0005)
o_eager = llgrad.optim.Adam(d_eager.parameters(), lr=0.01)
o_comp = llgrad.optim.Adam(d_comp.parameters(), lr=0.01)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for step in range(6):
        x, y = batch(step, N * B)
        le = train_step(d_eager, o_eager, x[mine], y[mine])
        lc = compiled_step(d_comp, o_comp, x[mine], y[mine])
        close(f"compiled step {step}: loss", lc.detach().numpy(), le.detach().numpy(), 0)
for k, (a, b) in enumerate(zip(params(m_comp), params(m_eager))):
    close(f"compiled DDP step == eager DDP step, parameter {k}", a, b, 0)
path = "eager (graph break)" if compiled_step.graph_breaks else "compiled"
say(f"PATH compiled DDP step: {path}; traces {compiled_step.n_traces}; "
    f"breaks {sorted(set(compiled_step.graph_breaks))}; warnings "
    f"{sorted(set(str(w.message)[:160] for w in caught))}")

# a compiled forward (llgrad.compile(model)) with the backward outside it
m_cf = mlp(seed=40)
d_cf = DDP(m_cf)
cmodel = llgrad.compile(d_cf)
ref_cf = mlp(seed=40)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for step in range(3):
        x, y = batch(step, N * B)
        for p in d_cf.parameters():
            p.grad = None
        F.cross_entropy(cmodel(x[mine]), y[mine]).backward()
g_ref = llgrad.autograd.grad(F.cross_entropy(ref_cf(x), y), list(ref_cf.parameters()))
close("compiled DDP forward, backward outside: averaged gradients",
      np.concatenate([p.grad.numpy().ravel() for p in m_cf.parameters()]),
      np.concatenate([g.numpy().ravel() for g in g_ref]), 2e-6)

# DDP(llgrad.compile(model)): compiled forward and backward, the all-reduce from the hooks
m_in, m_ref = mlp(seed=41 + R), mlp(seed=41)
d_in = DDP(llgrad.compile(m_in), bucket_cap_mb=0.0002)
d_ref = DDP(m_ref, bucket_cap_mb=0.0002)
o_in = llgrad.optim.SGD(d_in.parameters(), lr=0.1, momentum=0.9)
o_ref = llgrad.optim.SGD(d_ref.parameters(), lr=0.1, momentum=0.9)
for step in range(5):
    x, y = batch(step, N * B)
    train_step(d_in, o_in, x[mine], y[mine])
    train_step(d_ref, o_ref, x[mine], y[mine])
check("DDP(llgrad.compile(model)) runs compiled graphs",
      d_in._call.fn.n_traces >= 1 and len(d_in._call.fn.entries) >= 1)
for k, (a, b) in enumerate(zip(params(m_in), params(m_ref))):
    close(f"DDP(compiled model) == DDP(model), parameter {k}", a, b, 1e-6)

# ---- buffers: rank 0's broadcast at each forward --------------------------------------
llgrad.manual_seed(0)
bn_model = nn.Sequential(nn.Linear(D, H), nn.BatchNorm1d(H), nn.Linear(H, C))
ddp_bn = DDP(bn_model)
bn = bn_model[1]
with llgrad.no_grad():
    bn.running_mean.fill_(5.0 + R)
bn_model.eval()
with llgrad.no_grad():
    ddp_bn(batch(0, B)[0])
close("buffers broadcast from rank 0 at forward", bn.running_mean.numpy(),
      np.full(H, 5.0, np.float32))

# ---- unused parameters ----------------------------------------------------------------


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(D, H)
        self.used = nn.Linear(H, C)
        self.unused = nn.Linear(H, C)

    def forward(self, x):
        return self.used(self.body(x).tanh())


llgrad.manual_seed(1)
two = TwoHeads()
ddp_u = DDP(two, find_unused_parameters=True, bucket_cap_mb=0.0005)
for step in range(2):
    x, y = batch(step, B)
    for p in two.parameters():
        p.grad = None
    F.cross_entropy(ddp_u(x), y).backward()
check("find_unused_parameters: backward completes, unused .grad stays None",
      two.unused.weight.grad is None and two.used.weight.grad is not None)

llgrad.manual_seed(1)
two_b = TwoHeads()
ddp_b = DDP(two_b, bucket_cap_mb=0.0005)
x, y = batch(0, B)
F.cross_entropy(ddp_b(x), y).backward()
try:
    ddp_b(x)
    check("unused parameters without find_unused_parameters raise", False, "no error")
except RuntimeError as e:
    check("unused parameters without find_unused_parameters raise",
          "find_unused_parameters=True" in str(e), str(e))

dist.destroy_process_group()
