"""torch.hub's entry points from a directory's hubconf.py (hub.py's load / list / help with
source='local', and a GitHub repository already in the hub cache): the module is imported with
its directory first on sys.path, its `dependencies` checked, the entry point called, with
PyTorch's errors. Downloading a repository is not provided (llgrad runs offline)."""
import contextlib
import importlib.util
import os
import sys

VAR_DEPENDENCY = "dependencies"
MODULE_HUBCONF = "hubconf.py"


@contextlib.contextmanager
def _add_to_sys_path(path):
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def _import_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise AssertionError(f"failed to load spec from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_attr_from_module(module, func_name):
    return getattr(module, func_name) if func_name in dir(module) else None


def _check_dependencies(m):
    dependencies = _load_attr_from_module(m, VAR_DEPENDENCY)
    if dependencies is not None:
        missing = [pkg for pkg in dependencies if importlib.util.find_spec(pkg) is None]
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")


def _load_entry_from_hubconf(m, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    _check_dependencies(m)
    func = _load_attr_from_module(m, model)
    if func is None or not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def repo_dir(github, force_reload, hub_dir):
    """A GitHub repository's directory in the hub cache (hub_dir/owner_name_ref), as
    torch.hub leaves it after a download; llgrad does not download one."""
    if ":" in github:
        owner_name, ref = github.split(":")
    else:
        owner_name, ref = github, None
    if "/" not in owner_name:
        raise ValueError(f'Invalid input: "{github}" should be in the form of '
                         f'"repo_owner/repo_name[:ref]"')
    owner, name = owner_name.split("/")
    for r in ([ref] if ref else ["main", "master"]):
        path = os.path.join(hub_dir, "_".join([owner, name, r.replace("/", "_")]))
        if os.path.isdir(path) and not force_reload:
            return path
    raise NotImplementedError(f"llgrad.hub: {github} is not in the hub cache ({hub_dir}) and "
                              "llgrad does not download repositories; use source='local' "
                              "with a directory holding its hubconf.py")


def _hubconf(directory):
    with _add_to_sys_path(directory):
        return _import_module(MODULE_HUBCONF, os.path.join(directory, MODULE_HUBCONF))


def entry_points(directory):
    """The callable names of directory's hubconf.py not starting with _ (torch.hub.list)."""
    m = _hubconf(directory)
    return [f for f in dir(m) if callable(getattr(m, f)) and not f.startswith("_")]


def entry_doc(directory, model):
    """The docstring of entry point model (torch.hub.help)."""
    return _load_entry_from_hubconf(_hubconf(directory), model).__doc__


def load_local(hubconf_dir, model, *args, **kwargs):
    """What entry point model of hubconf_dir's hubconf.py makes of args and kwargs."""
    with _add_to_sys_path(hubconf_dir):
        hub_module = _import_module(MODULE_HUBCONF, os.path.join(hubconf_dir, MODULE_HUBCONF))
        entry = _load_entry_from_hubconf(hub_module, model)
        return entry(*args, **kwargs)
