"""nn.Module's `training`, kept in the module's __dict__ as a plain attribute is, through a
descriptor that lets a traced run see which modules' flags it set before reading them.

A training step that calls model.train() first (an eval step, model.eval()) does not
depend on the flags it found: compile's guard key holds them all the same, so without
this each step costs a trace per flag state it is entered with (compile/guards_blind.py
lets such an entry serve those states). Only the descriptor's reads and writes are seen:
a flag read any other way (the module's __dict__) counts as never written first."""
import threading


class _Watch(threading.local):
    def __init__(self):
        self.touched = None     # {id(module): (module, written first)} during a traced run


_watch = _Watch()


class TrainingFlag:
    """The data descriptor nn.Module.training: the value lives in the instance's __dict__
    (what copy, pickle and compile's guard walk read), True where it was never set."""

    def __get__(self, module, owner=None):
        if module is None:
            return self
        touched = _watch.touched
        if touched is not None and id(module) not in touched:
            touched[id(module)] = (module, False)
        return module.__dict__.get("training", True)

    def __set__(self, module, value):
        touched = _watch.touched
        if touched is not None and id(module) not in touched:
            touched[id(module)] = (module, True)
        module.__dict__["training"] = value

    def __delete__(self, module):
        try:
            del module.__dict__["training"]
        except KeyError:
            raise AttributeError("training") from None


def read_past(module):
    """Note a read of module's flag past the descriptor: its state taken whole
    (Module.__getstate__, which copy.copy, copy.deepcopy and pickle call) holds the flag as
    found, so a step that copies a module before model.train() depends on it."""
    touched = _watch.touched
    if touched is not None and id(module) not in touched:
        touched[id(module)] = (module, False)


class watching:
    """with watching() as flags: during the block, note for each module whose `training`
    the block touches whether it wrote it before reading it; afterwards flags.written_first
    holds the modules that did (the descriptor is theirs: a subclass overriding `training`
    hides its reads)."""

    def __enter__(self):
        self.outer, _watch.touched, self.written_first = _watch.touched, {}, []
        return self

    def __exit__(self, *exc):
        touched, _watch.touched = _watch.touched, self.outer
        self.written_first = [m for m, first in touched.values()
                              if first and isinstance(_resolved(type(m)), TrainingFlag)]
        return False


def _resolved(cls):
    """The `training` attribute cls resolves to (a descriptor itself, not called)."""
    for base in cls.__mro__:
        if "training" in base.__dict__:
            return base.__dict__["training"]
    return None
