"""Hogwild training (model.share_memory(), worker processes that step their own optimiser on
the shared parameters) started with the spawn or forkserver method (macOS's and Windows'
default; Linux's from Python 3.14): the workers got pickled copies of the parameters, and
the parent's model was never trained, without a word. Shared memory now travels to another
process as its memory file, as PyTorch's does; the workers' steps, eager or compiled, write
into the parent's parameters."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import json, sys
    import multiprocessing as mp
    import llgrad


    def train(model, compiled):
        for rank in range(2):
            opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
            x = llgrad.full((1, 3), float(rank + 1))

            def step():
                opt.zero_grad()
                loss = model(x).sum()
                loss.backward()
                opt.step()
            f = llgrad.compile(step) if compiled else step
            for _ in range(2):
                f()


    if __name__ == "__main__":
        method, compiled = sys.argv[1], sys.argv[2] == "compiled"
        ctx = mp.get_context(method)
        model = llgrad.nn.Linear(3, 2)
        with llgrad.no_grad():
            model.weight.fill_(1.0)
            model.bias.fill_(0.5)
        model.share_memory()
        p = ctx.Process(target=train, args=(model, compiled))
        p.start()
        p.join()
        assert p.exitcode == 0
        print(json.dumps([model.weight.tolist(), model.bias.tolist()]))
""")


def _expected():
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.5)
    for rank in range(2):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            model(torch.full((1, 3), float(rank + 1))).sum().backward()
            opt.step()
    return [model.weight.tolist(), model.bias.tolist()]


@pytest.mark.parametrize("method,compiled", [
    ("spawn", "eager"), pytest.param("spawn", "compiled", marks=pytest.mark.slow),
    pytest.param("forkserver", "eager", marks=pytest.mark.slow),
    pytest.param("fork", "compiled", marks=pytest.mark.slow)])
def test_hogwild_workers_train_the_parents_shared_model(tmp_path, method, compiled):
    path = tmp_path / "hogwild.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, LLGRAD_COMPILE="sync", LLGRAD_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, str(path), method, compiled], cwd=str(tmp_path),
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    weight, bias = json.loads(out.stdout.strip().splitlines()[-1])
    expected_weight, expected_bias = _expected()
    assert sum(weight, []) == pytest.approx(sum(expected_weight, []), abs=1e-6)
    assert bias == pytest.approx(expected_bias, abs=1e-6)
