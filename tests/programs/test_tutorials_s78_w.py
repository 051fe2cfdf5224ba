"""Stop 78 (W): tutorial programs from the official PyTorch tutorials (text classification
with EmbeddingBag offsets, char-RNN classification and generation, seq2seq translation with
attention, nn.Transformer translation, the CIFAR-10 classifier) and d2l's from-scratch
chapters (linear and softmax regression, dropout, GRU, batch normalization, attention
scoring), run with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py); each compiled step traces a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_s78_w as w1  # noqa: E402
import tutorials_s78_w2 as w2  # noqa: E402
import tutorials_s78_w3 as w3  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

# name: (program, most traces of any one compiled step)
PROGRAMS = {
    "text_classification_embeddingbag": (w1.text_classification_embeddingbag, 3),
    # (a step per name length, the loop unrolled; the third length tries symbolic sizes
    # first, which range(line_tensor.size()[0]) turns back into plain ones: one more)
    "char_rnn_classification": (w1.char_rnn_classification, 4),
    # (target_line_tensor.unsqueeze_(-1) on an input: replayed, compile/input_reshapes.py)
    "char_rnn_generation": (w1.char_rnn_generation, 4),
    "cifar_classifier": (w1.cifar_classifier, 1),
    "seq2seq_attention": (w2.seq2seq_attention, 2),     # (teacher forcing or not)
    "transformer_translation": (w2.transformer_translation, 1),
    "d2l_linreg_scratch": (w3.d2l_linreg_scratch, 2),   # (.grad None, then a tensor)
    "d2l_dropout_scratch": (w3.d2l_dropout_scratch, 1),
    "d2l_gru_scratch": (w3.d2l_gru_scratch, 2),         # (the state a leaf, then detached)
    "d2l_batchnorm_scratch": (w3.d2l_batchnorm_scratch, 1),
    "d2l_attention_scoring": (w3.d2l_attention_scoring, 1),
}
SLOW = set(PROGRAMS) - {"d2l_linreg_scratch"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else []) for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
