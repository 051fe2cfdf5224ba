"""torch._dynamo.config: the settings PyTorch programs assign. `recompile_limit` (and its
older name `cache_size_limit`: one setting, as in PyTorch) is the recompile limit of every
compiled function not given one of its own, read at each recompile; `patch(**settings)`
sets some for a `with` block. The others, and any other name a program sets (PyTorch has
hundreds), are held, not read."""
import contextlib

DEFAULT_RECOMPILE_LIMIT = 8
_ALIASES = {"cache_size_limit": "recompile_limit",
            "accumulated_cache_size_limit": "accumulated_recompile_limit"}


class DynamoConfig:
    """torch._dynamo.config's names with PyTorch's defaults (see the module)."""

    def __init__(self):
        self.reset()

    def reset(self):
        """Every setting back to PyTorch's default."""
        d = self.__dict__
        d.clear()
        d.update(recompile_limit=DEFAULT_RECOMPILE_LIMIT, accumulated_recompile_limit=256,
                 suppress_errors=False, verbose=False, capture_scalar_outputs=False,
                 automatic_dynamic_shapes=True)

    def __getattr__(self, name):            # (only for names not set: the aliases)
        if name in _ALIASES:
            return getattr(self, _ALIASES[name])
        raise AttributeError(f"torch._dynamo.config.{name} does not exist")

    def __setattr__(self, name, value):
        self.__dict__[_ALIASES.get(name, name)] = value

    @contextlib.contextmanager
    def patch(self, changes=None, **settings):
        """`with config.patch(recompile_limit=64):` the settings for the block only."""
        settings = {_ALIASES.get(k, k): v for k, v in {**(changes or {}), **settings}.items()}
        missing = object()
        before = {k: self.__dict__.get(k, missing) for k in settings}
        self.__dict__.update(settings)
        try:
            yield self
        finally:
            for k, v in before.items():
                if v is missing:
                    self.__dict__.pop(k, None)
                else:
                    self.__dict__[k] = v


config = DynamoConfig()


def recompile_limit(own):
    """A compiled function's limit: its own (compile(recompile_limit=...)) or, where it has
    none, torch._dynamo.config.recompile_limit now; a setting that is no count >= 0 raises
    ValueError naming it."""
    if own is not None:
        return own
    limit = config.recompile_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"torch._dynamo.config.recompile_limit must be an int >= 0, not "
                         f"{limit!r}")
    return limit
