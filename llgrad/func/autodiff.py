"""The reverse-mode core of grad, vjp and jvp: differentiable copies of the inputs, the
function run under enable_grad, and pullbacks through llgrad's autograd engine.

Everything is differentiated at the *graph level*: the physical values of BatchedTensors,
whose batch dims are ordinary dims there. An input is lifted to every vmap level active
when the transform is entered (an expanded view: each sample gets its own copy), so that
the gradient of a batched output is each sample's own (vmap(grad(f)) gives per-sample
gradients, even for an input mapped with in_dim None). A cotangent batched over a level
the graph does not have (vmap(vjp_fn) in jacrev, a tangent in jacfwd) stays a
BatchedTensor there, and the engine runs the VJP rules batched. Results are converted
back to logical tensors.

The transforms are functional: they never touch .grad, and results are detached unless
the computation reached a tensor that requires grad outside the transform (an enclosing
transform's input, a parameter the function closes over), in which case the gradient is
computed with create_graph and stays differentiable, as torch.func's does."""
from ..ir import OPS
from ..runtime import grad_mode, trace_state
from ..runtime.autograd_api import grad as autograd_grad
from ..runtime.dispatch import call
from ..runtime.node import AccumulateGrad, Node
from ..runtime.tensor import Tensor
from .batched import active_levels, align, sizes_of, unwrap, wrap
from .pytree import tree_flatten, tree_unflatten


def seq_now():
    """A backward-node sequence number: nodes made later have larger ones."""
    return Node()._seq


def reaches_outside(roots, leaves, seq0):
    """Whether the graph of roots reaches a tensor that requires grad and was not made
    here (a node older than seq0, or a leaf not in leaves)."""
    ours = {id(x) for x in leaves}
    stack = [t.grad_fn for t in roots if isinstance(t, Tensor) and t.grad_fn is not None]
    seen = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if type(n) is AccumulateGrad:
            v = n.variable
            if v is None or id(v) not in ours:
                return True
            continue
        if n._seq < seq0:
            return True
        stack.extend(c for c, _ in n.next_functions if c is not None)
    return False


def arrange(x, order, sizes):
    """x's physical value with leading dims for the levels in `order` (any order; a level x
    lacks is expanded to sizes[level]), then x's logical dims."""
    have = unwrap(x)[1]
    union = tuple(sorted(set(have) | set(order)))
    p = align(x, union, tuple(sizes[lv] for lv in union))
    perm = [union.index(lv) for lv in order]
    if perm != list(range(len(order))):
        k = len(union)
        p = p.permute(perm + list(range(k, p._data.ndim)))
    return p


