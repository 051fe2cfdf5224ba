"""Pictures and the command line: dump(format="dot") parses as DOT (and renders where
Graphviz is installed), the built-in SVG is well-formed XML, dump() shows readably in a REPL,
and `python -m llgrad` has --version and dump --llvm --asm --python --dot --svg."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.compile.dot import render_svg


def _loss(x, w1, w2, y):
    return F.cross_entropy((x @ w1).tanh() @ w2, y)


def _args():
    return (llgrad.randn(8, 4), llgrad.randn(4, 16, requires_grad=True),
            llgrad.randn(16, 3, requires_grad=True), llgrad.zeros(8, dtype=llgrad.int64))


def check_dot(text):
    """A structural DOT check: one digraph, braces balanced outside quoted strings, every
    edge's two nodes declared (-> the declared node ids and the edges)."""
    assert text.lstrip().startswith("digraph ")
    unquoted = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    depth = 0
    for ch in unquoted:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, "a } closes nothing"
    assert depth == 0, "unbalanced braces"
    declared = set(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[", unquoted, re.M))
    declared -= {"graph", "node", "edge"}
    edges = re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*->\s*([A-Za-z_][A-Za-z0-9_]*)",
                       unquoted, re.M)
    assert edges
    for a, b in edges:
        assert a in declared and b in declared, (a, b)
    return declared, edges


def test_dot_output_parses_and_marks_groups_saved_values_and_views():
    cf = llgrad.compile(_loss)
    text = cf.dump(*_args(), format="dot")
    declared, edges = check_dot(text)
    assert "subgraph cluster_f {" in text and "subgraph cluster_b {" in text
    assert "cluster_f_g0" in text and "cluster_b_g0" in text       # fused groups
    assert "(saved)" in text and "style=dotted" in text             # saved values
    assert "view of %" in text                                      # views (the t of w)
    assert "test_observe_dot.py:" in text                           # source lines
    assert repr(text) == text and str(text) == text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_dot_renders_with_graphviz():
    cf = llgrad.compile(_loss)
    text = cf.dump(*_args(), format="dot")
    res = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "<svg" in res.stdout


def test_svg_is_well_formed():
    cf = llgrad.compile(_loss)
    cf(*_args())
    svg, how = render_svg(cf.entries[-1])
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    assert "mm" in texts and "tanh" in texts and "return" in texts
    assert how in ("graphviz dot",) or "built-in layout" in how


def test_dump_shows_readably_in_a_repl():
    cf = llgrad.compile(lambda x: (x * 2).sum())
    text = cf.dump(llgrad.randn(3, requires_grad=True))
    assert isinstance(text, str) and repr(text) == str(text) == text
    assert "\n" in repr(text) and "== forward ==" in repr(text)
    assert text.splitlines()[0] == "== guards =="


def _cli(*args, cwd):
    env = dict(os.environ, LLGRAD_QUIET="1")
    return subprocess.run([sys.executable, "-m", "llgrad", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


@pytest.mark.slow
def test_cli_version_and_dump_flags(tmp_path):
    (tmp_path / "model.py").write_text(textwrap.dedent("""\
        def loss(x, w):
            return (x @ w).tanh().sum()
        """))
    res = _cli("--version", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.startswith(f"llgrad {llgrad.__version__} ")
    assert "llvmlite" in res.stdout and "LLVM" in res.stdout
    spec = ["dump", "model.py:loss", "--args", "f32[4,6] f32[6,3]"]
    res = _cli(*spec, "--llvm", "--asm", "--python", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for head in ("== forward ==", "== backward ==", "== forward LLVM IR (after optimisation) ==",
                 "== forward assembly ==", "== backward as Python =="):
        assert head in res.stdout, head
    res = _cli(*spec, "--dot", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    check_dot(res.stdout)
    res = _cli(*spec, "--svg", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "loss.svg").exists() and "wrote loss.svg" in res.stdout
    ET.fromstring((tmp_path / "loss.svg").read_text())
    if shutil.which("dot") is None:
        assert "`dot` program is not installed" in res.stderr
    res = _cli(*spec, "--svg", "pic.svg", cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "pic.svg").exists()
