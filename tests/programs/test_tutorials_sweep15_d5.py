"""Sweep 15 (D), part 5: "Double backward with custom functions" (gradcheck and
gradgradcheck of Functions that save inputs, outputs or intermediates, one that is not
twice differentiable, a backward written as a Function of its own), "Neural tangent
kernels" (jacobian contraction over vmap(jacrev) and the vjp/jvp form) and the NLP
tutorials' bag-of-words classifier and CBOW, all with the library's own generator. See
tutorial_harness.py."""
import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def double_backward(torch, env):
    """intermediate/custom_function_double_backward_tutorial."""
    gradcheck, gradgradcheck = torch.autograd.gradcheck, torch.autograd.gradgradcheck

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return grad_out * 2 * x

    torch.manual_seed(0)
    x = torch.rand(3, 3, requires_grad=True, dtype=torch.double)
    env.rec("square", (gradcheck(Square.apply, x), gradgradcheck(Square.apply, x)))

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = torch.exp(x)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_out):
            result, = ctx.saved_tensors
            return result * grad_out

    x = torch.tensor(1., requires_grad=True, dtype=torch.double).clone()
    env.rec("exp", (gradcheck(Exp.apply, x), gradgradcheck(Exp.apply, x)))

    class Sinh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = torch.exp(x)
            expnegx = torch.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
            expx, expnegx = ctx.saved_tensors
            grad_input = grad_out * (expx + expnegx) / 2
            grad_input += _grad_out_exp * expx
            grad_input -= _grad_out_negexp * expnegx
            return grad_input

    def sinh(x):
        return Sinh.apply(x)[0]

    x = torch.rand(3, 3, requires_grad=True, dtype=torch.double)
    env.rec("sinh", (gradcheck(sinh, x), gradgradcheck(sinh, x)))

    class SinhBad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = torch.exp(x)
            expnegx = torch.exp(-x)
            ctx.expx = expx
            ctx.expnegx = expnegx
            return (expx - expnegx) / 2

        @staticmethod
        def backward(ctx, grad_out):
            return grad_out * (ctx.expx + ctx.expnegx) / 2

    env.rec("bad once", gradcheck(SinhBad.apply, x))
    try:
        gradgradcheck(SinhBad.apply, x)
    except RuntimeError as e:          # (GradcheckError is a RuntimeError)
        env.rec("bad twice", str(e).splitlines()[0])

    def cube_forward(x):
        return x ** 3

    def cube_backward(grad_out, x):
        return grad_out * 3 * x ** 2

    def cube_backward_backward(grad_out, sav_grad_out, x):
        return grad_out * sav_grad_out * 6 * x

    def cube_backward_backward_grad_out(grad_out, x):
        return grad_out * 3 * x ** 2

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return cube_forward(x)

        @staticmethod
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return CubeBackward.apply(grad_out, x)

    class CubeBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, grad_out, x):
            ctx.save_for_backward(x, grad_out)
            return cube_backward(grad_out, x)

        @staticmethod
        def backward(ctx, grad_out):
            x, sav_grad_out = ctx.saved_tensors
            dx = cube_backward_backward(grad_out, sav_grad_out, x)
            dgrad_out = cube_backward_backward_grad_out(grad_out, x)
            return dgrad_out, dx

    x = torch.tensor(2., requires_grad=True, dtype=torch.double)
    env.rec("cube", (gradcheck(Cube.apply, x), gradgradcheck(Cube.apply, x)))

    def second_derivative(x):        # (compiled: the Functions' backwards in the graph)
        y = Cube.apply(x).sum() + sinh(x).sum()
        g, = torch.autograd.grad(y, x, create_graph=True)
        gg, = torch.autograd.grad(g.sum(), x)
        return g.detach(), gg

    second_derivative = env.step(second_derivative)
    for i in range(2):
        x = torch.rand(4, dtype=torch.double, requires_grad=True)
        env.rec(f"second {i}", second_derivative(x))


def test_double_backward():
    run_tutorial(double_backward)


