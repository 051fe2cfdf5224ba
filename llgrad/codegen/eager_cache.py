"""The disk-cache side of the eager kernels (eager_kernels.py, eager_row_kernels.py), light
enough to import before the code generator: a kernel is stored under the key of what was
asked for - its kind, op, dtype, Python numbers or block widths, attributes (keys.key_for adds
the source of codegen and ir, LLVM's version and the host) - so a warm process finds it
without importing the lowerings, which took 0.25 s of a first eager GELU when Python compiles
them from source (PYTHONDONTWRITEBYTECODE)."""
from ..ir.builder import Builder
from ..ir.graph import TensorType
from .native import jit, keys

ENTRY = "eager_kernel"
ROWS, H = 3, 5      # a row kernel's probe sizes (neither 1: no broadcast passes for a block)


def op_key(op_name, dtype, scalars, attrs):
    """The cache key of op's elementwise kernel (eager_kernels.build)."""
    return keys.key_for(repr((op_name, dtype, tuple((type(v).__name__, v) for v in scalars),
                              sorted((attrs or {}).items()))), "eager-elementwise-1d")


def rows_key(op_name, dtype, widths, attrs):
    """The cache key of op's row kernel (eager_row_kernels.build)."""
    return keys.key_for(repr((op_name, dtype, tuple(widths), sorted((attrs or {}).items()))),
                        "eager-rows-2d")


def cached(key):
    """The address of the kernel stored under key (a jit.CodeAddress), or None."""
    compiled = jit.lookup(key, ENTRY)
    return None if compiled is None else compiled.address(ENTRY)


def rows_graph(op_name, dtype, widths, attrs):
    """The IR graph of op on inputs (ROWS, w * H) for w in widths, or None where the shape
    rule refuses them."""
    b = Builder(f"eager_rows_{op_name}")
    xs = [b.input(TensorType(dtype, (ROWS, w * H)), f"x{k}") for k, w in enumerate(widths)]
    try:
        y = b.add(op_name, xs, attrs)
    except Exception:       # (the shape rule refuses these widths: NumPy's impl raises)
        return None
    return b.ret(*(y if isinstance(y, tuple) else (y,)))


def rows_out_widths(graph):
    """The results' widths in blocks of H (a row kernel's results are packed rows)."""
    return tuple(y.type.shape[-1] // H for y in graph.outputs)
