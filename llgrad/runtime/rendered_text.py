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

Only where that is exactly what eager prints: the text must be written by a call whose
bytecode says what each write is made of (runtime/write_sites.py: print of f-strings and
values, `sys.stdout.write(f"...")`), each piece at the place its FORMAT_VALUE (or print's
own str() of a value) puts it, the text between known or placed one way only; anything
else, a piece the run keeps, concatenates, pads or inspects (compares it, takes its length,
calls a method of it), gives it up: the value is read as before (a value guard, or a graph
break for a large tensor), so the call is traced for that value. A text the function returns
is each compiled call's own (compile/symbolic_args.py) unless its text also went out as
traced: written or warned other than at its place, or copied (an f-string around it, a
join), which gives it up too. A repr naming a grad_fn the caller made (an input's) stops
the trace: no guard follows which node an input has."""
import itertools
import os
import string
import sys

from . import trace_state
from .write_sites import call_offset, write_site


class Piece:
    """One formatted value: its copy in the graph, format(array) -> text, the text of this
    run, the user's frame and instruction where it was formatted, and read(where): the read
    the format stood in for (it raises, ending the trace, or guards the value)."""
    __slots__ = ("tensor", "render", "text", "frame", "lasti", "read", "where", "written",
                 "formatted", "owner")

    def __init__(self, tensor, render, text, frame, read, formatted, owner):
        self.tensor, self.render, self.text, self.written = tensor, render, text, False
        self.owner = owner              # (the run's Renderings)
        self.formatted = formatted      # (made by the value's own __format__, not its str())
        self.frame, self.lasti, self.read = frame, call_offset(frame.f_code, frame.f_lasti), read
        self.where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"

    def escape(self):
        """The read the format stood for, named by the user's line of the format."""
        self.read(self.where)

    def copied(self):
        """Its text was copied into a plain str: given up when the run ends, not returned
        as each call's text (the copy would hold the traced call's)."""
        owner = self.owner
        if self in owner.pending:
            owner.pending.remove(self)
            owner.shown.append(self)


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

    # (the copies made here are plain strs no later read can give up: the piece is marked
    # copied, so it is given up when the run ends; llgrad's own copies, a Parameter's repr
    # around the tensor's, are the text print writes)
    def __format__(self, spec):
        if spec:
            self.piece.escape()
        else:   # (an f-string around it copies it; not the format of its own conversion,
            # f"{loss!r}", at the instruction that made it)
            piece, f = self.piece, sys._getframe(1)
            if f is not piece.frame or call_offset(f.f_code, f.f_lasti) != piece.lasti:
                _copied(self)
        return format(str.__str__(self), spec) if spec else self

    def __repr__(self):
        _copied(self)
        return repr(str.__str__(self))

    def __add__(self, other):
        _copied(self)
        return str.__str__(self) + other

    def __radd__(self, other):
        _copied(self)
        return other + str.__str__(self)

    def __mod__(self, args):
        _copied(self)
        return str.__str__(self) % args


def _copied(text):
    """A copy of text made by the code calling its method: the piece marked copied unless
    that code is llgrad's own."""
    piece = object.__getattribute__(text, "piece")
    if not piece.owner.internal[sys._getframe(2).f_code.co_filename]:
        piece.copied()


def _read(name):
    def read(self, *args):
        object.__getattribute__(self, "piece").escape()
        return getattr(str, name)(str.__str__(self), *args)
    read.__name__ = name
    return read


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__len__",
              "__contains__", "__getitem__", "__iter__", "__mul__", "__rmul__", "__reduce__",
              "__reduce_ex__"):
    setattr(RenderedText, _name, _read(_name))
_PASSED = frozenset(("piece", "__class__", "__str__", "__format__", "__add__", "__radd__",
                     "__mod__", "__dict__", "__repr__"))


