"""llgrad.compiler: torch.compiler's names over llgrad.compile.

reset() forgets every compiled function's traced entries (the next calls trace again; the
kernel caches stay, so their native code is found again at once); disable(fn) makes calls of
fn inside a compiled function run the whole call eagerly (llgrad compiles a call as one
graph: a break runs it all eagerly, warned, where PyTorch splits the graph); is_compiling()
says whether the code runs under a trace."""
import functools

from .compile import eager_builds
from .compile.compiled_function import compile, registry
from .compile.stance import set_stance
from .compile.torch_api import TORCH_BACKENDS
from .runtime import trace_state

__all__ = ["compile", "reset", "disable", "is_compiling", "is_dynamo_compiling",
           "is_exporting", "list_backends", "allow_in_graph", "assume_constant_result",
           "cudagraph_mark_step_begin", "set_stance"]


def reset():
    """Forget every compiled function's traced entries, as torch.compiler.reset."""
    for cf in list(registry):
        cf.reset()
    eager_builds.reset()        # (kernels calls standing in found absent: probed again)


def is_compiling():
    """Whether the running code is being traced by llgrad.compile, or runs eagerly in
    place of compiled code still being built (run.StandIn: the branch the trace took)."""
    state = trace_state.state
    return state.tracer is not None or state.standing_in


is_dynamo_compiling = is_compiling


def is_exporting():
    """False: llgrad has no export."""
    return False


def list_backends(exclude_tags=None):
    """The backend names llgrad.compile takes from torch.compile."""
    return sorted(TORCH_BACKENDS)


def disable(fn=None, recursive=True, *, reason=None):
    """fn runs eagerly: called while llgrad.compile traces, it stops the trace (the call runs
    eagerly, with a warning naming the reason and the line)."""
    def wrap(f):
        @functools.wraps(f)
        def run_eagerly(*args, **kwargs):
            state = trace_state.state
            if state.tracer is not None:
                why = f" ({reason})" if reason else ""
                state.tracer.graph_break(f"{getattr(f, '__qualname__', f)} is marked "
                                         f"compiler.disable{why}")
            prev, state.standing_in = state.standing_in, False    # (not compiling in f)
            try:
                return f(*args, **kwargs)
            finally:
                state.standing_in = prev
        run_eagerly._llgrad_disabled = True
        return run_eagerly
    return wrap if fn is None else wrap(fn)


def allow_in_graph(fn):
    """fn itself (llgrad traces into every function)."""
    return fn


def assume_constant_result(fn):
    """fn itself (its result is traced as any other)."""
    return fn


def cudagraph_mark_step_begin():
    """Nothing to mark: llgrad runs on the CPU."""
