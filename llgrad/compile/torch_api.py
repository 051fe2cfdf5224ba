"""torch.compile's keyword arguments, as llgrad.compile takes them: checked as PyTorch
checks them, and mapped onto llgrad's backends (the rest changes nothing here)."""

TORCH_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs",
               "max-autotune")
# torch.compile's backends as llgrad's: inductor (the default) is native code; eager and
# aot_eager run the captured graphs eagerly, as PyTorch's do
TORCH_BACKENDS = {"inductor": None, "eager": "eager", "aot_eager": "eager"}
TORCH_KEYWORDS = ("dynamic", "mode", "options", "name", "disable", "isolate_recompiles",
                  "shapes_spec")


def torch_compile_arguments(backend, options):
    """(llgrad's backend name, disable) for torch.compile's backend and its other keywords
    (dynamic, mode, options, name, disable, isolate_recompiles, shapes_spec), checked as
    PyTorch checks them. mode, options and dynamic change nothing here: every mode compiles
    to native code, and shapes are specialised (a new size traces again)."""
    unknown = sorted(set(options) - set(TORCH_KEYWORDS))
    if unknown:
        raise TypeError(f"compile() got an unexpected keyword argument '{unknown[0]}'")
    mode, dynamic = options.get("mode"), options.get("dynamic")
    if mode is not None and options.get("options") is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode is not None and mode not in TORCH_MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           f"{', '.join(TORCH_MODES)}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise AssertionError(f"Expected enable to be a bool, got {type(dynamic)}")
    if callable(backend):
        raise TypeError("llgrad.compile: a backend function (a torch.compile custom backend, "
                        "which receives FX graphs) is not supported; use backend='inductor' "
                        "(llgrad's native code), 'eager', 'llvm', 'interpret' or 'python'")
    return TORCH_BACKENDS.get(backend, backend), bool(options.get("disable", False))
