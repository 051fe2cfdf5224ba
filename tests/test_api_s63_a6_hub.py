"""torch.hub.load / list / help with a local hubconf.py (source='local', and a repository in
the hub cache), compared with PyTorch's."""
import os

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

HUBCONF = '''
dependencies = ["numpy"]
from {lib}.nn import Linear as _Linear


def tiny(width=3, bias=True):
    """A Linear(2, width)."""
    return _Linear(2, width, bias=bias)


def needs_missing():
    return None


helper_value = 5
'''


def _repo(tmp_path, lib, deps=None):
    d = tmp_path / lib
    d.mkdir()
    text = HUBCONF.format(lib=lib)
    if deps is not None:
        text = text.replace('["numpy"]', repr(deps))
    (d / "hubconf.py").write_text(text)
    return str(d)


def test_load_local_entry_point(tmp_path):
    for lib in (torch, llgrad):
        d = _repo(tmp_path, lib.__name__)
        m = lib.hub.load(d, "tiny", 4, source="local", bias=False)
        assert isinstance(m, lib.nn.Linear) and tuple(m.weight.shape) == (4, 2)
        assert m.bias is None
        assert d not in __import__("sys").path


def test_errors_as_torch(tmp_path):
    msgs = []
    for lib in (torch, llgrad):
        d = _repo(tmp_path, lib.__name__)
        row = []
        for call, exc in ((lambda: lib.hub.load(d, "helper_value", source="local"), RuntimeError),
                          (lambda: lib.hub.load(d, "nope", source="local"), RuntimeError),
                          (lambda: lib.hub.load(d, 3, source="local"), ValueError),
                          (lambda: lib.hub.load(d, "tiny", source="ftp"), ValueError)):
            with pytest.raises(exc) as info:
                call()
            row.append(str(info.value).replace(d, "D"))
        msgs.append(row)
    assert msgs[0] == msgs[1]
    d2 = tmp_path / "deps"
    d2.mkdir()
    (d2 / "hubconf.py").write_text("dependencies = ['numpy', 'no_such_pkg_a6', 'x_a6']\n"
                                   "def f():\n    return 1\n")
    for lib in (torch, llgrad):
        with pytest.raises(RuntimeError, match="Missing dependencies: no_such_pkg_a6, x_a6"):
            lib.hub.load(str(d2), "f", source="local")


def test_list_and_help_from_the_hub_cache(tmp_path):
    results = []
    for lib in (torch, llgrad):
        hub_dir = tmp_path / ("hub_" + lib.__name__)
        repo = hub_dir / "someone_tinyrepo_main"
        repo.mkdir(parents=True)
        (repo / "hubconf.py").write_text(HUBCONF.format(lib=lib.__name__))
        old = lib.hub.get_dir()
        lib.hub.set_dir(str(hub_dir))
        try:
            results.append((lib.hub.list("someone/tinyrepo:main", trust_repo=True),
                            lib.hub.help("someone/tinyrepo:main", "tiny", trust_repo=True)))
            m = lib.hub.load("someone/tinyrepo:main", "tiny", trust_repo=True)
            assert tuple(m.weight.shape) == (3, 2)
        finally:
            lib.hub.set_dir(old)
    assert results[0] == results[1]
    assert results[1][0] == ["needs_missing", "tiny"]
    np.testing.assert_equal(os.path.isdir(tmp_path), True)
