"""llgrad.autograd.functional: torch.autograd.functional's jacobian, hessian, vjp, jvp,
vhp and hvp, computed as PyTorch computes them: by the autograd engine on func's outputs
(inputs a tensor or a tuple of tensors, results shaped output.shape + input.shape, nested
as PyTorch nests them); the forward-mode strategies through llgrad.func's jacrev / hessian."""
from ..func.jacobians import hessian as _hessian, jacrev as _jacrev
from ..runtime.autograd_api import grad
from ..runtime.creation import eye, ones_like, zeros, zeros_like
from ..runtime.functions import stack
from ..runtime.grad_mode import enable_grad
from ..runtime.tensor import Tensor


def _detach(r, keep):
    if isinstance(r, tuple):
        return tuple(_detach(x, keep) for x in r)
    return r if keep or not isinstance(r, Tensor) else r.detach()


def _checked(func, fn_name):
    """func with PyTorch's check of what it returns: a tensor or a tuple of tensors."""
    def f(*args):
        out = func(*args)
        _as_tuple(out, "outputs of the user-provided function", fn_name)
        return out
    return f


def _forward_mode(transform, func, inputs):
    """A forward-mode strategy's result: not detached, as PyTorch's (its forward AD under
    vmap leaves the tangents in the graph of the inputs that require grad)."""
    if isinstance(inputs, Tensor):
        return transform(func, 0)(inputs)
    return transform(func, tuple(range(len(inputs))))(*inputs)


def _forward_mode_checks(inputs, create_graph, strict, vectorize):
    """PyTorch's refusals of a forward-mode jacobian (a hessian's outer one too), in its
    order: create_graph, strict, the inputs, vectorize=False."""
    for flag, name, error in ((create_graph, "create_graph", NotImplementedError),
                              (strict, "strict", RuntimeError)):
        if flag:
            raise error(f"torch.autograd.functional.jacobian: `{name}=True` and `strategy="
                        f'"forward-mode"` are not supported together (yet). Please either '
                        f'set `{name}=False` or `strategy="reverse-mode"`.')
    _as_tuple(inputs, "inputs", "jacobian")
    if not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                  "Hessian isonly implemented for `vectorize=True`.")


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """As torch.autograd.functional.jacobian. Reverse mode runs func once on inputs made
    to require grad and differentiates its outputs with the engine (a row at a time, or
    all rows in one batched backward with vectorize), as PyTorch does: so a Function
    without setup_context, autograd.grad or .item() inside func all work, as there."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                             "Hint: If your function has more outputs than inputs, "
                             '"forward-mode" tends to be more performant. Otherwise, prefer to '
                             'use "reverse-mode".')
    if strategy == "forward-mode":
        # (PyTorch runs forward AD under vmap there; llgrad.func's jacrev gives its numbers)
        _forward_mode_checks(inputs, create_graph, strict, vectorize)
        jac = _forward_mode(_jacrev, _checked(func, "jacobian"), inputs)
        return jac if isinstance(inputs, Tensor) else _as_lists(jac)
    single_in, xs = _as_tuple(inputs, "inputs", "jacobian")
    xs = _prepare(xs, create_graph)
    single_out, outs = _outputs(func, xs, "jacobian")
    if strict:
        _strict_outputs(outs)
    if strict and vectorize:            # (after func ran and its outputs were checked)
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and "
                           "`vectorized=True` are not supported together. Please either set "
                           "`strict=False` or `vectorize=False`.")
    with enable_grad():
        rows = _rows_batched(outs, xs, create_graph) if vectorize else \
            _rows(outs, xs, create_graph, strict)
    jac = tuple(tuple(r.reshape(tuple(o.shape) + tuple(x.shape)) for r, x in zip(per, xs))
                for per, o in zip(rows, outs))
    jac = _detach(jac, create_graph)
    if single_out:
        return jac[0][0] if single_in else jac[0]
    return tuple(j[0] for j in jac) if single_in else jac


def _as_lists(jac):
    """Forward-mode results nest in lists, as PyTorch's, when the inputs are a tuple."""
    return [_as_lists(j) for j in jac] if isinstance(jac, tuple) else jac


def _engine_grad(outs, xs, gos, create_graph, **kw):
    """PyTorch's _autograd_grad: outputs that do not require grad are left out (all of
    them: no gradient)."""
    given = [(o, g) for o, g in zip(outs, gos) if o.requires_grad]
    if not given:
        return (None,) * len(xs)
    return grad([o for o, _ in given], xs, [g for _, g in given], retain_graph=True,
                create_graph=create_graph, allow_unused=True, **kw)


