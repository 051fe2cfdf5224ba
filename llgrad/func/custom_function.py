"""autograd.Function under vmap, as torch.func runs it: the Function needs a vmap staticmethod
or generate_vmap_rule=True (and setup_context, checked in Function.apply).

A vmap staticmethod gets the arguments with the innermost batched level's dim in front
(in_dims: 0, or None for an argument not batched there) and returns (outputs, out_dims); the
autograd graph is that of the ops it runs.

generate_vmap_rule=True: while nothing needs a gradient, forward simply runs on the batched
tensors. Otherwise the call becomes one node at the graph level (autograd lives on physical
values), of a Function named Vmapped<Name> as in PyTorch: its forward runs the user's forward
and setup_context on the batched arguments, its outputs and saved tensors are their physical
values with a leading dim for each batched level; its backward runs the user's backward
vmapped over those dims."""
from collections import namedtuple

from ..runtime import autograd_function, grad_mode
from ..runtime.autograd_function import Function, FunctionCtx
from ..runtime.tensor import Tensor
from .batched import BatchedTensor, active_levels, align, sizes_of, state, wrap
from .pytree import broadcast_to_and_flatten, tree_flatten, tree_unflatten
from .vmap import _add_batch_dim, _remove_batch_dim, vmap

VmapInfo = namedtuple("VmapInfo", ["batch_size", "randomness"])

_DOCS = " For more details, please see https://pytorch.org/docs/main/notes/extending.func.html"


def batched_apply(cls, args, kwargs):
    """cls.apply(*args, **kwargs) under vmap; NotImplemented where no argument is batched
    (or nothing needs a gradient, with a generated rule): then apply runs it as usual."""
    levels = sorted({lv for a in args if type(a) is BatchedTensor for lv in a._levels})
    if not levels:
        return NotImplemented
    rule = getattr(cls, "vmap", None)
    generate = getattr(cls, "generate_vmap_rule", False)
    if generate and rule is not None:
        raise RuntimeError(f"You tried to vmap over {cls.__name__}, but it has both "
                           "generate_vmap_rule=True and an overridden vmap staticmethod. Please "
                           "set generate_vmap_rule=False or delete the overridden vmap "
                           "staticmethod to avoid ambiguity." + _DOCS)
    if rule is not None:
        return _by_rule(cls, rule, args, kwargs, levels[-1])
    if not generate:
        raise RuntimeError(f"You tried to vmap over {cls.__name__}, but it does not have vmap "
                           "support. Please override and implement the vmap staticmethod or "
                           "set generate_vmap_rule=True." + _DOCS)
    if not (grad_mode.is_grad_enabled() and
            any(isinstance(a, Tensor) and a.requires_grad for a in args)):
        return NotImplemented
    sizes = dict(active_levels())
    for a in args:
        sizes.update(sizes_of(a))
    call = _Call(cls, args, kwargs, tuple(levels), tuple(sizes[lv] for lv in levels))
    phys = [call.physical(a) if isinstance(a, Tensor) else a for a in args]
    outs = _vmapped(cls, len(levels)).apply(call, *phys)
    outs = tuple(wrap(o, call.levels) if isinstance(o, Tensor) else o for o in outs)
    return outs[0] if call.single else outs


def _by_rule(cls, rule, args, kwargs, level):
    size, randomness = next((n, r) for lv, n, r in state.levels if lv == level)
    in_dims = tuple(0 if type(a) is BatchedTensor and level in a._levels else None
                    for a in args)
    inner = [a if d is None else _remove_batch_dim(cls.__name__, a, level, size, 0)
             for a, d in zip(args, in_dims)]
    res = rule(VmapInfo(size, randomness), in_dims, *inner, **kwargs)
    if not (isinstance(res, tuple) and len(res) == 2):
        raise RuntimeError(f"{cls.__name__}.vmap must return a tuple of (output, out_dims); "
                           f"got {type(res).__name__}")
    out, out_dims = res
    flat, spec = tree_flatten(out)
    dims = [out_dims] if isinstance(out, Tensor) and isinstance(out_dims, int) else \
        broadcast_to_and_flatten(out_dims, spec)
    if dims is None:
        raise RuntimeError(f"{cls.__name__}.vmap: out_dims={out_dims} does not match the "
                           "structure of the outputs")
    return tree_unflatten([o if d is None or not isinstance(o, Tensor) else
                           _add_batch_dim(o, d, level) for o, d in zip(flat, dims)], spec)


