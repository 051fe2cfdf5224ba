"""The op table: every op declared once.

An OpDef holds the op's name, its NumPy implementation, its VJP rule and PyTorch's name
for its backward node. VJP rules are written against the Tensor API only (methods of the
tensors they receive), so one rule serves eager autograd, tracing and higher-order
gradients. This module imports nothing from the rest of llgrad.

A VJP rule is `vjp(ctx, grad) -> tuple` with one entry per input (None where no gradient
flows). The backward node's edges (`next_functions`) are PyTorch's: one per input except
the arguments PyTorch never differentiates (`nondiff`: indices, masks, targets) and Python
numbers, which are Scalars to PyTorch; only `number_edges` ops (add, mul, where, ...) wrap
a number into a tensor, which gets a (None, 0) edge. A missing optional tensor (None)
gets a (None, 0) edge, except in `scalar_args` (clamp's bounds: Scalars unless one of
them is a tensor). `ctx.<name>` reads a saved input or output (version-checked) or an attribute;
`ctx.needs(i)` says whether input i wants a gradient; `ctx.shape(i)`/`ctx.dtype(i)` give
input metadata. Gradients whose shape differs from their input's (broadcasting) are summed
back to the input's shape by the caller, and cast to the input's dtype.
"""
import numpy as np

OPS = {}
CONTROL = {}        # the control ops (cond, while_loop, stack_get): ops_control.py declares them
_LISTENERS = []


