"""The package's imports point one way, as DESIGN.md orders the layers, with no circles
between files and no llgrad import hidden inside a function, read from the code itself
(every module's `import` statements, walked with ast).

    ir                      the op table, graphs, passes, the interpreter (nothing else)
    runtime                 eager autograd                                  (ir)
    tracer   codegen        tracing (ir, runtime); native code (ir)
    compile                 llgrad.compile and the transforms       (all of the above)
    nn optim utils ...      on top

An import inside a function is allowed only for what loads LLVM (llvmlite: codegen, from
the layers that may use it) or the source rewrite of control flow (astunparse): heavy
dependencies loaded on first use, on purpose, so `import llgrad` stays quick."""
import ast
import pathlib

import llgrad

ROOT = pathlib.Path(llgrad.__file__).parent
# layer of each top-level part (files directly under llgrad/ are the package's face: top)
LAYERS = {"version": 0, "ir": 1, "runtime": 2, "tracer": 3, "codegen": 3, "compile": 4}
TOP = 5
ALLOWED_SIDEWAYS = {("tracer", "codegen"): False, ("codegen", "tracer"): False,
                    ("codegen", "runtime"): False}
# llvmlite (codegen), astunparse and the source rewrite (tracer.convert: ~5 ms of import)
LAZY_TARGETS = ("llgrad.codegen", "llgrad.tracer.convert")


def _modules():
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(name, path):
    """[(target module, line, at top level)] of a module's llgrad imports."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_pkg else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            if t.startswith("llgrad"):
                found.append((t, node.lineno, id(node) in top))
    return found


def _part(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else ""


def _layer(module):
    part = _part(module)
    return LAYERS.get(part, TOP)


def _graph():
    mods = _modules()
    return mods, {name: [(t, line, top) for t, line, top in _imports(name, path) if t in mods]
                  for name, path in mods.items()}


def test_imports_point_down_the_layers():
    mods, graph = _graph()
    bad = []
    for name, deps in graph.items():
        for target, line, _ in deps:
            a, b = _part(name), _part(target)
            if a == b or target == "llgrad" and name.startswith("llgrad.__main__"):
                continue
            if _layer(target) > _layer(name) or \
                    (_layer(target) == _layer(name) and a != b and a in LAYERS):
                bad.append(f"{mods[name].relative_to(ROOT.parent)}:{line} imports {target}")
    assert not bad, "imports pointing up (or sideways between layers):\n" + "\n".join(bad)


def test_no_import_hidden_in_a_function():
    mods, graph = _graph()
    bad = [f"{mods[name].relative_to(ROOT.parent)}:{line} imports {target} inside a function"
           for name, deps in graph.items() for target, line, top in deps
           if not top and not target.startswith(LAZY_TARGETS)
           and not name.startswith(("llgrad.__main__", "llgrad.demo"))]
    assert not bad, "\n".join(bad)


def test_no_circles_between_files():
    _, graph = _graph()
    edges = {n: {t for t, _, _ in deps if t != n and not t.startswith(n + ".")
                 and not n.startswith(t + ".")} for n, deps in graph.items()}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):           # Tarjan's strongly connected components (the graph is small)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))
    for v in list(edges):
        if v not in index:
            visit(v)
    assert not cycles, f"import circles: {cycles}"


def test_files_stay_short():
    """Each of the package's files does one job in at most 400 lines (DESIGN.md)."""
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, f"files over 400 lines: {long}"
