"""One native loop for Adam's and AdamW's eager update of a contiguous parameter:
`void eager_kernel(ptr param, ptr grad, ptr exp_avg, ptr exp_avg_sq, [ptr max_exp_avg_sq,]
i64 n, T c0, ..., T c6)` (max_exp_avg_sq with amsgrad only).

Why: the update is ten passes over the parameter's arrays in NumPy (lerp, mul, addcmul, sqrt,
div, add, mul, div, add, and the weight decay's): an MLP's Adam step took 1.7x torch's.

Each element goes through the operations of optim/_eager_adam.py in their order, each
rounded to the parameter's dtype as NumPy rounds it (a Python number operand is the dtype's
value of it: the caller passes the constants so converted), with no fused multiply-add and
no reassociation: the same bits as the tensor calls. The constants are arguments, so one
kernel per (dtype, lerp's formula, weight-decay form, amsgrad) serves every step, learning
rate and parameter size; it is cached on disk like every kernel."""
from llvmlite import ir

from .eager_cache import ENTRY
from .lowerings.scalar import I64, PTR
from .native import jit, keys

DECAYS = ("none", "decoupled", "l2")
_TYPES = {"float32": ir.FloatType(), "float64": ir.DoubleType()}
# the constants, in the argument order: p *= decay (decoupled) or g += p * decay (l2); lerp's
# weight (near: m + w * (g - m)) or one minus it (far: g - (g - m) * (1 - w)); then beta2,
# 1 - beta2, sqrt(1 - beta2 ** step), eps, -lr / (1 - beta1 ** step)
CONSTANTS = ("decay", "lerp", "beta2", "one_minus_beta2", "bias_correction2_sqrt", "eps",
             "neg_step_size")


def key(dtype, near, decay, amsgrad=False):
    # (amsgrad's kernels only add to the key: the others keep the disk cache's entries)
    return keys.key_for(repr(("adam", dtype, bool(near), decay) + (("amsgrad",) if amsgrad
                                                                   else ())), "eager-adam-1")


def build(dtype, near, decay, amsgrad=False):
    """The address of the kernel (a jit.CodeAddress), from memory, the disk cache or LLVM."""
    k = key(dtype, near, decay, amsgrad)
    compiled = jit.lookup(k, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(_module(dtype, near, decay, amsgrad), [ENTRY], key=k)
    return compiled.address(ENTRY)


def _module(dtype, near, decay, amsgrad=False):
    t = _TYPES[dtype]
    mod = jit.new_module(f"eager_adam_{dtype}")
    n_ptr = 5 if amsgrad else 4
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR] * n_ptr + [I64] + [t] * 7),
                     ENTRY)
    ptrs, n, consts = fn.args[:n_ptr], fn.args[n_ptr], dict(zip(CONSTANTS, fn.args[n_ptr + 1:]))
    for p in ptrs:
        p.add_attribute("noalias")
    sqrt = mod.declare_intrinsic("llvm.sqrt", [t])
    # add's alpha, lerp and addcmul as ATen's vec::fmadd: one rounding
    fma = mod.declare_intrinsic("llvm.fma", [t], ir.FunctionType(t, [t] * 3))
    entry, body, done = (fn.append_basic_block(s) for s in ("entry", "body", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(I64, 0)), body, done)
    b.position_at_end(body)
    i = b.phi(I64, "i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    addr = [b.gep(p, [i], inbounds=True, source_etype=t) for p in ptrs]
    p, g, m, v = (b.load(a, typ=t) for a in addr[:4])
    if decay == "decoupled":                        # p.mul_(1 - lr * weight_decay)
        p = b.fmul(p, consts["decay"])
    elif decay == "l2":                             # grad.add(p, alpha=weight_decay)
        g = b.call(fma, [p, consts["decay"], g])
    d = b.fsub(g, m)                                # exp_avg.lerp_(grad, 1 - beta1)
    m = b.call(fma, [consts["lerp"], d, m]) if near else \
        b.call(fma, [b.fneg(d), consts["lerp"], g])
    v = b.fmul(v, consts["beta2"])                  # exp_avg_sq.mul_(beta2)
    v = b.call(fma, [b.fmul(g, consts["one_minus_beta2"]), g, v])     # .addcmul_(g, g, ...)
    if amsgrad:                 # max_sq.copy_(max_sq.maximum(exp_avg_sq)), as np.maximum:
        mx = b.load(addr[4], typ=t)     # the first where it is >= or NaN, else the second
        keep = b.or_(b.fcmp_ordered(">=", mx, v), b.fcmp_unordered("uno", mx, mx))
        mx = b.select(keep, mx, v)
        b.store(mx, addr[4])
        den = b.call(sqrt, [mx])                    # max_sq.sqrt()
    else:
        den = b.call(sqrt, [v])                     # exp_avg_sq.sqrt()
    den = b.fdiv(den, consts["bias_correction2_sqrt"])
    den = b.fadd(den, consts["eps"])
    upd = b.fdiv(b.fmul(m, consts["neg_step_size"]), den)
    p = b.fadd(p, upd)                              # p.add_(exp_avg.mul(-size).div_(denom))
    for value, a in zip((p, m, v), (addr[0], addr[2], addr[3])):
        b.store(value, a)
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, n), body, done)
    b.position_at_end(done)
    b.ret_void()
    return mod