def _rows(outs, xs, create_graph, strict):
    """For each output, for each input: the rows d out[j] / d input stacked (j over the
    output's elements, flattened)."""
    res = []
    for i, out in enumerate(outs):
        flat = out.reshape(-1)
        per = [[] for _ in xs]
        for j in range(flat.numel()):
            gs = _engine_grad((flat[j],), xs, (None,), create_graph)
            for k, (g, x) in enumerate(zip(gs, xs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is "
                                           f"independent of input {k}. This is not allowed "
                                           "in strict mode.")
                    g = zeros_like(x)
                elif strict and create_graph and not g.requires_grad:
                    raise RuntimeError("The jacobian of the user-provided function is "
                                       f"independent of input {k}. This is not allowed in "
                                       "strict mode when create_graph=True.")
                per[k].append(g)
        res.append([stack(p) if p else x.new_zeros((0,) + tuple(x.shape))
                    for p, x in zip(per, xs)])
    return res


def _rows_batched(outs, xs, create_graph):
    """_rows by one backward whose gradients are batched over the identity's rows."""
    flat = tuple(o.reshape(-1) for o in outs)
    sizes = [f.numel() for f in flat]
    total = sum(sizes)
    gos, at = [], 0
    for f, n in zip(flat, sizes):
        go = zeros((total, n), dtype=f.dtype)
        if n:
            go[at:at + n] = eye(n, dtype=f.dtype)
        gos.append(go)
        at += n
    gs = _engine_grad(flat, xs, gos, create_graph, is_grads_batched=True) if total else \
        (None,) * len(xs)
    gs = [zeros_like(x).expand((total,) + tuple(x.shape)) if g is None else g
          for g, x in zip(gs, xs)]
    parts = [g.split(sizes, dim=0) for g in gs]
    return [[p[i] for p in parts] for i in range(len(outs))]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """As torch.autograd.functional.hessian (func returns a one-element tensor): the
    jacobian of func's jacobian (taken with create_graph), as PyTorch computes it."""
    _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def single(*args):
        out = func(*args)
        _single_element(out, "hessian")
        return out.squeeze()
    if outer_jacobian_strategy == "forward-mode":
        _forward_mode_checks(inputs, create_graph, strict, vectorize)    # (the outer jacobian's)
        hess = _forward_mode(_hessian, single, inputs)
        return hess if isinstance(inputs, Tensor) else _as_lists(hess)
    single_in, _ = _as_tuple(inputs, "inputs", "hessian")

    def checked(*args):
        out = func(*args)
        _single_element(out, "hessian")
        if strict:
            _strict_outputs((out,))
        return out.squeeze()

    def jac_func(*args):
        jac = jacobian(checked, args, create_graph=True)
        if strict:
            for i, j in enumerate(jac):
                if not j.requires_grad:
                    raise RuntimeError(
                        "While computing the hessian, found that the jacobian of the "
                        f"user-provided function with respect to input {i} is independent of "
                        "the input. This is not allowed in strict mode. You should ensure that "
                        "your function is twice differentiable and that the jacobian depends "
                        "on the inputs (this would be violated by a linear function for "
                        "example).")
        return jac
    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize)
    return res[0] if single_in else res


def _single_element(out, fn_name):
    single, outs = _as_tuple(out, "outputs of the user-provided function", fn_name)
    if not single:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                           "contain a single element")


# vjp / jvp / vhp / hvp: as torch.autograd.functional computes them, by the autograd engine
# on inputs detached from the caller's graph (kept in it with create_graph=True)

def _as_tuple(x, what, fn_name):
    """(whether x is one tensor, x as a tuple), PyTorch's TypeError for anything but a
    tensor or a tuple of them (a list included)."""
    single = not isinstance(x, tuple)
    xs = (x,) if single else x
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            raise TypeError(f"The {what} given to {fn_name} must be either a Tensor or a tuple "
                            "of Tensors but the " + (f"given {what} has type {type(t)}." if single
                                                     else f"value at index {i} has type "
                                                     f"{type(t)}."))
    return single, xs


def _strict_outputs(outs):
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(f"Output {i} of the user-provided function does not require "
                               "gradients. The outputs must be computed in a differentiable "
                               "manner from the input when running in strict mode.")


def _prepare(inputs, create_graph):
    return tuple(t.view_as(t) if create_graph and t.requires_grad
                 else t.detach().requires_grad_(True) for t in inputs)


def _outputs(func, inputs, fn_name):
    with enable_grad():
        out = func(*inputs)
    single, outs = _as_tuple(out, "outputs of the user-provided function", fn_name)
    return single, outs


def _grads(outputs, inputs, grad_outputs, create_graph):
    gos = (None,) * len(outputs) if grad_outputs is None else grad_outputs
    gs = _engine_grad(outputs, inputs, gos, create_graph)
    return tuple(zeros_like(x) if g is None else g for g, x in zip(gs, inputs))


def _v(v, like, fn_name, what, single_like):
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element."
                               if what == "output" else
                               "The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        return tuple(ones_like(t) for t in like)
    _, vs = _as_tuple(v, "v", fn_name)
    if len(vs) != len(like):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got "
                           f"{len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, like)):
        if tuple(a.shape) != tuple(b.shape):
            prefix = "" if single_like else f"Entry {i} in "
            raise RuntimeError(f"{prefix}v has invalid size: should be {b.shape} but got "
                               f"{a.shape}.")
    return vs


