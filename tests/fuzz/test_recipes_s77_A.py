"""The fuzz generator's recipes must draw programs PyTorch accepts: a program eager llgrad
rejects stops a long fuzz run (differential.py: "the generator made a program eager
rejects") though nothing is wrong with llgrad. Here a recipe's every draw is scripted, so
a rarely drawn form runs on every default run, against torch as the oracle of the call."""
import numpy as np
import pytest

pytest.importorskip("hypothesis")
torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

from programs import Gen, Step, r_sort_scatter  # noqa: E402  (recipes_tensor.py: exec'd there)


class _Scripted(Gen):
    """Every int its lowest, every chance off, every choice the first element, except the
    choices that contain `pick`, which take it."""

    def __init__(self, pick):
        super().__init__(draw=None, smooth=False)
        self.dtype, self._pick = "float32", pick

    def int(self, lo, hi):
        return lo

    def chance(self, pct):
        return False

    def choice(self, seq):
        seq = list(seq)
        return self._pick if self._pick in seq else seq[0]


@pytest.mark.parametrize("pick", ["", ", descending=True", ", stable=True"])
def test_sort_forms_are_calls_torch_accepts(pick):
    g = _Scripted(pick)
    g.input((3, 4), "float32")
    g.step = Step()
    assert r_sort_scatter(g) is not False
    assert g.step.ops == ["sort"], g.step.ops
    line, = g.step.lines
    assert pick in line, line
    x = np.random.default_rng(0).permutation(12).reshape(3, 4).astype(np.float32)
    sign = -1 if "descending" in pick else 1     # (distinct values: one order either way)
    for lib in (torch, llgrad):
        env = {"x0": lib.tensor(x)}
        exec(line, env)         # (torch: sort(0, stable=True) matches neither overload)
        values, indices = (env[v.name] for v in g.step.defs)
        np.testing.assert_array_equal(values.numpy(), sign * np.sort(sign * x, axis=-2))
        np.testing.assert_array_equal(indices.numpy(), np.argsort(sign * x, axis=-2))
