"""llgrad._logging: torch._logging.set_logs over llgrad's log channels (compile/log.py).

PyTorch's artifact and component names map to the llgrad channel that shows the same
thing (recompiles: why a function traced again; graph_breaks: why calls ran eagerly;
guards; dynamo / graph / output_code and kin: the traces and builds, llgrad's "compile";
perf_hints: "perf"); names with no llgrad counterpart (inductor's fusion, cudagraphs, ...)
are accepted and show nothing. set_logs() with no arguments turns every channel off."""
from .compile import log as _log

__all__ = ["set_logs"]

_CHANNEL_OF = {
    "recompiles": "recompiles", "recompiles_verbose": "recompiles",
    "graph_breaks": "graph_breaks", "guards": "guards", "perf_hints": "perf",
    "dynamo": "compile", "aot": "compile", "graph": "compile", "graph_code": "compile",
    "graph_code_verbose": "compile", "output_code": "compile", "kernel_code": "compile",
    "aot_graphs": "compile", "aot_joint_graph": "compile", "bytecode": "compile",
    "graph_sizes": "compile", "pre_grad_graphs": "compile", "post_grad_graphs": "compile",
}
# torch's other names: accepted, with nothing of llgrad's to show
_NOTHING = frozenset(
    "autograd dynamic inductor distributed c10d ddp fsdp dtensor onnx ddp_graphs side_effects "
    "trace_source trace_call trace_bytecode schedule ir_pre_fusion ir_post_fusion "
    "onnx_diagnostics fusion overlap export modules cudagraphs sym_node compiled_autograd "
    "compiled_autograd_verbose cudagraph_static_inputs benchmarking autotuning incremental "
    "graph_region_expansion inductor_metrics hierarchical_compile compute_dependencies "
    "caching".split())


def set_logs(**kwargs):
    """Show what torch._logging.set_logs(**kwargs) asks for, in llgrad's channels: a
    component given a logging level (dynamo=logging.DEBUG) or an artifact set True turns
    its channel on; all= every channel; no arguments: all off."""
    on = set()
    for name, value in kwargs.items():
        if name == "all":
            if value:
                on.update(_log.CHANNELS)
        elif name in _CHANNEL_OF:
            if value:
                on.add(_CHANNEL_OF[name])
        elif name not in _NOTHING:
            raise TypeError(f"set_logs() got an unexpected keyword argument '{name}'")
    _log.set_logs(sorted(on))
