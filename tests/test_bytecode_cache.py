"""llgrad's module bytecode in its signed disk cache where Python writes none
(llgrad/_bytecode.py): a second process loads every module from the cache, a damaged entry
is compiled again, and nothing is installed where Python keeps its own bytecode or the
cache is off."""
import json
import os
import subprocess
import sys

_CHILD = """
import json, inspect, llgrad, llgrad._bytecode as b
from llgrad.runtime import tensor
loader = type(tensor.__spec__.loader).__name__
src = inspect.getsource(tensor.Tensor.detach)
print(json.dumps({"counts": b.counts, "loader": loader, "file": tensor.__file__,
                  "src": "def detach" in src, "y": float((llgrad.ones(3) * 2).sum())}))
"""


def _run(tmp_path, **env_changes):
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path / "cache"),
               LLGRAD_CACHE_KEY_FILE=str(tmp_path / "key" / "cache-key"),
               PYTHONDONTWRITEBYTECODE="1")
    for k, v in env_changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_llgrad_from_the_cache(tmp_path):
    first = _run(tmp_path)
    assert first["counts"]["cached"] == 0 and first["counts"]["compiled"] > 300
    assert first["loader"] == "_CachedLoader" and first["src"] and first["y"] == 6.0
    second = _run(tmp_path)
    assert second["counts"] == {"cached": first["counts"]["compiled"], "compiled": 0}
    assert second["file"] == first["file"] and second["src"] and second["y"] == 6.0
    entries = sorted((tmp_path / "cache" / "modules").iterdir())
    assert len(entries) == first["counts"]["compiled"]
    # a damaged entry fails its signature: that module is compiled again, the rest load
    data = bytearray(entries[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    entries[0].write_bytes(bytes(data))
    third = _run(tmp_path)
    assert third["counts"] == {"cached": first["counts"]["compiled"] - 1, "compiled": 1}
    assert third["y"] == 6.0


def test_nothing_installed_where_python_writes_bytecode_or_the_cache_is_off(tmp_path):
    off = _run(tmp_path, LLGRAD_CACHE_DIR="0")
    assert off["counts"] == {"cached": 0, "compiled": 0} and off["loader"] == "SourceFileLoader"
    own = _run(tmp_path, PYTHONDONTWRITEBYTECODE=None,
               PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))     # (not into the source tree)
    assert own["counts"] == {"cached": 0, "compiled": 0} and own["loader"] == "SourceFileLoader"
    assert not (tmp_path / "cache" / "modules").exists()


def test_nothing_written_into_a_refused_cache_directory(tmp_path):
    d = tmp_path / "cache"
    d.mkdir()
    os.chmod(d, 0o777)          # (others may write: the kernel cache refuses it)
    out = _run(tmp_path)
    assert out["counts"]["cached"] == 0 and out["y"] == 6.0
    assert list(d.iterdir()) == []
