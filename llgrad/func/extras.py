"""The rest of torch.func: stack_module_state (ensembling with vmap),
replace_all_batch_norm_modules_, linearize, functionalize and debug_unwrap."""
import functools

from ..runtime.functions import stack
from .batched import BatchedTensor
from .forward import jvp
from .autodiff import detached
from .pytree import tree_flatten


def stack_module_state(models):
    """(params, buffers): each name's tensors of the models (all of one class, all in one
    mode) stacked along a new dim 0; stacked parameters are new leaves that require grad."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors, name):
        grads = [t.requires_grad for t in tensors]
        if any(grads) and not all(grads):
            raise RuntimeError(f"Expected {name} from each model to have the same "
                               ".requires_grad")
        out = stack(list(tensors))
        return out.detach().requires_grad_() if all(grads) else out
    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    params = {k: stacked([p[k] for p in all_params], k) for k in all_params[0]}
    buffers = {k: stacked([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers


def replace_all_batch_norm_modules_(root):
    """In place: every batch norm module in root stops tracking running statistics (so that
    vmap can map it: each sample normalised by its own batch statistics)."""
    for m in root.modules():
        if hasattr(m, "running_mean") and getattr(m, "track_running_stats", False):
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None
            m.track_running_stats = False
    return root


def linearize(func, *primals):
    """(func(*primals), jvp_fn): jvp_fn(*tangents) is the Jacobian at primals times the
    tangents (each call runs jvp again; the values are torch's). As PyTorch's, the output
    stays in the graph of the primals and jvp_fn's Jacobian is a constant (PyTorch traces
    it once with the primals' values folded in): a gradient through it reaches the tangents,
    not the primals (a tensor func closes over still gets one: see test_adversary_s74_g)."""
    output = func(*primals)
    fixed = detached(primals, False)

    def jvp_fn(*tangents):
        _check_tangents(primals, tangents)
        return jvp(func, fixed, tangents)[1]
    return output, jvp_fn


def _check_tangents(primals, tangents):
    """PyTorch's linearize checks: the tangents' pytree, shapes and dtypes are the primals'."""
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if t_spec != p_spec:
        raise RuntimeError(f"Expected the tangents {t_spec} to have the same argspec as the "
                           f"primals {p_spec}")
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"tangent:{i} with shape {t.shape} in flattened pytree doesn't "
                               f"match the shape {p.shape} of the corresponding primal.")
        if p.dtype != t.dtype:
            raise RuntimeError(f"tangent:{i} with dtype {t.dtype} in flattened pytree doesn't "
                               f"match the dtype {p.dtype} of the corresponding primal.")


def functionalize(func, *, remove="mutations"):
    """func itself, as a function: llgrad's eager mode already gives the observable results
    of the functionalized program (llgrad.compile functionalises what it traces)."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument "
                           f"for remove={remove}. Valid options are:\n"
                           "     remove='mutations': all inplace and out= operators will be "
                           "removed from the program, and replaced with their out-of-place "
                           "equivalents.\n"
                           "     remove='mutations_and_views': In addition to the above, all "
                           "aliasing operators {view} will be replaced with their non-aliasing "
                           "counterparts, {view}_copy.\n")

    @functools.wraps(func, updated=())
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper


def debug_unwrap(tensor, *, recurse=True):
    """A batched tensor's physical value (its batch dims first), for debugging."""
    if type(tensor) is BatchedTensor:
        return tensor._phys
    return tensor
