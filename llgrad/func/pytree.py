"""The pytrees of torch.func: tuples, lists, dicts and namedtuples are nodes, anything else
(a tensor, a number, None) is a leaf. TreeSpec prints as torch.utils._pytree's does, so
that llgrad.func's error messages about mismatched structures read as torch.func's."""


class TreeSpec:
    """The structure of a pytree: a node type, its context (a dict's keys, a namedtuple's
    class) and its children's specs; a leaf is `LEAF`."""
    __slots__ = ("type", "context", "children", "num_leaves")

    def __init__(self, type_, context, children):
        self.type, self.context, self.children = type_, context, children
        self.num_leaves = sum(c.num_leaves for c in children) if type_ is not None else 1

    def is_leaf(self):
        return self.type is None

    def __eq__(self, other):
        return isinstance(other, TreeSpec) and self.type is other.type and \
            self.context == other.context and self.children == other.children

    def __hash__(self):
        return hash((self.type, len(self.children)))

    def __repr__(self, indent=0):
        if self.type is None:
            return "*"
        name = "namedtuple" if _is_namedtuple_type(self.type) else self.type.__name__
        context = self.context if self.context is not None else None
        out = f"TreeSpec({name}, {context!r}, ["
        if self.children:
            indent += 2
            out += self.children[0].__repr__(indent)
            out += "," if len(self.children) > 1 else ""
            out += ",".join("\n" + " " * indent + c.__repr__(indent) for c in self.children[1:])
        return out + "])"


LEAF = TreeSpec(None, None, [])


def _is_namedtuple_type(t):
    return isinstance(t, type) and issubclass(t, tuple) and hasattr(t, "_fields")


def _children(obj):
    """(node type, context, children) of a node, or None for a leaf."""
    t = type(obj)
    if isinstance(obj, tuple):
        if hasattr(obj, "_fields"):
            return t, t, list(obj)
        return tuple, None, list(obj)
    if isinstance(obj, list):
        return list, None, list(obj)
    if isinstance(obj, dict):
        keys = list(obj)
        return (dict if t is dict else t), keys, [obj[k] for k in keys]
    return None


def tree_flatten(obj):
    """(leaves, TreeSpec)."""
    leaves = []
    return leaves, _flatten(obj, leaves)


def _flatten(obj, leaves):
    node = _children(obj)
    if node is None:
        leaves.append(obj)
        return LEAF
    t, context, kids = node
    return TreeSpec(t, context, [_flatten(k, leaves) for k in kids])


def tree_unflatten(leaves, spec):
    it = iter(leaves)
    return _build(spec, it)


def _build(spec, it):
    if spec.type is None:
        return next(it)
    kids = [_build(c, it) for c in spec.children]
    t = spec.type
    if t is tuple:
        return tuple(kids)
    if t is list:
        return kids
    if _is_namedtuple_type(t):
        return t(*kids)
    return t(zip(spec.context, kids))      # dict, OrderedDict, ...


def tree_leaves(obj):
    return tree_flatten(obj)[0]


def tree_map(fn, obj):
    leaves, spec = tree_flatten(obj)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_to_and_flatten(prefix, spec):
    """The leaves of `prefix` (in_dims, out_dims) broadcast over `spec`'s structure: a leaf of
    prefix stands for every leaf under the matching node. None when the structures differ."""
    node = _children(prefix)
    if node is None:
        return [prefix] * spec.num_leaves
    if spec.type is None:
        return None
    t, context, kids = node
    if t is not spec.type or len(kids) != len(spec.children):
        return None
    if t is not tuple and t is not list and not _is_namedtuple_type(t):
        if set(context) != set(spec.context):
            return None
        kids = [prefix[k] for k in spec.context]
    out = []
    for k, s in zip(kids, spec.children):
        flat = broadcast_to_and_flatten(k, s)
        if flat is None:
            return None
        out += flat
    return out


class _DummyLeaf:
    def __repr__(self):
        return "*"


def treespec_pprint(spec):
    """The structure with `*` for each leaf (torch.utils._pytree.treespec_pprint)."""
    return repr(tree_unflatten([_DummyLeaf() for _ in range(spec.num_leaves)], spec))
