"""llgrad.func.jvp and jacfwd: forward mode by the double-VJP trick. With u a zero
cotangent that requires grad, g(u) = J^T u is computed with create_graph; g is linear in u,
so the derivative of <g(u), t> with respect to u is J t, exactly, for every op whose VJP
rule is differentiable in its incoming gradient (every rule of the op table is written with
tensor ops, so every op with a VJP qualifies). It costs a forward and two backward passes.

jacfwd is vmap of jvp over the standard basis of the inputs: the forward and the first
backward run once, the second backward runs batched over the basis."""
import functools

from ..runtime import grad_mode
from ..runtime.autograd_api import grad as autograd_grad
from ..runtime.creation import zeros
from ..runtime.tensor import Tensor
from .autodiff import detached, from_graph, run, to_graph
from .batched import sizes_of
from .grad import _check_argnums, _only_tensors
from .pytree import tree_flatten, tree_unflatten
from .vmap import vmap


def _tuple_of_tensors(api, name, value):
    if not isinstance(value, tuple):
        raise RuntimeError(f"{api}: Expected {name} to be a tuple. E.g. it should be valid to "
                           f"call f(*{name}).")


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: (func(*primals), the Jacobian of func at primals times tangents)
    ((output, jvp_out, aux) with has_aux)."""
    return jvp_with_argnums(func, primals, tangents, None, strict, has_aux)


def jvp_with_argnums(func, primals, tangents, argnums, strict=False, has_aux=False):
    api = "jvp(f, primals, tangents)"
    _tuple_of_tensors(api, "primals", primals)
    if argnums is None:
        _tuple_of_tensors(api, "tangents", tangents)
        nums = tuple(range(len(primals)))
        diff = primals
    else:
        nums = _check_argnums(argnums, len(primals))
        diff = tuple(primals[i] for i in nums)
        tangents = tangents if isinstance(argnums, tuple) else (tangents,)
    flat_p, p_spec = tree_flatten(diff)
    flat_t, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, "
                           "tangents also must be. Got primals with structure "
                           f"{p_spec} and tangents with structure {t_spec}")
    for i, (p, t) in enumerate(zip(flat_p, flat_t)):
        if not isinstance(p, Tensor) or not isinstance(t, Tensor):
            raise RuntimeError(f"{api}: Expected primals and tangents to only contain "
                               f"Tensors, got {type(p if not isinstance(p, Tensor) else t)}")
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError("Trying to set a forward gradient that has a different size "
                               "than that of the original Tensor, this is not supported. "
                               f"Tensor is of size {list(p.shape)} while the given forward "
                               f"gradient is of size {list(t.shape)}.")
    grad_enabled = grad_mode.is_grad_enabled()
    out, aux, flat_out, out_spec, pull, _ = run(func, primals, nums, has_aux, api, lift=False,
                                                forward=True)
    for o in flat_out:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(o)}")
    tangent_out = _push(pull, flat_t, grad_enabled, strict, api)
    res = tree_unflatten(tangent_out, out_spec)
    value = detached(out, pull.outside)
    if has_aux:
        return value, res, detached(_only_tensors(aux), pull.outside)
    return value, res


def _push(pull, flat_t, grad_enabled, strict, api):
    """J t for each output, by differentiating <J^T u, t> with respect to u."""
    outs = pull.outs
    us = [zeros(o._data.shape, dtype=o.dtype).requires_grad_(True)
          if o.requires_grad and o.is_floating_point() else None for o, _ in outs]
    pairs = []
    live = [(o, u) for (o, _), u in zip(outs, us) if u is not None]
    if live:
        with grad_mode.enable_grad():
            gs = autograd_grad([o for o, _ in live], [x for x, _ in pull.leaves],
                               [u for _, u in live], create_graph=True, allow_unused=True)
        for g, t, (x, lv) in zip(gs, flat_t, pull.leaves):
            if g is not None and g.requires_grad:
                pairs.append((g, to_graph(t, lv, _leaf_sizes(x, lv, t))))
    if strict and not pairs:
        raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                           "independent of the inputs. This is not allowed with strict=True.")
    live_us = [u for u in us if u is not None]
    jv = [None] * len(live_us)
    if pairs and live_us:
        create = grad_enabled and (pull.outside or any(t.requires_grad for _, t in pairs))
        with grad_mode.enable_grad():
            jv = autograd_grad([g for g, _ in pairs], live_us, [t for _, t in pairs],
                               create_graph=create, allow_unused=True)
        if not create:
            jv = [j.detach() if j is not None else None for j in jv]
    it = iter(jv)
    res = []
    for (o, lv), u in zip(outs, us):
        j = next(it) if u is not None else None
        res.append(from_graph(j, lv) if j is not None else
                   from_graph(o.new_zeros(o._data.shape), lv))
    return res


def _leaf_sizes(x, levels, t):
    shape = x._data.shape
    s = {lv: shape[i] for i, lv in enumerate(levels)}
    s.update(sizes_of(t))
    return s


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian of func with respect to the argument(s) argnums,
    by forward mode (vmap of jvp over the standard basis of the inputs)."""
    @functools.wraps(func, updated=())
    def wrapper(*args):
        nums = _check_argnums(argnums, len(args))
        primals = args[nums[0]] if isinstance(argnums, int) else tuple(args[i] for i in nums)
        flat_p, p_spec = tree_flatten(primals)
        numels = [p.numel() for p in flat_p]
        basis = tree_unflatten(_standard_basis(flat_p, numels), p_spec)

        def push(b):
            res = jvp_with_argnums(func, args, b, argnums, has_aux=has_aux)
            return (res[1], res[2]) if has_aux else res[1]
        results = vmap(push, randomness=randomness)(basis)
        aux = None
        if has_aux:
            results, aux = results
            flat_aux, aux_spec = tree_flatten(aux)
            aux = tree_unflatten([a[0] if isinstance(a, Tensor) else a for a in flat_aux],
                                 aux_spec)
        flat_j, j_spec = tree_flatten(results)
        per_out = []
        for j in flat_j:
            moved = j.permute(tuple(range(1, j.dim())) + (0,)) if j.dim() > 1 else j
            pieces = moved.split(numels, dim=-1)
            per_in = [piece.reshape(tuple(j.shape[1:]) + tuple(p.shape))
                      for piece, p in zip(pieces, flat_p)]
            per_in = tree_unflatten(per_in, p_spec)
            per_out.append(per_in)
        jac = tree_unflatten(per_out, j_spec)
        return (jac, aux) if has_aux else jac
    return wrapper


def _standard_basis(flat, numels):
    """Per tensor, its rows of the identity over all inputs' elements: (N, *shape)."""
    total = sum(numels)
    out, start = [], 0
    for t, n in zip(flat, numels):
        e = zeros((total, n), dtype=t.dtype)
        if n:
            e.diagonal(-start).fill_(1)
        out.append(e.reshape((total,) + tuple(t.shape)))
        start += n
    return out
