"""llgrad.onnx: torch.onnx's names so that programs importing it (the word-language-model
example does, to export on request) run. llgrad has no ONNX exporter: export raises."""


def export(*args, **kwargs):
    """Not available: llgrad cannot write ONNX graphs (raises NotImplementedError)."""
    raise NotImplementedError("llgrad cannot export ONNX models (torch.onnx.export); "
                              "llgrad.compile's dump() shows llgrad's own IR")


def is_in_onnx_export() -> bool:
    """False: no ONNX export ever runs, as torch.onnx.is_in_onnx_export outside one."""
    return False
