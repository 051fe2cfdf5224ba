"""Text made of a traced value for output, while compile traces a function: `print(loss)`,
`print(f"step {i}: {loss.item():.4f}")`, `print("acc", acc)`.

Eager prints the call's own numbers, so such text cannot be replayed as the traced run wrote
it. Rather than read the value out of the graph (a value guard, so a trace per value, and
from the recompile limit on eager calls), a format of a traced tensor, or of a stand-in of a
number (runtime/symbolic_scalar.py), gives this call's text as a RenderedText and notes a
piece: the value (a copy taken at the format, a graph value the compiled call returns) and
how to format it again. compile/replayed_output.py matches the pieces in what the run writes
to sys.stdout / sys.stderr, and each compiled call writes that text with its own values
formatted in place of the pieces.

Only where that is exactly what eager prints: a piece must reach a write in the frame that
formatted it, within one expression (no store, nor the end of a statement, between the
format and the call that writes: compile's own check, `flows_to_write`), found once in the
written text and in order; anything else, a piece the run keeps or inspects (compares it,
takes its length, indexes it, calls a method of it), gives it up: the value is read as
before (a value guard or a graph break), so the call is traced again or runs eagerly."""
import dis
import os

from . import trace_state

# instructions that end the expression a text was formatted in: it is stored or dropped
_ENDS = frozenset(("STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF", "STORE_ATTR",
                   "STORE_SUBSCR", "POP_TOP", "RETURN_VALUE", "YIELD_VALUE", "DELETE_FAST",
                   "LIST_APPEND", "SET_ADD", "MAP_ADD", "BUILD_LIST", "BUILD_TUPLE",
                   "BUILD_MAP", "BUILD_SET", "RAISE_VARARGS", "JUMP_BACKWARD", "SEND"))


class Piece:
    """One formatted value: its copy in the graph, format(array) -> text, the text of this
    run, the user's frame and instruction where it was formatted, and read(where): the read
    the format stood in for (it raises, ending the trace, or guards the value)."""
    __slots__ = ("tensor", "render", "text", "frame", "lasti", "read", "where", "written")

    def __init__(self, tensor, render, text, frame, read):
        self.tensor, self.render, self.text, self.written = tensor, render, text, False
        self.frame, self.lasti, self.read = frame, frame.f_lasti, read
        self.where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"

    def escape(self):
        """The read the format stood for, named by the user's line of the format."""
        self.read(self.where)


class RenderedText(str):
    """The text of a piece, as the user's code gets it: a str it may print, join, embed in
    an f-string or concatenate; reading it otherwise gives the piece up first (escape: the
    trace ends, or the value is guarded). (The piece is held in the instance's __dict__: a
    str subclass takes no __slots__.)"""

    def __getattribute__(self, name):
        if name in _PASSED:
            return object.__getattribute__(self, name)
        object.__getattribute__(self, "piece").escape()
        return getattr(str.__str__(self), name)

    def __format__(self, spec):
        if spec:
            self.piece.escape()
        return format(str.__str__(self), spec) if spec else self

    def __add__(self, other):
        return str.__str__(self) + other

    def __radd__(self, other):
        return other + str.__str__(self)

    def __mod__(self, args):
        return str.__str__(self) % args


def _read(name):
    def read(self, *args):
        object.__getattribute__(self, "piece").escape()
        return getattr(str, name)(str.__str__(self), *args)
    read.__name__ = name
    return read


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__len__",
              "__contains__", "__getitem__", "__iter__", "__mul__", "__rmul__", "__reduce__",
              "__reduce_ex__", "__bool__"):
    if _name != "__bool__":
        setattr(RenderedText, _name, _read(_name))
_PASSED = frozenset(("piece", "__class__", "__str__", "__format__", "__add__", "__radd__",
                     "__mod__", "__dict__"))