def _result(single, xs, create_graph):
    xs = _detach(xs, create_graph)
    return xs[0] if single else xs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """As torch.autograd.functional.vjp: (func(inputs), v^T J)."""
    single_in, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prepare(inputs, create_graph)
    single_out, outs = _outputs(func, inputs, "vjp")
    if strict:
        _strict_outputs(outs)
    vs = _v(v, outs, "vjp", "output", single_out)
    with enable_grad():
        if strict:
            _strict_filled(_engine_grad(outs, inputs, vs, create_graph), create_graph,
                           "The output of the user-provided function is independent of "
                           "input {i}. This is not allowed in strict mode.")
        g = _grads(outs, inputs, vs, create_graph)
    return _result(single_out, outs, create_graph), _result(single_in, g, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """As torch.autograd.functional.jvp: (func(inputs), J v), by the double-vjp trick."""
    single_in, inputs = _as_tuple(inputs, "inputs", "jvp")
    inputs = _prepare(inputs, create_graph)
    vs = _v(v, inputs, "jvp", "input", single_in)
    single_out, outs = _outputs(func, inputs, "jvp")
    if strict:
        _strict_outputs(outs)
    with enable_grad():
        us = tuple(zeros_like(o).requires_grad_(True) for o in outs)
        g = _engine_grad(outs, inputs, us, True)
        if strict:
            _strict_grad_inputs(g)
        used = [(gi, vi) for gi, vi in zip(g, vs) if gi is not None]
        if used:
            jv = grad([gi for gi, _ in used], us, [vi for _, vi in used],
                      create_graph=create_graph, allow_unused=True)
        else:
            jv = (None,) * len(us)
        if strict:
            _strict_filled(jv, create_graph, "The gradient with respect to the input is "
                           "independent of entry {i} in the grad_outputs when using the double "
                           "backward trick to compute forward mode gradients. This is not allowed"
                           " in strict mode.")
        jv = tuple(zeros_like(o) if j is None else j for j, o in zip(jv, outs))
    return _result(single_out, outs, create_graph), _result(single_out, jv, create_graph)


def _strict_grad_inputs(g):
    for i, gi in enumerate(g):
        if gi is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if not gi.requires_grad:
            raise RuntimeError(f"The gradient with respect to input {i} is independent of the "
                               "inputs of the user-provided function. This is not allowed in "
                               "strict mode.")


def _strict_filled(gs, create_graph, none_msg):
    """PyTorch's strict checks of a first-order result (_fill_in_zeros)."""
    for i, g in enumerate(gs):
        if g is None:
            raise RuntimeError(none_msg.format(i=i))
        if create_graph and not g.requires_grad:
            raise RuntimeError("The jacobian of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               "create_graph=True.")


def _second_order(func, inputs, v, create_graph, fn_name, strict):
    single_in, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _prepare(inputs, create_graph)
    single_out, outs = _outputs(func, inputs, fn_name)
    _single_element(outs[0] if single_out else outs, fn_name)
    if strict:
        _strict_outputs(outs)
    vs = _v(v, inputs, fn_name, "input", single_in)
    with enable_grad():
        jac = _engine_grad(outs, inputs, (None,) * len(outs), True)
        if strict:
            _strict_jacobian(jac)
        jac = tuple(zeros_like(x) if j is None else j for j, x in zip(jac, inputs))
        used = [(j, w) for j, w in zip(jac, vs) if j.requires_grad]
        hv = grad([j for j, _ in used], inputs, [w for _, w in used],
                  create_graph=create_graph, allow_unused=True) if used else \
            (None,) * len(inputs)
        if strict:
            for i, h in enumerate(hv):
                if h is None:
                    raise RuntimeError(
                        f"The jacobian of the user-provided function is independent of input {i}."
                        " This is not allowed in strict mode." if fn_name == "vhp" else
                        "The hessian of the user-provided function is independent of entry "
                        f"{i} in the grad_jacobian. This is not allowed in strict mode as it "
                        "prevents from using the double backward trick to replace forward mode "
                        "AD.")
                if create_graph and not h.requires_grad:
                    raise RuntimeError("The hessian of the user-provided function is independent "
                                       f"of input {i}. This is not allowed in strict mode when "
                                       "create_graph=True.")
        hv = tuple(zeros_like(x) if h is None else h for h, x in zip(hv, inputs))
    return _result(True, outs, create_graph), _result(single_in, hv, create_graph)


def _strict_jacobian(jac):
    """PyTorch's strict check of the first backward of vhp / hvp."""
    for i, j in enumerate(jac):
        if j is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if not j.requires_grad:
            raise RuntimeError(
                "While computing the hessian, found that the jacobian of the user-provided "
                f"function with respect to input {i} is independent of the input. This is not "
                "allowed in strict mode. You should ensure that your function is twice "
                "differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example).")


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """As torch.autograd.functional.vhp: (func(inputs), v^T H)."""
    return _second_order(func, inputs, v, create_graph, "vhp", strict)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """As torch.autograd.functional.hvp: (func(inputs), H v); H is symmetric for the
    twice-differentiable functions autograd sees, so H v is v^T H transposed (the same)."""
    return _second_order(func, inputs, v, create_graph, "hvp", strict)
