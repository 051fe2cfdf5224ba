"""torch.utils._pytree's public functions: nested containers (tuple, list, dict, namedtuple,
OrderedDict, defaultdict, deque and the types registered with register_pytree_node) as a
flat list of leaves and a TreeSpec that builds the container back. Everything else is a
leaf, None included; dict keys keep their insertion order."""
import collections

__all__ = ["LeafSpec", "TreeSpec", "register_pytree_node", "tree_all", "tree_all_only",
           "tree_any", "tree_any_only", "tree_flatten", "tree_iter", "tree_leaves", "tree_map",
           "tree_map_", "tree_map_only", "tree_map_only_", "tree_structure", "tree_unflatten",
           "treespec_pprint"]


class _Node:
    __slots__ = ("flatten", "unflatten")

    def __init__(self, flatten, unflatten):
        self.flatten, self.unflatten = flatten, unflatten


def _namedtuple(t):
    return list(t), type(t)


SUPPORTED_NODES = {
    tuple: _Node(lambda t: (list(t), None), lambda xs, c: tuple(xs)),
    list: _Node(lambda t: (list(t), None), lambda xs, c: list(xs)),
    dict: _Node(lambda d: (list(d.values()), list(d)), lambda xs, c: dict(zip(c, xs))),
    collections.OrderedDict: _Node(lambda d: (list(d.values()), list(d)),
                                   lambda xs, c: collections.OrderedDict(zip(c, xs))),
    collections.defaultdict: _Node(
        lambda d: (list(d.values()), [d.default_factory, list(d)]),
        lambda xs, c: collections.defaultdict(c[0], zip(c[1], xs))),
    collections.deque: _Node(lambda d: (list(d), d.maxlen),
                             lambda xs, c: collections.deque(xs, maxlen=c)),
}


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                         to_dumpable_context=None, from_dumpable_context=None,
                         flatten_with_keys_fn=None):
    """As torch.utils._pytree.register_pytree_node: instances of cls are nodes;
    flatten_fn(x) -> (children, context), unflatten_fn(children, context) -> x."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = _Node(flatten_fn, unflatten_fn)


def _node_type(x):
    t = type(x)
    if t in SUPPORTED_NODES:
        return t
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return "namedtuple"
    return None


class TreeSpec:
    """A container's kind (type), what else it needs to be rebuilt (context: dict keys,
    a namedtuple's class, ...) and its children's specs."""

    def __init__(self, type, context, children_specs):
        self.type, self.context, self.children_specs = type, context, list(children_specs)
        self.num_leaves = sum(c.num_leaves for c in self.children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)
        self.num_children = len(self.children_specs)

    def is_leaf(self):
        """Whether this spec is a leaf's."""
        return False

    def unflatten(self, leaves):
        """The container this spec describes, with these leaves."""
        return tree_unflatten(leaves, self)

    def __eq__(self, other):
        return type(other) is type(self) and (self.type, self.context, self.children_specs) \
            == (other.type, other.context, other.children_specs)

    def __hash__(self):
        return hash((self.type, self.num_nodes))

    def __repr__(self, indent=0):
        name = self.type.__name__
        text = f"TreeSpec({name}, {self.context}, ["
        if self.children_specs:
            indent += 2
            parts = [self.children_specs[0].__repr__(indent)] + \
                ["\n" + " " * indent + c.__repr__(indent) for c in self.children_specs[1:]]
            text += ",".join(parts)
        return text + "])"


class LeafSpec(TreeSpec):
    """The spec of a leaf (printed *)."""

    def __init__(self):
        super().__init__(None, None, [])
        self.num_leaves, self.num_nodes = 1, 1

    def is_leaf(self):
        """True."""
        return True

    def __repr__(self, indent=0):
        return "*"


def tree_flatten(tree, is_leaf=None):
    """(leaves, TreeSpec) of tree, leaves in depth-first order."""
    leaves = []

    def walk(x):
        kind = None if is_leaf is not None and is_leaf(x) else _node_type(x)
        if kind is None:
            leaves.append(x)
            return LeafSpec()
        if kind == "namedtuple":
            children, context, kind = list(x), type(x), type(x)
        else:
            children, context = SUPPORTED_NODES[kind].flatten(x)
        return TreeSpec(kind, context, [walk(c) for c in children])
    spec = walk(tree)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    """The container treespec describes, filled with leaves."""
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but "
                         f"the spec refers to a pytree that holds {treespec.num_leaves} items "
                         f"({treespec}).")
    it = iter(leaves)

    def build(spec):
        if spec.is_leaf():
            return next(it)
        children = [build(c) for c in spec.children_specs]
        if spec.type in SUPPORTED_NODES:
            return SUPPORTED_NODES[spec.type].unflatten(children, spec.context)
        return spec.context(*children)      # (a namedtuple)
    return build(treespec)


def tree_leaves(tree, is_leaf=None):
    """The leaves of tree."""
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    """An iterator over the leaves of tree."""
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree, is_leaf=None):
    """The TreeSpec of tree."""
    return tree_flatten(tree, is_leaf)[1]


def treespec_pprint(treespec):
    """The spec as text, leaves as *."""
    return repr(treespec)


def tree_map(func, tree, *rests, is_leaf=None):
    """A container of tree's shape with func(leaf, *the rests' leaves) at each leaf."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_leaves_as(spec, r) for r in rests]
    return tree_unflatten(map(func, leaves, *others), spec)


def _leaves_as(spec, tree):
    """tree's leaves, for a tree with spec's structure (as a prefix)."""
    if spec.is_leaf():
        return [tree]
    kind = _node_type(tree)
    kind = type(tree) if kind == "namedtuple" else kind
    if kind != spec.type:
        raise ValueError(f"Node type mismatch; expected {spec.type}, but got {type(tree)}.")
    if kind in (dict, collections.OrderedDict, collections.defaultdict):    # (by key)
        keys = spec.context[1] if kind is collections.defaultdict else spec.context
        if set(keys) != set(tree):
            raise ValueError(f"Node keys mismatch; expected {keys}, but got {list(tree)}.")
        children = [tree[k] for k in keys]
    else:
        children = list(tree) if kind is spec.context else SUPPORTED_NODES[kind].flatten(tree)[0]
    if len(children) != spec.num_children:
        raise ValueError(f"Node arity mismatch; expected {spec.num_children}, but got "
                         f"{len(children)}.")
    return [leaf for c, s in zip(children, spec.children_specs) for leaf in _leaves_as(s, c)]


def tree_map_(func, tree, *rests, is_leaf=None):
    """func at each leaf for its effect (in-place ops); tree itself is returned."""
    leaves, spec = tree_flatten(tree, is_leaf)
    for args in zip(leaves, *[_leaves_as(spec, r) for r in rests]):
        func(*args)
    return tree


def _only(types, func):
    types = types if isinstance(types, tuple) else (types,)
    return lambda x: func(x) if isinstance(x, types) else x


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """tree_map of func over the leaves that are instances of type_or_types (others kept)."""
    return tree_map(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func, tree, is_leaf=None):
    """tree_map_ of func over the leaves that are instances of type_or_types."""
    return tree_map_(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    """Whether pred holds at every leaf."""
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    """Whether pred holds at some leaf."""
    return any(map(pred, tree_leaves(tree, is_leaf)))


def tree_all_only(type_or_types, pred, tree, is_leaf=None):
    """Whether pred holds at every leaf that is an instance of type_or_types."""
    return all(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred, tree, is_leaf=None):
    """Whether pred holds at some leaf that is an instance of type_or_types."""
    return any(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))
