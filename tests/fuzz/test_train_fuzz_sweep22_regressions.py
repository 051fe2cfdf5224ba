"""Regressions found by the training-program fuzzer (tests/fuzz/test_train_fuzz_sweep22.py),
each checked against torch."""
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _error(lib, cls, shape, *args):
    lib.manual_seed(0)
    m = cls(*args, padding=1, padding_mode="reflect")
    with pytest.raises(RuntimeError) as e:
        m(lib.zeros(shape))
    return str(e.value)


@pytest.mark.parametrize("shape", [(4, 6, 1, 1), (4, 6, 3, 1), (4, 6, 1, 3)])
def test_conv2d_reflect_padding_too_large_names_torch_dimension(shape):
    """A reflect-padded Conv2d over a too-small input names the dimension (and argument)
    torch names: the width is checked first (ATen pads the last dimension first)."""
    assert _error(llgrad, llgrad.nn.Conv2d, shape, 6, 4, 3) == \
        _error(torch, torch.nn.Conv2d, shape, 6, 4, 3)


def test_conv1d_reflect_padding_too_large_names_the_input_as_given():
    """Conv1d runs as a unit-height Conv2d; its error names the 3-D input and its dimension 2,
    as torch's does, not the 4-D tensor of the inner call."""
    assert _error(llgrad, llgrad.nn.Conv1d, (4, 6, 1), 6, 4, 3) == \
        _error(torch, torch.nn.Conv1d, (4, 6, 1), 6, 4, 3)


@pytest.mark.parametrize("name, kw", [
    ("Adam", {}), ("AdamW", {}), ("SGD", {"momentum": 0.9}),
    ("Adamax", {}), ("Adamax", {"weight_decay": 1e-3}),
    ("NAdam", {}), ("NAdam", {"decoupled_weight_decay": True, "weight_decay": 0.01}),
    ("RAdam", {}),
    ("RMSprop", {"momentum": 0.5}), ("RMSprop", {"momentum": 0.5, "centered": True})])
def test_one_cycle_schedule_does_not_retrace_the_step(name, kw):
    """A compiled step under OneCycleLR(cycle_momentum=True) traces once: the schedule's
    betas / momentum are read at each call as its lr is (seen by the training fuzzer: NAdam
    with OneCycleLR over 11 steps hit the recompile limit and ran eagerly)."""
    import warnings

    import llgrad.nn.functional as F

    def make(lib):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 2)
        opt = getattr(lib.optim, name)(model.parameters(), lr=0.01, **kw)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.02, total_steps=20)
        return model, opt, sched, lib.randn(4, 3), lib.randn(4, 2)

    model, opt, sched, x, y = make(llgrad)

    @llgrad.compile(backend="interpret")
    def step():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    tm, topt, tsched, tx, ty = make(torch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(12):
            loss = step()
            sched.step()
            topt.zero_grad()
            tloss = torch.nn.functional.mse_loss(tm(tx), ty)
            tloss.backward()
            topt.step()
            tsched.step()
            assert abs(float(loss) - tloss.item()) < 1e-5
    assert not [w for w in caught if "running eagerly" in str(w.message)]
    assert step.n_traces <= 2


@pytest.mark.parametrize("key, make", [
    ("weight_decay", lambda ps: llgrad.optim.SGD(ps, lr=0.05, weight_decay=0.01)),
    ("eps", lambda ps: llgrad.optim.Adam(ps, lr=0.01))])
def test_hyper_parameter_written_in_the_step_is_read_fresh(key, make):
    """Found by the training fuzzer (RMSprop's momentum cycled by OneCycleLR inside the
    step, before momentum became one of RMSprop's dynamic hyper-parameters): a param group
    entry the step writes from a counter became a dynamic input with no stand-in in its slot,
    so the trace baked this call's number in (compile/symbolic_slots._place)."""
    import llgrad.nn.functional as F

    def run(compiled):
        llgrad.manual_seed(0)
        model = llgrad.nn.Linear(3, 2)
        opt = make(model.parameters())

        class Schedule:         # (as an lr scheduler: a counter, a write into the groups)
            last_epoch = 0

            def step(self):
                self.last_epoch += 1
                for g in opt.param_groups:
                    g[key] = 0.05 + 0.1 * self.last_epoch

        sched, x, y = Schedule(), llgrad.randn(4, 3), llgrad.randn(4, 2)

        def step():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss.detach()

        if compiled:
            step = llgrad.compile(step, backend="interpret")
        return [float(step()) for _ in range(6)], [p.detach().numpy() for p in
                                                   model.parameters()]

    (eager, pe), (comp, pc) = run(False), run(True)
    assert eager == comp
    for a, b in zip(pe, pc):
        assert (a == b).all()