def neural_tangent_kernels(torch, env):
    """intermediate/neural_tangent_kernels, a small CNN on 8x8 inputs."""
    nn = torch.nn
    functional_call, vmap, vjp, jvp, jacrev = (torch.func.functional_call, torch.func.vmap,
                                               torch.func.vjp, torch.func.jvp, torch.func.jacrev)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, (3, 3))
            self.conv2 = nn.Conv2d(8, 8, (3, 3))
            self.conv3 = nn.Conv2d(8, 8, (3, 3))
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            x = self.conv1(x).relu()
            x = self.conv2(x).relu()
            x = self.conv3(x)
            x = x.mean((2, 3))
            return self.fc(x)

    torch.manual_seed(0)
    x_train = torch.randn(5, 3, 8, 8)
    x_test = torch.randn(3, 3, 8, 8)
    net = CNN()
    net.eval()
    params = {k: v.detach() for k, v in net.named_parameters()}

    def fnet_single(params, x):
        return functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)

    def empirical_ntk_jacobian_contraction(fnet_single, params, x1, x2, compute="full"):
        jac1 = vmap(jacrev(fnet_single), (None, 0))(params, x1)
        jac1 = [j.flatten(2) for j in jac1.values()]
        jac2 = vmap(jacrev(fnet_single), (None, 0))(params, x2)
        jac2 = [j.flatten(2) for j in jac2.values()]
        einsum_expr = {"full": "Naf,Mbf->NMab", "trace": "Naf,Maf->NM",
                       "diagonal": "Naf,Maf->NMa"}[compute]
        result = torch.stack([torch.einsum(einsum_expr, j1, j2) for j1, j2 in zip(jac1, jac2)])
        return result.sum(0)

    result = empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_test)
    env.rec("full", result)
    env.rec("trace", empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_test,
                                                        "trace"))

    def empirical_ntk_ntk_vps(func, params, x1, x2, compute="full"):
        def get_ntk(x1, x2):
            def func_x1(params):
                return func(params, x1)

            def func_x2(params):
                return func(params, x2)

            output, vjp_fn = vjp(func_x1, params)

            def get_ntk_slice(vec):
                vjps = vjp_fn(vec)
                _, jvps = jvp(func_x2, (params,), vjps)
                return jvps

            basis = torch.eye(output.numel(), dtype=output.dtype).view(output.numel(), -1)
            return vmap(get_ntk_slice)(basis)

        result = vmap(vmap(get_ntk, (None, 0)), (0, None))(x1, x2)
        return result if compute == "full" else torch.einsum("NMKK->NM", result)

    result_vps = empirical_ntk_ntk_vps(fnet_single, params, x_train, x_test)
    env.rec("vps", result_vps)
    env.rec("same", bool(torch.allclose(result, result_vps, atol=1e-5)))

    def ntk_trace(x1, x2):          # (compiled: vmap over jacrev inside one graph)
        return empirical_ntk_jacobian_contraction(fnet_single, params, x1, x2, "trace")

    ntk_trace = env.step(ntk_trace)
    for i in range(2):
        env.rec(f"compiled trace {i}", ntk_trace(x_train + i, x_test))


@pytest.mark.slow       # (~10 s: the compiled vmap(jacrev) graph's build)
def test_neural_tangent_kernels():
    run_tutorial(neural_tangent_kernels, rtol=1e-4, atol=1e-5)


def make_tensors(torch, env):
    """torch.testing.make_tensor draws as PyTorch draws (randint, uniform_ of the global
    generator): the same values, and the same numbers after it (gradgradcheck's random
    grad_outputs are made so)."""
    torch.manual_seed(0)
    mt = torch.testing.make_tensor
    env.rec("float", mt((2, 3), dtype=torch.float64, device="cpu", low=-1, high=1))
    env.rec("int", mt(4, dtype=torch.int64, device="cpu"))
    env.rec("noncontiguous", mt(3, 2, dtype=torch.float32, device="cpu",
                                noncontiguous=True).stride())
    env.rec("bool", mt(5, dtype=torch.bool, device="cpu"))
    env.rec("exclude_zero", mt(4, dtype=torch.uint8, device="cpu", exclude_zero=True, low=0,
                               high=3))
    env.rec("wide", mt(2, dtype=torch.float32, device="cpu", low=-1e39, high=1e39))
    env.rec("after", torch.rand(2))
    x = torch.rand(3, dtype=torch.double, requires_grad=True)
    env.rec("gradgradcheck", torch.autograd.gradgradcheck(lambda t: t * t.sin(), x))
    env.rec("after gradgradcheck", torch.rand(2))


def test_make_tensor():
    run_tutorial(make_tensors)


def strided_gradcheck(torch, env):
    """gradcheck of strided inputs (a column slice, a transpose) and gradgradcheck with
    non-contiguous grad_outputs, as PyTorch checks them; stride-0 inputs refused."""
    torch.manual_seed(0)
    x = torch.rand(3, 4, dtype=torch.double)[:, ::2].requires_grad_()
    w = torch.rand(4, 3, dtype=torch.double).t().requires_grad_()
    env.rec("strided", torch.autograd.gradcheck(lambda a, b: (a * b[:, :2]).sin(), (x, w)))
    env.rec("non-contiguous grad outputs", torch.autograd.gradgradcheck(
        lambda t: t * t.sin(), x, gen_non_contig_grad_outputs=True))
    try:
        torch.autograd.gradcheck(lambda a: a * 2,
                                 torch.ones(1, dtype=torch.double).expand(3).requires_grad_())
    except RuntimeError as e:
        env.rec("stride 0", str(e)[:40])
    env.rec("after", torch.rand(2, dtype=torch.double))


def test_strided_gradcheck():
    run_tutorial(strided_gradcheck)
