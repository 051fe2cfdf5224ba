"""What a call that writes to sys.stdout / sys.stderr writes, read from the bytecode of the
user's code at the call (rendered_text.py uses it to place formatted values in the text).

A write site is a `print(...)` of the builtin print, or `<stream>.write(<one argument>)` whose
result is dropped, in straight-line code (no jump between the callable's load and the call).
Its writes are, in order, print's positional arguments with sep between them and end after
them (2n writes for n arguments; a constant sep or end known as such), or the one argument.
Each argument's value is described by the instructions that made it: an f-string
(BUILD_STRING of string constants and FORMAT_VALUE results, each at its instruction's
offset), a FORMAT_VALUE result alone, a constant, a `'<template>'.format(...)` of a constant
template (its fields formatted inside that call, in order), or something else (whose text
print makes with str() inside the call). Anything the analysis does not know (starred
arguments, jumps, an opcode outside the table) gives no site: the values formatted for it
are read as before."""
import builtins
import dis

# opcode name -> (items popped, items pushed) where fixed; the others are computed below
_FIXED = {"LOAD_CONST": (0, 1), "LOAD_FAST": (0, 1), "LOAD_DEREF": (0, 1),
          "LOAD_CLOSURE": (0, 1), "LOAD_NAME": (0, 1), "LOAD_CLASSDEREF": (0, 1),
          "LOAD_ATTR": (1, 1), "LOAD_METHOD": (1, 2), "PUSH_NULL": (0, 1), "PRECALL": (0, 0),
          "KW_NAMES": (0, 0), "BINARY_OP": (2, 1), "BINARY_SUBSCR": (2, 1),
          "UNARY_NEGATIVE": (1, 1), "UNARY_NOT": (1, 1), "UNARY_INVERT": (1, 1),
          "UNARY_POSITIVE": (1, 1), "COMPARE_OP": (2, 1), "IS_OP": (2, 1),
          "CONTAINS_OP": (2, 1), "NOP": (0, 0)}
_MAX_SITES = 1024
_JUMPS = frozenset(dis.hasjrel + dis.hasjabs)


class Site:
    """kind: "print" or "write"; writes: per write of one call, the item of the argument it
    writes (a separator or the end: a constant's item, or None where it is not one)."""
    __slots__ = ("kind", "writes")

    def __init__(self, kind, writes):
        self.kind, self.writes = kind, writes


_sites = {}


_calls = {}


def call_offset(code, lasti):
    """The offset of the instruction a frame's f_lasti stands in: a Python function's call
    leaves f_lasti on the CALL's last inline cache entry, and a PRECALL specialised for a
    builtin (print, str.format) makes the call itself, f_lasti on the PRECALL."""
    key = (code, lasti)
    if key not in _calls:
        if len(_calls) >= _MAX_SITES:
            _calls.clear()
        ins = list(dis.get_instructions(code))
        k = max((n for n, i in enumerate(ins) if i.offset <= lasti), default=None)
        at = lasti
        if k is not None:
            at = ins[k].offset
            if ins[k].opname == "PRECALL" and k + 1 < len(ins) and ins[k + 1].opname == "CALL":
                at = ins[k + 1].offset
        _calls[key] = at
    return _calls[key]


def write_site(frame):
    """The Site of the call the frame is making (at its f_lasti), or None."""
    code = frame.f_code
    at = call_offset(code, frame.f_lasti)
    key = (code, at)
    if key not in _sites:
        if len(_sites) >= _MAX_SITES:
            _sites.clear()
        found = _analyse(code, at)
        _sites[key] = None if found is None else Site(*found)
    site = _sites[key]
    if site is not None and site.kind == "print" and \
            not _builtin_print(frame.f_globals.get("print", frame.f_builtins.get("print"))):
        return None     # (a print of the user's own, or one rebound)
    return site


def _builtin_print(p):
    """Whether p is the builtin print itself (not a replacement of builtins.print, such as a
    partial adding an argument)."""
    return type(p) is type(len) and getattr(p, "__self__", None) is builtins and \
        p.__name__ == "print"


