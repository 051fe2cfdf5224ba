"""The rows= hook an eager_steps op's impl gets (a whole LSTM layer: ir/ops_rnn_layer.py):

    rows(name, arrays, outs)        the step's eager_rows op (a fused cell) on its row kernel,
                                    written into outs; None where it does not run there (the
                                    impl then runs the op's NumPy implementation)
    rows.bind(name, arrays, outs)   that call's kernel as a function of the addresses of the
                                    outs and then of the arrays, for each step whose operands
                                    are laid out as these (the same shapes, strides and dtype:
                                    the layer's own time-major buffers); None where it would
                                    not run natively
    rows.product(a, b, out, beta)   out = a @ b + beta * out for matrices laid out as these,
                                    as a function of the three addresses
                                    (eager_gemm_bound.bind), or None (the impl runs matmul)

Why: a layer runs its cell once per step forward and once backward. Each call of the first
form finds its plan from every operand's shape and strides and takes the address of each of
the step's views: ~3.5 us beside the cell's 10 us loop (batch 32, H 128), a tenth of an eager
LSTM step. Bound once per layer, a step is the kernel's call on addresses the impl computes
(the same kernel, the same bits). Each bound call counts in eager_native's stats as a call.
The steps' products likewise: matmul's checks and np.add's call cost ~7 us a step beside a
20-30 us product (batch 32, H 128, 2 threads); bound, a step's product is one call on
addresses (the forward's added into the step's gates by the BLAS, beta 1; the backward's on
gemm.py's kernel over the threads: eager_gemm_bound.py)."""
from ..ir import OPS
from . import eager_gemm_bound


class Steps:
    """rows= (see the module): plan(op, arrays, attrs, outs) -> eager_native's row plan or
    None; run(op, arrays, attrs, outs) -> the outs written, or None; stats: the counts."""
    __slots__ = ("_plan", "_run", "_stats")

    def __init__(self, plan, run, stats):
        self._plan, self._run, self._stats = plan, run, stats

    def __call__(self, name, arrays, outs):
        return self._run(OPS[name], arrays, {}, outs)

    def bind(self, name, arrays, outs):
        plan = self._plan(OPS[name], arrays, {}, outs)
        if plan is None:
            return None
        fn, tail, stats = plan[0], (plan[4], plan[5], *plan[6]), self._stats

        def run(*addresses):
            fn(*addresses, *tail)
            stats["calls"] += 1
        return run

    def product(self, a, b, out, beta=0.0):
        return eager_gemm_bound.bind(a, b, out, beta)
