"""Stop 77, file b: pytorch/examples (mnist_hogwild, mnist_forward_forward, regression,
time_sequence_prediction), d2l.ai (GRU and batch norm from scratch, DenseNet, BERT pretraining
loss) and Karpathy's makemore MLP / nanoGPT training loop as programs, run with PyTorch, with
llgrad eagerly and with llgrad compiling their training steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402
from tutorials_s77_b import (batchnorm_scratch, densenet, forward_forward,  # noqa: E402
                             gru_scratch, hogwild_mnist, poly_regression)
from tutorials_s77_b3 import (bahdanau_seq2seq, micrograd_demo,  # noqa: E402
                              siamese_contrastive)
from tutorials_s77_b2 import (bert_pretraining, makemore_mlp, nanogpt_loop,  # noqa: E402
                              time_sequence)

pytestmark = pytest.mark.torch

PROGRAMS = {
    "hogwild_mnist": hogwild_mnist, "forward_forward": forward_forward,
    "poly_regression": poly_regression, "gru_scratch": gru_scratch,
    "batchnorm_scratch": batchnorm_scratch, "densenet": densenet,
    "bert_pretraining": bert_pretraining, "makemore_mlp": makemore_mlp,
    "nanogpt_loop": nanogpt_loop, "time_sequence": time_sequence,
    "bahdanau_seq2seq": bahdanau_seq2seq, "siamese_contrastive": siamese_contrastive,
    "micrograd_demo": micrograd_demo,
}

# (the attention seq2seq's float32 weights after Adam differ by rounding its near-zero
# gradients make whole steps, in torch as in llgrad: float64 agrees to 1e-9)
FLOAT64 = {"bahdanau_seq2seq"}


def _in_float64(program):
    def run(lib, env):
        old = lib.get_default_dtype()
        lib.set_default_dtype(lib.float64)
        try:
            program(lib, env)
        finally:
            lib.set_default_dtype(old)
    return run


@pytest.mark.slow
@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    if name in FLOAT64:
        _, _, compiled = run_tutorial(_in_float64(program), rtol=1e-9, atol=1e-10)
    else:
        _, _, compiled = run_tutorial(program, rtol=1e-5, atol=1e-6)
    traces = {cf.fn.__name__: (cf.n_traces, cf.graph_breaks) for cf in compiled.steps}
    for fn_name, (n, breaks) in traces.items():
        # (a second trace: grads None at the first call, tensors after; or a Python number
        # argument that changes, which the second trace makes symbolic)
        assert not breaks and n <= 2, (fn_name, n, breaks)