class Renderings:
    """The pieces of one traced run (replayed_output.recording makes it the thread's);
    users_frame(): the nearest frame of the user's code; internal[filename]: whether the
    file is llgrad's own."""

    def __init__(self, users_frame, internal):
        self.internal = internal
        self.pieces, self.pending = [], []
        # pieces whose text was copied (their methods): given up when the run ends; and the
        # texts written or warned of no known making while pieces were pending
        self.shown, self.went = [], []
        self.users_frame = users_frame
        self.write_at = {}      # (frame, call offset) -> the index of its last write
        self.options = None             # the print options when the run began (recording)
        self.given = 0                  # texts written and warnings shown so far

    def add(self, value, render, text, read, formatted=False):
        """This run's text of `value` (a tensor of the trace, copied here) as a
        RenderedText, noted as a piece; read(where): the read it stands for; formatted:
        made by the value's own __format__ (a template's field), not its str() or repr()."""
        node = getattr(value, "_grad_fn", None)
        tracer = trace_state.state.tracer
        if getattr(node, "_seq", tracer.first_node) < tracer.first_node and \
                f"grad_fn=<{type(node).__name__}>" in text:
            # (a repr naming the node the caller made the input with: no guard follows which)
            tracer.graph_break(f"printing a tensor whose grad_fn ({type(node).__name__}) the "
                               "caller made, which no guard follows,")
        frame = self.users_frame()
        if frame is None:       # (no frame of the user's: the read, if it does not raise)
            read("?")
            return text
        piece = Piece(value.detach().clone(), render, text, frame, read, formatted, self)
        self.pieces.append(piece)
        self.pending.append(piece)
        out = RenderedText(text)
        object.__setattr__(out, "piece", piece)
        return out

    def consume(self, text):
        """The parts of a write (literal strs and piece indices) where it carries pending
        pieces at places its call's bytecode gives them; None: none placed (a piece left
        pending is given up when the run ends). The write's text of no known making is
        noted (went_out)."""
        plain = str.__str__(text) if isinstance(text, str) else str(text)
        frame = self.users_frame()
        site = write_site(frame) if frame is not None else None
        if site is None:
            self.went_out(plain)
            return None
        call = (frame, call_offset(frame.f_code, frame.f_lasti))   # (each write counted)
        # (each call's writes counted on their own: a print inside an argument's str()
        # writes in the middle of another's)
        n = self.write_at.get(call, -1) + 1
        n = n if n < len(site.writes) else 0
        self.write_at[call] = n
        if not self.pending:
            return None
        item = site.writes[n]
        segments = self._segments(item, frame, text)
        parts = None
        if segments is not None:
            parts = _fill(plain, *segments) if type(segments) is tuple else \
                _align(plain, segments)[1]
        if parts is None:
            if not (type(item) is tuple and item[0] == "const"):    # (a code constant)
                self.went_out(plain)
            return None
        for p in parts:
            if type(p) is Piece:
                p.written = True
                self.pending.remove(p)
        for p in parts:         # (text the bytecode does not give: a variable's, say)
            if type(p) is _Stretch:
                self.went_out(p)
        return [self.pieces.index(p) if type(p) is Piece else str.__str__(p)
                for p in parts if p != ""]

    def went_out(self, text):
        """Text written or warned of no known making (a variable's, a warning's): noted, as
        it may hold a pending piece's text (check)."""
        if self.pending:
            self.went.append(text)

    def _segments(self, item, frame, text):
        """The write's segments ("text" literal, a Piece, or None: text of no piece) for
        the argument item (write_sites), or None where no piece is in it."""
        kind = item[0] if type(item) is tuple else None
        if kind == "fmt":
            piece = self._made_at(frame, item[1])
            return None if piece is None else [piece]
        if kind == "str":
            segments = []
            for part in item[1]:
                if type(part) is tuple and part[0] == "const" and type(part[1]) is str:
                    segments.append(part[1])
                elif type(part) is tuple and part[0] == "fmt":
                    segments.append(self._made_at(frame, part[1]))
                else:
                    segments.append(None)
            return segments if any(type(g) is Piece for g in segments) else None
        if kind == "format":            # (the pieces the call made, in its fields' order)
            made = [p for p in self.pending if p.frame is frame and p.lasti == item[1]]
            if not all(p.formatted for p in made):
                return None     # (a piece inside a field's text, a tuple's: not the field)
            try:
                fields = list(string.Formatter().parse(item[2])) if made else None
            except ValueError:
                fields = None
            if not fields or any(spec and "{" in spec for _, _, spec, _ in fields):
                return None
            segments, slots = [], []
            for literal, field, _, _ in fields:
                if literal:
                    segments.append(literal)
                if field is not None:
                    slots.append(len(segments))
                    segments.append(None)
            return segments, slots, made
        if kind in (None, "const"):     # (a separator, an end, a constant)
            return None
        # print's own str() of the value, made inside the call: the text is the piece, or
        # (llgrad's own str() around it: a Parameter's) holds it
        at = call_offset(frame.f_code, frame.f_lasti)
        made = [p for p in self.pending if p.frame is frame and p.lasti == at]
        if len(made) != 1:
            return None
        if type(text) is RenderedText and object.__getattribute__(text, "piece") is made[0]:
            return [made[0]]
        return [None, made[0], None]

    def _made_at(self, frame, offset):
        """The last pending piece formatted in frame at instruction offset, or None."""
        for piece in reversed(self.pending):
            if piece.frame is frame and piece.lasti == offset:
                return piece
        return None

    def check(self, kept=()):
        """At the run's end: every piece written as made, and none kept in `kept` (the
        result, the objects the function reaches), or the read each such piece stood for
        (each of them: a read that guards lets the run go on to the next)."""
        given_up = self.pending + self.shown
        if self.pieces:
            given_up += [p for p in (object.__getattribute__(t, "piece")
                                     for t in held(kept, RenderedText)) if p not in given_up]
        # (a piece returned as each call's text (compile/symbolic_args.py): given up where
        # its text went out as traced, or a plain str kept or returned holds it, a copy no
        # hook saw: print(s), ",".join([s]))
        returned = [p for p in self.pieces if not p.written and p not in given_up]
        if returned:
            texts = self.went + held(kept, str)
            given_up += [p for p in returned if any(p.text in t for t in texts)]
        for piece in given_up:
            piece.escape()


