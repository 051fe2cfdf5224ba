"""What llgrad.compile(module) returns: torch.compile's OptimizedModule. Calls run the
compiled forward; everything else (train/eval, parameters, state_dict, attributes, items of
a Sequential) is the module's own, so the object stands wherever the module did."""
from collections import OrderedDict

_OWN = frozenset({"_orig_mod", "_compiled"})
# what a compiled module answers as the compiled function (counters, inspection)
_COMPILED_ATTRS = frozenset({"n_traces", "entries", "cache", "dump", "backend", "fullgraph",
                             "recompile_limit", "wait", "graph_breaks", "n_llvm_compiles"})


def is_module(obj):
    """A Module-like object (llgrad.nn.Module or a look-alike): compiled as a module."""
    return callable(obj) and all(hasattr(obj, a) for a in ("forward", "parameters", "train"))


class CompiledModule:
    def __init__(self, module, compiled):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled", compiled)

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    @property
    def __class__(self):
        # (isinstance(cm, nn.Module) holds, as for torch's OptimizedModule: a parent module
        # registers it as a child, a Sequential takes it; its parameters are the module's)
        return type(self._orig_mod)

    @property
    def training(self):
        return self._orig_mod.training

    @training.setter
    def training(self, mode):           # (a parent's train() sets it on every module it
        self._orig_mod.training = mode  # walks, this one among them: the module's own)

    def __reduce_ex__(self, protocol):
        # copy.deepcopy (an EMA copy of the model), pickle and llgrad.save: the module's
        # copy, compiled afresh with the same options
        cf = self._compiled
        return _rebuild, (self._orig_mod, type(cf), cf.backend, cf.own_limit,
                          cf.transform, cf.fullgraph)

    def __getattr__(self, name):        # (only for names not found on this object)
        if name in _OWN:
            raise AttributeError(name)
        if name in _COMPILED_ATTRS:
            return getattr(self._compiled, name)
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        delattr(self._orig_mod, name)

    def load_state_dict(self, state_dict, *args, **kwargs):
        """The module's load_state_dict; a checkpoint of PyTorch's compiled module (every
        key under '_orig_mod.') loads as the module's own keys."""
        return self._orig_mod.load_state_dict(_unprefixed(state_dict), *args, **kwargs)

    def train(self, mode=True):
        self._orig_mod.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def __getitem__(self, index):
        return self._orig_mod[index]

    def __len__(self):
        return len(self._orig_mod)

    def __iter__(self):
        return iter(self._orig_mod)

    def __dir__(self):
        return sorted(set(dir(self._orig_mod)) | set(_COMPILED_ATTRS) | {"_orig_mod"})

    def __repr__(self):
        inner = repr(self._orig_mod).replace("\n", "\n  ")
        return f"OptimizedModule(\n  (_orig_mod): {inner}\n)"


def _rebuild(module, compiled_class, *options):
    return CompiledModule(module, compiled_class(module, *options))


def _unprefixed(state_dict, prefix="_orig_mod."):
    """state_dict with PyTorch's OptimizedModule prefix taken off its keys (and off its
    `_metadata`'s, where the compiled wrapper's own entry is dropped), when every key has
    it; else state_dict itself."""
    if not state_dict or not all(isinstance(k, str) and k.startswith(prefix)
                                 for k in state_dict):
        return state_dict
    renamed = type(state_dict)() if isinstance(state_dict, OrderedDict) else OrderedDict()
    for k, v in state_dict.items():
        renamed[k[len(prefix):]] = v
    meta = getattr(state_dict, "_metadata", None)
    if meta is not None:
        renamed._metadata = OrderedDict(
            (k[len(prefix):] if k.startswith(prefix) else "", v) for k, v in meta.items()
            if k != "")
    return renamed
