"""Identical transformer blocks share their functions before any LLVM IR is emitted
(codegen/build.call_specs keys every group by its structure: dedupe.group_key): a deeper
stack plans more groups but no more distinct keys, so its build emits no more functions
(issue 19: a stack of 12 blocks compiles in about the time of one)."""
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen import build
from llgrad.codegen.lowerings.ops_matmul import small_gemm_bound


def _keys(depth):
    llgrad.manual_seed(0)
    model = nn.Sequential(*[nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
                            for _ in range(depth)])
    x = llgrad.randn(2, 8, 32)

    def loss(x):
        y = model(x)
        return (y * y).mean()

    f = llgrad.compile(loss, backend="interpret")   # (the graphs alone: no LLVM here)
    f(x).backward()
    out = []
    for graph in (f.entries[-1].forward, f.entries[-1].backward):
        plan = build.plan_graph(build.simplify(graph), {"blas": build.blas_available(),
                                                        "small_gemm": small_gemm_bound()})
        specs = build.call_specs(plan)
        out.append((len(specs), len({key for key, *_ in specs})))
    return out


@pytest.mark.parametrize("pass_", [0, 1], ids=["forward", "backward"])
def test_a_deeper_stack_plans_no_more_distinct_groups(pass_):
    (g2, k2), (g5, k5) = _keys(2)[pass_], _keys(5)[pass_]
    assert g5 > g2                  # (more blocks: more groups ...)
    assert k5 == k2                 # (... of the same structures)
