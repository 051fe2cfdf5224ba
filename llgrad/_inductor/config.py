"""torch._inductor.config: Inductor's code-generation settings, with PyTorch 2.13's defaults
for the ones programs commonly set or read (a module, as PyTorch's: a program may set any
name; reading a name never set raises AttributeError). They tune Inductor's kernels and never
change results; llgrad's compiler does not read them. `patch(**settings)` sets some for a
`with` block, as PyTorch's."""
import contextlib
import sys

coordinate_descent_tuning = False
coordinate_descent_check_all_directions = False
max_autotune = False
max_autotune_gemm = False
max_autotune_pointwise = False
autotune_in_subproc = False
autotune_local_cache = True
benchmark_kernel = False
fx_graph_cache = True
fx_graph_remote_cache = None
freezing = False
epilogue_fusion = True
aggressive_fusion = False
shape_padding = True
comprehensive_padding = True
use_mixed_mm = True
force_fuse_int_mm_with_mul = False
split_reductions = True
fallback_random = False
allow_buffer_reuse = True
cpp_wrapper = False
layout_optimization = True
keep_output_stride = True
reorder_for_compute_comm_overlap = False
size_asserts = True
emulate_precision_casts = False
debug = False
verbose_progress = False
compile_threads = 2


class triton:
    """torch._inductor.config.triton: the Triton (GPU) kernels' settings."""
    unique_kernel_names = True
    cudagraphs = False
    cudagraph_trees = True
    cudagraph_skip_dynamic_graphs = False
    use_block_ptr = False
    max_tiles = None


class cpp:
    """torch._inductor.config.cpp: the C++ (CPU) kernels' settings."""
    threads = -1
    simdlen = None
    enable_kernel_profile = False


@contextlib.contextmanager
def patch(arg1=None, arg2=None, **kwargs):
    """`with config.patch(max_autotune=True):` (or patch('max_autotune', True), or a dict)
    the settings for the block only, as PyTorch's; a dotted name, 'triton.cudagraphs', sets
    the nested one."""
    if arg1 is not None:
        if arg2 is not None:
            if not isinstance(arg1, str):
                raise AssertionError("first argument must be a string if passing 2 positional "
                                     "args to patch")
            settings = {arg1: arg2}
        else:
            if not isinstance(arg1, dict):
                raise AssertionError("first argument must be a dict if passing a single "
                                     "positional arg to patch")
            settings = dict(arg1)
        if kwargs:
            raise AssertionError("cannot pass both positional and keyword arguments to patch")
    else:
        if arg2 is not None:
            raise AssertionError("second positional argument is only valid if first is a "
                                 "string")
        settings = kwargs
    module = sys.modules[__name__]
    missing = object()
    before = []
    for name, value in settings.items():
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            owner = getattr(owner, part)
        before.append((owner, leaf, getattr(owner, leaf, missing)))
        setattr(owner, leaf, value)
    try:
        yield
    finally:
        for owner, leaf, value in reversed(before):
            if value is missing:
                delattr(owner, leaf)
            else:
                setattr(owner, leaf, value)
