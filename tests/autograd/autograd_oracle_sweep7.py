"""Shared by the sweep-7 autograd tests: run one program with llgrad and with PyTorch and
compare what it gives (values, dtypes, shapes, requires_grad, grad_fn names) or raises (the
exception type and the first line of its message, with PyTorch's `torch.` read as
`llgrad.`; a saved-tensor error's hint aside)."""
import numpy as np

import llgrad


def _norm(x, lib):
    if isinstance(x, lib.Tensor):
        gf = x.grad_fn
        return ("T", str(x.dtype).split(".")[-1], tuple(x.shape),
                np.round(np.asarray(x.detach().tolist(), dtype=float), 5).tolist(),
                x.requires_grad, type(gf).__name__ if gf is not None else None)
    if isinstance(x, (list, tuple)):
        return [_norm(i, lib) for i in x]
    if isinstance(x, float):
        return round(x, 5)
    return x


def outcome(lib, fn):
    try:
        return "ok", _norm(fn(lib), lib)
    except Exception as e:      # noqa: BLE001 (the exception is what is compared)
        # (llgrad's hint after a saved-tensor error names the lines that saved and wrote the
        # tensor, where PyTorch's suggests anomaly mode)
        first = str(e).splitlines()[0].split(" Hint: ")[0]
        return "err", type(e).__name__, first.replace("torch.", "llgrad.")


def same(fn, torch):
    assert outcome(llgrad, fn) == outcome(torch, fn)
