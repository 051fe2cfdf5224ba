"""Complex numbers: conjugation, the real view of a complex tensor and back, building one
from parts (complex), and the angle. Native code has no loops over complex values: it calls
each run of complex ops back as one complex_region (ir/complex_regions.py).

VJP rules follow PyTorch's convention: a complex input's gradient is dL/dRe + i dL/dIm of
the real loss, which is what view_as_real's gradient is; so view_as_real and
view_as_complex pass gradients through unchanged, and a holomorphic op's rule multiplies
by the conjugate of its derivative (the ops' own rules: ops_elementwise, ops_nn)."""
import numpy as np

from .interpret import evaluate
from .optable import defop

COMPLEX_OF = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}
REAL_OF = {np.dtype(c): r for r, c in COMPLEX_OF.items()}


def _view_as_real(z):
    if z.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    part = z.real               # (a float view with z's strides, in bytes)
    return np.lib.stride_tricks.as_strided(part, z.shape + (2,),
                                           z.strides + (part.itemsize,))


def _view_as_complex(x):
    if x.dtype not in COMPLEX_OF:
        raise RuntimeError("view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {x.dtype}")
    if not x.ndim or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if x.strides[-1] != x.itemsize:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * x.itemsize) for s in x.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    return x.view(COMPLEX_OF[x.dtype])[..., 0]     # (NumPy: the last axis is contiguous)


defop("view_as_real", _view_as_real, kind="view", grad_fn="ViewAsRealBackward0",
      vjp=lambda c, g: (g.contiguous()._op("view_as_complex"),), complex="only")
defop("view_as_complex", _view_as_complex, kind="view", grad_fn="ViewAsComplexBackward0",
      vjp=lambda c, g: (g._op("view_as_real"),), complex="only")


def _conj(z):
    return np.conj(z) if z.dtype.kind == "c" else np.array(z, copy=True)


# (conj() is what programs call, and PyTorch's is a lazy view whose node is ConjBackward0;
# llgrad computes the conjugate, for conj_physical() too)
defop("conj_physical", _conj, vjp=lambda c, g: (g._op("conj_physical"),),
      grad_fn="ConjBackward0", kind="elementwise", complex="only")


def _complex(re, im):
    if re.dtype != im.dtype:
        raise RuntimeError(f"Expected object of scalar type {re.dtype} but got scalar type "
                           f"{im.dtype} for second argument")
    if re.dtype not in COMPLEX_OF:
        raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got "
                           f"{re.dtype} and {im.dtype}")
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), COMPLEX_OF[re.dtype])
    out.real, out.imag = re, im
    return out


def _complex_vjp(c, g):
    parts = g._op("view_as_real")
    return (parts.select(-1, 0) if c.needs(0) else None,
            parts.select(-1, 1) if c.needs(1) else None)


defop("complex", _complex, args=("real", "imag"), vjp=_complex_vjp, grad_fn="ComplexBackward0",
      kind="elementwise", complex="only")


def _angle_vjp(c, g):
    # (PyTorch's angle_backward: d angle = Im(dz / z), so the gradient is g * i z / |z|^2,
    # 0 at z == 0)
    z = c.self
    grad = g * z / z.abs().pow(2) * 1j
    return (grad.masked_fill(z == 0, 0),)


defop("angle_complex", np.angle, vjp=_angle_vjp, save=("self",), grad_fn="AngleBackward0",
      kind="elementwise", complex="only")


def _complex_region(*arrays, region, digest=None):
    return evaluate(region, arrays)[0]


# Native code's complex values (ir/complex_regions.py): connected ops on complex values,
# gathered into one region run by the interpreter as eager runs them (the NumPy
# implementations), called back from native code as the LAPACK ops are. Made only where a
# graph is lowered, never traced: no VJP (the traced backward graph holds its own regions).
defop("complex_region", _complex_region, nout=None, kind="other", complex="only")