def _analyse(code, at):
    ins = list(dis.get_instructions(code))
    where = {i.offset: k for k, i in enumerate(ins)}
    k = where.get(at)
    if k is None or ins[k].opname != "CALL" or k < 1 or ins[k - 1].opname != "PRECALL":
        return None
    argc = ins[k].arg
    # back from the call to the instruction that pushed its callable: the argc + 2 items it
    # takes (callable and self-or-NULL, the arguments), in straight-line code
    need, start = argc + 2, k - 1
    while need > 0:
        start -= 1
        if start < 0 or ins[start].opcode in _JUMPS or ins[start + 1].is_jump_target:
            return None     # (a jump into the call's code: the first load may be one)
        need -= _effect(ins[start])
    if need != 0:
        return None
    stack, kw = [], ()
    for i in ins[start:k]:
        item = _step(i, stack)
        if item is False:
            return None
        if i.opname == "KW_NAMES":
            kw = code.co_consts[i.arg]
    if len(stack) != argc + 2:
        return None
    if _run_again_after_an_error(code, ins, start, k):
        return None
    callee, args = stack[:2], stack[2:]
    positional = args[:len(args) - len(kw)]
    if ("global", "print") in callee:
        if not set(kw) <= {"sep", "end", "file", "flush"}:
            return None
        given = dict(zip(kw, args[len(positional):]))
        sep = _text_of(given.get("sep", ("const", None)), " ")
        end = _text_of(given.get("end", ("const", None)), "\n")
        writes = []
        for n, a in enumerate(positional):
            writes += [sep, a] if n else [a]
        return "print", writes + [end]
    if any(type(c) is tuple and c[:2] == ("method", "write") for c in callee) and \
            argc == 1 and not kw and k + 1 < len(ins) and ins[k + 1].opname == "POP_TOP":
        return "write", [positional[0]]
    return None


def _text_of(item, default):
    """The item of print's sep or end: a constant's (None: the default) as a constant,
    else None (text the bytecode does not give)."""
    if type(item) is tuple and item[0] == "const" and item[1] is None:
        return ("const", default)
    return item if type(item) is tuple and item[0] == "const" and type(item[1]) is str \
        else None


def _effect(i):
    """The net stack effect of instruction i (as the call's items are counted)."""
    if i.opname == "CALL":
        return -1
    try:
        return dis.stack_effect(i.opcode, i.arg)
    except ValueError:
        return 0


def _step(i, stack):
    """Apply instruction i to the stack of item descriptions; False where it is not known."""
    name = i.opname
    if name == "LOAD_CONST":
        stack.append(("const", i.argval))
    elif name == "LOAD_GLOBAL":
        if i.arg & 1:
            stack.append(None)
        stack.append(("global", i.argval))
    elif name == "LOAD_METHOD":
        obj = stack.pop()
        stack += [("method", i.argval, obj), obj]
    elif name == "CALL":
        n = i.arg + 2
        if len(stack) < n:
            return False
        callee = stack[-n:][0]
        del stack[-n:]
        # ('{} {:.4f}'.format(...): a template whose fields the call formats in order)
        if type(callee) is tuple and callee[:2] == ("method", "format") and \
                type(callee[2]) is tuple and callee[2][0] == "const" and \
                type(callee[2][1]) is str:
            stack.append(("format", i.offset, callee[2][1]))
        else:
            stack.append(("call", i.offset))
    elif name == "FORMAT_VALUE":
        n = 2 if i.arg & 4 else 1
        if len(stack) < n:
            return False
        del stack[-n:]
        stack.append(("fmt", i.offset))
    elif name == "BUILD_STRING":
        n = i.arg
        if len(stack) < n:
            return False
        parts = stack[len(stack) - n:]
        del stack[len(stack) - n:]
        stack.append(("str", tuple(parts)))
    elif name in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_SLICE", "BUILD_MAP",
                  "BUILD_CONST_KEY_MAP"):
        n = {"BUILD_MAP": 2 * i.arg, "BUILD_CONST_KEY_MAP": i.arg + 1}.get(name, i.arg)
        if len(stack) < n:
            return False
        del stack[len(stack) - n:]
        stack.append(("other", i.offset))
    elif name in _FIXED:
        pops, pushes = _FIXED[name]
        if len(stack) < pops:
            return False
        del stack[len(stack) - pops:]
        stack += [("other", i.offset)] * pushes
    else:
        return False
    return True


def _run_again_after_an_error(code, ins, start, k):
    """Whether an error raised between the callable's load and the call can be caught in
    this frame and the loop around it run the call again: the pieces formatted in the pass
    that failed, and the writes it made, would be taken for the next pass's."""
    first, last = ins[start].offset, ins[k].offset
    table = getattr(dis, "_parse_exception_table", None)
    if table is None:
        return True     # (no way to tell: as if it could)
    caught = any(e.start <= last and first < e.end for e in table(code))
    return caught and any("BACKWARD" in i.opname and i.offset > last and i.argval <= first
                          for i in ins)
