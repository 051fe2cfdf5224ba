"""Lowering of `complex_region` (ir/complex_regions.py): native code calls back into Python,
which runs the region's sub-Graph on the interpreter, as host_call.py runs a LAPACK op's
NumPy implementation (the same call, addresses and error flag). The callback's key is made
from the region's text (its digest) and operand layouts, so every process that plans the
graph, or loads its plan from the disk cache (host_call.register_loaded), registers the same
key its object code calls."""
import hashlib

from ...ir.interpret import evaluate
from . import host_call
from .table import register


def _run(*arrays, region):
    outs = evaluate(region, arrays)[0]
    return outs if len(outs) > 1 else outs[0]


def _register(node):
    """The callback's table entry for node, under its key (returned)."""
    text = repr((node.attrs["digest"], host_call._operands(node),
                 [(v.type.dtype, tuple(v.type.shape)) for v in node.outputs]))
    key = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1
    host_call._CALLS[key] = (_run, {"region": node.attrs["region"]}, (),
                             host_call._operands(node),
                             tuple((v.type.dtype, tuple(v.type.shape)) for v in node.outputs))
    return key


def _prepare(plan, group):
    group.state["key"] = _register(group.root)
    group.state["register"] = _register     # (host_call.register_loaded)
    group.state["flag"] = plan.flag(group, "complex values: their NumPy implementations, "
                                           "called from native code, failed")


register("complex_region", "kernel", emit=host_call._emit, prepare=_prepare,
         check=host_call._check)
