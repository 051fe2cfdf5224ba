"""`python -m llgrad coverage`: the table of PyTorch's public names llgrad has, with the
missing names; a clear message without torch."""
import subprocess
import sys

import pytest

from llgrad import coverage


@pytest.mark.slow
def test_coverage_report_lists_counts_and_missing_names():
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-m", "llgrad", "coverage"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in ("torch (functions)", "torch.nn", "torch.nn.functional", "torch.Tensor",
                 "torch.optim", "torch.optim.lr_scheduler", "torch.func", "torch.utils.data",
                 "torch.nn.utils", "all"):
        assert f"\n  {name} " in out, name
    _, rows = coverage.collect()
    by_name = {r[0]: r for r in rows}
    nn_have, nn_missing = by_name["torch.nn"][3], by_name["torch.nn"][4]
    for present in ("LSTM", "GRU", "RNN", "LSTMCell", "MultiheadAttention", "Transformer",
                    "TransformerEncoderLayer", "Linear"):
        assert present in nn_have and present not in nn_missing
    f_have = by_name["torch.nn.functional"][3]
    assert "scaled_dot_product_attention" in f_have and "multi_head_attention_forward" in f_have
    assert ("missing from torch.nn (" in out) == bool(nn_missing)  # (none left: no section)
    for row in rows:                    # each namespace with missing names lists them
        if row[4]:
            assert f"missing from {row[0]} ({len(row[4])}):" in out
            assert all(name in out for name in row[4][:3])
    counts = subprocess.run([sys.executable, "-m", "llgrad", "coverage", "--counts-only"],
                            capture_output=True, text=True, timeout=120).stdout
    assert "missing from" not in counts and "torch.nn.functional" in counts
    table = coverage.markdown().splitlines()
    assert table[0].startswith("| namespace |") and table[-1].startswith("| all |")


def test_coverage_without_torch_says_so(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)      # `import torch` raises ImportError
    assert coverage.main() == 2
    out = capsys.readouterr().out
    assert "needs PyTorch" in out and "pip install torch" in out
