"""Python numbers that tensor-dependent control flow (control.py) carries: what a variable
the branches of a tensor `if` set to numbers, or a number loop variable of a tensor
`while`, is after it (eager has a Python number there, not a 0-d tensor), and which loop
variables stay numbers through eager's iterations."""
from ..runtime.symbolic_scalar import ITEM_READS, SymbolicScalar, stand_ins
from .returned import ReturnedScalar


def python_number(t, value, only_returned):
    """What a variable the branches of a tensor `if` set to Python numbers of one type is
    after it, or a number loop variable after a tensor `while` (t the graph value, value
    eager's number): a number of eager's type, not a 0-d tensor, which would be returned,
    stored or printed where eager has the number and give `int_tensor * scale` a float
    dtype. In a compiled function's trace, an int or a
    float is a stand-in of the number (arithmetic with tensors as the number's, returned as
    an output, a read of its value retraces with a value guard: runtime/symbolic_scalar.py);
    else an output read as the number where it is only returned (a bool: `return y, found`);
    else the value read, a value guard as a Python if."""
    if stand_ins.item_reads and type(value) in (int, float):
        stand_ins.made, stand_ins.active = stand_ins.made | {ITEM_READS}, True
        return SymbolicScalar(t, value, ITEM_READS)
    if only_returned:
        return ReturnedScalar(t)
    return type(value)(t.item())


def number_positions(graph, numbers):
    """The positions among `numbers` (a loop body's outputs that are Python numbers
    before the loop) computed from such positions alone, transitively."""
    behind = {j: inputs_behind(graph, j) for j in numbers}
    kept = set(numbers)
    while True:
        out = {j for j in kept if not behind[j] <= kept}
        if not out:
            return kept
        kept -= out


def inputs_behind(graph, j):
    """The positions of graph's inputs that its output j is computed from."""
    position = {id(v): i for i, v in enumerate(graph.inputs)}
    found, seen, stack = set(), set(), [graph.outputs[j]]
    while stack:
        v = stack.pop()
        if id(v) in position:
            found.add(position[id(v)])
        node = v.node
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(x for x in node.inputs if hasattr(x, "node"))
        if node.view_of is not None:
            stack.append(node.view_of)
    return found
