"""`python -m llgrad coverage`: which public names of PyTorch llgrad has, namespace by
namespace (torch, torch.nn, torch.nn.functional, Tensor methods and attributes, torch.optim,
torch.optim.lr_scheduler, torch.func, torch.utils.data, torch.nn.utils), with the counts and
the missing names. PyTorch itself enumerates its names, so it must be installed.

A name counts as present when the llgrad counterpart of the namespace has an attribute of that
name (llgrad.nn.LSTM for torch.nn.LSTM, llgrad.Tensor.add_ for torch.Tensor.add_); whether it
behaves as PyTorch's is for the tests to say. Submodules are not names (they are namespaces of
their own or out of scope)."""
import importlib
import inspect
import os
import sys
import types

from .version import __version__

# (torch namespace, how its public names are chosen, the llgrad counterpart's dotted name)
NAMESPACES = [
    ("torch (functions)", "__all__:functions", "llgrad"),
    ("torch (classes, dtypes, ...)", "__all__:others", "llgrad"),
    ("torch.nn", "dir", "llgrad.nn"),
    ("torch.nn.functional", "functions", "llgrad.nn.functional"),
    ("torch.Tensor", "dir", "llgrad.Tensor"),
    ("torch.optim", "__all__", "llgrad.optim"),
    ("torch.optim.lr_scheduler", "__all__", "llgrad.optim.lr_scheduler"),
    ("torch.func", "__all__", "llgrad.func"),
    ("torch.utils.data", "__all__", "llgrad.utils.data"),
    ("torch.nn.utils", "__all__", "llgrad.nn.utils"),
]


class TorchMissing(RuntimeError):
    pass


def _resolve(dotted):
    """A module or class by dotted name (torch.Tensor is an attribute of torch; a note in
    parentheses is not part of the name)."""
    dotted = dotted.split(" ")[0]
    try:
        return importlib.import_module(dotted)
    except ImportError:
        head, _, attr = dotted.rpartition(".")
        return getattr(importlib.import_module(head), attr)


def _public(obj, how):
    """The public names of a torch namespace (not submodules, not typing helpers)."""
    if how.startswith("__all__"):
        names = list(getattr(obj, "__all__"))
    else:
        names = [n for n in dir(obj) if not n.startswith("_")]
    out = []
    for n in names:
        try:
            v = getattr(obj, n)
        except AttributeError:
            continue
        if isinstance(v, types.ModuleType):
            continue
        function = callable(v) and not inspect.isclass(v)
        if how == "functions":       # torch.nn.functional: its functions, not re-exported types
            if not function or \
                    not (getattr(v, "__module__", None) or "torch").startswith("torch"):
                continue
        if how.endswith(":functions") and not function or how.endswith(":others") and function:
            continue
        out.append(n)
    return sorted(set(out))


def _counterpart(dotted):
    """(the llgrad object for a dotted name or None, a note when it is looked up elsewhere)."""
    try:
        return _resolve(dotted), ""
    except (ImportError, AttributeError):
        return None, f"no {dotted}"


def collect():
    """(torch's version, [(torch namespace, llgrad namespace, note, names present, names
    missing)]); raises TorchMissing without torch."""
    try:
        torch = importlib.import_module("torch")
    except ImportError as e:
        raise TorchMissing("llgrad coverage needs PyTorch to enumerate PyTorch's names, and "
                           f"`import torch` failed ({e}); install it (pip install torch) and "
                           "run `python -m llgrad coverage` again") from None
    rows = []
    for name, how, ours in NAMESPACES:
        names = _public(_resolve(name), how)
        target, note = _counterpart(ours)
        have = [n for n in names if target is not None and hasattr(target, n)]
        missing = [n for n in names if n not in set(have)]
        rows.append((name, ours, note, have, missing))
    return torch.__version__, rows


def report(show_missing=True, width=100):
    """The report as text: a table of counts, then the missing names of each namespace."""
    version, rows = collect()
    lines = [f"PyTorch coverage: public names of torch {version} that llgrad {__version__} has",
             "", f"  {'namespace':28s} {'llgrad has':>12s}  {'share':>6s}"]
    total_have = total = 0
    for name, _, note, have, missing in rows:
        n = len(have) + len(missing)
        total_have, total = total_have + len(have), total + n
        extra = f"  ({note})" if note else ""
        lines.append(f"  {name:28s} {len(have):5d} / {n:<5d} {100 * len(have) / max(n, 1):5.0f}%"
                     f"{extra}")
    lines.append(f"  {'all':28s} {total_have:5d} / {total:<5d} "
                 f"{100 * total_have / max(total, 1):5.0f}%")
    if show_missing:
        for name, _, _, _, missing in rows:
            if not missing:
                continue
            lines += ["", f"missing from {name} ({len(missing)}):"]
            line = " "
            for n in missing:
                if len(line) + len(n) + 2 > width:
                    lines.append(line.rstrip())
                    line = " "
                line += f" {n},"
            lines.append(line.rstrip(","))
    return "\n".join(lines)


def markdown():
    """The counts as a Markdown table (for README.md)."""
    version, rows = collect()
    lines = ["| namespace | llgrad has | of torch's | share |", "|---|---|---|---|"]
    total_have = total = 0
    for name, _, note, have, missing in rows:
        n = len(have) + len(missing)
        total_have, total = total_have + len(have), total + n
        label = f"`{name.split(' ')[0]}`" + (" " + " ".join(name.split(" ")[1:])
                                             if " " in name else "")
        lines.append(f"| {label}{f' ({note})' if note else ''} | {len(have)} | {n} | "
                     f"{100 * len(have) / max(n, 1):.0f}% |")
    lines.append(f"| all | {total_have} | {total} | {100 * total_have / max(total, 1):.0f}% |")
    return "\n".join(lines)


def main(show_missing=True, as_markdown=False):
    try:
        print(markdown() if as_markdown else report(show_missing))
    except TorchMissing as e:
        print(f"llgrad coverage: {e}")
        return 2
    except BrokenPipeError:
        # the reader went away (`... coverage | head`): no traceback, as a Unix tool; stdout
        # goes to devnull so that the interpreter's own flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