class OpDef:
    """One op of the table: its NumPy implementation, VJP rule, PyTorch's backward node
    name, argument names, the Tensor methods and llgrad.* functions made from it (see the
    module)."""
    __slots__ = ("name", "impl", "vjp", "grad_fn", "args", "save", "nout", "kind",
                 "promote", "float_out", "doc", "nondiff", "number_edges", "scalar_args",
                 "methods", "inplace", "functions", "cost", "decompose", "decompose_dtypes",
                 "eager_native", "eager_rows", "eager_steps", "eager_kernel",
                 "eager_min_elements", "eager_vjp",
                 "native_host", "complex", "autocast", "broadcast_zero_grads", "vjp_reads",
                 "recompute")

    def __init__(self, name, impl, vjp=None, grad_fn=None, args=("self",), save=(),
                 nout=1, kind="other", promote=(), float_out=False, doc="", nondiff=(),
                 number_edges=False, scalar_args=(), methods=(), inplace=(), functions=(),
                 cost=1, decompose=None, decompose_dtypes=("float32", "float64"),
                 eager_native=False, eager_rows=False,
                 eager_steps=(), eager_kernel=None, eager_min_elements=None, eager_vjp=None,
                 native_host=False, complex=False, autocast=None, broadcast_zero_grads=False,
                 vjp_reads=None, recompute=True):
        self.name = name
        self.impl = impl
        self.vjp = vjp
        self.grad_fn = grad_fn      # str, or callable(inputs, attrs) -> str
        self.args = args            # names of the inputs (tensors or Python scalars)
        self.save = save            # input names and/or "result" ("result0".. if nout > 1)
        self.nout = nout
        self.kind = kind            # "elementwise" | "reduce" | "view" | "random" | "other"
        self.promote = promote      # input positions promoted to one dtype (PyTorch rules)
        self.float_out = float_out  # integer inputs give float32 (exp, div, ...)
        self.doc = doc      # a note on the op; its methods and functions add it to their docs
        self.nondiff = nondiff          # argument names that never get an edge
        self.number_edges = number_edges    # Python numbers get (None, 0) edges
        self.scalar_args = scalar_args  # None there is a Scalar too (no edge)
        # Tensor methods that are the op applied to (self, *operands), and in-place ones that
        # write self (runtime/methods.py makes them); an op whose methods take more than its
        # operands (add's alpha, clamp's bounds) has hand-written ones and declares none
        self.methods, self.inplace = methods, inplace
        self.functions = functions      # llgrad.<name>(x, ...) = x.<name>(...) (functions.py)
        self.cost = cost                # per element, in memory-bound adds (thread split)
        # decompose(node, emit) -> Value: the op as primitive ops (ir/decompose.py), lowered
        # to native code in its place
        self.decompose = decompose
        # the dtypes at which decompose applies: arithmetic composites at the float ones
        # (their primitives' rounding is float's); those that only move elements
        # (constant_pad_nd) at every dtype native code holds
        self.decompose_dtypes = decompose_dtypes
        # eagerly, a float tensor operand runs on the native kernel of the op's lowering
        # (codegen/eager_kernels.py) in place of impl: for ops NumPy has no kernel of its own
        # for (erf, sigmoid, GELU), whose impl takes many passes or an np.where
        self.eager_native = eager_native
        # eagerly, float operands of rows of H-wide blocks ((..., 4H) gates beside (..., H)
        # states) run as one native loop over the rows of the op's decomposition
        # (codegen/eager_row_kernels.py) in place of impl: the fused LSTM/GRU cells
        self.eager_rows = eager_rows
        # the eager_rows ops impl runs once per time step (a whole LSTM layer): eagerly, impl
        # is called with rows=fn(op name, arrays, outs) -> outs written by the op's row
        # kernel, or None (impl then runs the op's NumPy implementation itself)
        self.eager_steps = eager_steps
        # eagerly, float operands run a native kernel in place of impl (compile/eager_native.py):
        # "last_dim": the op over the last dim of a C-contiguous operand, one loop per row
        # (codegen/eager_softmax.py: softmax's passes); "shaped": C-contiguous operands run
        # the compiled lowering of the op alone, built for their shapes (eager_shaped.py:
        # convolutions, where NumPy's im2col and products are a third of torch's speed)
        self.eager_kernel = eager_kernel
        # the largest operand's size from which eager_kernel runs (None: the kernel kind's
        # own; smaller calls run impl): low where impl's passes cost many times one native
        # pass (normalisations: 8-10 NumPy passes where one loop does)
        self.eager_min_elements = eager_min_elements
        # "shaped": eagerly, a backward that builds no graph runs the VJP rule traced for its
        # operands' shapes and lowered as a compiled backward is (compile/eager_shaped_vjp.py:
        # layer_norm's rule, ~14 NumPy passes, becomes one walk over each row)
        self.eager_vjp = eager_vjp
        # compiled code calls impl back through Python for this op (a LAPACK factorisation
        # with no loop of its own: codegen/lowerings/host_call.py), so a graph holding it
        # stays native code around it instead of running whole on the interpreter
        self.native_host = native_host
        # True: the op runs on complex operands too (eagerly: compiled code has no complex
        # values), its VJP rule written for them (PyTorch's convention: the gradient of a real
        # loss is dL/dRe + i dL/dIm, so rules take the conjugate of the op's derivative);
        # "only": its inputs or results are complex whatever its operands (view_as_real, the
        # transforms): eager only, which the tests of the table's native code leave out. An
        # op without it raises on a complex operand rather than compute what NumPy would
        self.complex = complex
        # PyTorch's CPU autocast list the op is on: "lower" (run in the autocast dtype:
        # products, convolutions), "fp32" (in float32: losses), or None (as its operands are)
        self.autocast = autocast
        # an op of several results whose VJP gets the gradient of a result nothing reached
        # as a read-only stride-0 zero (np.broadcast_to), not a fresh array of zeros, and
        # skips adding it (lstm_layer: its gates and cells, 2.5x its output, reach nothing in
        # nn.LSTM)
        self.broadcast_zero_grads = broadcast_zero_grads
        # an op of several results: the results whose gradients its VJP reads (None: all);
        # a backward that reaches none of them gives no gradient at all (None, as PyTorch's
        # formula returns an undefined one: slogdet's sign alone leaves A.grad None)
        self.vjp_reads = vjp_reads
        # False: a backward never recomputes the op's result from its inputs (ir/partition.py
        # saves it instead) where its own VJP rule evaluates the op's dearest part again
        # anyway: a recomputed exact GELU put erf into the backward twice, once for the
        # result a product's weight gradient reads and once for GELU's derivative, in two
        # kernels that the product between them keeps apart
        self.recompute = recompute

    @property
    def differentiable(self):
        """Whether the op has a VJP rule."""
        return self.vjp is not None

    def node_name(self, inputs, attrs):
        """PyTorch's name for the backward node of this op applied to inputs with attrs
        (e.g. 'MulBackward0')."""
        g = self.grad_fn
        return g if g is None or isinstance(g, str) else g(inputs, attrs)

    def __repr__(self):
        return f"<op {self.name}>"


def conj(v):
    """v's complex conjugate in a VJP rule (PyTorch's rules conjugate the op's derivative):
    a tensor's conj() (itself when real), a Python complex's, a real number itself."""
    return v.conjugate() if isinstance(v, complex) else v.conj() if hasattr(v, "conj") and \
        not isinstance(v, (int, float, np.generic)) else v


def defop(name, impl, **kw):
    """Declare an op (name must be new); the listeners of on_declare see it (its methods and
    functions are made then)."""
    if name in OPS:
        raise ValueError(f"op {name!r} declared twice")
    op = OpDef(name, impl, **kw)
    OPS[name] = op
    for listener in _LISTENERS:
        listener(op)
    return op


