"""A compiled function with a tensor-dependent `if` whose source Python cannot show (a
program given as `python -c`, piped to `python -`, or a notebook cell run by exec): compile
warns that the branch becomes a value guard. The warning named a line inside llgrad (a
fixed stacklevel that counted the wrong frames) instead of the user's call, unlike every
other warning of compile; it now names the call. The results equal eager's either way."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = textwrap.dedent("""
    import json, warnings
    import LIB


    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1


    cf = LIB.compile(f)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = [cf(LIB.full((3,), v)).tolist() for v in (1.0, -1.0, 1.0, -0.5)]
    print(json.dumps([out, [(w.filename, w.lineno) for w in seen
                            if "control flow" in str(w.message)]]))
""")


@pytest.mark.parametrize("how", ["-c", "stdin"])
def test_a_function_without_source_warns_at_the_users_call(tmp_path, how):
    env = dict(os.environ, LLGRAD_COMPILE="sync", LLGRAD_CACHE_DIR=str(tmp_path),
               LLGRAD_BACKEND="interpret", PYTHONPATH=ROOT)
    args, stdin = ([sys.executable, "-c", PROGRAM.replace("LIB", "llgrad")], None) \
        if how == "-c" else ([sys.executable, "-"], PROGRAM.replace("LIB", "llgrad"))
    out = subprocess.run(args, input=stdin, cwd=str(tmp_path), env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got, where = json.loads(out.stdout.strip().splitlines()[-1])
    call_line = PROGRAM.splitlines().index(
        "    out = [cf(LIB.full((3,), v)).tolist() for v in (1.0, -1.0, 1.0, -0.5)]") + 1
    assert where == [["<string>" if how == "-c" else "<stdin>", call_line]]
    expected = [(torch.full((3,), v) * 2 if v > 0 else torch.full((3,), v) - 1).tolist()
                for v in (1.0, -1.0, 1.0, -0.5)]
    assert got == expected
