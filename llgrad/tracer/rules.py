"""Static analyses of a function's AST for the control-flow conversion (convert.py): which
names a block assigns, which it reads, which it may read before assigning them, where it
returns, what in it cannot be converted (and, from its bytecode, whether it has anything to
convert); and the one restructuring done before converting
(returns gathered after an if). Scopes: a nested def, lambda, class or comprehension has
its own variables, so the analyses do not look inside one (except to see which names it
reads from outside)."""
import ast
import dis
import types

RETVAL = "retval__"        # the variable a normalised function returns
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _scope_nodes(nodes):
    """Every node under nodes that runs in their scope (nested scopes not entered)."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def contains(stmts, classes):
    return any(isinstance(n, classes) for n in _scope_nodes(stmts))


def loads(stmts):
    """[(Name node, name)] of every read under stmts, nested scopes included."""
    return [(n, n.id) for s in stmts for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def assigned(stmts):
    """The names stmts bind in their scope, in order of first binding (a list)."""
    out = {}
    for n in _scope_nodes(stmts):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.setdefault(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(n.name)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.setdefault(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out.setdefault((a.asname or a.name).split(".")[0])
    return list(out)


def _reads(node):
    """Names an expression (or a simple statement) reads, in its scope and from the nested
    scopes inside it (a lambda reading y reads y)."""
    inner = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            inner.update(x.id for x in ast.walk(n.target) if isinstance(x, ast.Name))
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and n.id not in inner}


def exposed(stmts):
    """Names stmts may read before assigning them (so their value comes from before)."""
    out = set()
    _flow(stmts, set(), out)
    return out


def _flow(stmts, defined, out):
    """Walk stmts in order: add to out the reads of names not yet surely defined; add to
    defined what each statement surely assigns."""
    for s in stmts:
        if isinstance(s, ast.If):
            out |= _reads(s.test) - defined
            a, b = set(defined), set(defined)
            _flow(s.body, a, out)
            _flow(s.orelse, b, out)
            defined |= a & b
        elif isinstance(s, ast.While):
            out |= _reads(s.test) - defined
            _flow(s.body, set(defined), out)
            _flow(s.orelse, set(defined), out)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            out |= _reads(s.iter) - defined
            _flow(s.body, set(defined) | set(assigned([s.target])), out)
            _flow(s.orelse, set(defined), out)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                out |= _reads(item.context_expr) - defined
                if item.optional_vars is not None:
                    defined |= set(assigned([item.optional_vars]))
            _flow(s.body, defined, out)
        elif isinstance(s, ast.Try):
            _flow(s.body, set(defined), out)
            for h in s.handlers:
                _flow(h.body, set(defined) | ({h.name} if h.name else set()), out)
            _flow(s.orelse, set(defined), out)
            _flow(s.finalbody, set(defined), out)
        elif isinstance(s, (ast.Assign, ast.AnnAssign)):
            value = s.value if s.value is not None else ast.Constant(None)
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            out |= (_reads(value) | set().union(*map(_reads, targets))) - defined
            defined |= set(assigned(targets))
        elif isinstance(s, ast.AugAssign):
            out |= (_reads(s.value) | _reads(s.target) |
                    ({s.target.id} if isinstance(s.target, ast.Name) else set())) - defined
            defined |= set(assigned([s.target]))
        else:
            out |= _reads(s) - defined
            defined |= set(assigned([s]))


def always_returns(stmts):
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and always_returns(last.body) and \
        always_returns(last.orelse)


def tail_return_only(stmts):
    """stmts end in a return and hold no other one."""
    return bool(stmts) and isinstance(stmts[-1], ast.Return) and \
        not contains(stmts[:-1], (ast.Return,))


def is_super_call(node):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "super" and not node.args and not node.keywords


def definitely(s):
    """Names s surely assigns when it completes (for deciding which reads need ag__.ld)."""
    if isinstance(s, ast.If):
        return set(assigned(s.body)) & set(assigned(s.orelse)) if s.orelse else set()
    if isinstance(s, (ast.While, ast.For, ast.Try)):
        return set()
    return set(assigned([s]))


def declared(stmts):
    """The names stmts declare `global` or `nonlocal` in their scope."""
    return {name for n in _scope_nodes(stmts) if isinstance(n, (ast.Global, ast.Nonlocal))
            for name in n.names}


def unsupported(stmts, loop, outer=()):
    """What in stmts (a branch, or a loop body when loop) cannot be converted, with its
    line: None when everything can. outer: the function's global and nonlocal names (an
    assignment to one in a branch made a function of its own would bind a local there)."""
    bound = next((n for n in assigned(stmts) if n in outer), None)
    if bound is not None:
        return f"assigning the global or nonlocal name {bound!r}"
    what = [(ast.Return, "`return`"), (ast.Delete, "`del`"), (ast.Global, "`global`"),
            (ast.Nonlocal, "`nonlocal`")]
    for node in _walk_scope(stmts, stop_loops=False):
        for cls, text in what:
            if isinstance(node, cls):
                return f"{text} at line {node.lineno}"
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if any(isinstance(x, ast.Attribute) for x in ast.walk(t)):
                return f"assigning to an attribute (line {node.lineno})"
    for node in _walk_scope(stmts, stop_loops=True):
        if isinstance(node, (ast.Break, ast.Continue)):
            return f"`{'break' if isinstance(node, ast.Break) else 'continue'}` at line " \
                   f"{node.lineno}"
    return None


def _walk_scope(stmts, stop_loops):
    """The nodes of stmts, not entering nested definitions (nor loops when stop_loops)."""
    stack = list(reversed(stmts))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if stop_loops and isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            stack.extend(reversed(node.orelse))     # break in a loop's else: the outer loop
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def normalize_returns(stmts):
    """Move the code after an if whose branch returns into the other branch; when then both
    branches end in their only return, make those assignments and return once after the if
    (so that the if converts)."""
    for i, s in enumerate(stmts):
        if not isinstance(s, ast.If) or not contains(s.body + s.orelse, (ast.Return,)):
            continue
        body, orelse, rest = list(s.body), list(s.orelse), stmts[i + 1:]
        b, o = always_returns(body), always_returns(orelse)
        if b and not o:
            orelse += rest
        elif o and not b:
            body += rest
        elif not b and not o:
            return stmts            # a return in the middle: left as it is
        body, orelse = normalize_returns(body), normalize_returns(orelse)
        new = ast.copy_location(ast.If(s.test, body, orelse), s)
        if tail_return_only(body) and tail_return_only(orelse):
            for branch in (body, orelse):
                ret = branch[-1]
                value = ret.value if ret.value is not None else ast.Constant(None)
                branch[-1] = ast.copy_location(
                    ast.Assign([ast.Name(RETVAL, ast.Store())], value, lineno=ret.lineno), ret)
            back = ast.copy_location(ast.Return(ast.Name(RETVAL, ast.Load())), s)
            return stmts[:i] + [new, back]
        return stmts[:i] + [new]
    return stmts


def returned_assignments(body, returned):
    """The ids of the statements `v = <expr>` in body (a function's own statements) whose
    variable is bound nowhere else and read only where the function returns it (Name
    nodes whose ids are in `returned`): its number goes straight into the result
    (tracer/returned.py). Not a global or nonlocal name, not one a nested scope reads."""
    nodes = list(ast.walk(ast.Module(body, [])))
    declared = {n for x in nodes if isinstance(x, (ast.Global, ast.Nonlocal)) for n in x.names}
    bound, reads = {}, {}
    for n in nodes:
        if isinstance(n, ast.Name):
            (reads if isinstance(n.ctx, ast.Load) else bound).setdefault(n.id, []).append(n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                            ast.ExceptHandler)):
            bound.setdefault(n.name, []).append(n)
        elif isinstance(n, ast.alias):
            bound.setdefault((n.asname or n.name).split(".")[0], []).append(n)
    out = set()
    for s in body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
                isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            if name not in declared and len(bound.get(name, ())) == 1 and reads.get(name) \
                    and all(id(n) in returned for n in reads[name]):
                out.add(id(s))
    return out


# every construct the converter rewrites (if, while, a if b else c, and/or, chained
# comparisons) compiles to a conditional jump
_CONDITIONAL_JUMPS = frozenset(op for name, op in dis.opmap.items()
                               if "JUMP" in name and "IF" in name)


def branches(code, names, builtins=()):
    """Whether code, or code nested in it (inner functions, lambdas, comprehensions), has a
    conditional jump, or code or its comprehensions read one of the attributes names or call
    one of the builtins (a global name: `float(loss)`, not `.float()`). (Without either, the
    source is not read: inspect.getsource tokenizes the file, ~5 ms the first time.)"""
    stack = [code]
    while stack:
        c = stack.pop()
        own = c is code or c.co_name in ("<listcomp>", "<dictcomp>")
        if any(op in _CONDITIONAL_JUMPS for op in c.co_code[::2]) or own and (
                any(n in c.co_names for n in names) or
                any(n in c.co_names for n in builtins) and any(
                    i.opname == "LOAD_GLOBAL" and i.argval in builtins
                    for i in dis.get_instructions(c))):
            return True
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return False


def displayed(e):
    """The expressions standing in a return value: itself, the items of its tuple, list
    and dict displays, the operands of its arithmetic and of a comparison (returned.py)."""
    if isinstance(e, (ast.Tuple, ast.List)):
        return [x for item in e.elts for x in displayed(item)]
    if isinstance(e, ast.Dict):
        return [x for item in e.values for x in displayed(item)]
    if isinstance(e, (ast.BinOp, ast.UnaryOp)) and type(e.op) in ARITHMETIC:
        return [x for item in ([e.left, e.right] if isinstance(e, ast.BinOp) else [e.operand])
                for x in displayed(item)]
    if single_comparison(e):
        return [x for item in (e.left, e.comparators[0]) for x in displayed(item)]
    return [e]


# the arithmetic a returned number may go through and stay an output (returned.py)
ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
              ast.Mod: "%", ast.Pow: "**", ast.USub: "-", ast.UAdd: "+"}
CASTS = ("float", "int", "round", "abs")        # (returned_call: returned.py)
# comparisons too (`return loss.item() < threshold`: a stop flag)
COMPARISONS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
               ast.NotEq: "!="}


def single_comparison(e):
    """e is `a op b` with one comparison operator of COMPARISONS."""
    return isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in COMPARISONS
