"""llgrad.utils._pytree against torch.utils._pytree: leaves, specs (their text too),
unflatten, tree_map over several trees, the _only and all / any variants, registered types,
and the errors of mismatched trees."""
import collections

import pytest

import llgrad
import llgrad.utils._pytree as mine

torch = pytest.importorskip("torch")
import torch.utils._pytree as theirs  # noqa: E402

NT = collections.namedtuple("NT", "x y")
TREES = [
    None, 3, [1, 2], (1, [2, (3, None)]), {"b": 1, "a": [2, (3, None)]},
    collections.OrderedDict(z=1, y=(2, 3)), NT(1, [2, {"k": 3}]),
    collections.defaultdict(list, {"p": [1], "q": 2}), collections.deque([1, [2]], maxlen=4),
    [[], {}, ()], {"t": (llgrad.ones(2), "text"), "n": 1.5},
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_flatten_unflatten_as_torch(tree):
    leaves, spec = mine.tree_flatten(tree)
    t_leaves, t_spec = theirs.tree_flatten(tree)
    assert leaves == t_leaves or all(a is b for a, b in zip(leaves, t_leaves))
    assert repr(spec) == repr(t_spec).replace("torch.", "llgrad.") or \
        type(tree).__name__ == "NT"             # (a namedtuple's spec names its class)
    assert (spec.num_leaves, spec.num_nodes) == (t_spec.num_leaves, t_spec.num_nodes)
    back = mine.tree_unflatten(leaves, spec)
    assert type(back) is type(tree) and repr(back) == repr(tree)
    assert mine.tree_leaves(tree) == leaves and mine.tree_structure(tree) == spec


def test_tree_map_and_friends_as_torch():
    tree = {"b": 1, "a": [2, (3, None)], "c": NT(4, 5.0)}
    other = {"a": [20, (30, None)], "b": 10, "c": NT(40, 50.0)}      # (other key order)
    f = lambda x, y=0: None if x is None else x * 2 + (y or 0)  # noqa: E731
    assert mine.tree_map(f, tree, other) == theirs.tree_map(f, tree, other)
    assert mine.tree_map_only(int, lambda x: -x, tree) == \
        theirs.tree_map_only(int, lambda x: -x, tree)
    for lib in (mine, theirs):
        assert lib.tree_all(lambda x: x is None or x > 0, tree)
        assert lib.tree_any(lambda x: x is None, tree)
        assert not lib.tree_all_only(int, lambda x: x > 3, tree)
        assert lib.tree_any_only(float, lambda x: x == 5.0, tree)
    seen = []
    assert mine.tree_map_(seen.append, tree) is tree and seen == mine.tree_leaves(tree)
    batch = {"x": llgrad.ones(2), "y": [llgrad.zeros(1)]}
    moved = mine.tree_map(lambda t: t.to(llgrad.float64), batch)
    assert moved["x"].dtype == llgrad.float64 and moved["y"][0].dtype == llgrad.float64


def test_is_leaf_and_registered_types():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b
    mine.register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda xs, c: Pair(*xs))
    try:
        leaves, spec = mine.tree_flatten([Pair(1, (2, 3)), 4])
        assert leaves == [1, 2, 3, 4]
        back = mine.tree_unflatten([5, 6, 7, 8], spec)
        assert (back[0].a, back[0].b, back[1]) == (5, (6, 7), 8)
        with pytest.raises(ValueError):
            mine.register_pytree_node(Pair, lambda p: ([], None), lambda xs, c: Pair(0, 0))
    finally:
        del mine.SUPPORTED_NODES[Pair]
    assert mine.tree_leaves([(1, 2), 3], is_leaf=lambda x: isinstance(x, tuple)) == [(1, 2), 3]


def test_mismatched_trees_raise_as_torch():
    for lib in (mine, theirs):
        with pytest.raises(ValueError):
            lib.tree_map(lambda a, b: a, [1, 2], [1, 2, 3])
        with pytest.raises(ValueError):
            lib.tree_map(lambda a, b: a, {"a": 1}, {"b": 1})
        with pytest.raises(ValueError):
            lib.tree_unflatten([1], lib.tree_structure([1, 2]))
    assert llgrad.utils._pytree is mine
