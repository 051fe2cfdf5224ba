"""llgrad.func.jacrev and hessian. jacrev is vjp plus vmap of vjp_fn over the standard
basis of the outputs (the backward runs once, batched over the basis; chunk_size splits the
basis); hessian is jacfwd of jacrev, forward over reverse, as torch.func has it."""
import functools

from ..runtime.creation import zeros
from ..runtime.functions import cat
from .forward import jacfwd
from .grad import _check_argnums, vjp_with_argnums
from .pytree import tree_flatten, tree_unflatten
from .vmap import vmap


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: the Jacobian of func with respect to the argument(s) argnums, by
    reverse mode. For outputs o and inputs x (pytrees), result[o][x] has shape
    o.shape + x.shape."""
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func, updated=())
    def wrapper(*args):
        nums = _check_argnums(argnums, len(args))
        res = vjp_with_argnums(func, args, argnums, has_aux)
        output, vjp_fn = res[0], res[1]
        flat_out, out_spec = tree_flatten(output)
        numels = [o.numel() for o in flat_out]
        primals = args[nums[0]] if isinstance(argnums, int) else tuple(args[i] for i in nums)
        flat_p, p_spec = tree_flatten(primals)
        total = sum(numels)
        step = total if chunk_size is None else chunk_size
        chunks = []
        for start in range(0, total, max(step, 1)):
            n = min(step, total - start)
            basis = tree_unflatten(_basis_rows(flat_out, numels, start, n), out_spec)
            if chunk_size == 1:
                rows = vjp_fn(tree_unflatten([b[0] for b in tree_flatten(basis)[0]],
                                             out_spec))
                rows = [r.unsqueeze(0) for r in tree_flatten(rows)[0]]
            else:
                rows = tree_flatten(vmap(vjp_fn)(basis))[0]
            chunks.append(rows)
        if not chunks:          # (no output elements: no rows, as torch's empty Jacobian)
            chunks = [[zeros((0,) + tuple(p.shape), dtype=p.dtype) for p in flat_p]]
        per_in = [cat([c[i] for c in chunks], 0) if len(chunks) > 1 else chunks[0][i]
                  for i in range(len(flat_p))]
        split = [r.split(numels, 0) for r in per_in]
        per_out = []
        for j, o in enumerate(flat_out):
            jac = [split[i][j].reshape(tuple(o.shape) + tuple(p.shape))
                   for i, p in enumerate(flat_p)]
            per_out.append(tree_unflatten(jac, p_spec))
        jac = tree_unflatten(per_out, out_spec)
        return (jac, res[2]) if has_aux else jac
    return wrapper


def _basis_rows(flat_out, numels, start, n):
    """Rows start..start+n of the identity over all outputs' elements, split per output as
    (n, *output.shape)."""
    out, offset = [], 0
    for o, m in zip(flat_out, numels):
        e = zeros((n, m), dtype=o.dtype)
        lo, hi = max(start, offset), min(start + n, offset + m)
        if lo < hi:
            e.diagonal(start - offset).fill_(1)
        out.append(e.reshape((n,) + tuple(o.shape)))
        offset += m
    return out


def hessian(func, argnums=0):
    """torch.func.hessian: jacfwd(jacrev(func, argnums), argnums)."""
    return jacfwd(jacrev(func, argnums), argnums)
