"""Every collective on 2 ranks against NumPy's result (each rank makes every rank's input
from a shared seed, so it knows the expected answer)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llgrad  # noqa: E402
import llgrad.distributed as dist  # noqa: E402
from llgrad.utils.data import DistributedSampler  # noqa: E402
from report import check, close  # noqa: E402

check("not initialized before init", not dist.is_initialized() and dist.is_available())
dist.init_process_group(backend="mpi")
R, N = dist.get_rank(), dist.get_world_size()
check("world", dist.is_initialized() and N == 2 and R in (0, 1) and
      dist.get_backend() == "mpi", f"{R} {N}")
rng = np.random.default_rng(0)
data = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(N)]
ints = [rng.integers(-5, 6, (7,)).astype(np.int64) for _ in range(N)]
R = dist.get_rank()
Op = dist.ReduceOp
expected = {Op.SUM: np.sum(data, 0), Op.AVG: np.sum(data, 0) / N, Op.MAX: np.max(data, 0),
            Op.MIN: np.min(data, 0), Op.PRODUCT: np.prod(data, 0)}
for op, want in expected.items():
    t = llgrad.tensor(data[R])
    v = t._version
    assert dist.all_reduce(t, op=op) is None
    close(f"all_reduce {op.name}", t.numpy(), want, 1e-6)
    check(f"all_reduce {op.name} bumps the version", t._version > v)
t = llgrad.tensor(ints[R])
dist.all_reduce(t)
close("all_reduce int64 SUM", t.numpy(), np.sum(ints, 0))
t = llgrad.tensor(ints[R])
dist.all_reduce(t, op=Op.BXOR)
close("all_reduce int64 BXOR", t.numpy(), np.bitwise_xor.reduce(ints, 0))

# non-contiguous tensors (a transposed view) are reduced in place through a copy
base = llgrad.tensor(data[R].copy())
view = base.t()
dist.all_reduce(view)
close("all_reduce of a non-contiguous view", base.numpy(), np.sum(data, 0), 1e-6)

# async_op: a Work handle
t = llgrad.tensor(data[R])
work = dist.all_reduce(t, async_op=True)
check("async_op returns a Work", isinstance(work, dist.Work))
check("Work.wait() returns True", work.wait() is True and work.is_completed())
close("async all_reduce", t.numpy(), np.sum(data, 0), 1e-6)
works = [dist.all_reduce(llgrad.tensor(d), async_op=True) for d in data]
for w in works:
    w.wait()
check("several async in flight", all(w.is_completed() for w in works))

for src in range(N):
    t = llgrad.tensor(data[R])
    dist.broadcast(t, src=src)
    close(f"broadcast from {src}", t.numpy(), data[src])
t = llgrad.tensor(data[R])
dist.broadcast(t, 1, async_op=True).wait()
close("async broadcast", t.numpy(), data[1])

out = [llgrad.zeros(3, 4) for _ in range(N)]
dist.all_gather(out, llgrad.tensor(data[R]))
close("all_gather", np.stack([o.numpy() for o in out]), np.stack(data))
out = [llgrad.zeros(7, dtype=llgrad.int64) for _ in range(N)]
dist.all_gather(out, llgrad.tensor(ints[R]), async_op=True).wait()
close("async all_gather int64", np.stack([o.numpy() for o in out]), np.stack(ints))
big = llgrad.zeros(N * 3, 4)
dist.all_gather_into_tensor(big, llgrad.tensor(data[R]))
close("all_gather_into_tensor", big.numpy(), np.concatenate(data))

# reduce_scatter: rank r gets the sum over ranks of their input_list[r]
lists = [[rng.standard_normal(5).astype(np.float32) for _ in range(N)] for _ in range(N)]
out = llgrad.zeros(5)
dist.reduce_scatter(out, [llgrad.tensor(a) for a in lists[R]])
close("reduce_scatter SUM", out.numpy(), sum(lists[r][R] for r in range(N)), 1e-6)
out = llgrad.zeros(5)
dist.reduce_scatter(out, [llgrad.tensor(a) for a in lists[R]], op=Op.MAX)
close("reduce_scatter MAX", out.numpy(), np.max([lists[r][R] for r in range(N)], 0))
out = llgrad.zeros(5)
dist.reduce_scatter(out, [llgrad.tensor(a) for a in lists[R]], op=Op.AVG,
                    async_op=True).wait()
close("async reduce_scatter AVG", out.numpy(), sum(lists[r][R] for r in range(N)) / N, 1e-6)
out = llgrad.zeros(5)
dist.reduce_scatter_tensor(out, llgrad.tensor(np.concatenate(lists[R])))
close("reduce_scatter_tensor", out.numpy(), sum(lists[r][R] for r in range(N)), 1e-6)

check("barrier", dist.barrier() is None)
dist.barrier(async_op=True).wait()
check("async barrier", True)

# errors as torch raises them
for name, call in [("all_gather wrong list", lambda: dist.all_gather([llgrad.zeros(2)],
                                                                     llgrad.zeros(2))),
                   ("AVG of ints", lambda: dist.all_reduce(llgrad.zeros(2, dtype=llgrad.int64),
                                                           op=Op.AVG)),
                   ("init twice", lambda: dist.init_process_group("mpi"))]:
    try:
        call()
        check(name, False, "no error")
    except (ValueError, TypeError):
        check(name, True)

# DistributedSampler: the ranks' shares are disjoint and cover the (padded) dataset
for n_items, drop_last, shuffle in [(10, False, True), (11, False, False), (11, True, True)]:
    s = DistributedSampler(range(n_items), shuffle=shuffle, drop_last=drop_last, seed=3)
    mine = llgrad.tensor(list(s), dtype=llgrad.int64)
    every = [llgrad.zeros(len(s), dtype=llgrad.int64) for _ in range(N)]
    dist.all_gather(every, mine)
    shares = [list(e.numpy()) for e in every]
    flat = sorted(sum(shares, []))
    if drop_last:
        ok = len(set(flat)) == len(flat) == N * (n_items // N)
    else:
        ok = set(flat) == set(range(n_items)) and len(flat) == N * -(-n_items // N)
    check(f"DistributedSampler n={n_items} drop_last={drop_last} shuffle={shuffle}", ok,
          str(shares))
s = DistributedSampler(range(20))
first = list(s)
s.set_epoch(1)
check("DistributedSampler set_epoch reshuffles", list(s) != first)

dist.destroy_process_group()
check("destroyed", not dist.is_initialized())
