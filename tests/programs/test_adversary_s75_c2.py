"""Session 75 (c2), adversarial: modules changed between calls of a compiled training step:
train()/eval() toggled, a Dropout's p changed, a submodule replaced, parameters frozen and
unfrozen, a parameter's .data or the Parameter itself reassigned, a buffer registered
later, a state_dict loaded, apply() re-initialising, the model moved to float64: torch,
llgrad eager and llgrad.compile call by call (test_adversary_s75_c.run_case)."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import randn  # noqa: E402
from test_adversary_s75_c import net, observed, run_case, train_step  # noqa: E402

pytestmark = pytest.mark.torch


def train_eval_toggled_with_batchnorm(lib):
    m = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.BatchNorm1d(3), lib.nn.Linear(3, 2))
    with lib.no_grad():
        for k, p in enumerate(m.parameters()):
            p.copy_(lib.tensor(randn(710 + k, *p.shape) * 0.5))
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def between(i):
        m.train(i % 2 == 1)
    return dict(step=train_step(lib, m, opt),
                state=lambda: observed(m, [m[1].running_mean, m[1].running_var,
                                           m[1].num_batches_tracked]),
                between=between)


def dropout_p_changed_eval_then_zero(lib):
    m = net(lib)
    m.insert(1, lib.nn.Dropout(0.5))
    m.eval()

    def between(i):
        if i == 1:
            m[1].p = 0.0
            m.train()
        if i == 2:
            m[1].p = 1.0
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def submodule_replaced_other_width(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def between(i):
        if i == 1:
            m[2] = lib.nn.Linear(3, 2, bias=False)
            with lib.no_grad():
                m[2].weight.copy_(lib.tensor(randn(720, 2, 3)))
            opt.add_param_group({"params": [m[2].weight], "lr": 0.05})
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def attribute_submodule_replaced(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 2)
            self.act = lib.nn.Tanh()

        def forward(self, x):
            return self.act(self.fc(x))
    m = M()
    with lib.no_grad():
        m.fc.weight.copy_(lib.tensor(randn(721, 2, 4)))
        m.fc.bias.zero_()

    def between(i):
        if i == 0:
            m.act = lib.nn.Sigmoid()
        if i == 2:
            m.fc = lib.nn.Linear(4, 2)
            with lib.no_grad():
                m.fc.weight.copy_(lib.tensor(randn(722, 2, 4)))
                m.fc.bias.fill_(0.5)
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def freeze_then_unfreeze(lib):
    m = net(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.01)

    def between(i):
        if i == 0:
            m[0].requires_grad_(False)
        if i == 2:
            m[0].requires_grad_(True)
        if i == 3:
            m.requires_grad_(False)
            m[2].bias.requires_grad_(True)
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def param_data_reassigned_other_shape(lib):
    m = net(lib)

    def between(i):
        if i == 1:
            m[2].weight.data = lib.tensor(randn(723, 2, 3))
        if i == 2:
            m[0].bias.data = m[0].bias.data * 0 + 1
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def parameter_object_replaced(lib):
    m = net(lib)

    def between(i):
        if i == 0:
            m[0].weight = lib.nn.Parameter(lib.tensor(randn(724, 3, 4)))
        if i == 2:
            m[2].bias = lib.nn.Parameter(lib.tensor(randn(725, 2)), requires_grad=False)
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def buffer_registered_later_used_in_forward(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 2)

        def forward(self, x):
            y = self.fc(x)
            if hasattr(self, "shift"):
                y = y + self.shift
                self.shift.mul_(0.5)
            return y
    m = M()
    with lib.no_grad():
        m.fc.weight.copy_(lib.tensor(randn(726, 2, 4)))
        m.fc.bias.fill_(0.25)

    def between(i):
        if i == 1:
            m.register_buffer("shift", lib.ones(2))
        if i == 3:
            m.shift = lib.full((2,), -2.0)
    return dict(step=train_step(lib, m),
                state=lambda: observed(m, [dict(m.named_buffers())]), between=between)


def state_dict_loaded_between(lib):
    m = net(lib)
    other = net(lib, seed=50)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    saved = {}

    def between(i):
        if i == 0:
            saved.update({k: v.clone() for k, v in m.state_dict().items()})
            m.load_state_dict(other.state_dict())
        if i == 2:
            m.load_state_dict(saved)
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def apply_reinit_between(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    n = [0]

    def init(mod):
        if isinstance(mod, lib.nn.Linear):
            n[0] += 1
            with lib.no_grad():
                mod.weight.fill_(0.1 * n[0])
                mod.bias.zero_()

    def between(i):
        if i in (1, 3):
            m.apply(init)
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m, n), between=between)


def model_to_float64_between(lib):
    m = net(lib)

    def step(x, y):
        w = next(m.parameters())
        out = m(x.to(w.dtype))
        loss = (out - y.to(w.dtype)).pow(2).mean()
        loss.backward()
        return loss, out

    def between(i):
        if i == 1:
            m.to(lib.float64)
            m.zero_grad()
        if i == 3:
            m.float()
    return dict(step=step, state=lambda: observed(m), between=between)


def model_to_float64_step_without_cast(lib):
    m = net(lib)

    def between(i):
        if i == 1:
            m.double()
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def in_place_param_edit_between(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def between(i):
        with lib.no_grad():
            m[0].weight.mul_(0.5)
            m[0].weight[0, i % 4] = 2.0
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


MODULES = [train_eval_toggled_with_batchnorm, dropout_p_changed_eval_then_zero,
           submodule_replaced_other_width, attribute_submodule_replaced, freeze_then_unfreeze,
           param_data_reassigned_other_shape, parameter_object_replaced,
           buffer_registered_later_used_in_forward, state_dict_loaded_between,
           apply_reinit_between, model_to_float64_between, model_to_float64_step_without_cast,
           in_place_param_edit_between]


@pytest.mark.slow       # (a sweep: the fix's own case, test_adversary_s75_c7.py, runs by default)
@pytest.mark.parametrize("make", MODULES, ids=[f.__name__ for f in MODULES])
def test_modules_changed_between_calls(make):
    run_case(make)
