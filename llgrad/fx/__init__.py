"""llgrad.fx: torch.fx's symbolic tracing (symbolic_trace, Tracer, Proxy), its Graph and
Node (printing, Python source, editing: inserting_before/after, replace_all_uses_with,
erase_node, eliminate_dead_code, lint) and GraphModule (recompile)."""
from .graph import Graph, Node
from .graph_module import GraphModule
from .proxy import Proxy, TraceError
from ._symbolic_trace import PH
from .tracer import Tracer, symbolic_trace, wrap

__all__ = ["symbolic_trace", "wrap", "Tracer", "Graph", "Node", "GraphModule", "Proxy",
           "TraceError", "PH"]
