"""The autograd engine's look at a graph before it runs: how many edges point at each node,
and which nodes must run for gradients to reach the inputs asked for."""


def _collect(root_nodes):
    """Count, for every node reachable from the roots, the edges that point at it."""
    deps = {}
    roots = set(root_nodes)
    stack = list(root_nodes)
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is not None:
                if child in deps:
                    deps[child] += 1
                else:
                    deps[child] = 1
                    # (a node with no edges, a leaf's, has nothing to visit; a root is
                    # on the stack already)
                    if child.next_functions and child not in roots:
                        stack.append(child)
    return deps


def _needed(nodes, targets):
    """Nodes that must run so that gradients reach a target: those with a path to one."""
    needed = {}
    for start in nodes:
        if start in needed:
            continue
        stack = [(start, iter(start.next_functions))]
        on_path = {start}
        while stack:
            node, it = stack[-1]
            for child, _ in it:
                if child is None or child in needed or child in on_path:
                    continue
                if not child.next_functions:    # a leaf's node: nothing is behind it
                    needed[child] = False
                    continue
                on_path.add(child)
                stack.append((child, iter(child.next_functions)))
                break
            else:
                stack.pop()
                reaches = False         # (a loop, not any() over a generator: per node)
                for c, _ in node.next_functions:
                    if c is not None and (c in targets or needed.get(c, False)):
                        reaches = True
                        break
                needed[node] = reaches
    return needed
