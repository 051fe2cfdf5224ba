"""Sweep 15 (D), part 3: tutorials whose APIs llgrad lacked: "Python custom operators"
(torch.library.custom_op with a NumPy kernel, register_fake, register_autograd, opcheck,
a mutating op, torch.ops.<namespace>), the foreach_map recipe (torch._foreach_* and
torch._higher_order_ops.foreach_map: Adam written as multi-tensor maps, compiled), and
the saved-tensor hooks tutorial (grad_fn._raw_saved_<name>.register_hooks)."""
import itertools
import warnings
from typing import Sequence

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

_namespaces = itertools.count()    # (each run registers its ops under a namespace of its own)
# what torch.library.opcheck returns for a well registered op (torch's own opcheck imports
# its compiler stack, ~10 s here: the torch run records this instead of calling it)
OPCHECK_PASSED = sorted({"test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
                         "test_faketensor": "SUCCESS",
                         "test_aot_dispatch_dynamic": "SUCCESS"}.items())


def _opcheck(torch, env, op, example):
    if env.mode == "torch":
        return OPCHECK_PASSED
    return sorted(torch.library.opcheck(op, example).items())


def custom_ops(torch, env):
    """advanced/python_custom_ops, with NumPy slicing in place of PIL's crop and paste."""
    ns = f"sweep15d{next(_namespaces)}"

    @torch.library.custom_op(ns + "::crop", mutates_args=())
    def crop(pic: torch.Tensor, box: Sequence[int]) -> torch.Tensor:
        x0, y0, x1, y1 = box
        return torch.from_numpy(pic.numpy()[:, y0:y1, x0:x1].copy()).to(pic.dtype)

    @crop.register_fake
    def _(pic, box):
        x0, y0, x1, y1 = box
        return pic.new_empty(pic.shape[0], y1 - y0, x1 - x0)

    @torch.library.custom_op(ns + "::paste", mutates_args=())
    def paste(im1: torch.Tensor, im2: torch.Tensor, coord: Sequence[int]) -> torch.Tensor:
        out = im1.numpy().copy()
        x0, y0 = coord
        out[:, y0:y0 + im2.shape[1], x0:x0 + im2.shape[2]] = im2.numpy()
        return torch.from_numpy(out)

    @paste.register_fake
    def _(im1, im2, coord):
        return torch.empty_like(im1)

    img = torch.ones(3, 16, 16)
    img *= torch.linspace(0, 1, steps=16) * torch.linspace(0, 1, steps=16).unsqueeze(-1)
    env.rec("cropped", crop(img, (2, 3, 10, 12)))
    img = img.requires_grad_()
    result = crop(img, (2, 3, 10, 12))
    env.rec("no formula", (result.requires_grad, type(result.grad_fn).__name__.replace(ns, "")))
    try:
        result.sum().backward()
    except RuntimeError as e:
        env.rec("no formula error", str(e).replace(ns, ""))

    def backward(ctx, grad_output):
        grad_input = grad_output.new_zeros(ctx.pic_shape)
        grad_input = paste(grad_input, grad_output, ctx.coords)
        return grad_input, None

    def setup_context(ctx, inputs, output):
        pic, box = inputs
        ctx.coords = box[:2]
        ctx.pic_shape = pic.shape

    crop.register_autograd(backward, setup_context=setup_context)
    result = crop(img, (2, 3, 10, 12))
    (result * result).sum().backward()
    env.rec("grad", img.grad)

    torch.manual_seed(0)
    examples = [[torch.randn(3, 8, 8), [0, 0, 4, 4]],
                [torch.randn(3, 9, 9, requires_grad=True), [1, 0, 5, 4]],
                [torch.randn(3, 6, 6, dtype=torch.double), [3, 4, 5, 6]]]
    for example in examples:
        env.rec("opcheck", _opcheck(torch, env, crop, example))

    @torch.library.custom_op(ns + "::numpy_sin", mutates_args={"output"}, device_types="cpu")
    def numpy_sin(input: torch.Tensor, output: torch.Tensor) -> None:
        np.sin(input.numpy(), out=output.numpy())

    x = torch.randn(3)
    out = torch.empty(3)
    env.rec("mutating", (numpy_sin(x, out), out._version, bool(torch.allclose(out, x.sin()))))
    for example in [[torch.randn(3), torch.empty(3)], [torch.randn(0, 3), torch.empty(0, 3)]]:
        env.rec("opcheck mutating", _opcheck(torch, env, numpy_sin, example))
    ops = getattr(torch.ops, ns)
    env.rec("torch.ops", (ops.crop(x.view(1, 1, 3), (0, 0, 2, 1)),
                          ops.crop.default(x.view(1, 1, 3), (1, 0, 3, 1))))

    @torch.library.custom_op(ns + "::scaled_tanh", mutates_args=())
    def scaled_tanh(x: torch.Tensor, k: float) -> torch.Tensor:
        return torch.tanh(x) * k

    def tanh_backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * ctx.k * (1 - y * y), None

    def tanh_setup(ctx, inputs, output):
        ctx.k = inputs[1]
        ctx.save_for_backward(output / inputs[1])

    scaled_tanh.register_autograd(tanh_backward, setup_context=tanh_setup)
    lin = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)

    def step(x):           # (a kernel of tensor ops: it compiles, the formula included)
        opt.zero_grad()
        loss = scaled_tanh(lin(x), 2.0).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    x = torch.randn(5, 4)
    for i in range(3):
        env.rec(f"loss {i}", step(x))
    env.rec("params", [p for p in lin.parameters()])