class _InnerCtx(FunctionCtx):
    """The ctx the user's setup_context and backward see under a generated vmap rule."""

    def __init__(self, needs):
        self.to_save = self.dirty_tensors = self.non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = needs
        self.samples = ()

    @property
    def saved_tensors(self):
        return tuple(self.samples)


class _Call:
    """One call of a Function with a generated vmap rule: the batched arguments, the levels
    (sorted) and their sizes, and what forward left for backward."""

    def __init__(self, cls, args, kwargs, levels, sizes):
        self.cls, self.args, self.kwargs, self.levels, self.sizes = \
            cls, args, kwargs, levels, sizes
        self.ctx = _InnerCtx(tuple(isinstance(a, Tensor) and a.requires_grad for a in args))
        self.single, self.saved, self.nondiff = False, (), ()

    def physical(self, x):
        """x's physical value with a leading dim for each level (expanded where x lacks
        one)."""
        return align(x, self.levels, self.sizes)

    def forward(self):
        out = self.cls.forward(*self.args, **self.kwargs)
        ctx = self.ctx
        self.cls.setup_context(ctx, self.args, out)
        if ctx.dirty_tensors:
            raise RuntimeError(f"vmap over {self.cls.__name__}: mark_dirty is not supported "
                               "with generate_vmap_rule=True by llgrad")
        self.single = not isinstance(out, tuple)
        outs = (out,) if self.single else out
        phys = {id(o): self.physical(o) for o in outs if isinstance(o, Tensor)}
        for t in ctx.to_save:
            if isinstance(t, Tensor) and id(t) not in phys:
                phys[id(t)] = self.physical(t)
        self.saved = tuple(None if t is None else phys[id(t)] for t in ctx.to_save)
        self.nondiff = tuple(phys[id(t)] for t in ctx.non_differentiable if id(t) in phys)
        return tuple(phys[id(o)] if isinstance(o, Tensor) else o for o in outs)

    def backward(self, saved, grads):
        cls, ctx, nones = self.cls, self.ctx, []

        def per_sample(samples, gs):
            ctx.samples = samples
            res = cls.backward(ctx, *gs)
            res = res if isinstance(res, tuple) else (res,)
            nones[:] = [r is None for r in res]
            return tuple(r for r in res if r is not None)

        fn = per_sample
        dims = (tuple(None if s is None else 0 for s in saved),
                tuple(None if g is None else 0 for g in grads))
        for _ in self.levels:
            fn = vmap(fn, in_dims=dims)
        got = iter(fn(tuple(saved), tuple(grads)))
        res = [None if none else next(got) for none in nones]
        return tuple(res[:len(self.args)])


def _vmapped(cls, k):
    """The Function that records a generated-rule call of cls over k levels, named as
    PyTorch's (which peels one level at a time): Vmapped<Name>, VmappedVmapped<Name>, ..."""
    made = cls.__dict__.get("_llgrad_vmapped")
    if made is None:
        made = {}
        setattr(cls, "_llgrad_vmapped", made)
    if k in made:
        return made[k]

    def forward(call, *phys):
        return call.forward()

    def setup_context(ctx, inputs, output):
        call = ctx.call = inputs[0]
        ctx.save_for_backward(*call.saved)
        ctx.mark_non_differentiable(*call.nondiff)
        ctx.set_materialize_grads(call.ctx.materialize_grads)

    def backward(ctx, *grads):
        return (None,) + ctx.call.backward(ctx.saved_tensors, grads)

    made[k] = type("Vmapped" * k + cls.__name__, (Function,), {
        "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward)})
    return made[k]


autograd_function.batched_apply = batched_apply
