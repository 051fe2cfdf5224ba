"""torch.fx's Graph and Node: a doubly linked list of nodes (placeholder, get_attr,
call_function, call_method, call_module, output), each with its args, kwargs and users; the
graph prints as PyTorch's (print(gm.graph)) and turns into the Python source of forward
(python_code), with PyTorch's node names and its `x = None` frees after each last use."""
import builtins
import contextlib
import keyword
import re
import sys
import types

from ..nn import functional as F

_illegal_char = re.compile("[^0-9a-zA-Z_]+")
_name_regex = re.compile(r"^([a-zA-Z_][0-9a-zA-Z_]*?)(?:_(\d+))?$")
_illegal_names = {k: object() for k in keyword.kwlist}
_illegal_names.update(builtins.__dict__)
_illegal_names.update({"inf": object(), "nan": object(), "NoneType": object(),
                       "torch": object(), "llgrad": object(), "device": object(),
                       "fx_pytree": object(), "pytree": object()})
_snake = re.compile(r"(?<=[a-z])([A-Z])")

MAGIC = {"add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "floordiv": "{} // {}",
         "truediv": "{} / {}", "mod": "{} % {}", "pow": "{} ** {}", "lshift": "{} << {}",
         "rshift": "{} >> {}", "and_": "{} & {}", "or_": "{} | {}", "xor": "{} ^ {}",
         "getitem": "{}[{}]", "matmul": "{} @ {}", "eq": "{} == {}", "ne": "{} != {}",
         "lt": "{} < {}", "gt": "{} > {}", "le": "{} <= {}", "ge": "{} >= {}", "pos": "+{}",
         "neg": "-{}", "invert": "~{}"}


def qualified_name(fn):
    """How code and printouts name a function: operator.add, builtins.getattr, or
    llgrad.<name> / llgrad.nn.functional.<name> where llgrad exports it."""
    name = getattr(fn, "__name__", repr(fn))
    if getattr(fn, "__module__", None) in ("_operator", "operator"):
        return f"operator.{name}"
    if getattr(fn, "__module__", None) == "builtins":
        return f"builtins.{name}"
    for prefix, mod in (("llgrad", sys.modules["llgrad"]), ("llgrad.nn.functional", F)):
        if getattr(mod, name, None) is fn:
            return f"{prefix}.{name}"
    return f"{fn.__module__}.{getattr(fn, '__qualname__', name)}"


def type_repr(obj):
    """An annotation as PyTorch prints it (llgrad.Tensor for llgrad's Tensor)."""
    if isinstance(obj, type) and not isinstance(obj, types.GenericAlias):
        if obj.__module__ == "builtins":
            return obj.__qualname__
        if getattr(sys.modules["llgrad"], obj.__qualname__, None) is obj:
            return f"llgrad.{obj.__qualname__}"
        return f"{obj.__module__}.{obj.__qualname__}"
    if obj is ...:
        return "..."
    if isinstance(obj, types.FunctionType):
        return obj.__name__
    return repr(obj)