def test_custom_ops():
    run_tutorial(custom_ops, rtol=1e-5, atol=1e-6)


def test_custom_op_errors():
    """What custom_op refuses as torch.library does: a parameter without a type annotation,
    and an output that is an input."""
    for lib in (torch, llgrad):
        ns = f"sweep15d{next(_namespaces)}"
        with pytest.raises(ValueError, match="must have a type annotation"):
            @lib.library.custom_op(ns + "::noann", mutates_args=())
            def noann(x):
                return x

        @lib.library.custom_op(ns + "::same", mutates_args=())
        def same(x: lib.Tensor) -> lib.Tensor:
            return x

        with pytest.raises(RuntimeError, match="must not also be an input"):
            same(lib.ones(2))


def test_custom_op_numpy_kernel_compiled_runs_eagerly():
    """A kernel that reads values out with Tensor.numpy() cannot be traced: the compiled call
    runs eagerly, warns, and gives eager's numbers."""
    ns = f"sweep15d{next(_namespaces)}"

    @llgrad.library.custom_op(ns + "::npsin", mutates_args=())
    def npsin(x: llgrad.Tensor) -> llgrad.Tensor:
        return llgrad.from_numpy(np.sin(x.numpy()))

    def f(x):
        return npsin(x * 2).sum() + x.sum()

    cf = llgrad.compile(f)
    x = llgrad.randn(5)
    with pytest.warns(UserWarning, match="running eagerly"):
        got = cf(x)
    assert got.item() == f(x).item()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cf(x + 1).item() == f(x + 1).item()