def make_leaf(x, lift=True):
    """(a differentiable copy of x at the graph level, its levels, the leaf it is made from).
    With lift, x gets every active vmap level where it is unbatched: an expanded view of a
    fresh leaf, the gradient taken at the view, so that it is per sample (not summed) and
    nothing is copied."""
    if not isinstance(x, Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
    phys, have = unwrap(x)
    if phys.requires_grad:
        base = call(OPS["alias"], (phys,), {})      # a node of its own, attached outside
    else:
        base = phys.detach().requires_grad_(True)
    levels = have
    if lift:
        sizes = dict(active_levels())
        sizes.update(sizes_of(x))
        levels = tuple(sorted(set(have) | set(sizes)))
        if levels != have:
            return (align(wrap(base, have), levels, tuple(sizes[lv] for lv in levels)), levels,
                    base)
    return base, levels, base


def to_graph(ct, levels, sizes):
    """A cotangent (or tangent) ct as the graph level sees a value with batch levels
    `levels`: those levels become leading dims; levels of ct the value lacks stay batched."""
    _, have = unwrap(ct)
    extra = tuple(lv for lv in have if lv not in levels)
    allsizes = dict(sizes)
    allsizes.update(sizes_of(ct))
    return wrap(arrange(ct, extra + tuple(levels), allsizes), extra)


def from_graph(g, levels):
    """A graph-level result whose leading (logical) dims are the levels `levels`, as a
    logical tensor batched over those and whatever g is batched over. A level both batched
    and a leading dim (a cotangent mapped over a level its output lacks) takes the diagonal:
    sample b's value is sample b's."""
    phys, extra = unwrap(g)
    labels = list(extra) + list(levels)
    for lv in extra:
        if lv in levels:
            i, j = labels.index(lv), len(labels) - 1 - labels[::-1].index(lv)
            phys = phys.diagonal(0, i, j)                   # the level's dim goes last
            order = list(range(phys._data.ndim))
            order.insert(i, order.pop())
            phys = phys.permute(order)
            labels.pop(j)
    k = len(labels)
    target = sorted(labels)
    perm = [labels.index(lv) for lv in target]
    if perm != list(range(k)):
        phys = phys.permute(perm + list(range(k, phys._data.ndim)))
    return wrap(phys, tuple(target))


class Pullback:
    """The state of one differentiated run: leaves, outputs (graph level) and whether the
    result must stay attached to an outer graph."""

    def __init__(self, leaves, outs, outside, grad_enabled):
        self.leaves, self.outs = leaves, outs         # [(tensor, levels)]
        self.outside, self.grad_enabled = outside, grad_enabled

    def __call__(self, cotangents, retain_graph=True):
        """Gradients (logical) of the leaves, given one cotangent per output."""
        cts = [to_graph(c, lv, _sizes(o, lv, c)) for c, (o, lv) in zip(cotangents, self.outs)]
        create = self.grad_enabled and (self.outside or any(c.requires_grad for c in cts))
        pairs = [(o, c) for (o, _), c in zip(self.outs, cts) if o.requires_grad]
        grads = [None] * len(self.leaves)
        if pairs:
            with grad_mode.enable_grad():
                grads = autograd_grad([o for o, _ in pairs], [x for x, _ in self.leaves],
                                      [c for _, c in pairs], retain_graph=retain_graph or create,
                                      create_graph=create, allow_unused=True)
        out = []
        for g, (x, lv) in zip(grads, self.leaves):
            if g is None:
                g = x.new_zeros(x._data.shape)
            out.append(from_graph(g, lv))       # (without create_graph: no history)
        return out


def _sizes(o, levels, c):
    shape = o._data.shape
    s = {lv: shape[i] for i, lv in enumerate(levels)}
    s.update(sizes_of(c))
    return s


def run(func, args, diff_pos, has_aux, api, lift=True, forward=False):
    """func(*args) with the args at diff_pos (pytrees) replaced by differentiable copies.
    -> (output, aux, flat graph-level outputs [(tensor, levels)], output spec, Pullback,
    the diff args' spec)."""
    grad_enabled = grad_mode.is_grad_enabled()
    seq0 = seq_now()
    args = list(args)
    leaves, specs = [], []
    with grad_mode.enable_grad(), _Transform(forward):
        bases = []
        for i in diff_pos:
            flat, spec = tree_flatten(args[i])
            made = [make_leaf(x, lift) for x in flat]
            leaves += [(t, lv) for t, lv, _ in made]
            bases += [b for _, _, b in made]
            specs.append(spec)
            args[i] = tree_unflatten([wrap(t, lv) for t, lv, _ in made], spec)
        out = func(*args)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) "
                               "if has_aux is True")
        out, aux = out
    flat_out, out_spec = tree_flatten(out)
    outs = [unwrap(o) if isinstance(o, Tensor) else (o, ()) for o in flat_out]
    outside = reaches_outside([o for o, _ in outs] + tree_flatten(aux)[0], bases, seq0)
    pull = Pullback(leaves, outs, outside, grad_enabled)
    return out, aux, flat_out, out_spec, pull, specs


class _Transform:
    """While a transform runs its function (an autograd.Function there needs
    setup_context, and under jvp a jvp staticmethod, as in torch.func)."""

    def __init__(self, forward):
        self.forward = forward

    def __enter__(self):
        st = trace_state.state
        st.func_transforms += 1
        st.func_jvps += self.forward

    def __exit__(self, *exc):
        st = trace_state.state
        st.func_transforms -= 1
        st.func_jvps -= self.forward


def detached(tree, keep):
    """tree with its tensors detached from the graph made here (kept as they are when the
    result must stay attached outside)."""
    if keep:
        return tree
    flat, spec = tree_flatten(tree)
    return tree_unflatten([x.detach() if isinstance(x, Tensor) else x for x in flat], spec)
