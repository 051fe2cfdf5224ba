"""The families of graphs that differ only in their numbers (size_params.py): per family,
the last graphs lowered at one size each and the templates compiled for it. One per JIT
(jit._Jit.size_families), so a reset JIT forgets them with its code."""
import threading

MAX_TEMPLATES = 4        # per family: size classes whose code differs (threads, GEMM paths)
MAX_FAMILIES = 64
# per family: specialised lowerings a new size may derive a template from. Two, so sizes
# that alternate between classes whose code differs (small and large batches, where a loop
# threads past a threshold) still find one of their own class: 3, 700, 5, 2000 derive the
# small class's template at 5 and the large's at 2000, where the last alone (the other
# class, each time) left every size to build its own code
MAX_LAST = 2


class Families:
    """Per family (graph text without numbers): the last MAX_LAST specialised graphs
    lowered (to derive a template from when another size comes) and the templates made so far."""

    def __init__(self):
        self._lock = threading.Lock()
        self._last, self._templates, self._refused = {}, {}, set()

    def templates(self, family):
        with self._lock:
            return list(self._templates.get(family, ()))

    def last(self, family):
        """The family's specialised lowerings noted (key, args), the most recent first."""
        with self._lock:
            return list(reversed(self._last.get(family, ())))

    def remember(self, family, key, args):
        """Note a specialised lowering of family: its key and lower()'s arguments (the graph
        by weak reference)."""
        with self._lock:
            kept = [e for e in self._last.pop(family, ()) if e[0] != key]
            self._last[family] = (kept + [(key, args)])[-MAX_LAST:]
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