def map_arg(a, fn):
    """a with every Node in it (nested in tuples, lists, dicts, slices) replaced by fn(node)."""
    if isinstance(a, Node):
        return fn(a)
    if isinstance(a, tuple):
        return type(a)(*[map_arg(x, fn) for x in a]) if hasattr(a, "_fields") else \
            tuple(map_arg(x, fn) for x in a)
    if isinstance(a, list):
        return [map_arg(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: map_arg(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_arg(a.start, fn), map_arg(a.stop, fn), map_arg(a.step, fn))
    return a


def _format_arg(a):
    if isinstance(a, list):
        return "[" + ", ".join(_format_arg(x) for x in a) + "]"
    if isinstance(a, tuple):
        return "(" + ", ".join(_format_arg(x) for x in a) + ("," if len(a) == 1 else "") + ")"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in a.items()) + "}"
    return "%" + str(a) if isinstance(a, Node) else str(a)


class Node:
    """One operation of a Graph (torch.fx.Node): op, name, target, args, kwargs, users."""

    def __init__(self, graph, name, op, target, args, kwargs):
        self.graph, self.name, self.op, self.target = graph, name, op, target
        self.users = {}
        self.meta = {}
        self.type = None
        self._prev = self._next = self
        self._args, self._kwargs = (), {}
        self._input_nodes = {}
        self._update(tuple(args), dict(kwargs))

    def _update(self, args, kwargs):
        for n in self._input_nodes:
            n.users.pop(self, None)
        self._args, self._kwargs, self._input_nodes = args, kwargs, {}
        map_arg((args, kwargs), lambda n: self._input_nodes.setdefault(n))
        for n in self._input_nodes:
            n.users.setdefault(self)

    args = property(lambda self: self._args,
                    lambda self, v: self._update(tuple(v), self._kwargs))
    kwargs = property(lambda self: self._kwargs,
                      lambda self, v: self._update(self._args, dict(v)))
    all_input_nodes = property(lambda self: list(self._input_nodes))
    next = property(lambda self: self._next)
    prev = property(lambda self: self._prev)

    def __repr__(self):
        return self.name

    def update_arg(self, idx, arg):
        args = list(self._args)
        args[idx] = arg
        self.args = args

    def update_kwarg(self, key, arg):
        self.kwargs = {**self._kwargs, key: arg}

    def replace_input_with(self, old, new):
        self._update(*map_arg((self._args, self._kwargs), lambda n: new if n is old else n))

    def replace_all_uses_with(self, replace_with, delete_user_cb=lambda user: True):
        """Make every user of this node use replace_with instead; the users changed."""
        changed = [u for u in list(self.users) if delete_user_cb(u)]
        for user in changed:
            user.replace_input_with(self, replace_with)
        return changed

    def prepend(self, x):
        """Put node x just before this one."""
        x._remove_from_list()
        p = self._prev
        p._next, x._prev, x._next, self._prev = x, p, self, x

    def append(self, x):
        """Put node x just after this one."""
        self._next.prepend(x)

    def _remove_from_list(self):
        p, n = self._prev, self._next
        p._next, n._prev = n, p
        self._prev = self._next = self

    def _pretty_target(self):
        return self.target if isinstance(self.target, str) else qualified_name(self.target)

    def format_node(self):
        """The node's line in print(graph) (torch.fx.Node.format_node)."""
        typed = f"{type_repr(self.type)} " if self.type is not None else ""
        head = f"%{self.name} : {typed}[num_users={len(self.users)}] = "
        if self.op == "placeholder":
            default = f"(default={self.args[0]})" if self.args else ""
            return f"{head}{self.op}[target={self.target}]{default}"
        if self.op == "get_attr":
            return f"{head}{self.op}[target={self._pretty_target()}]"
        if self.op == "output":
            return f"return {self.args[0]}"
        return (f"{head}{self.op}[target={self._pretty_target()}](args = "
                f"{_format_arg(self.args)}, kwargs = {_format_arg(self.kwargs)})")


class Graph:
    """torch.fx.Graph: its nodes in order, made by placeholder / get_attr / call_function /
    call_method / call_module / output (or create_node) at the insertion point."""

    def __init__(self, owning_module=None):
        self._root = Node(self, "_root", "root", "", (), {})
        self._insert = self._root.prepend
        self._used, self._base_count = set(), {}
        self.owning_module = owning_module

    @property
    def nodes(self):
        out, n = [], self._root._next
        while n is not self._root:
            out.append(n)
            n = n._next
        return out

    def _name(self, candidate):
        m = _name_regex.match(candidate)
        if m is None:
            candidate = _illegal_char.sub("_", candidate) or "_unnamed"
            if candidate[0].isdigit():
                candidate = "_" + candidate
            m = _name_regex.match(candidate)
        base, num = m.group(1, 2)
        if num is None or candidate in self._used:
            num = self._base_count.get(base, 0)
            if candidate in _illegal_names:
                num += 1
                candidate = f"{base}_{num}"
        else:
            num = int(num)
        while candidate in self._used:
            num += 1
            candidate = f"{base}_{num}"
        self._used.add(candidate)
        self._base_count[base] = num
        return candidate

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        """A new node at the insertion point (torch.fx.Graph.create_node)."""
        if op not in ("call_function", "call_method", "get_attr", "call_module",
                      "placeholder", "output"):
            raise ValueError(f"Unsupported node type: {op}")
        if name is None:
            t = target.__name__ if callable(target) else target
            if isinstance(t, str) and t.startswith("__") and t.endswith("__"):
                t = t[2:-2]
            name = _snake.sub(r"_\1", t).lower()
        node = Node(self, self._name(name), op, target, args or (), kwargs or {})
        node.type = type_expr
        self._insert(node)
        return node

    def placeholder(self, name, type_expr=None, default_value=None):
        args = () if default_value is None else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name, type_expr=None):
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_function(self, the_function, args=None, kwargs=None, type_expr=None):
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name, args=None, kwargs=None, type_expr=None):
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_module(self, module_name, args=None, kwargs=None, type_expr=None):
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def output(self, result, type_expr=None):
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    @contextlib.contextmanager
    def inserting_before(self, n=None):
        prev, self._insert = self._insert, (n or self._root._next).prepend
        try:
            yield
        finally:
            self._insert = prev

    @contextlib.contextmanager
    def inserting_after(self, n=None):
        prev, self._insert = self._insert, (n or self._root).append
        try:
            yield
        finally:
            self._insert = prev

    def erase_node(self, to_erase):
        """Remove a node nothing uses (PyTorch's error otherwise)."""
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had "
                               f"{len(to_erase.users)} users in the graph: "
                               f"{to_erase.users}!")
        to_erase._remove_from_list()
        to_erase._update((), {})

    def eliminate_dead_code(self):
        """Remove the nodes without users that have no effects (placeholders and output
        stay); True when something was removed."""
        changed = False
        for node in reversed(self.nodes):
            if node.op not in ("placeholder", "output") and not node.users and \
                    not (node.op == "call_method" and str(node.target).endswith("_")):
                self.erase_node(node)
                changed = True
        return changed

    def lint(self):
        """Check that each node's inputs are in the graph and come before it."""
        seen = set()
        for node in self.nodes:
            for n in node.all_input_nodes:
                if n.graph is not self or n not in seen:
                    raise RuntimeError(f"Argument '{n}' of Node '{node}' was used before it "
                                       "has been defined! Please check that Nodes in the "
                                       "graph are topologically ordered")
            seen.add(node)

    def __str__(self):
        return "graph():" + "".join("\n    " + n.format_node() for n in self.nodes)

    def python_code(self, root_module="self"):
        """The source of forward (PythonCode.src is what GraphModule.code shows)."""
        globals_ = {}
        return _PythonCode(_codegen(self, root_module, globals_), globals_)


