"""gradcheck / gradgradcheck: analytical Jacobians (by backward passes) against central
finite differences, in float64."""
import warnings

import numpy as np

from .autograd_api import grad as autograd_grad
from .creation import empty
from .dtypes import float64
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck / gradgradcheck on a Jacobian mismatch, as
    torch.autograd.GradcheckError."""
    pass


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(fn, inputs):
    """The differentiable outputs (integer outputs such as max's indices are skipped), a
    complex one as its real view (view_as_real): its real and imaginary parts are checked
    as two real outputs."""
    return [o._op("view_as_real") if o._dtype.is_complex else o
            for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor) and o._dtype._cat >= 2]


def _real_inputs(func, inputs):
    """func and inputs with each complex input given as a real leaf (its view_as_real),
    func seeing it as complex again: finite differences then perturb the real and the
    imaginary parts, and the real leaf's gradient is PyTorch's complex gradient (dL/dRe +
    i dL/dIm) as two reals."""
    if not any(isinstance(x, Tensor) and x._dtype.is_complex for x in inputs):
        return func, inputs
    real = tuple(x.detach()._op("view_as_real").clone().requires_grad_(x.requires_grad)
                 if isinstance(x, Tensor) and x._dtype.is_complex else x for x in inputs)
    cplx = [isinstance(x, Tensor) and x._dtype.is_complex for x in inputs]

    def on_complex(*xs):
        return func(*(x._op("view_as_complex") if c else x for x, c in zip(xs, cplx)))
    return on_complex, real


def _numerical(fn, inputs, i, eps):
    """Columns of d(outputs)/d(inputs[i]) by central differences, one per element."""
    x = inputs[i]
    arr = x._data
    if any(st == 0 and n > 1 for st, n in zip(arr.strides, arr.shape)):
        raise RuntimeError(f"The {i}th input has a dimension with stride 0. gradcheck only "
                           "supports inputs that are non-overlapping to be able to compute "
                           "the numerical gradients correctly. You should call .contiguous "
                           "on the input before passing it to gradcheck.")
    # (a strided input is perturbed in place element by element, in C order as the
    # analytical Jacobian's columns)
    flat = arr.reshape(-1) if arr.flags.c_contiguous else None
    cols = []
    # grad mode stays on: fn may itself differentiate (gradgradcheck's inner grad)
    for j, idx in enumerate(np.ndindex(arr.shape)):
        at, where = (flat, j) if flat is not None else (arr, idx)
        orig = at[where]
        at[where] = orig + eps
        plus = [o._data.astype(np.float64).reshape(-1).copy() for o in _outputs(fn, inputs)]
        at[where] = orig - eps
        minus = [o._data.astype(np.float64).reshape(-1).copy() for o in _outputs(fn, inputs)]
        at[where] = orig
        cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    return cols


# the Jacobian's columns by forward mode (llgrad/autograd/forward_ad.py installs it):
# forward_columns(fn, inputs, i) -> per element of inputs[i], the flattened outputs' tangents
forward_columns = None


def _analytical(fn, inputs, diff):
    outs = _outputs(fn, inputs)
    rows = []   # rows[k][e] -> list over diff inputs of flattened gradient
    for o in outs:
        per_elem = []
        for e in range(o._data.size):
            if not o.requires_grad:
                per_elem.append([np.zeros(inputs[i]._data.size) for i in diff])
                continue
            seed = np.zeros(o._data.size, dtype=o._data.dtype)
            seed[e] = 1
            g = Tensor._from_array(seed.reshape(o._data.shape))
            grads = autograd_grad([o], [inputs[i] for i in diff], [g], retain_graph=True,
                                  allow_unused=True)
            per_elem.append([np.zeros(inputs[i]._data.size) if gi is None else
                             gi._data.astype(np.float64).reshape(-1)
                             for gi, i in zip(grads, diff)])
        rows.append(per_elem)
    return outs, rows


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False,
              check_forward_ad=False, check_backward_ad=True, **kw):
    """Compare backward's Jacobian of func at inputs (and forward mode's, with
    check_forward_ad) with central finite differences (in float64; inputs must be
    contiguous), as torch.autograd.gradcheck. Returns True, or raises GradcheckError (False
    with raise_exception=False)."""
    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of them have requires_grad=True.")
    for i in diff:
        if inputs[i]._dtype.name not in ("float64", "complex128"):
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          "point or complex. This check will likely fail if all the inputs are not "
                          "of double precision floating point or complex. ", UserWarning,
                          stacklevel=2)
    func, inputs = _real_inputs(func, inputs)
    outs, rows = _analytical(func, inputs, diff) if check_backward_ad else \
        (_outputs(func, inputs), None)
    for k, i in enumerate(diff):
        if inputs[i]._data.size == 0:
            continue                       # an empty input has an empty Jacobian
        cols = _numerical(func, inputs, i, eps)
        fwd = forward_columns(func, inputs, i) if check_forward_ad else None
        for oi, o in enumerate(outs):
            num = np.array([c[oi] for c in cols]).reshape(len(cols), -1)     # in x out
            checks = []
            if rows is not None:
                checks.append(("", np.array([r[k] for r in rows[oi]]).reshape(-1, len(cols)).T
                               if rows[oi] else np.zeros_like(num)))
            if fwd is not None:
                checks.append((" computed with forward mode",
                               np.array([c[oi] for c in fwd]).reshape(len(cols), -1)))
            for how, ana in checks:
                if np.allclose(ana, num, rtol=rtol, atol=atol, equal_nan=True):
                    continue
                msg = (f"Jacobian{how} mismatch for output {oi} with respect to input {i},\n"
                       f"numerical:{Tensor._from_array(num)!r}\n"
                       f"analytical:{Tensor._from_array(ana)!r}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def _random_grad_output(out, noncontiguous):
    dt = out._dtype if out._dtype.is_floating_point else float64
    shape = tuple(out.shape)
    noncontiguous = noncontiguous and int(np.prod(shape)) > 1
    if noncontiguous:
        shape = shape[:-1] + (2 * shape[-1],)
    t = empty(shape, dtype=dt).uniform_(-1, 1)
    return (t[..., 1::2] if noncontiguous else t).requires_grad_(True)


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, gen_non_contig_grad_outputs=False, **kw):
    """gradcheck of the first derivatives (second order), as torch.autograd.gradgradcheck."""
    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        # uniform in [-1, 1) from the global generator, as torch.testing.make_tensor draws
        # PyTorch's (a program's later random numbers stay PyTorch's)
        grad_outputs = [_random_grad_output(o, gen_non_contig_grad_outputs) for o in outs]
    grad_outputs = list(_as_tuple(grad_outputs))
    n = len(inputs)

    def first_grads(*args):
        xs, gos = args[:n], args[n:]
        os_ = _outputs(func, xs)
        gs = autograd_grad(os_, [xs[i] for i in diff], list(gos), create_graph=True,
                           allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
