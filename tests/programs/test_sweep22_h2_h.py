"""Sweep 22 (H2, H): the official "Optional: Data Parallelism" tutorial, "Hyperparameter
tuning with Ray Tune"'s train_cifar (without Ray) and the torch.compiler.disable docs, run
with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_h as a  # noqa: E402
from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "data_parallel": a.data_parallel,
    "ray_tune_train_cifar": a.ray_tune_train_cifar,
    "compiler_disable": pytest.param(a.compiler_disable, marks=pytest.mark.xfail(
        strict=True, reason="llgrad.compile has no graph breaks: a call reaching a "
        "compiler.disable'd function runs wholly eagerly with a warning (PyTorch compiles "
        "the code around it)")),
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, SLOW))
def test_program(name, program):
    run_tutorial(program, **TOL.get(name, {}))


def test_list_appended_in_a_compiled_step_keeps_an_entry():
    """The Data Parallelism tutorial's forward, recording sizes in a list instead of printing
    them (prints are replayed): the step traces twice (the first run marks the list it only
    appends to, compile/appended_lists.py) and then runs compiled."""
    import warnings

    import llgrad
    sizes = []
    model = llgrad.nn.Linear(5, 2)
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        out = model(x)
        sizes.append(("In Model", tuple(x.size()), tuple(out.size())))
        loss = (out ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    cf = llgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(5):
            cf(llgrad.ones(3, 5))
    assert len(sizes) == 5
    assert cf.entries and cf.n_traces <= 2, (len(cf.entries), cf.n_traces)