def foreach_adam(torch, env):
    """recipes/foreach_map: Adam as foreach_map calls over the lists of an optimiser's state,
    compiled, against torch.optim.Adam on a twin model; plus the _foreach_* ops it stands
    for."""
    import importlib
    foreach_map = importlib.import_module(
        torch.__name__ + "._higher_order_ops.foreach_map").foreach_map

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8, False) for _ in range(3)])
    model_copy = torch.nn.Sequential(*[torch.nn.Linear(8, 8, False) for _ in range(3)])
    model_copy.load_state_dict(model.state_dict())
    input = torch.rand(8)
    model(input).sum().backward()
    model_copy(input).sum().backward()

    def get_inputs(optim):
        steps, params, exp_avgs, exp_avg_sqs = [], [], [], []
        for group in optim.param_groups:
            for p in group["params"]:
                params.append(p)
                state = optim.state[p]
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
        return steps, params, exp_avgs, exp_avg_sqs

    def update_exp_avg_sq(exp_avg_sq, grad, beta2):
        return exp_avg_sq.mul(beta2).addcmul(grad, grad, value=1 - beta2)

    def update_param(param, step, exp_avg, exp_avg_sq, beta1, beta2, lr, eps):
        bias_correction1 = 1 - torch.pow(beta1, step)
        bias_correction2 = (1 - torch.pow(beta2, step)).sqrt()
        step_size = (lr / bias_correction1).neg()
        denom = (exp_avg_sq.sqrt() / (bias_correction2 * step_size)).add(eps / step_size)
        return torch.add(param, torch.div(exp_avg, denom))

    def foreach_map_adam(steps, params, exp_avgs, exp_avg_sqs, weight_decay=0, beta1=0.9,
                         beta2=0.999, lr=1e-3, eps=1e-8):
        with torch.no_grad():
            grads = [param.grad for param in params]
            updated_steps = foreach_map(lambda x: x + 1, steps)
            torch._foreach_copy_(steps, updated_steps)
            exp_avgs_updated = foreach_map(torch.lerp, exp_avgs, grads, 1 - beta1)
            exp_avgs_sq_updated = foreach_map(update_exp_avg_sq, exp_avg_sqs, grads, beta2)
            params_updated = foreach_map(update_param, params, steps, exp_avgs_updated,
                                         exp_avgs_sq_updated, beta1, beta2, lr, eps)
            torch._foreach_copy_(exp_avgs, exp_avgs_updated)
            torch._foreach_copy_(exp_avg_sqs, exp_avgs_sq_updated)
            torch._foreach_copy_(params, params_updated)

    opt_eager = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    opt_eager_copy = torch.optim.Adam(model_copy.parameters(), lr=torch.tensor(0.01))
    opt_eager.step()
    opt_eager_copy.step()
    inputs = get_inputs(opt_eager_copy)
    compiled_adam = env.step(foreach_map_adam)
    for i in range(4):
        opt_eager.step()
        compiled_adam(*inputs, lr=0.01)
        env.rec(f"step {i}", ([p for p in model.parameters()], inputs))
    env.rec("same", all(bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6)) for a, b in
                        zip(model.parameters(), model_copy.parameters())))

    a = [torch.randn(2), torch.randn(3)]
    b = [torch.rand(2) + 0.5, torch.rand(3) + 0.5]
    env.rec("foreach", [torch._foreach_add(a, b, alpha=2), torch._foreach_mul(a, 3.0),
                        torch._foreach_lerp(a, b, [0.5, 0.2]), torch._foreach_norm(a),
                        torch._foreach_addcdiv(a, a, b, torch.tensor([1.0, 2.0])),
                        torch._foreach_sqrt(b), torch._foreach_maximum(a, 0.1),
                        torch._foreach_pow(2.0, a), torch._foreach_max(a)])
    c = [t.clone() for t in a]
    env.rec("in place", (torch._foreach_addcmul_(c, a, b, value=-0.5) is c, c,
                         [t._version for t in c]))
    try:
        torch._foreach_add(a, [b[0]])
    except RuntimeError as e:
        env.rec("lengths", str(e))


def test_foreach_adam():
    run_tutorial(foreach_adam, rtol=1e-5, atol=1e-6)


def test_opcheck_finds_wrong_registrations():
    """llgrad's opcheck fails, as torch's, for an op that writes an argument it does not
    declare and for an op without a fake kernel."""
    ns = f"sweep15d{next(_namespaces)}"

    @llgrad.library.custom_op(ns + "::sneaky", mutates_args=())
    def sneaky(x: llgrad.Tensor) -> llgrad.Tensor:
        x.add_(1)
        return x * 2

    @sneaky.register_fake
    def _(x):
        return llgrad.empty_like(x)

    with pytest.raises(Exception, match="test_schema failed"):
        llgrad.library.opcheck(sneaky, (llgrad.ones(3),))

    @llgrad.library.custom_op(ns + "::nofake", mutates_args=())
    def nofake(x: llgrad.Tensor) -> llgrad.Tensor:
        return x + 1

    res = llgrad.library.opcheck(nofake, (llgrad.ones(3),), raise_exception=False)
    assert res["test_schema"] == "SUCCESS"
    assert "no fake impl" in str(res["test_faketensor"])
