"""llgrad.func.vmap: torch.func.vmap's API, arguments, errors and results.

Each call enters a new level: inputs with an in_dim become BatchedTensors (batched.py)
whose ops are batched by the op table's rules (batching.py); the outputs' batch dims are
moved to out_dims. randomness="error" (the default, as in torch) raises on any random draw
inside; "same" draws once for the whole batch; "different" runs the function once per
sample (a draw per sample; the results stacked). chunk_size splits the batch into chunks
run one after the other."""
import functools

from ..runtime import trace_state
from ..runtime.generator import get_rng_state, set_rng_state
from ..runtime.functions import cat, stack
from ..runtime.tensor import Tensor
from . import batching, rules_matrix, rules_nn, rules_shape  # noqa: F401 (rules register)
from . import rules_nn3d  # noqa: F401,E402 (rules of the 3-D convolution and pools)
from . import rules_ctc  # noqa: F401,E402 (ctc_loss and its backward)
from . import per_sample  # noqa: F401,E402 (NumPy-evaluated functions, per sample)
from .batched import BatchedTensor, move_dim, pop_level, push_level, state, unwrap, wrap
from .pytree import broadcast_to_and_flatten, tree_flatten, tree_unflatten


def _name(func):
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap: func mapped over dimension in_dims of its inputs, the results
    stacked along out_dims. in_dims / out_dims are an int, None (not mapped) or a pytree
    matching the inputs / outputs (a leaf stands for its whole subtree)."""
    _check_randomness(randomness)
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got "
                         f"{chunk_size})")

    @functools.wraps(func, updated=())
    def wrapped(*args, **kwargs):
        _check_out_dims(out_dims, func)
        size, flat_dims, flat_args, spec = _process_inputs(in_dims, args, func)
        if chunk_size is not None and chunk_size < size:
            return _chunked(func, size, flat_dims, flat_args, spec, out_dims, randomness,
                            chunk_size, kwargs)
        return _flat_vmap(func, size, flat_dims, flat_args, spec, out_dims, randomness, kwargs)
    return wrapped


def _check_randomness(randomness):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


def _check_out_dims(out_dims, func):
    for d in tree_flatten(out_dims)[0]:
        if d is not None and not isinstance(d, int):
            raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must "
                             "be an int, None or a python collection of ints representing "
                             "where in the outputs the vmapped dimension should appear.")


def _process_inputs(in_dims, args, func):
    name = _name(func)
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` "
                         "to be int or a (potentially nested) tuple matching the structure of "
                         f"inputs, got: {type(in_dims)}.")
    if len(args) == 0:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add "
                         "inputs, or you are trying to vmap over a function with no inputs. "
                         "The latter is unsupported.")
    flat_args, spec = tree_flatten(args)
    flat_dims = broadcast_to_and_flatten(in_dims, spec)
    if flat_dims is None:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                         "compatible with the structure of `inputs`. in_dims has structure "
                         f"{tree_flatten(in_dims)[1]} but inputs has structure {spec}.")
    for i, (arg, d) in enumerate(zip(flat_args, flat_dims)):
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} "
                             "for an input but in_dim must be either an integer dimension or "
                             "None.")
        if isinstance(d, int) and not isinstance(arg, Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} "
                             f"for an input but the input is of type {type(arg)}. We cannot "
                             "vmap over non-Tensor arguments, please use None as the "
                             "respective in_dim")
        if d is not None:
            nd = arg.dim()
            if not -nd <= d < nd:
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got "
                                 f"in_dim={d} for some input, but that input is a Tensor of "
                                 f"dimensionality {nd} so expected in_dim to satisfy "
                                 f"-{nd} <= in_dim < {nd}.")
            flat_dims[i] = d % nd
    sizes = [a.size(d) for a, d in zip(flat_args, flat_dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0], flat_dims, flat_args, spec


def _add_batch_dim(x, d, level):
    """x (possibly batched at outer levels) with logical dim d as the batch dim of level
    (the newest, so the last of its levels)."""
    phys, levels = unwrap(x)
    k = len(levels)
    return wrap(move_dim(phys, k + d, k), levels + (level,))


def _remove_batch_dim(name, x, level, size, out_dim):
    if out_dim is None:
        if type(x) is BatchedTensor and level in x._levels:
            raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                             "when out_dim is None")
        return x
    if not isinstance(x, Tensor):
        raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                         f"{type(x)}. Did you mean to set out_dims= to None for output?")
    phys, levels = unwrap(x)
    nd = x.dim() + 1
    if not -nd <= out_dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                         f"{nd - 1}], but got {out_dim})")
    out_dim %= nd
    if level not in levels:                 # unbatched at this level: expanded, as torch
        y = x.unsqueeze(out_dim)
        shape = list(y.shape)
        shape[out_dim] = size
        return y.expand(shape)
    i = levels.index(level)
    rest = levels[:i] + levels[i + 1:]
    return wrap(move_dim(phys, i, len(rest) + out_dim), rest)


def _flat_out_dims(outputs, out_dims, func):
    """(flat outputs, their spec, one out_dim per flat output), torch's error otherwise."""
    flat, spec = tree_flatten(outputs)
    flat_dims = None
    if isinstance(outputs, Tensor):
        if isinstance(out_dims, int) or out_dims is None:
            flat_dims = [out_dims]
        elif isinstance(out_dims, tuple) and len(out_dims) == 1:
            flat_dims = list(out_dims)
    else:
        flat_dims = broadcast_to_and_flatten(out_dims, spec)
    if flat_dims is None:
        raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is "
                         "not compatible with the structure of `outputs`. out_dims has "
                         f"structure {tree_flatten(out_dims)[1]} but outputs has structure "
                         f"{spec}.")
    return flat, spec, flat_dims


