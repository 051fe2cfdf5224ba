"""Every sample program of the op table (tests/runtime/test_optable.py), traced.

For each sample (SAMPLES, and EXEMPT's programs of the non-differentiable ops) and each input
layout (contiguous; and, when the sample has a float input of ndim >= 2, those inputs built
from a transposed or a stepped NumPy view), `llgrad.trace` must give a verified graph that

* interprets to what eager mode computes on the same inputs: every output (values exactly,
  dtype, shape), every input the program writes to (`graph.mutated`), and the generator state
  when the program draws random numbers;
* prints, parses and prints back to the same text;
* names, in every node's `loc`, the line of the sample program that made it (a line of the
  sample's own code in test_optable.py, never a file of llgrad).

Adding an op to the table without a sample fails `test_every_op_is_traced`.
"""
import dis
import functools
import importlib.util
import os
import re
import types

import numpy as np
import pytest

import llgrad
from llgrad.ir import OPS, interpret, parse_graph, verify
from llgrad.runtime.creation import default_generator

_OPTABLE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "runtime", "test_optable.py")


def _load_optable():
    spec = importlib.util.spec_from_file_location("_optable_samples", _OPTABLE_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


optable = _load_optable()
SAMPLES, EXEMPT, K = optable.SAMPLES, optable.EXEMPT, optable.K
_SAMPLE_PATHS = {_OPTABLE_PATH, *optable.SAMPLE_FILES}      # (the files samples live in)


# ---- the programs ----------------------------------------------------------------------------

class Program:
    """One program to trace: a SAMPLES case, or an EXEMPT op's program."""

    def __init__(self, op, id, fn, inputs):
        self.op, self.id, self.fn, self.inputs = op, id, fn, tuple(inputs)

    def __repr__(self):
        return f"{self.op}-{self.id}"


PROGRAMS = [Program(op, c.id, c.fn, c.inputs) for op, cases in SAMPLES.items() for c in cases
            if op not in optable.EAGER_ONLY]
PROGRAMS += [Program(op, "exempt", e.fn, e.inputs) for op, e in EXEMPT.items()
             if op not in optable.EAGER_ONLY]      # (complex_region: made by a lowering pass)


# ---- input layouts ---------------------------------------------------------------------------
# Every layout builds the same values; "transposed" and "stepped" give each float input of
# ndim >= 2 non-contiguous memory (through llgrad.from_numpy of a NumPy view).

def _transposed(a):
    return np.ascontiguousarray(a.T).T


def _stepped(a):
    """a's values in every other element of a bigger array, from offset 1 on each axis; the
    gaps hold other values, so a program reading them is seen."""
    big = np.random.default_rng(a.size).uniform(-9.0, 9.0, tuple(2 * n + 1 for n in a.shape))
    view = big[tuple(slice(1, 1 + 2 * n, 2) for n in a.shape)]
    view[...] = a
    return view


def _broadcast(a):
    """a's first row repeated through a stride-0 dimension (an expanded input)."""
    return np.broadcast_to(a[:1], a.shape)


LAYOUTS = {"contiguous": None, "transposed": _transposed, "stepped": _stepped,
           "broadcast": _broadcast}


def _laid_out(a):
    """The float array (ndim >= 2) behind a raw input or a K constant, else None."""
    arr = a.arr if isinstance(a, K) else a
    if isinstance(arr, np.ndarray) and arr.dtype.kind == "f" and arr.ndim >= 2:
        return arr
    return None


# (program, layout) pairs that do not apply, with the reason.
NOT_IN_LAYOUT = {
    ("as_strided-of_view", "broadcast"): "as_strided over the storage of an expanded input "
                                         "reaches past it (an error in eager too)",
    ("as_strided-of_transpose", "broadcast"): "as above",
}

# Programs that only run on contiguous inputs, with the reason.
CONTIGUOUS_ONLY = {
    "view-view": "view() of non-contiguous memory raises (as in PyTorch)",
    "view-flat": "view() of non-contiguous memory raises (as in PyTorch)",
}


def _applies(prog, layout):
    """A layout applies when it makes some input non-contiguous ((3, 1) transposed is not)."""
    make = LAYOUTS[layout]
    if make is None:
        return True
    if f"{prog.op}-{prog.id}" in CONTIGUOUS_ONLY or (f"{prog.op}-{prog.id}", layout) in \
            NOT_IN_LAYOUT:
        return False
    arrays = [_laid_out(a) for a in prog.inputs]
    return any(not make(np.array(a)).flags.c_contiguous for a in arrays
               if a is not None and (layout != "broadcast" or a.shape[0] > 1))


def build(prog, layout):
    """Fresh input tensors of prog in the layout (test_optable.build for "contiguous")."""
    inputs = optable.build(llgrad, prog.inputs)
    make = LAYOUTS[layout]
    if make is None:
        return inputs
    out = []
    for a, t in zip(prog.inputs, inputs):
        arr = _laid_out(a)
        if arr is not None:
            t = llgrad.from_numpy(make(np.array(arr, dtype=np.float64 if not isinstance(a, K)
                                                else arr.dtype)))
            if not isinstance(a, K):          # as build() does: a float64 leaf
                t.requires_grad_()
        out.append(t)
    return out


def _copy(a):
    """A copy of a with the same strides, inside a copy of all the memory it views (an
    as_strided program may read outside a's own elements)."""
    root = a
    while True:   # through ndarray bases and array-interface holders (ops_shape.strided_view)
        b = root.base
        b = b if isinstance(b, np.ndarray) else getattr(b, "base", None)
        if not isinstance(b, np.ndarray):
            break
        root = b
    assert root.flags.c_contiguous
    buf = root.copy()
    shift = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    flat = buf.reshape(-1).view(np.uint8)
    return np.lib.stride_tricks.as_strided(flat[shift:].view(a.dtype), a.shape, a.strides)


def _copy_arrays(arrays):
    return [_copy(a) if a.ndim and a.size else np.array(a) for a in map(np.asarray, arrays)]


# ---- expected failures --------------------------------------------------------------------------
# {(check, "op-id" or "op-id-layout"): reason}; checks: "op", "eager", "roundtrip", "loc".

XFAIL = {}


def _params(check, layouts=LAYOUTS):
    out = []
    for prog in PROGRAMS:
        for layout in layouts:
            if not _applies(prog, layout):
                continue
            key = f"{prog.op}-{prog.id}"
            reason = XFAIL.get((check, key)) or XFAIL.get((check, f"{key}-{layout}"))
            marks = (pytest.mark.xfail(strict=True, reason=reason),) if reason else ()
            out.append(pytest.param(prog, layout, id=f"{key}-{layout}", marks=marks))
    return out


@functools.lru_cache(maxsize=None)
def traced(prog, layout):
    """(graph, the rng state before tracing): traced once per program and layout."""
    inputs = build(prog, layout)
    state = default_generator.state.copy()
    g = llgrad.trace(lambda *xs: prog.fn(llgrad, *xs), *inputs)
    return g, state


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ---- the op table is covered ----------------------------------------------------------------------

def test_every_op_is_traced():
    """Every op of the table has a sample, and some sample's trace runs it."""
    sampled = {p.op for p in PROGRAMS} | set(optable.EAGER_ONLY)
    assert set(OPS) <= sampled, f"ops without a sample: {sorted(set(OPS) - sampled)}"
    assert sampled <= set(OPS), f"samples of unknown ops: {sorted(sampled - set(OPS))}"
    traced_ops = set()
    for prog in PROGRAMS:
        traced_ops |= {n.op for n in traced(prog, "contiguous")[0].nodes}
    missing = set(OPS) - traced_ops - set(optable.EAGER_ONLY)
    assert not missing, f"ops in no trace: {sorted(missing)}"


@pytest.mark.parametrize("prog,layout", _params("op", ["contiguous"]))
def test_sample_traces_its_op(prog, layout):
    g, _ = traced(prog, layout)
    assert prog.op in {n.op for n in g.nodes}, f"the trace never ran {prog.op!r}:\n{g}"


# ---- trace -> verify -> interpret == eager ------------------------------------------------------

@pytest.mark.parametrize("prog,layout", _params("eager"))
def test_interpret_matches_eager(prog, layout):
    g, state = traced(prog, layout)

    # eager, on fresh inputs, from the generator state the trace started from
    inputs = build(prog, layout)
    saved = default_generator._state
    default_generator._state = state.copy()
    try:
        eager = _flat(prog.fn(llgrad, *inputs))
        eager_state = default_generator.state.copy()
    finally:
        default_generator._state = saved

    tensors = [t for t in inputs if isinstance(t, llgrad.Tensor)]
    has_rng = len(g.inputs) == len(tensors) + 1
    assert len(g.inputs) == len(tensors) + has_rng
    assert len(g.example_inputs) == len(g.inputs)
    arrays = _copy_arrays(g.example_inputs)
    got = interpret(g, *arrays)

    assert len(got) == len(eager)
    for i, (a, e) in enumerate(zip(got, eager)):
        e = e.detach().numpy()
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} != eager's {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape} != eager's {e.shape}"
        np.testing.assert_array_equal(a, e, err_msg=f"output {i}")
    for i, v in g.mutated.items():
        if has_rng and i == len(tensors):
            np.testing.assert_array_equal(arrays[i], eager_state, err_msg="generator state")
        else:
            np.testing.assert_array_equal(arrays[i], tensors[i].detach().numpy(),
                                          err_msg=f"mutated input {g.inputs[i].name}")
    # inputs not in graph.mutated are left as eager leaves them
    for i, t in enumerate(tensors):
        if i not in g.mutated:
            np.testing.assert_array_equal(arrays[i], t.detach().numpy())
    if has_rng:
        assert len(tensors) in g.mutated


