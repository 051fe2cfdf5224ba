"""Where a BLAS product writes C: its own buffer, or, when C's row stride is a multiple of
ALIAS_BYTES, a scratch whose rows are PAD elements longer, copied row by row into C after.

Why: rows of C a large power of two of bytes apart fall into the same cache sets, and
OpenBLAS writes each micro-tile of C across many rows at once; with a short K its kernels
spend their time on C. Measured on this project's machine (OpenBLAS sgemm, 1 thread, thread
CPU, medians of 15 interleaved blocks; padded = GEMM into the scratch + the copy):

    M x N x K          direct    padded          M x N x K          direct    padded
    32 x 8192 x 10     243 us    161 us          16 x 4096 x 16     72 us     62 us
    32 x 4096 x 32     241 us    174 us          64 x 4096 x 16     286 us    201 us
    10 x 8192 x 32     193 us    204 us (few rows: no gain)
    32 x 8192 x 64     734 us    739 us (longer K: the copy eats the gain)
    32 x 2048 x 10     29 us     42 us  (8 KiB rows: no gain; 1024 x 512 x 32 lost too)

The transposed product (C^T = B^T A^T, C's rows then M elements apart) gains as much, 243 ->
119 us, but C's consumers read it row-major and a transposing copy of C costs more than
the row copy here. Every other formulation of the real models' products (bench/
real_models.py: the four flag combinations of each, with a transposed copy of an operand,
and the transposed product) measured within 10% of today's, noise included: see
tests/codegen/test_gemm_c_stride_s79_T.py's module docstring. The same products either
way (only C's address and row stride change), so results are bitwise those of the direct
call."""
from .loops import Access, loop_nest

ALIAS_BYTES = 16384         # C's row stride a multiple of this: the rows share cache sets
MIN_ROWS = 16               # with fewer rows the conflicts stay within the cache's ways
MAX_K = 32                  # with a longer K the arithmetic hides C's misses
PAD = 16                    # elements added to each row of the scratch (64 bytes of float32)


def padded_ldc(M, N, K, itemsize, ldc):
    """The scratch's row stride for a product (M x K) @ (K x N) into a C of row stride ldc
    (elements), or None to write C directly."""
    if M >= MIN_ROWS and K <= MAX_K and ldc == N and (ldc * itemsize) % ALIAS_BYTES == 0:
        return ldc + PAD
    return None


def prepare(plan, group, C, M, N, K, itemsize):
    """(scratch buffer, its row stride) for C (an ops_matmul._Mat with contiguous rows), or
    None."""
    ld = padded_ldc(M, N, K, itemsize, C.rs)
    if ld is None:
        return None
    return plan.temp(group, C.acc.dt, M * ld), ld


def copy_back(fg, padded, C, M, N):
    """C[i, j] = scratch[i, j] after the product went to the scratch."""
    buf, ld = padded
    src = Access(buf, C.acc.dt, 0, (ld, 1))
    with loop_nest(fg.b, (M, N), name="cpad") as idx:
        fg.store(fg.load(src, list(idx)), C.acc, list(idx))