class Renderings:
    """The pieces of one traced run (replayed_output.recording makes it the thread's);
    users_frame(): the nearest frame of the user's code."""

    def __init__(self, users_frame):
        self.pieces, self.pending, self.refused = [], [], None
        self.users_frame = users_frame

    def add(self, value, render, text, read):
        """This run's text of `value` (a tensor of the trace, copied here) as a
        RenderedText, noted as a piece; read(where): the read it stands for."""
        frame = self.users_frame()
        if frame is None:       # (no frame of the user's: the read, if it does not raise)
            read("?")
            return text
        piece = Piece(value.detach().clone(), render, text, frame, read)
        self.pieces.append(piece)
        self.pending.append(piece)
        out = RenderedText(text)
        object.__setattr__(out, "piece", piece)
        return out

    def consume(self, text):
        """The parts of a write (literal strs and piece indices) where it carries the pending
        pieces made in its frame's expression, in order; None: no piece in it. A pending
        piece it cannot account for is refused (the trace gives the pieces up at its end)."""
        if not self.pending:
            return None
        plain = str.__str__(text) if isinstance(text, str) else str(text)
        frame = self.users_frame()
        ready = 0
        for piece in self.pending:
            if frame is not piece.frame or not _flows(frame.f_code, piece.lasti, frame.f_lasti):
                break
            ready += 1
        placed = None
        for k in range(ready, 0, -1):   # (print's first argument alone, the next pending)
            placed = _placement(plain, [p.text for p in self.pending[:k]], frame.f_code)
            if placed is not None:
                break
        taken = len(placed) if placed else 0
        # (a piece still pending must be on its way to a later write of this expression,
        # as print's next argument is: else it was kept, not written)
        for piece in self.pending[taken:]:
            if frame is not piece.frame or not _flows(frame.f_code, piece.lasti, frame.f_lasti):
                self.refused = self.refused or piece
        if not taken:
            return None
        parts, pos = [], 0
        for piece, at in zip(self.pending, placed):
            parts += [plain[pos:at], self.pieces.index(piece)]
            pos, piece.written = at + len(piece.text), True
        del self.pending[:taken]
        parts.append(plain[pos:])
        return [p for p in parts if p != ""]

    def check(self, kept=()):
        """At the run's end: every piece written as made, and none kept in `kept` (the
        result, the objects the function reaches), or the read it stood for."""
        piece = self.refused or (self.pending[0] if self.pending else None)
        if piece is None and self.pieces:
            piece = _held(kept)
        if piece is not None:
            piece.escape()


_MAX_HELD = 10000


def _held(objects):
    """The piece of a RenderedText held in objects (their items and attributes), or None."""
    todo, seen = list(objects), set()
    while todo and len(seen) < _MAX_HELD:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if type(x) is RenderedText:
            return object.__getattribute__(x, "piece")
        if isinstance(x, (list, tuple, set, frozenset)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
        elif hasattr(type(x), "__dict__") and isinstance(getattr(x, "__dict__", None), dict) \
                and not isinstance(x, type):
            todo.extend(vars(x).values())
    return None


def active():
    """The traced run's Renderings where a format may be one (not inside a branch traced
    for tensor-dependent control flow), else None."""
    rendering = trace_state.state.rendering
    tracer = trace_state.state.tracer
    if rendering is None or tracer is None or getattr(tracer, "parent", None) is not None:
        return None
    return rendering


_instructions = {}
_MAX_PLACEMENTS = 64


def _placement(text, texts, code):
    """Where the pieces' texts lie in `text`, in order and apart: the one placement whose
    literal stretches are all the code's own string constants (an f-string's: f"step {i}:
    {loss:.4f}" prints "step 1: 1.1294"), or else the only placement there is; None where
    none or several (the text does not tell which stretch the value made)."""
    if not all(texts):
        return None
    found, todo = [], [(0, ())]
    while todo and len(found) < _MAX_PLACEMENTS:     # (no recursion: a stack of prefixes)
        pos, at = todo.pop()
        if len(at) == len(texts):
            found.append(at)
            continue
        piece = texts[len(at)]
        start = text.find(piece, pos)
        while start >= 0:
            todo.append((start + len(piece), at + (start,)))
            start = text.find(piece, start + 1)
    if len(found) == 1:
        return found[0]
    if not found or len(found) >= _MAX_PLACEMENTS:
        return None
    literals = {c for c in code.co_consts if type(c) is str} | {""}
    fitting = [at for at in found if _stretches(text, texts, at) <= literals]
    return fitting[0] if len(fitting) == 1 else None


def _stretches(text, texts, at):
    """The literal stretches of text around the pieces placed at `at`."""
    out, pos = set(), 0
    for piece, start in zip(texts, at):
        out.add(text[pos:start])
        pos = start + len(piece)
    out.add(text[pos:])
    return out


def _flows(code, start, end):
    """Whether the instructions of `code` after offset `start` up to `end` (the call that
    writes) stay within one expression: none stores, drops or collects a value, or jumps
    back."""
    if end < start:
        return False
    ops = _instructions.get(code)
    if ops is None:
        ops = _instructions[code] = [(i.offset, i.opname) for i in dis.get_instructions(code)]
        if len(_instructions) > 512:
            _instructions.pop(next(iter(_instructions)))
    return not any(start < off < end and name in _ENDS for off, name in ops)
