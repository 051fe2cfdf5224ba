"""Names research code reaches for outside torch's public namespaces: torch._assert (timm's
patch embeddings), torch.version.cuda, torch.nn.common_types' annotations,
torch.nn.init._no_grad_trunc_normal_ (timm's copy), autograd.function.InplaceFunction and
torch._inductor.config's settings (gpt-fast sets them before compiling); against torch."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def test_assert_as_torch():
    for m in (torch, llgrad):
        m._assert(True, "never")
        m._assert(m.tensor(True), "never")
        m._assert(3 == 3, "never")
        with pytest.raises(AssertionError, match="^Input height \\(5\\) doesn't match"):
            m._assert(5 == 4, "Input height (5) doesn't match model (4).")
        with pytest.raises(AssertionError, match="bad"):
            m._assert(m.tensor(0.0), "bad")
        with pytest.raises(RuntimeError, match="ambiguous"):
            m._assert(m.tensor([1.0, 0.0]), "two values")


def test_version_build_facts_as_torch_cpu_build():
    for name in ("cuda", "hip", "rocm", "xpu", "debug"):
        assert getattr(llgrad.version, name) == getattr(torch.version, name), name


def test_common_types_as_torch():
    import llgrad.nn.common_types as ours
    import torch.nn.common_types as theirs
    names = [n for n in vars(theirs) if n.startswith("_") and n.endswith("_t")]
    assert len(names) > 15
    for n in names:
        assert str(getattr(ours, n)).replace("llgrad.Tensor", "torch.Tensor") == \
            str(getattr(theirs, n)), n

    def conv(kernel_size: ours._size_2_t) -> ours._size_2_t:
        return kernel_size
    assert conv((3, 3)) == (3, 3)


def test_no_grad_trunc_normal_draws_as_torch():
    out = []
    for m in (torch, llgrad):
        m.manual_seed(7)
        w = m.empty(4, 6, requires_grad=True)
        r = m.nn.init._no_grad_trunc_normal_(w, 0.5, 0.2, 0.0, 1.0)
        assert r is w and w.requires_grad and w.grad_fn is None
        g = m.Generator().manual_seed(3)
        v = m.nn.init._no_grad_trunc_normal_(m.empty(5), 0.0, 1.0, -2.0, 2.0, generator=g)
        out.append((w.detach().numpy(), v.numpy()))
    np.testing.assert_array_equal(out[1][0], out[0][0])
    np.testing.assert_array_equal(out[1][1], out[0][1])
    assert (out[1][0] >= 0).all() and (out[1][0] <= 1).all()


def test_inplace_function_as_torch():
    for m in (torch, llgrad):
        class Double(m.autograd.function.InplaceFunction):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        assert issubclass(Double, m.autograd.Function)
        assert Double().inplace is False and Double(inplace=True).inplace is True
        x = m.ones(3, requires_grad=True)
        Double.apply(x).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_inductor_config_patch_restores():
    c = llgrad._inductor.config
    with c.patch({"triton.cudagraphs": True}):
        with c.patch("max_autotune", True):
            assert c.triton.cudagraphs is True and c.max_autotune is True
    assert c.triton.cudagraphs is False and c.max_autotune is False

    @c.patch(freezing=True)
    def frozen():
        return c.freezing
    assert frozen() is True and c.freezing is False
    with pytest.raises(AssertionError, match="cannot pass both"):
        with c.patch({"max_autotune": True}, freezing=True):
            pass


@pytest.mark.slow       # (importing torch._inductor takes ~4 s)
def test_inductor_config_settings_as_torch():
    names = ("coordinate_descent_tuning", "max_autotune", "fx_graph_cache", "freezing",
             "epilogue_fusion", "triton.unique_kernel_names", "triton.cudagraphs",
             "triton.cudagraph_trees", "cpp.threads", "compile_threads")

    def read(c, name):
        for part in name.split("."):
            c = getattr(c, part)
        return c
    import torch._inductor.config as theirs
    ours = llgrad._inductor.config
    for n in names:
        assert read(ours, n) == read(theirs, n), n
    for c in (theirs, ours):
        with c.patch({"triton.cudagraphs": True}):
            with c.patch("max_autotune", True):
                assert c.triton.cudagraphs is True and c.max_autotune is True
        assert c.triton.cudagraphs is False and c.max_autotune is False
        with pytest.raises(AssertionError, match="cannot pass both"):
            with c.patch({"max_autotune": True}, freezing=True):
                pass
        with pytest.raises(AttributeError):
            c.no_such_setting_s62


def test_inductor_config_set_before_compile_keeps_results():
    import llgrad._inductor.config
    llgrad._inductor.config.coordinate_descent_tuning = True
    llgrad._inductor.config.triton.unique_kernel_names = True
    try:
        f = llgrad.compile(lambda x: (x * x).sum())
        x = llgrad.arange(4.0)
        assert f(x).item() == 14.0
    finally:
        llgrad._inductor.config.coordinate_descent_tuning = False


@pytest.mark.parametrize("kwargs", [
    None, {}, {"dtype": "D"}, {"device": "cpu", "dtype": "D"},
    {"factory_kwargs": {"dtype": "D"}, "device": "cpu"}, {"memory_format": "M"},
    {"bias": True}, {"dtype": "D", "factory_kwargs": {"dtype": "D"}}])
def test_nn_factory_kwargs_as_torch(kwargs):
    outs = []
    for m in (torch, llgrad):
        k = None if kwargs is None else {
            key: ({kk: m.float64 for kk in v} if key == "factory_kwargs" else
                  m.float64 if v == "D" else m.channels_last if v == "M" else v)
            for key, v in kwargs.items()}
        try:
            r = m.nn.factory_kwargs(k)
            outs.append(sorted((key, str(v).replace("torch", "X").replace("llgrad", "X"))
                               for key, v in r.items()))
        except TypeError as e:
            outs.append(("TypeError", str(e)))
    assert outs[1] == outs[0]
    if kwargs == {"device": "cpu", "dtype": "D"}:
        assert llgrad.empty(2, **llgrad.nn.factory_kwargs(
            {"device": "cpu", "dtype": llgrad.float64})).dtype == llgrad.float64
