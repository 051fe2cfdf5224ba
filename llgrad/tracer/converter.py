"""The AST rewriter convert.py runs over one function's definition: each tensor-dependent if,
while, conditional expression, and/or/not and chained comparison becomes calls of
tracer/control.py (`ag__`), returned `.item()` / `float()` / `int()` reads become
number casts (convert.py's docstring shows each rewrite)."""
import ast
import os

from .rules import (ARITHMETIC, CASTS, COMPARISONS, always_returns, assigned, contains,
                    declared, definitely, displayed, exposed, is_super_call, loads,
                    normalize_returns, returned_assignments, single_comparison, unsupported)

AG = "ag__"
_OPS = {**COMPARISONS, ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


def _call(name, args):
    return ast.Call(ast.Attribute(ast.Name(AG, ast.Load()), name, ast.Load()), args, [])


def _lambda(body):
    return ast.Lambda(ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                    kw_defaults=[], kwarg=None, defaults=[]), body)


def _names_tuple(names, ctx):
    return ast.Tuple([ast.Name(n, ctx()) for n in names], ctx())


class _Converter:
    def __init__(self, fdef, filename, has_class_cell, control_flow=True):
        self.file = os.path.basename(filename)
        self.control_flow = control_flow
        self.has_class_cell = has_class_cell
        self.counter = 0
        self.changed = False
        self.first_param = None

    def loc(self, node):
        return f"{self.file}:{node.lineno}"

    def function(self, fdef, nested=False):
        a = fdef.args
        params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + \
            [x.arg for x in (a.vararg, a.kwarg) if x is not None]
        self.first_param = params[0] if params else None
        body = list(fdef.body)
        if not always_returns(body):
            body.append(ast.copy_location(ast.Return(None), body[-1]))
        body = normalize_returns(body)
        fdef.body = body
        self.loads = loads(fdef.body)       # [(Name node, name)] after normalisation
        self.outer = declared(fdef.body)    # (its global and nonlocal names)
        self.top = {id(st) for st in body}
        self.returned_names = {id(n) for st in ast.walk(ast.Module(body, []))
                               if isinstance(st, ast.Return) and st.value is not None
                               for n in displayed(st.value) if isinstance(n, ast.Name)}
        self.item_assigns = returned_assignments(body, self.returned_names)
        self.casts = any(isinstance(n, ast.Attribute) and n.attr == "item"  # (number_cast:
                         for n in ast.walk(fdef))       # int() of a t.item(), item_reads.py)
        fdef.body = self.block(body, set(params))
        return ast.fix_missing_locations(fdef)

    def read_outside(self, stmt):
        inside = {id(n) for n in ast.walk(stmt)}
        return {name for node, name in self.loads if id(node) not in inside}

    # ---- statements -----------------------------------------------------------------------
    def block(self, stmts, defined):
        out, defined = [], set(defined)
        for s in stmts:
            out += self.stmt(s, defined)
            defined |= definitely(s)
        return out

    def stmt(self, s, defined):
        if isinstance(s, (ast.If, ast.While)) and not self.control_flow:
            s.body, s.orelse = self.block(s.body, defined), self.block(s.orelse, defined)
            return [s]
        if isinstance(s, ast.If):
            return self.if_(s, defined)
        if isinstance(s, ast.While):
            return self.while_(s, defined)
        if isinstance(s, ast.FunctionDef) and not contains(s.body, (ast.Yield, ast.YieldFrom)):
            sub = _Converter(None, self.file, False, self.control_flow)   # its own scope
            sub.counter = self.counter
            s = sub.function(s, nested=True)
            self.counter, self.changed = sub.counter, self.changed or sub.changed
            return [s]
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [s]              # generators, coroutines and classes run as they are
        if isinstance(s, ast.For):
            s.iter = self.expr(s.iter)
            s.body = self.block(s.body, defined | set(assigned([s.target])))
            s.orelse = self.block(s.orelse, defined)
            return [s]
        if isinstance(s, (ast.With, ast.AsyncWith)):
            s.body = self.block(s.body, defined)
            return [s]
        if isinstance(s, ast.Return) and s.value is not None:
            s = self.expr(s, casts=False)   # (its int() / float(): returned_call's)
            s.value = self.returned(s.value)
            return [s]
        if id(s) in self.item_assigns:          # `v = x.item()`, v only returned
            s = self.expr(s, casts=False)
            s.value = self.returned(s.value, assigned=True)
            return [s]
        if isinstance(s, ast.Try):
            s.body = self.block(s.body, defined)
            for h in s.handlers:
                h.body = self.block(h.body, defined | ({h.name} if h.name else set()))
            s.orelse = self.block(s.orelse, defined)
            s.finalbody = self.block(s.finalbody, defined)
            return [s]
        return [self.expr(s)]

    def returned(self, e, assigned=False):
        """`x.item()` standing in a return value (alone, in tuple, list and dict displays,
        in arithmetic) -> ag__.returned_item(x): a graph output, not a value guard; so is
        `x.numpy()` / `x.tolist()` there (ag__.returned_array: tracer/returned.py)."""
        if isinstance(e, (ast.Tuple, ast.List)):
            e.elts = [self.returned(x, assigned) for x in e.elts]
        elif isinstance(e, ast.ListComp):       # (its items go to the list alone)
            e.elt = self.returned(e.elt, assigned)
        elif isinstance(e, ast.DictComp):
            e.value = self.returned(e.value, assigned)
        elif isinstance(e, ast.Dict):
            e.values = [self.returned(x, assigned) for x in e.values]
        elif isinstance(e, (ast.BinOp, ast.UnaryOp)) and type(e.op) in ARITHMETIC:
            self.changed = True     # (ag__.returned_binop / _unop: returned.py)
            args = [e.left, e.right] if isinstance(e, ast.BinOp) else [e.operand]
            return ast.copy_location(_call(f"returned_{'bin' if len(args) == 2 else 'un'}op", [
                ast.Constant(ARITHMETIC[type(e.op)])] + [self.returned(x, assigned)
                                                          for x in args]), e)
        elif single_comparison(e):
            self.changed = True
            return ast.copy_location(_call("returned_binop", [
                ast.Constant(COMPARISONS[type(e.ops[0])]), self.returned(e.left, assigned),
                self.returned(e.comparators[0], assigned)]), e)
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in CASTS \
                and 1 <= len(e.args) <= 2 and not e.keywords:       # float(x.item()), round
            number = self.returned(e.args[0], assigned)
            if number is not e.args[0]:
                return ast.copy_location(_call("returned_call", [e.func, number] +
                                               e.args[1:]), e)
            if e.func.id in ("float", "int") and len(e.args) == 1:     # float(loss)
                self.changed = True
                return ast.copy_location(_call("returned_number", [e.func, e.args[0]] + (
                    [ast.Constant(True)] if assigned else [])), e)
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr == "item" and not e.args and not e.keywords:
            self.changed = True
            return ast.copy_location(_call("returned_item", [e.func.value] + (
                [ast.Constant(True)] if assigned else [])), e)
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr in ("numpy", "tolist") and not e.args and not e.keywords and \
                not assigned:       # (`return model(x).argmax(1).numpy()`: an output)
            self.changed = True
            return ast.copy_location(_call("returned_array", [e.func.value,
                                                              ast.Constant(e.func.attr)]), e)
        return e

    def if_(self, s, defined):
        if contains(s.body + s.orelse, (ast.Raise,)):
            s.body, s.orelse = self.block(s.body, defined), self.block(s.orelse, defined)
            return [s]              # a check that raises: a value guard, as before
        reason = unsupported(s.body + s.orelse, loop=False, outer=self.outer)
        if reason:
            return [self.left_in_python(s, defined, reason, "an if")]
        read = self.read_outside(s) | exposed(s.body) | exposed(s.orelse)
        names = [n for n in assigned(s.body + s.orelse) if n in read]
        k = self.next()
        test = self.test(s.test)
        fns = [self.branch(f"if_true_{k}", names, s.body, defined, s),
               self.branch(f"if_false_{k}", names, s.orelse, defined, s)]
        call = _call("if_stmt", [test, ast.Name(f"if_true_{k}", ast.Load()),
                                 ast.Name(f"if_false_{k}", ast.Load()),
                                 self.values(names, defined), self.strings(names),
                                 ast.Constant(self.loc(s)),
                                 self.strings(self.only_returned(s, names))])
        return fns + [self.bind(names, call, s)]

    def while_(self, s, defined):
        reason = unsupported(s.body, loop=True, outer=self.outer) or \
            ("a while loop with an `else` clause" if s.orelse else None)
        if reason:
            return [self.left_in_python(s, defined, reason, "a while loop")]
        read = {n for _, n in loads([ast.Expr(s.test)])} | exposed(s.body) | \
            self.read_outside(s)
        names = [n for n in assigned(s.body) if n in read]
        k = self.next()
        test = ast.FunctionDef(f"while_test_{k}", self.params(names),
                               [ast.copy_location(ast.Return(self.test(s.test)), s)], [], None)
        fns = [ast.copy_location(test, s),
               self.branch(f"while_body_{k}", names, s.body, defined, s)]
        call = _call("while_stmt", [ast.Name(f"while_test_{k}", ast.Load()),
                                    ast.Name(f"while_body_{k}", ast.Load()),
                                    self.values(names, defined), self.strings(names),
                                    ast.Constant(self.loc(s)),
                                    self.strings(self.only_returned(s, names)),
                                    self.strings([n for n in names
                                                  if n in self.read_outside(s)])])
        return fns + [self.bind(names, call, s)]

    def only_returned(self, s, names):
        """The names (of a loop in the function's own body) that after the loop are only
        returned, as they are: a number the loop counts needs no value guard then
        (tracer/returned.py)."""
        if id(s) not in self.top:
            return []
        inside = {id(n) for n in ast.walk(s)}
        outside = [(node, n) for node, n in self.loads if id(node) not in inside]
        return [n for n in names if any(m == n for _, m in outside)
                and all(id(node) in self.returned_names for node, m in outside if m == n)]

    def left_in_python(self, s, defined, reason, what):
        """The statement stays as it is; a tensor condition is an error naming the lines."""
        self.changed = True
        msg = f"{reason} inside {what} whose condition is a tensor is not supported"
        s.test = ast.copy_location(_call("py_cond", [self.expr(s.test), ast.Constant(msg),
                                                     ast.Constant(self.loc(s))]), s.test)
        s.body, s.orelse = self.block(s.body, defined), self.block(s.orelse, defined)
        return s

    def branch(self, name, names, body, defined, at):
        stmts = self.block(body, defined | set(names)) or [ast.Pass()]
        ret = ast.Return(_names_tuple(names, ast.Load))
        fn = ast.FunctionDef(name, self.params(names), stmts + [ret], [], None)
        return ast.fix_missing_locations(ast.copy_location(fn, at))

    def params(self, names):
        return ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in names], vararg=None,
                             kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])

    def values(self, names, defined):
        """The variables' current values; ag__.ld(lambda: y, 'y') where y may have none."""
        return ast.Tuple([ast.Name(n, ast.Load()) if n in defined else
                          _call("ld", [_lambda(ast.Name(n, ast.Load())), ast.Constant(n)])
                          for n in names], ast.Load())

    def strings(self, names):
        return ast.Tuple([ast.Constant(n) for n in names], ast.Load())

    def bind(self, names, call, at):
        stmt = ast.Assign([_names_tuple(names, ast.Store)], call, lineno=at.lineno) if names \
            else ast.Expr(call)
        return ast.fix_missing_locations(ast.copy_location(stmt, at))

    def next(self):
        self.counter += 1
        self.changed = True
        return self.counter

    # ---- expressions ------------------------------------------------------------------------
    def expr(self, node, casts=True):
        return _Expressions(self, casts and self.casts).visit(node)

    def test(self, e):
        """A condition: and/or/not (and chained comparisons of names) become ag__ calls."""
        if isinstance(e, ast.BoolOp):
            self.changed = True
            fn = "and_" if isinstance(e.op, ast.And) else "or_"
            return ast.copy_location(_call(fn, [_lambda(self.test(v)) for v in e.values]), e)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            self.changed = True
            return ast.copy_location(_call("not_", [self.test(e.operand)]), e)
        if isinstance(e, ast.Compare) and len(e.ops) > 1:
            self.changed = True
            ops = ast.Tuple([ast.Constant(_OPS[type(op)]) for op in e.ops], ast.Load())
            parts = [_lambda(self.expr(x)) for x in [e.left] + e.comparators]
            return ast.copy_location(_call("compare", [ops] + parts), e)
        return self.expr(e)


