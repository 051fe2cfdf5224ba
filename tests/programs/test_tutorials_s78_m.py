"""Stop 78 (M): tutorial programs from Godoy's "Deep Learning with PyTorch Step-by-Step",
fast.ai lesson 5 (Titanic from scratch), CS224n's ParserModel, MIT 6.S191 lab 1, d2l.ai
chapter 11, minGPT, makemore part 3, Raschka's "Machine Learning with PyTorch and
Scikit-Learn", NYU Deep Learning's spiral, PyTorch's "Visualizing Gradients" (both parts)
and Patrick Loeber's course, run with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py); each compiled step traces a bounded number of times."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
import tutorials_s78_m as m1  # noqa: E402
import tutorials_s78_m2 as m2  # noqa: E402
import tutorials_s78_m3 as m3  # noqa: E402
import tutorials_s78_m4 as m4  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

# name: (program, most traces of any one compiled step). Two traces: a step whose first call
# finds .grad None (hand-written updates), or whose first traced run marks a list it appends
# to (appended_lists.py: that run is not kept).
PROGRAMS = {
    "godoy_step_by_step": (m1.godoy_step_by_step, 1),
    "fastai_titanic_scratch": (m1.fastai_titanic_scratch, 2),
    "cs224n_parser": (m1.cs224n_parser, 1),
    "mit6s191_lab1": (m1.mit6s191_lab1, 2),
    "d2l_ch11_optimizers": (m2.d2l_ch11_optimizers, 2),
    "mingpt_small": (m2.mingpt_small, 1),
    "makemore_part3_batchnorm": (m4.makemore_part3_batchnorm, 2),
    "raschka_iris_xor": (m3.raschka_iris_xor, 1),
    "nyu_spiral": (m3.nyu_spiral, 1),
    "visualizing_gradients": (m3.visualizing_gradients, 2),
    "visualizing_gradients_retain": (m4.visualizing_gradients_retain, 1),
    "loeber_course": (m4.loeber_course, 2),
}
# (minGPT's key biases get a gradient of rounding noise alone, softmax being blind to them:
# AdamW makes lr-sized steps of it, which two float32 libraries round differently)
TOLERANCE = {"mingpt_small": dict(rtol=1e-4, atol=1e-5)}
SLOW = {"godoy_step_by_step", "d2l_ch11_optimizers", "nyu_spiral", "makemore_part3_batchnorm",
        "mingpt_small", "raschka_iris_xor", "visualizing_gradients",
        "visualizing_gradients_retain"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOLERANCE.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)


def _grad_logger(lib, compiled):
    """Visualizing Gradients' hooks: a forward hook passes the list on to hook_backward, whose
    tensor hook appends (name, grad) to it. -> the losses, the logged sums and the step."""
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Sigmoid(), nn.Linear(3, 2))
    with lib.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(lib.linspace(-0.5, 0.5 + i, p.numel()).reshape(p.shape))

    def hook_forward(module_name, grads, hook_backward):
        def hook(module, args, output):
            output.register_hook(hook_backward(module_name, grads))
        return hook

    def hook_backward(module_name, grads):
        def hook(grad):
            grads.append((module_name, grad))
        return hook

    grads = []
    for name, layer in model.named_modules():
        if any(layer.children()) is False:
            layer.register_forward_hook(hook_forward(name, grads, hook_backward))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
    x = lib.linspace(-1, 1, 20).reshape(5, 4)
    target = lib.tensor([0, 1, 0, 1, 1])

    def step(x, target):
        loss = nn.CrossEntropyLoss()(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    fn = lib.compile(step) if compiled else step
    losses, logged = [], []
    for _ in range(4):
        grads.clear()
        losses.append(fn(x, target).item())
        if compiled:
            fn.wait()
        logged.append([(n, g.sum().item()) for n, g in grads])
    return losses, logged, fn


def test_list_passed_on_to_a_hook_maker_is_replayed():
    """A list the step reaches through a forward hook's closure that the hook passes on to
    the function making the tensor hook that appends to it: compiled calls replay the
    appends (it ran eagerly: the pass counted as a read)."""
    want_losses, want_logged, _ = _grad_logger(torch, False)
    eager_losses, eager_logged, _ = _grad_logger(llgrad, False)
    losses, logged, cf = _grad_logger(llgrad, True)
    for got_l, got_g in ((eager_losses, eager_logged), (losses, logged)):
        np.testing.assert_allclose(got_l, want_losses, rtol=1e-5)
        assert [[n for n, _ in row] for row in got_g] == [[n for n, _ in row]
                                                          for row in want_logged]
        np.testing.assert_allclose([[v for _, v in row] for row in got_g],
                                   [[v for _, v in row] for row in want_logged],
                                   rtol=1e-4, atol=1e-6)
    assert cf.entries and cf.n_traces == 2, (cf.n_traces, cf._not_kept)
