"""llgrad.func.grad, grad_and_value and vjp: torch.func's reverse-mode transforms (the
machinery is autodiff.py). They nest with each other and with vmap and jvp, work under
no_grad (the function runs with grad enabled; a no_grad inside it is respected), never
touch .grad, and take pytrees (tuples, lists, dicts) of tensors as arguments."""
import functools

from ..runtime.tensor import Tensor
from .autodiff import detached, run
from .pytree import tree_flatten, tree_unflatten, treespec_pprint


def _check_argnums(argnums, nargs):
    """The argnums as a tuple of non-negative positions (torch's checks, order and words)."""
    if not isinstance(argnums, (int, tuple)) or isinstance(argnums, bool):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    out = []
    for n in ((argnums,) if isinstance(argnums, int) else argnums):
        if not isinstance(n, int):
            raise RuntimeError(f"argnum must be int, got: {type(n)}")
        if not -nargs <= n < nargs:
            raise RuntimeError(f"Got argnum={n}, but only {nargs} positional inputs")
        out.append(n % nargs)
    if isinstance(argnums, tuple):
        if not out:
            raise RuntimeError("argnums must be non-empty")
        if len(set(out)) != len(out):
            raise RuntimeError(f"argnums elements must be unique, got {tuple(out)}")
    return tuple(out)


def _regroup(flat_grads, specs, argnums):
    """Per-leaf gradients back into each differentiated argument's structure; one argument's
    for an int argnums, a tuple of them for a tuple."""
    out, i = [], 0
    for spec in specs:
        n = spec.num_leaves
        out.append(tree_unflatten(flat_grads[i:i + n], spec))
        i += n
    return out[0] if isinstance(argnums, int) else tuple(out)


def _only_tensors(aux):
    """torch.func's check of an aux output: tensors (in tuples, lists, dicts) only."""
    for x in tree_flatten(aux)[0]:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")
    return aux


def _grad_and_value(func, argnums, has_aux, args, kwargs):
    nums = _check_argnums(argnums, len(args))
    f = functools.partial(func, **kwargs) if kwargs else func
    api = "grad_and_value(f)(*args)"
    out, aux, flat, _, pull, specs = run(f, args, nums, has_aux, api)
    if not isinstance(out, Tensor):
        raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
    if out.dim() != 0:
        raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor "
                           f"with {out.dim()} dims. Maybe you wanted to use the vjp or "
                           "jacrev APIs instead?")
    grads = pull([out.new_ones(())], retain_graph=False)
    g = _regroup(grads, specs, argnums)
    value = detached(out, pull.outside)
    if has_aux:
        return g, (value, detached(_only_tensors(aux), pull.outside))
    return g, value


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: (gradient of func's scalar output with respect to the
    argument(s) argnums, func's value) -- ((gradient, (value, aux)) with has_aux)."""
    @functools.wraps(func, updated=())
    def wrapper(*args, **kwargs):
        return _grad_and_value(func, argnums, has_aux, args, kwargs)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: the gradient of func's scalar output with respect to the
    argument(s) argnums ((gradient, aux) with has_aux)."""
    @functools.wraps(func, updated=())
    def wrapper(*args, **kwargs):
        g, value = _grad_and_value(func, argnums, has_aux, args, kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn) where vjp_fn(cotangents) gives a tuple with
    the gradient of each primal ((output, vjp_fn, aux) with has_aux). vjp_fn can be called
    many times, and under vmap (jacrev does)."""
    return vjp_with_argnums(func, primals, None, has_aux)


def vjp_with_argnums(func, primals, argnums, has_aux, api="vjp(f, *primals)"):
    nums = tuple(range(len(primals))) if argnums is None else _check_argnums(argnums,
                                                                            len(primals))
    out, aux, flat, out_spec, pull, specs = run(func, primals, nums, has_aux, api)
    if not flat:
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output "
                           f"(got output = {out})")
    for o in flat:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(o)}")
        if not o.is_floating_point():
            raise RuntimeError("vjp(f, ...): All outputs of f must be floating-point or "
                               f"complex Tensors, got Tensor with dtype {o.dtype}")

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        flat_ct, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as "
                               "pytree structure of outputs to the function. cotangents: "
                               f"{treespec_pprint(ct_spec)}, primal output: "
                               f"{treespec_pprint(out_spec)}")
        for i, (c, o) in enumerate(zip(flat_ct, flat)):
            if not isinstance(c, Tensor):
                raise RuntimeError(f"{api}: Expected cotangents to only contain Tensors, got "
                                   f"{type(c)}")
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                   f"llgrad.Size({list(c.shape)}) and output[{i}] has a shape "
                                   f"of llgrad.Size({list(o.shape)}).")
        grads = pull(flat_ct, retain_graph=True)
        res = _regroup(grads, specs, argnums if argnums is not None else tuple(nums))
        return res

    value = detached(out, pull.outside)
    if has_aux:
        return value, vjp_fn, detached(_only_tensors(aux), pull.outside)
    return value, vjp_fn