class _PythonCode:
    def __init__(self, src, globals_):
        self.src, self.globals = src, globals_


def _value(a):
    if isinstance(a, Node):
        return a.name
    if isinstance(a, tuple):
        return "(" + ", ".join(_value(x) for x in a) + ("," if len(a) == 1 else "") + ")"
    if isinstance(a, list):
        return "[" + ", ".join(_value(x) for x in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k!r}: {_value(v)}" for k, v in a.items()) + "}"
    if isinstance(a, slice):
        return f"slice({_value(a.start)}, {_value(a.stop)}, {_value(a.step)})"
    if callable(a) and not isinstance(a, type):
        return qualified_name(a)
    return repr(a)


def _call_args(args, kwargs):
    return ", ".join([_value(a) for a in args] + [f"{k} = {_value(v)}"
                                                   for k, v in kwargs.items()])


def _format_target(base, target):
    for e in target.split("."):
        base = f"{base}.{e}" if e.isidentifier() else f'getattr({base}, "{e}")'
    return base


def _annotation(obj, globals_):
    """An annotation in forward's source: a name that resolves where it runs."""
    s = type_repr(obj)
    if (isinstance(obj, type) and obj.__module__ == "builtins") or s.startswith("llgrad."):
        return s
    name = re.sub("[^0-9a-zA-Z_]", "_", s)
    globals_[name] = obj
    return name


def _codegen(graph, root, globals_):
    nodes = graph.nodes
    last_use, freed_after = {}, {n: [] for n in nodes}
    for node in reversed(nodes):
        for n in node.all_input_nodes:
            if n not in last_use:
                last_use[n] = node
                freed_after[node].append(n)
    params, body, returns = [], [], ""
    for node in nodes:
        a, k = node.args, node.kwargs
        if node.op == "placeholder":
            typed = f" : {_annotation(node.type, globals_)}" if node.type is not None else ""
            params.append(node.target + typed + (f" = {_value(a[0])}" if a else ""))
            if node.name != node.target:
                body.append(f"{node.name} = {node.target}")
            continue
        if node.op == "output":
            body.append(f"return {_value(a[0])}")
            if node.type is not None:
                returns = f" -> {_annotation(node.type, globals_)}"
            continue
        if node.op == "get_attr":
            line = f"{node.name} = {_format_target(root, node.target)}"
        elif node.op == "call_module":
            line = f"{node.name} = {_format_target(root, node.target)}({_call_args(a, k)})"
        elif node.op == "call_method":
            line = f"{node.name} = {_value(a[0])}.{node.target}({_call_args(a[1:], k)})"
        elif node.target is getattr and not k and len(a) == 2 and isinstance(a[1], str):
            line = f"{node.name} = {_value(a[0])}.{a[1]}"
        elif getattr(node.target, "__module__", None) in ("_operator", "operator") and \
                node.target.__name__ in MAGIC and not k:
            line = f"{node.name} = " + MAGIC[node.target.__name__].format(
                *[_value(x) for x in a])
        else:
            line = f"{node.name} = {qualified_name(node.target)}({_call_args(a, k)})"
        # (a node nothing uses, kept for its effect, an _assert: freed on its own line, as
        # torch.fx's delete_unused_values)
        dead = [n.name for n in freed_after[node]] + ([node.name] if not node.users else [])
        if dead:
            line += ";  " + " = ".join(dead) + " = None"
        body.append(line)
    if not body or not body[-1].startswith("return"):
        body.append("pass")
    return ("\n\n\ndef forward(" + ", ".join([root] + params) + f"){returns}:\n" +
            "".join(f"    {line}\n" for line in body) + "    ")

