"""torch.cuda / torch.mps / torch.backends names a CPU-only PyTorch answers without a device
(llgrad/cuda/cpu_build.py, llgrad/mps.py, llgrad/backends): each call is compared with what
torch 2.13's CPU build answers or raises, so a program calling them unguarded runs (or
fails) the same."""
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")


def _outcome(fn):
    """('ok', value) or ('raise', exception class family) of calling fn."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", fn()
        except AssertionError:
            return "raise", AssertionError
        except TypeError:
            return "raise", TypeError
        except ValueError:
            return "raise", ValueError
        except RuntimeError:
            return "raise", RuntimeError


def _both(expr):
    """expr evaluated with `m` bound to torch and to llgrad."""
    return (_outcome(lambda: eval(expr, {"m": torch})),
            _outcome(lambda: eval(expr, {"m": llgrad})))


@pytest.mark.parametrize("expr", [
    "m.cuda.get_rng_state_all()",
    "m.cuda.set_rng_state_all([])",
    "m.cuda.set_rng_state(m.zeros(8, dtype=m.uint8))",
    "m.cuda.set_rng_state_all(m.cuda.get_rng_state_all())",
    "dict(m.cuda.memory_stats())",
    "m.cuda.memory_stats_as_nested_dict()",
    "dict(m.cuda.host_memory_stats())",
    "m.cuda.host_memory_stats_as_nested_dict()",
    "m.cuda.memory_cached()",
    "m.cuda.max_memory_cached()",
    "m.cuda.get_arch_list()",
    "m.cuda.get_gencode_flags()",
    "m.cuda.is_tf32_supported()",
    "(m.cuda.has_half, m.cuda.has_magma, tuple(m.cuda.default_generators))",
    "m.cuda.set_stream(None)",
    "m.cuda.init()",
    "m.cuda.get_device_capability()",
    "m.cuda.get_device_capability(0)",
    "m.cuda.current_stream()",
    "m.cuda.default_stream()",
    "m.cuda.set_per_process_memory_fraction(0.5)",
    "m.cuda.get_sync_debug_mode()",
    "m.cuda.can_device_access_peer(0, 1)",
    "m.cuda.Event(enable_timing=True)",
    "m.cuda.Stream()",
    "m.cuda.FloatTensor([1.0])",
    "m.cuda.LongTensor(3)",
    "isinstance(m.ones(2), m.cuda.FloatTensor)",
    "isinstance(m.ones(2).long(), m.cuda.LongTensor)",
    "(m.cuda.FloatTensor.is_cuda, str(m.cuda.HalfTensor.dtype).split('.')[1])",
    "m.cuda.device(-1).idx",
    "m.cuda.device('cuda:2').idx",
    "m.cuda.device(m.device('cuda', 1)).idx",
    "m.cuda.device('cpu')",
    "m.cuda.amp.amp_definitely_not_available()",
    "m.mps.is_available()",
    "m.mps.device_count()",
    "m.mps.manual_seed(3)",
    "m.mps.empty_cache()",
    "m.mps.synchronize()",
    "m.mps.seed()",
    "m.mps.get_rng_state()",
    "m.mps.set_rng_state(m.zeros(8, dtype=m.uint8))",
    "m.mps.current_allocated_memory()",
    "m.mps.driver_allocated_memory()",
    "m.mps.recommended_max_memory()",
    "m.mps.set_per_process_memory_fraction(0.5)",
    "m.mps.compile_shader('kernel void f() {}')",
    "m.backends.mps.is_macos13_or_newer()",
    "m.backends.mps.is_macos_or_newer(14, 0)",
    "m.backends.cuda.is_flash_attention_available()",
    "m.accelerator.memory_allocated()",
    "m.accelerator.max_memory_allocated()",
    "m.accelerator.memory_reserved()",
    "m.accelerator.max_memory_reserved()",
    "m.accelerator.memory_stats()",
    "m.accelerator.reset_peak_memory_stats()",
    "m.accelerator.reset_accumulated_memory_stats()",
    "m.accelerator.get_memory_info()",
    "m.accelerator.empty_host_cache()",
    "m.accelerator.current_stream()",
    "m.accelerator.get_device_capability()",
    "m.accelerator.Graph()",
    "m.backends.cuda.is_ck_sdpa_available()",
])
def test_answers_as_torch_cpu_build(expr):
    ours_torch, ours = _both(expr)
    assert ours == ours_torch


def test_device_contexts_as_torch_cpu_build():
    for m in (torch, llgrad):
        with m.cuda.device(-1):
            pass
        with m.cuda.device_of(m.ones(2)):           # a CPU tensor: a no-op
            pass
        with m.cuda.stream(None):
            pass
        with pytest.raises(RuntimeError, match="compiled without CUDA"):
            with m.cuda.device(0):
                pass
        with pytest.raises(TypeError):               # (None < 0, as in PyTorch)
            with m.cuda.device(None):
                pass


def test_accelerator_device_index_as_torch():
    for m in (torch, llgrad):
        with m.accelerator.device_index(None):
            pass
        with pytest.raises(RuntimeError, match="none is available"):
            with m.accelerator.device_index(0):
                pass


def test_cuda_tensor_type_cast_raises_as_torch():
    x = llgrad.ones(2)
    for arg in (llgrad.cuda.FloatTensor, "torch.cuda.FloatTensor"):
        with pytest.raises(RuntimeError):
            torch.ones(2).type(arg if isinstance(arg, str) else torch.cuda.FloatTensor)
        with pytest.raises(RuntimeError):            # (not silently a CPU tensor)
            x.type(arg)
    assert x.type(llgrad.DoubleTensor).dtype == llgrad.float64
    assert x.type("torch.LongTensor").dtype == llgrad.int64


def test_deprecated_cache_names_warn_as_torch():
    for m in (torch, llgrad):
        with pytest.warns(FutureWarning, match="memory_reserved"):
            assert m.cuda.memory_cached() == 0
        with pytest.warns(FutureWarning, match="max_memory_reserved"):
            assert m.cuda.max_memory_cached() == 0


def test_mps_event_needs_the_backend():
    with pytest.raises(RuntimeError, match="without MPS backend"):
        llgrad.mps.Event(enable_timing=True)


def test_set_rng_state_needs_a_tensor():
    with pytest.raises(AttributeError):
        torch.cuda.set_rng_state([1, 2])
    with pytest.raises(AttributeError):
        llgrad.cuda.set_rng_state([1, 2])


def _scale_fn(m):
    """A custom Function decorated with the deprecated torch.cuda.amp decorators (as mixed
    precision research code writes them), in namespace m."""
    with pytest.warns(FutureWarning, match="custom_fwd"):
        fwd_deco = m.cuda.amp.custom_fwd(cast_inputs=m.float32)
    with pytest.warns(FutureWarning, match="custom_bwd"):
        @m.cuda.amp.custom_bwd
        def backward(ctx, g):
            return g * ctx.k, None

    class Scale(m.autograd.Function):
        @staticmethod
        @fwd_deco
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

    Scale.backward = staticmethod(backward)
    return Scale


def test_cuda_amp_custom_fwd_bwd_as_torch():
    results = []
    for m in (torch, llgrad):
        Scale = _scale_fn(m)
        x = m.tensor([1.0, -2.0, 3.0], requires_grad=True)
        y = Scale.apply(x, 2.5)
        y.sum().backward()
        results.append((y.detach().numpy().tolist(), x.grad.numpy().tolist(), str(y.dtype)))
    assert results[0][:2] == results[1][:2]
    assert results[0][2].split(".")[1] == results[1][2].split(".")[1]


def test_sdp_kernel_sets_and_restores_flags_as_torch():
    names = ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled",
             "cudnn_sdp_enabled")
    seen = []
    for m in (torch, llgrad):
        flags = lambda: [getattr(m.backends.cuda, n)() for n in names]  # noqa: E731
        before = flags()
        with pytest.warns(FutureWarning, match="sdp_kernel"):
            ctx = m.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False)
        with ctx as got:
            inside = flags()
        seen.append((before, got, inside, flags()))
    assert seen[0] == seen[1]
    assert seen[1][2] == [False, False, True, True] and seen[1][3] == seen[1][0]


def test_sdp_kernel_without_flash_keeps_sdpa_results():
    q = llgrad.randn(1, 2, 4, 8)
    ref = llgrad.nn.functional.scaled_dot_product_attention(q, q, q)
    with pytest.warns(FutureWarning):
        ctx = llgrad.backends.cuda.sdp_kernel(enable_math=True, enable_flash=False)
    with ctx:
        out = llgrad.nn.functional.scaled_dot_product_attention(q, q, q)
    assert llgrad.equal(out, ref)