# PyTorch's reductions, cat, scans, indexing ... give C-contiguous results whatever their
# input's layout (NumPy's impls may keep a transposed one: a later .view() would fail, and a
# sum over it would add in another order); these keep their input's layout in both
_KEEP_LAYOUT = ("sort", "flip", "index_put", "index")
# (and masked_fill, elementwise but a contiguous clone filled in place in PyTorch: a masked
# transposed tensor's .view() works there; logsigmoid's kernel writes a contiguous output)
_CONTIGUOUS_ELEMENTWISE = ("masked_fill", "logsigmoid")


def no_derivative(aten):
    """The VJP rule of an op PyTorch gives no derivative (its backward ops): a backward
    through the op raises PyTorch's error, where a rule-less op's result would silently
    have no history (a double backward missing that part of the gradient)."""
    def vjp(c, gs):
        raise RuntimeError(f"derivative for aten::{aten} is not implemented")
    vjp.no_derivative = aten
    return vjp


def contiguous_result(op):
    """Whether op's results are made C-contiguous (eager, the interpreter and the Python
    backend alike; the IR types say so for every op that is not a view)."""
    return (op.kind in ("reduce", "other") and op.name not in _KEEP_LAYOUT
            or op.name in _CONTIGUOUS_ELEMENTWISE)


# losses elementwise under reduction="none": PyTorch lays that result out as an elementwise
# op's (a transposed input's loss is transposed, its .view(-1) raises)
_UNREDUCED_ELEMENTWISE = frozenset(("mse_loss", "huber_loss", "smooth_l1_loss",
                                    "binary_cross_entropy", "binary_cross_entropy_with_logits"))


def unreduced_elementwise(op):
    """Whether op's result under reduction="none" is laid out as iterator_layout_op's are
    (else, and reduced, as contiguous_result says)."""
    return op.name in _UNREDUCED_ELEMENTWISE


# elementwise ops whose result layout is not the TensorIterator's (iterator_layout_op): copies
# and fills (their own memory_format rules), draws (filled in memory order), the
# contiguous ones above
_OWN_LAYOUT = frozenset(("clone", "copy", "fill", "zero", "to_dtype", "bernoulli",
                         "bernoulli_p", "cauchy", "exponential", "geometric", "log_normal",
                         "normal", "normal_tensor", "random_", "uniform")
                        + _CONTIGUOUS_ELEMENTWISE)


def iterator_layout_op(op):
    """Whether op's result is laid out as PyTorch's TensorIterator lays out an elementwise
    result (ops_copy.iterator_relaid: eager, the interpreter and the Python backend alike),
    not as NumPy's order="K" does (which differs where operands disagree, x.t() + y)."""
    return op.kind == "elementwise" and op.name not in _OWN_LAYOUT


# the one array c_order keeps as it is laid out (compile/eager_channels_last.py's
# channels_last result of a convolution or batch norm, which the caller lays out so anyway)
kept = [None]


def c_order(a):
    """a, or a C-contiguous copy of an array that is not (but kept[0]); a size-1 dim gets its
    row-major stride, as PyTorch's results are allocated (x.t().sum(0, keepdim=True).stride()
    is (3, 1); NumPy leaves any stride there, and counts the array contiguous)."""
    if type(a) is not np.ndarray:
        return a
    if not a.flags.c_contiguous:
        if a is kept[0]:
            kept[0] = None
            return a
        return a.copy()
    if 1 in a.shape and a.ndim > 1 and a.size > 1:
        st, acc = [], a.itemsize
        for n in reversed(a.shape):
            st.append(acc)
            acc *= n
        st = tuple(reversed(st))
        if a.strides != st:
            return np.lib.stride_tricks.as_strided(a, a.shape, st)
    return a


def method_doc(name, op=None, function=False):
    """The docstring of a Tensor method (function=True: an llgrad.* function) that the
    runtime makes from the table or by a one-line wrapper: PyTorch's name, and op.doc where
    the op says how it differs."""
    doc = (f"llgrad.{name}(input, *args, **kwargs) is input.{name}(*args, **kwargs): as "
           f"torch.{name}." if function else f"As torch.Tensor.{name}.")
    return f"{doc} {op.doc}" if op is not None and op.doc else doc


def on_declare(listener):
    """listener(op) for every op declared so far and every one declared later (the runtime
    makes an op's Tensor methods and llgrad.* functions this way)."""
    _LISTENERS.append(listener)
    for op in list(OPS.values()):
        listener(op)
