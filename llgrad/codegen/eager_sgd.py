"""One native loop for SGD's eager update of a contiguous parameter:
`void eager_kernel(ptr param, ptr grad, ptr momentum_buffer, i64 n, T decay, T momentum,
T one_minus_dampening, T neg_lr)`.

Why: a tutorial's SGD with momentum is four tensor calls per parameter (the buffer's mul_ and
add_, Nesterov's add, the parameter's add_), each a NumPy pass plus the dispatcher's
bookkeeping: a small tabular net's optimiser step cost as much as its forward.

Each element goes through the operations of optim/_eager_sgd.py in their order, each rounded
to the parameter's dtype as NumPy rounds it (the caller passes the Python numbers converted to
the dtype, as NumPy converts a Python number operand), with no fused multiply-add and no
reassociation: the same bits as the tensor calls. The constants are arguments, so one kernel
per (dtype, maximize, weight decay or not, momentum or not, Nesterov) serves every step and
parameter size; it is cached on disk like every kernel."""
from llvmlite import ir

from .eager_cache import ENTRY
from .lowerings.loops import for_range
from .lowerings.scalar import I64, PTR
from .native import jit, keys

_TYPES = {"float32": ir.FloatType(), "float64": ir.DoubleType()}


def key(dtype, maximize, decay, momentum, nesterov):
    flags = tuple(bool(f) for f in (maximize, decay, momentum, nesterov))
    return keys.key_for(repr(("sgd", dtype) + flags), "eager-sgd-2")


def build(dtype, maximize, decay, momentum, nesterov):
    """The address of the kernel (a jit.CodeAddress), from memory, the disk cache or LLVM."""
    k = key(dtype, maximize, decay, momentum, nesterov)
    compiled = jit.lookup(k, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(_module(dtype, maximize, decay, momentum, nesterov),
                                      [ENTRY], key=k)
    return compiled.address(ENTRY)


def _module(dtype, maximize, decay, momentum, nesterov):
    t = _TYPES[dtype]
    mod = jit.new_module(f"eager_sgd_{dtype}")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR] * 3 + [I64] + [t] * 4), ENTRY)
    (p_ptr, g_ptr, buf_ptr), n = fn.args[:3], fn.args[3]
    c_decay, c_momentum, c_dampened, c_neg_lr = fn.args[4:]
    for a in (p_ptr, g_ptr, buf_ptr):
        a.add_attribute("noalias")
    # add with an alpha as ATen's vec::fmadd: one rounding
    fma = mod.declare_intrinsic("llvm.fma", [t], ir.FunctionType(t, [t] * 3))
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def plus(x, y, alpha):                          # x.add(y, alpha=alpha), rounded once
        return b.call(fma, [y, alpha, x])
    with for_range(b, 0, n) as i:
        p_addr, g_addr = (b.gep(a, [i], inbounds=True, source_etype=t) for a in (p_ptr, g_ptr))
        p, g = b.load(p_addr, typ=t), b.load(g_addr, typ=t)
        if maximize:                                # -p.grad
            g = b.fneg(g)
        if decay:                                   # grad.add(p, alpha=weight_decay)
            g = plus(g, p, c_decay)
        if momentum:
            buf_addr = b.gep(buf_ptr, [i], inbounds=True, source_etype=t)
            buf = b.fmul(b.load(buf_addr, typ=t), c_momentum)   # buf.mul_(momentum)
            buf = plus(buf, g, c_dampened)                      # .add_(grad, alpha=1 - damp.)
            b.store(buf, buf_addr)
            g = plus(g, buf, c_momentum) if nesterov else buf
        b.store(plus(p, g, c_neg_lr), p_addr)                   # p.add_(grad, alpha=-lr)
    b.ret_void()
    return mod