def _unwrap_outputs(outputs, out_dims, level, size, func):
    flat, spec, flat_dims = _flat_out_dims(outputs, out_dims, func)
    name = _name(func)
    return tree_unflatten([_remove_batch_dim(name, x, level, size, d)
                           for x, d in zip(flat, flat_dims)], spec)


def _random_error():
    for _, _, randomness in state.levels:
        if randomness == "error":
            raise RuntimeError("vmap: called random operation while in randomness error mode. "
                               "Please either use the 'same' or 'different' randomness flags "
                               "on vmap or perform the randomness operation out of vmap")


def _flat_vmap(func, size, flat_dims, flat_args, spec, out_dims, randomness, kwargs):
    if randomness == "different":
        return _per_sample(func, size, flat_dims, flat_args, spec, out_dims, kwargs)
    level = push_level(size, randomness)
    trace_state.state.vmap_levels += 1
    batching.install(_random_error)
    try:
        args = tree_unflatten([a if d is None else _add_batch_dim(a, d, level)
                               for a, d in zip(flat_args, flat_dims)], spec)
        out = func(*args, **kwargs)
        return _unwrap_outputs(out, out_dims, level, size, func)
    finally:
        trace_state.state.vmap_levels -= 1
        pop_level(level)
        batching.uninstall()


def _per_sample(func, size, flat_dims, flat_args, spec, out_dims, kwargs):
    """randomness='different': func once per sample (each draws its own numbers). What
    PyTorch's one batched call rejects, and a loop would do silently, raises: a write into
    an input that is not batched (done once per sample), a per-sample result returned
    under out_dims=None."""
    name = _name(func)
    unbatched = [a for a, d in zip(flat_args, flat_dims) if d is None and isinstance(a, Tensor)]
    versions = [a._version for a in unbatched]
    outs = []
    for b in range(size):
        args = tree_unflatten([a if d is None else a.select(d, b)
                               for a, d in zip(flat_args, flat_dims)], spec)
        outs.append(func(*args, **kwargs))
        if any(a._version != v for a, v in zip(unbatched, versions)):
            raise RuntimeError(f"vmap({name}, ..., randomness='different'): `{name}` writes in "
                               "place into an input that is not batched (in_dims None). "
                               "llgrad runs randomness='different' one sample at a time, so "
                               "the write would happen once per sample; pass the input "
                               "batched or write into a copy of it.")
    _, ospec, flat_dims_out = _flat_out_dims(outs[0], out_dims, func)
    columns = list(zip(*[tree_flatten(o)[0] for o in outs]))
    res = []
    for col, d in zip(columns, flat_dims_out):
        if d is None:
            if any(isinstance(c, Tensor) and not _same_value(c, col[0]) for c in col):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                                 "when out_dim is None")
            res.append(col[0])
        elif not isinstance(col[0], Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                             f"{type(col[0])}. Did you mean to set out_dims= to None for "
                             "output?")
        else:
            res.append(stack(col, d))
    return tree_unflatten(res, ospec)


def _same_value(a, b):
    # (NaN where both are NaN counts as the same value)
    return a is b or (tuple(a.shape) == tuple(b.shape) and
                      bool(((a == b) | ((a != a) & (b != b))).all()))


def _chunked(func, size, flat_dims, flat_args, spec, out_dims, randomness, chunk_size, kwargs):
    starts = list(range(0, size, chunk_size))
    rng = get_rng_state() if randomness == "same" else None
    results = []
    for s in starts:
        n = min(chunk_size, size - s)
        chunk = [a if d is None else a.narrow(d, s, n) for a, d in zip(flat_args, flat_dims)]
        if rng is not None:
            set_rng_state(rng)
        results.append(_flat_vmap(func, n, flat_dims, chunk, spec, out_dims, randomness,
                                  kwargs))
    _, ospec, flat_out = _flat_out_dims(results[0], out_dims, func)
    columns = list(zip(*[tree_flatten(r)[0] for r in results]))
    out = [col[0] if d is None else cat(col, d) for col, d in zip(columns, flat_out)]
    return tree_unflatten(out, ospec)