_MAX_HELD = 10000


def held(objects, kind, modules=True):
    """The objects of type `kind` held in objects (their items and attributes): the
    RenderedTexts a run kept, compile's stream wrappers a run stored; modules=False: not
    looking into modules (sys holds the wrappers while they are in place)."""
    todo, seen, found = list(objects), set(), []
    while todo and len(seen) < _MAX_HELD:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if type(x) is kind:
            found.append(x)
            continue
        # (through the base types' own methods and the instance dict: a subclass's or an
        # object's hooks, an optimiser's ParamGroup noting the hyper-parameters read, must
        # not see the walk)
        if isinstance(x, dict):
            todo.extend(dict.values(x))
            continue
        base = next((b for b in (list, tuple, set, frozenset) if isinstance(x, b)), None)
        if base is not None:
            todo.extend(base.__iter__(x))
        elif not isinstance(x, type) and (modules or type(x) is not type(os)):
            try:
                d = object.__getattribute__(x, "__dict__")
            except (AttributeError, TypeError):
                continue
            if type(d) is dict:
                todo.extend(dict.values(d))
    return found


def value_free(spec):
    """Whether format(number, spec) succeeds for every number of the type once it does for
    one: not for 'c' (a character: a code point in range only)."""
    return spec[-1:] != "c"


def active():
    """The traced run's Renderings where a format may be one (not inside a branch traced
    for tensor-dependent control flow), else None."""
    state = trace_state.state
    rendering, tracer = state.rendering, state.tracer
    if rendering is None or tracer is None or getattr(tracer, "parent", None) is not None or \
            state.types_read:       # (type(s) is str would fail: the value is read instead)
        return None
    return rendering


_MAX_ALIGNMENTS = 2
_MAX_FIELDS = 12


class _Stretch(str):
    """A stretch of a write's text the bytecode gives no making of (a None segment's)."""


def _align(text, segments):
    """text split as segments says (literal strs, Pieces (their text), None: any text):
    (how many splits fit (0, 1, or 2: several), the one as [str | Piece | _Stretch], else
    None)."""
    found, todo = [], [(0, 0, ())]
    while todo and len(found) < _MAX_ALIGNMENTS:    # (no recursion: a stack of prefixes)
        k, pos, acc = todo.pop()
        if k == len(segments):
            if pos == len(text):
                found.append(acc)
            continue
        seg = segments[k]
        if seg is None:
            nxt = segments[k + 1] if k + 1 < len(segments) else False
            if nxt is False:
                todo.append((k + 1, len(text), acc + (_Stretch(text[pos:]),)))
            elif nxt is None:                   # (two unknowns in a row: one stretch)
                todo.append((k + 1, pos, acc))
            else:
                known = nxt.text if type(nxt) is Piece else nxt
                at = text.find(known, pos)
                while at >= 0:
                    todo.append((k + 1, at, acc + (_Stretch(text[pos:at]),)))
                    at = text.find(known, at + 1)
            continue
        known = seg.text if type(seg) is Piece else seg
        if text.startswith(known, pos):
            todo.append((k + 1, pos + len(known), acc + (seg,)))
    return len(found), (list(found[0]) if len(found) == 1 else None)


def _fill(text, segments, slots, pieces):
    """_align with the pieces put in order into some of the slots (a template's fields,
    the others any text): the one way that fits, or None."""
    if len(pieces) > len(slots) or len(slots) > _MAX_FIELDS:
        return None
    found = None
    for chosen in itertools.combinations(slots, len(pieces)):
        filled = list(segments)
        for k, piece in zip(chosen, pieces):
            filled[k] = piece
        n, parts = _align(text, filled)
        if n and (found is not None or n > 1):
            return None
        found = parts if n else found
    return found
