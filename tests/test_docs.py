"""Documentation in the code: every public function, class and method of llgrad's public
namespaces has a docstring (methods may inherit theirs, as help() shows them), Tensor
methods and llgrad.* functions made from the op table get theirs from the generator,
help(llgrad.compile) explains the compiler and its environment variables, and the package
ships its type annotations (py.typed, PEP 561)."""
import importlib
import inspect
import pathlib
import pydoc
import types

import pytest

import llgrad

NAMESPACES = ["llgrad", "llgrad.nn", "llgrad.nn.functional", "llgrad.nn.init", "llgrad.nn.utils",
              "llgrad.nn.parallel", "llgrad.optim", "llgrad.optim.lr_scheduler",
              "llgrad.utils.data", "llgrad.func", "llgrad.distributed", "llgrad.autograd",
              "llgrad.linalg", "llgrad.debug", "llgrad.ir", "llgrad.cuda"]

COMPILE_ENV_VARS = ["LLGRAD_BACKEND", "LLGRAD_DUMP", "LLGRAD_COMPILE", "LLGRAD_CACHE_DIR",
                    "LLGRAD_KERNEL_CACHE_MB", "LLGRAD_NUM_THREADS", "LLGRAD_LOG",
                    "LLGRAD_CHECK"]


def _module(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        if name == "llgrad.func":           # (if present)
            return None
        raise


def _public_names(mod):
    names = mod.__dict__.get("__all__")
    if names is None:
        names = [n for n in vars(mod) if not n.startswith("_")]
    if mod is llgrad:       # llgrad.* functions of ops declared after import (__getattr__)
        from llgrad.runtime import functions
        names = sorted(set(names) | set(functions.__all__))
    return names


def _own_doc(obj):
    """The docstring obj itself has (a class's own, not one inherited from its base)."""
    if inspect.isclass(obj):
        return obj.__dict__.get("__doc__")
    return inspect.getdoc(obj)


def _members_without_doc(cls, where):
    """Public methods and properties defined on cls without a docstring (inherited from
    the method they override counts, as help() shows it)."""
    missing = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            doc = value.__doc__
        elif isinstance(value, (staticmethod, classmethod)) or inspect.isfunction(value):
            doc = inspect.getdoc(getattr(cls, name))
            if not doc:     # a method defined outside the class body: look it up the MRO
                doc = next((inspect.getdoc(vars(base)[name]) for base in cls.__mro__[1:]
                            if name in vars(base) and inspect.getdoc(vars(base)[name])), None)
        else:
            continue
        if not doc or not doc.strip():
            missing.append(f"{where}.{name}")
    return missing


def _undocumented():
    missing, seen = [], set()
    for modname in NAMESPACES:
        mod = _module(modname)
        if mod is None:
            continue
        for name in _public_names(mod):
            obj = getattr(mod, name)
            if isinstance(obj, types.ModuleType) or not callable(obj):
                continue
            if not getattr(obj, "__module__", "llgrad").startswith("llgrad"):
                continue        # (NumPy's, the standard library's: not ours to document)
            key = id(obj)
            if key in seen:
                continue
            seen.add(key)
            where = f"{modname}.{name}"
            doc = _own_doc(obj)
            if not doc or not doc.strip():
                missing.append(where)
            if inspect.isclass(obj):
                missing += _members_without_doc(obj, where)
    return missing


def test_every_public_name_has_a_docstring():
    missing = _undocumented()
    assert not missing, f"{len(missing)} public names without a docstring:\n  " + \
        "\n  ".join(missing)


def test_namespaces_are_checked():
    # the walk above sees the whole API: Tensor's methods, nn's layers, the optimisers
    assert llgrad.Tensor.__dict__.get("__doc__")
    assert "llgrad.nn.Linear" not in _undocumented()
    for modname in ("llgrad", "llgrad.nn", "llgrad.nn.functional", "llgrad.optim",
                    "llgrad.utils.data", "llgrad.distributed"):
        assert len([n for n in _public_names(importlib.import_module(modname))
                    if not n.startswith("_")]) >= 5, modname


def test_generated_methods_and_functions_get_docstrings_from_the_generator():
    from llgrad.ir import OPS
    from llgrad.ir.optable import method_doc
    op = next(o for o in OPS.values() if "exp" in o.methods)
    assert llgrad.Tensor.exp.__doc__ == method_doc("exp", op) == "As torch.Tensor.exp."
    assert llgrad.Tensor.exp_.__doc__ == "As torch.Tensor.exp_."
    assert "as torch.exp." in llgrad.exp.__doc__
    # an op's doc= note is added to its methods' docstrings
    assert method_doc("x", type("Op", (), {"doc": "a note"})()) == "As torch.Tensor.x. a note"
    # hand-written methods that differ from PyTorch keep their own text
    assert "tensor" in llgrad.Tensor.add.__doc__ and "As torch.Tensor.add" not in \
        llgrad.Tensor.add.__doc__
    assert "view" in llgrad.Tensor.numpy.__doc__


def test_help_of_compile_explains_the_compiler():
    text = pydoc.render_doc(llgrad.compile, renderer=pydoc.plaintext)
    for var in COMPILE_ENV_VARS:
        assert var in text, f"help(llgrad.compile) does not mention {var}"
    for topic in ("llvm", "interpret", "python", "eager", "guard", "re-trac", "graph break",
                  "fullgraph", "fn.dump", "sync", "background", "thread", "recompile_limit",
                  "transform"):
        assert topic in text.lower(), f"help(llgrad.compile) does not mention {topic!r}"


@pytest.mark.parametrize("fn", [llgrad.zeros, llgrad.tensor, llgrad.cat, llgrad.compile,
                                llgrad.explain, llgrad.save, llgrad.load, llgrad.grad,
                                llgrad.Tensor.backward, llgrad.Tensor.size,
                                llgrad.nn.Module.parameters, llgrad.nn.Module.state_dict,
                                llgrad.optim.SGD.__init__, llgrad.optim.Adam.__init__,
                                llgrad.utils.data.DataLoader.__init__,
                                llgrad.distributed.init_process_group,
                                llgrad.distributed.all_reduce, llgrad.profile.table])
def test_the_public_api_is_annotated(fn):
    assert fn.__annotations__.get("return") is not None, fn.__qualname__


def test_py_typed_ships():
    pkg = pathlib.Path(llgrad.__file__).parent
    assert (pkg / "py.typed").is_file()
    pyproject = pkg.parent / "pyproject.toml"
    if pyproject.is_file():                 # (a source checkout: the marker is package data)
        assert "py.typed" in pyproject.read_text()
