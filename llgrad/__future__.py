"""llgrad.__future__: torch.__future__'s switches for how nn.Module conversions (to, float,
double, ...) and load_state_dict change parameters.

llgrad's conversions already keep each parameter's object and change its data (what
PyTorch's swap path gives: optimisers keep working), so set_swap_module_params_on_conversion
is recorded and read back; set_overwrite_module_params_on_conversion(True) (with swapping
off) makes conversions assign new Parameter objects instead, as in PyTorch."""

_overwrite_module_params_on_conversion = False
_swap_module_params_on_conversion = False


def set_overwrite_module_params_on_conversion(value: bool) -> None:
    """Whether nn.Module conversions assign new parameters, as
    torch.__future__.set_overwrite_module_params_on_conversion."""
    global _overwrite_module_params_on_conversion
    _overwrite_module_params_on_conversion = value


def get_overwrite_module_params_on_conversion() -> bool:
    """As torch.__future__.get_overwrite_module_params_on_conversion (default False)."""
    return _overwrite_module_params_on_conversion


def set_swap_module_params_on_conversion(value: bool) -> None:
    """Whether conversions swap parameters in place (keeping their objects), as
    torch.__future__.set_swap_module_params_on_conversion; takes precedence over the
    overwrite switch."""
    global _swap_module_params_on_conversion
    _swap_module_params_on_conversion = value


def get_swap_module_params_on_conversion() -> bool:
    """As torch.__future__.get_swap_module_params_on_conversion (default False)."""
    return _swap_module_params_on_conversion
