"""A rank that fails must not leave the others waiting forever.

    raise    rank 1 raises before the all-reduce: its uncaught exception aborts the job
    skip     rank 1 never calls the all-reduce (and waits): rank 0's collective times out
             with a clear error, and that uncaught error aborts the job
    ddp      as skip, inside DistributedDataParallel's backward"""
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llgrad  # noqa: E402
import llgrad.distributed as dist  # noqa: E402
import llgrad.nn as nn  # noqa: E402
from report import say  # noqa: E402

mode = sys.argv[1]
dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=3))
R = dist.get_rank()
say("started")
if mode == "raise":
    if R == 1:
        raise ValueError("rank 1 failed on purpose")
    dist.all_reduce(llgrad.ones(3))
elif mode == "skip":
    if R == 1:
        time.sleep(30)          # (killed by the abort long before)
    else:
        dist.all_reduce(llgrad.ones(3))
elif mode == "ddp":
    model = nn.Linear(4, 2)
    ddp = nn.parallel.DistributedDataParallel(model)
    if R == 1:
        time.sleep(30)
    else:
        ddp(llgrad.ones(2, 4)).sum().backward()
say("finished")             # (never reached)