class _Expressions(ast.NodeTransformer):
    """Conditional expressions anywhere in an expression; super() keeps working inside the
    functions the rewrite introduces (it names its class and instance explicitly)."""

    def __init__(self, conv, casts):
        self.conv, self.casts = conv, casts

    def visit_IfExp(self, node):
        self.generic_visit(node)
        if not self.conv.control_flow:
            return node
        self.conv.changed = True
        call = _call("if_exp", [self.conv.test(node.test), _lambda(node.body),
                                _lambda(node.orelse), ast.Constant(self.conv.loc(node))])
        return ast.copy_location(call, node)

    def visit_Call(self, node):
        self.generic_visit(node)
        if is_super_call(node) and self.conv.first_param and self.conv.has_class_cell:
            node.args = [ast.Name("__class__", ast.Load()),
                         ast.Name(self.conv.first_param, ast.Load())]
        f = node.func
        if self.casts and isinstance(f, ast.Name) and f.id in ("int", "float") and \
                len(node.args) == 1 and not node.keywords and type(node.args[0]) is not ast.Starred:
            self.conv.changed = True
            return ast.copy_location(_call("number_cast", [node.func, node.args[0]]), node)
        return node

    def visit_FunctionDef(self, node):
        return node                # statements: converted by _Converter.stmt

    visit_ClassDef = visit_AsyncFunctionDef = visit_FunctionDef
