"""The families of graphs that differ only in their numbers (size_params.py): per family,
the last graph lowered at one size and the templates compiled for it. One per JIT
(jit._Jit.size_families), so a reset JIT forgets them with its code."""
import threading

MAX_TEMPLATES = 4        # per family: size classes whose code differs (threads, GEMM paths)
MAX_FAMILIES = 64


class Families:
    """Per family (graph text without numbers): the last specialised graph lowered (to
    derive a template from when another size comes) and the templates made so far."""

    def __init__(self):
        self._lock = threading.Lock()
        self._last, self._templates, self._refused = {}, {}, set()

    def templates(self, family):
        with self._lock:
            return list(self._templates.get(family, ()))

    def last(self, family):
        with self._lock:
            return self._last.get(family)

    def remember(self, family, key, args):
        """Note a specialised lowering of family: its key and lower()'s arguments (the graph
        by weak reference)."""
        with self._lock:
            self._last.pop(family, None)
            self._last[family] = (key, args)
            while len(self._last) > MAX_FAMILIES:
                self._last.pop(next(iter(self._last)))

    def add(self, family, template):
        with self._lock:
            ts = self._templates.setdefault(family, [])
            ts.append(template)
            del ts[:-MAX_TEMPLATES]
            while len(self._templates) > MAX_FAMILIES:
                self._templates.pop(next(iter(self._templates)))

    def refuse(self, family):
        """family's templates do not compile: it is specialised from now on."""
        with self._lock:
            self._refused.add(family)

    def refused(self, family):
        with self._lock:
            return family in self._refused
