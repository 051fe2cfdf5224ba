"""Session 75 (c5), adversarial: state a compiled step reads changed between calls in
ways a guard must see: a tensor lr filled in place, maximize toggled, Adam's state edited,
a group's parameter replaced by index, forward monkeypatched on the instance, hook dicts
cleared, a callable object's or bound method's attribute, a class attribute, a
parametrization registered and removed, a module's plain tensor attribute replaced,
a captured tensor's .data swapped or set_(), Dropout's p in training, a ModuleDict entry,
clip_grad_norm_'s bound: torch, llgrad eager and llgrad.compile call by call."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import randn  # noqa: E402
from test_adversary_s75_c import net, observed, run_case, train_step  # noqa: E402

pytestmark = pytest.mark.torch


def tensor_lr_filled_in_place(lib):
    m = net(lib)
    lr = lib.tensor(0.1)
    opt = lib.optim.Adam(m.parameters(), lr=lr)

    def between(i):
        lr.fill_(0.1 / (i + 2))
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def sgd_tensor_lr_filled(lib):
    m = net(lib)
    lr = lib.tensor(0.1)
    opt = lib.optim.SGD(m.parameters(), lr=lr, momentum=0.5)

    def between(i):
        lr.mul_(0.5)
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def maximize_toggled(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def between(i):
        opt.param_groups[0]["maximize"] = i % 2 == 0
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def adam_state_step_edited(lib):
    m = net(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.05)

    def between(i):
        if i == 1:
            for st in opt.state.values():
                st["step"].fill_(0.0)
                st["exp_avg"].mul_(-1)
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m), between=between)


def group_param_replaced_by_index(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    extra = lib.nn.Parameter(lib.tensor(randn(743, 3, 4)))

    def between(i):
        if i == 1:
            opt.param_groups[0]["params"][0] = extra
            extra.grad = lib.ones(3, 4)
    return dict(step=train_step(lib, m, opt), state=lambda: observed(m) + [extra],
                between=between)


def forward_monkeypatched_on_instance(lib):
    m = net(lib)
    lin = m[2]

    def between(i):
        if i == 1:
            lin.forward = lambda x: lib.nn.functional.linear(x, lin.weight) * 2
        if i == 3:
            del lin.forward
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def forward_hooks_dict_cleared(lib):
    m = net(lib)
    m[0].register_forward_hook(lambda mod, a, o: o * 3)
    m[2].register_forward_pre_hook(lambda mod, a: (a[0] + 1,))

    def between(i):
        if i == 1:
            m[0]._forward_hooks.clear()
        if i == 2:
            m[2]._forward_pre_hooks.clear()
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def callable_object_hook_attr(lib):
    m = net(lib)

    class Scale:
        def __init__(self):
            self.k = 1.0

        def __call__(self, mod, a, o):
            return o * self.k
    h = Scale()
    m[0].register_forward_hook(h)

    def between(i):
        h.k = 0.5 * (i + 3)
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def bound_method_hook_attr(lib):
    m = net(lib)

    class Clip:
        bound = 0.5

        def hook(self, g):
            return g.clamp(-self.bound, self.bound)
    c = Clip()
    m[0].weight.register_hook(c.hook)

    def between(i):
        c.bound = 0.01 * (i + 1)
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def class_attr_read(lib):
    m = net(lib)

    class Cfg:
        k = 1.0
    def step(x, y):
        loss = ((m(x) - y) * Cfg.k).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        Cfg.k = i + 2.0
    return dict(step=step, state=lambda: observed(m), between=between)


def parametrization_registered_later(lib):
    m = net(lib)

    class Sym(lib.nn.Module):
        def forward(self, w):
            return w * 0.5 + 0.25

    def between(i):
        if i == 1:
            lib.nn.utils.parametrize.register_parametrization(m[0], "bias", Sym())
        if i == 3:
            lib.nn.utils.parametrize.remove_parametrizations(m[0], "bias")
    return dict(step=train_step(lib, m),
                state=lambda: [[p for p in m.parameters()], [p.grad for p in m.parameters()]],
                between=between)


def module_attr_tensor_replaced_other_shape(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 2)
            self.scale = lib.ones(2)

        def forward(self, x):
            return self.fc(x) * self.scale
    m = M()
    with lib.no_grad():
        m.fc.weight.copy_(lib.tensor(randn(744, 2, 4)))
        m.fc.bias.zero_()

    def between(i):
        if i == 0:
            m.scale = lib.tensor(3.0)
        if i == 1:
            m.scale = lib.tensor([[0.5, 2.0]])
        if i == 2:
            m.scale.mul_(2)
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def captured_tensor_data_swapped(lib):
    m = net(lib)
    bias = lib.zeros(2)

    def step(x, y):
        loss = (m(x) + bias - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        if i == 0:
            bias.data = lib.ones(1, 2)
        if i == 2:
            bias.data = lib.ones(2, dtype=lib.float64)
    return dict(step=step, state=lambda: observed(m, [bias]), between=between)


def captured_tensor_resized(lib):
    w = lib.tensor(randn(745, 4, 2), requires_grad=True)
    extra = lib.zeros(2)

    def step(x, y):
        loss = (x @ w + extra.sum() - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        if i == 1:
            extra.set_(lib.full((5,), 0.2))
    return dict(step=step, state=lambda: [w.grad, extra], between=between)


def dropout_p_changed_in_train(lib):
    lib.manual_seed(3)
    m = net(lib)
    m.insert(1, lib.nn.Dropout(0.3))

    def between(i):
        m[1].p = 0.1 * (i + 4)
        lib.manual_seed(3)
    return dict(step=train_step(lib, m), state=lambda: observed(m), between=between)


def module_dict_entry_replaced(lib):
    d = lib.nn.ModuleDict({"a": lib.nn.Linear(4, 2), "b": lib.nn.Linear(4, 2)})
    with lib.no_grad():
        for k, p in enumerate(d.parameters()):
            p.copy_(lib.tensor(randn(746 + k, *p.shape)))
    key = ["a"]

    def step(x, y):
        loss = (d[key[0]](x) - y).pow(2).mean()
        loss.backward()
        return loss

    def between(i):
        key[0] = "b" if i % 2 == 0 else "a"
        if i == 2:
            d["a"] = lib.nn.Identity()
            key[0] = "b"
    return dict(step=step, state=lambda: [list(d.parameters()), [p.grad for p in d.parameters()]],
                between=between)


def clip_grad_norm_max_changed(lib):
    m = net(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.5)
    mx = [1.0]

    def step(x, y):
        opt.zero_grad()
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        n = lib.nn.utils.clip_grad_norm_(m.parameters(), mx[0])
        opt.step()
        return loss, n
    return dict(step=step, state=lambda: observed(m),
                between=lambda i: mx.__setitem__(0, 0.01 * (i + 1)))


bound_method_hook_attr.warns = "a tensor hook runs in a backward"


CASES = [tensor_lr_filled_in_place, sgd_tensor_lr_filled, maximize_toggled,
         adam_state_step_edited, group_param_replaced_by_index,
         forward_monkeypatched_on_instance, forward_hooks_dict_cleared,
         callable_object_hook_attr, bound_method_hook_attr, class_attr_read,
         parametrization_registered_later, module_attr_tensor_replaced_other_shape,
         captured_tensor_data_swapped, captured_tensor_resized,
         dropout_p_changed_in_train, module_dict_entry_replaced,
         clip_grad_norm_max_changed]


@pytest.mark.slow       # (a sweep: the fix's own case runs by default)
@pytest.mark.parametrize("make", CASES, ids=[f.__name__ for f in CASES])
def test_state_changed_between_calls(make):
    run_case(make)