# ---- print -> parse -> print ----------------------------------------------------------------------

@pytest.mark.parametrize("prog,layout", _params("roundtrip"))
def test_print_parse_roundtrip(prog, layout):
    g, _ = traced(prog, layout)
    text = str(g)
    parsed = parse_graph(text)
    assert str(parsed) == text
    verify(parsed)


# ---- node locations ------------------------------------------------------------------------------

def _code_lines(fn):
    """The source lines of fn in test_optable.py, and of what it runs there: nested lambdas,
    closures (binary()'s `f`) and the module's helpers (_inplace_view, _setitem, _grad)."""
    lines, seen, funcs, codes = set(), set(), [fn], []
    while funcs or codes:
        if codes:
            code = codes.pop()
            lines |= {ln for _, ln in dis.findlinestarts(code) if ln is not None}
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            continue
        f = funcs.pop()
        if not isinstance(f, types.FunctionType) or f in seen or \
                f.__code__.co_filename not in _SAMPLE_PATHS:
            continue
        seen.add(f)
        codes.append(f.__code__)
        funcs += [c.cell_contents for c in f.__closure__ or ()]
        funcs += [f.__globals__.get(n) for n in f.__code__.co_names]
    return lines


@pytest.mark.parametrize("prog,layout", _params("loc"))
def test_node_locations(prog, layout):
    g, _ = traced(prog, layout)
    lines = _code_lines(prog.fn)
    name = os.path.basename(prog.fn.__code__.co_filename)
    bad = []
    for n in g.nodes:
        m = re.fullmatch(r"(.+):(\d+)", n.loc)
        if not m or m.group(1) != name or int(m.group(2)) not in lines:
            bad.append((n.op, n.loc))
    assert not bad, f"nodes not located in the sample ({name}, lines {sorted(lines)}): {bad}"
