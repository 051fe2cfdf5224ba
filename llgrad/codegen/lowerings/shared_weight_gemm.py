"""Which few-row products with a BLAS available go to llgrad's own GEMM (gemm.py) instead:
those whose B is one row-major matrix read by several products of the graph, as a recurrent
layer's weight is by every step (h_t @ W_hh^T forward, from the layer's one contiguous copy,
and d_t @ W_hh backward: 32 rows against 128 x 512 at the LSTM benchmark's sizes).

Why: OpenBLAS packs B into its panel layout on every call, and with 32 rows that copy of
all of B is a large part of a 2.1 M multiply-add product; gemm.py reads a row-major B in
place (it packs only A, 32 x K). Measured (1 thread, process CPU, one process, compiled
32-step loops): 54 -> 49 us a forward product, 54 -> 44 us a backward one; whole training
steps, process CPU, medians of one interleaved run: bench/real_models.py's LSTM 7.59 ->
7.25 ms and GRU 5.99 -> 5.52 ms, bench/seq_models.py's char-LM 8.19 -> 7.56 ms. The bounds
keep it to where that holds: few rows (OpenBLAS amortises its packing over more), B within
L2 (gemm.py does no cache blocking: every 8-row tile of A reads all of B), and a B that
other products share (a one-off product with a row-major B, such as a Linear's input
gradient, stays with OpenBLAS, which measured faster on those shapes: ops_matmul.py).
Results are the same sums in another order (float32 rounding: compiled matches eager to
float32 tolerance, as any GEMM's K order).

On hosts with 512-bit vectors only (where it was measured): on an AVX2 AMD EPYC (znver3,
gemm.py's 6 x 16 tile, 32 rows = five tiles and two single rows) the same products ran 1.4x
slower than OpenBLAS (32 x 128 @ 128 x 512, 1 thread, thread CPU, one process each, three
alternations: 135-163 us against 95-108 us a product; 4-row tiles: 115 us) and whole LSTM
training steps 5-35% slower (GRU's, 3 gates, 0-20%), so there they stay with BLAS.
LLGRAD_SHARED_WEIGHT_GEMM=1 takes the rule on any host, =0 on none (read at compile time;
part of the kernels' keys).

On one thread only: with more, the product calls BLAS as before, whose shim splits it over
the threads (gemm.py runs a product on its caller's thread). The count is read at run time
(set_num_threads never recompiles), so the kernel holds both calls; each thread count
gives the same results on every call."""
import os

from llvmlite import ir

from ...ir.graph import Value
from ..native import jit
from .parallel import _declare
from .scalar import I64

FEW_ROWS = 32               # rows of A (and C), at most
B_ELEMENTS = 1 << 16        # K * N of B, at most (256 KiB of float32: within L2)
PRODUCT_OPS = {"mm": 1, "matmul": 1, "addmm": 2}    # the position of B
MIN_VECTOR_BITS = 512       # (the hosts the rule holds on: see the docstring)


def enabled():
    """Whether the rule applies on this host (LLGRAD_SHARED_WEIGHT_GEMM=1 / 0 forces it
    on / off): lower.py puts this in the kernels' keys."""
    forced = os.environ.get("LLGRAD_SHARED_WEIGHT_GEMM", "")
    if forced in ("0", "1"):
        return forced == "1"
    return jit.jit().vector_bits >= MIN_VECTOR_BITS


def _shared(plan, b):
    """Whether b is the B operand of two or more products of plan's graph (the counts made
    once a plan)."""
    counts = getattr(plan, "_b_operand_uses", None)
    if counts is None:
        counts = {}
        for n in plan.graph.nodes:
            k = PRODUCT_OPS.get(n.op)
            if k is not None and len(n.inputs) > k and isinstance(n.inputs[k], Value):
                counts[n.inputs[k]] = counts.get(n.inputs[k], 0) + 1
        plan._b_operand_uses = counts
    return counts.get(b, 0) >= 2


def prefer_own_gemm(plan, b, M, N, K, batch, B):
    """Whether the product (M x K) @ B (K x N, its layout B: ops_matmul._Mat) of one
    matrix pair runs on gemm.py rather than BLAS."""
    return enabled() and not batch and 1 < M <= FEW_ROWS and K * N <= B_ELEMENTS and \
        B.cs == 1 and B.rs >= N and isinstance(b, Value) and len(b.type.shape) == 2 and \
        _shared(plan, b)


def by_threads(b, one, many):
    """At b: one() (gemm.py's call) where the run-time thread count is 1, else many() (the
    same product through BLAS: its operands need no copy for either)."""
    nt = b.load_atomic(_declare(b.module)[0], "monotonic", 8, typ=I64)
    with b.if_else(b.icmp_signed("<=", nt, ir.Constant(I64, 1))) as (on_one, on_many):
        with on_one:
            one()
        with on_many:
            many()
