"""The text of help(llgrad.compile): kept here so that compiled_function.py stays code."""
from collections.abc import Callable as Callable  # noqa: F401 (compile's annotations)

COMPILE_DOC = """Compile fn, as torch.compile: a decorator, or a call returning it compiled.

    @llgrad.compile                         # or llgrad.compile(fn, backend=..., ...)
    def loss(x, w):
        return (x @ w).tanh().sum()

    step = llgrad.compile(train_step, fullgraph=True)
    model = llgrad.compile(model)           # a module-like object (torch's OptimizedModule)

The first call with a new guard key traces fn (an ordinary eager run, so its results are
eager's) into a typed SSA IR; the forward and backward graphs then run as native code.
A compiled call behaves as the eager call would: results, gradients, .grad, writes to
inputs and to objects fn reads, hooks on inputs, RNG state and exceptions. A compiled
module keeps train/eval as a guard and writes BatchNorm statistics back; its .train(),
.eval(), .parameters(), .state_dict() and attributes are the module's.

Arguments
    fn              a function, a method or an nn.Module (None: return a decorator)
    backend         "llvm" (default), "interpret", "python" or "eager" (else LLGRAD_BACKEND)
    recompile_limit traces per function before new guard values run eagerly (default:
                    torch._dynamo.config.recompile_limit when it is reached, 8 unless set)
    transform       rewrite tensor-dependent if/elif/else, `a if c else b` and while into
                    cond / while_loop ops (AutoGraph's approach), so one trace serves every
                    branch; False traces fn as written (tensor conditions become value guards)
    fullgraph       raise instead of running eagerly where a call cannot be compiled
    torch.compile's mode, options, dynamic, name, isolate_recompiles, shapes_spec
                    checked as PyTorch checks them and otherwise without effect (every
                    mode compiles to native code; shapes are specialised); disable=True
                    returns fn itself; backend 'inductor' is llvm, 'eager' and
                    'aot_eager' are eager (llgrad.compiler and llgrad._dynamo hold
                    torch.compiler's reset, disable, is_compiling and friends)

Backends (chosen once, when compile() is called: backend= or LLGRAD_BACKEND)
    llvm        each forward and backward graph is one LLVM module: fused strided loops,
                OpenBLAS (or llgrad's own GEMM) matmuls, native branches and loops; a graph
                the lowering does not cover runs on the interpreter, with a warning
    interpret   the IR interpreter (the reference the native code is tested against)
    python      the graphs as generated Python source over NumPy
    eager       no tracing: fn itself runs on every call (prints and breakpoints work)

Guards and re-tracing
    A call's guard key holds its tensors' dtypes, shapes, strides and requires_grad, grad
    mode, the default dtype, Python-number arguments (a float's zero with its sign), the
    .grad of inputs (only for a function that reads or sets one), and the type and
    contents of objects fn is given or reads from globals and closures (a model, an
    optimiser: guarded by what they hold, not by identity, as Dynamo treats modules). A
    value read from a tensor that steers Python code (bool(t), or t.item() whose digits the
    code reads) is a value guard.
    A cache hit never runs fn's Python again (once its native code is built: until then
    calls run fn eagerly, see Background builds). A changed guard traces
    again, up to recompile_limit specialisations; then a warning names the guard that
    changed and calls with new guard values run eagerly. A value guard that has taken four
    values in the traces of one guard key (the count a data-dependent mask or nonzero
    selects, changing every call) stops it sooner: that key's calls run eagerly, with a
    warning naming the line (each kept entry would cost a call a forward run before its
    value guards could be read). Python state a traced run changed
    is replayed by compiled calls where it can be: tensors, constants and flags put into
    attributes, dicts and lists, an optimiser's lr the step sets, and numbers the step
    counts (`self.t += 1`, a global step), which become inputs after the first trace and
    are written back. A run that changed other state (an append to a list) is not kept:
    the next call traces again (an optimiser's first step, which makes its state, is
    followed by steps that change none).

Graph breaks and fullgraph
    Where compile cannot keep the contract (numpy() or tolist() of a traced tensor, a hook
    or retain_grad() made inside fn on a graph a backward after the call would run (in a
    step whose own backward runs through it, retained gradients are given back), aliasing
    inputs that fn writes, a draw from NumPy's or Python's random generator that compiled
    calls cannot make again (py_draws.py makes random.random() and the like), data-dependent
    shapes such as unique(dim=...), a DistributedDataParallel forward, an iterator
    the call reaches, globals() or os.environ read, a global setting fn leaves changed:
    set_grad_enabled, set_default_dtype, set_printoptions, set_num_threads), everything the
    traced run changed is put back and the call runs eagerly, with a warning once per reason
    naming the user's line; fullgraph=True raises instead. Tensor-dependent control flow the
    rewrite cannot hold (branches of different shapes, break) is traced again as plain
    Python, its conditions value guards. fn.graph_breaks lists the reasons;
    llgrad.explain(fn, *args) reports the graphs, breaks and guards without changing
    anything.

Dumps
    fn.dump(*args) returns the guards, the forward and backward IR and the saved values
    (with bytes and source lines) of the specialisation these arguments select, tracing it
    if needed and putting back everything the trace wrote; llvm=True adds the LLVM IR
    before and after optimisation, asm=True the host assembly, python=True the graphs as
    Python source; format="dot" gives Graphviz DOT. LLGRAD_DUMP=DIR writes all of it (LLVM
    IR and Python source included) to DIR/<name>_<n>.txt for every trace. From the shell:
    python -m llgrad dump FILE.py:FUNC --args "f32[4,6] f32[6,3]" [--llvm --asm --python
    --dot --svg].

Background builds (LLGRAD_COMPILE)
    A call never waits for LLVM: after a trace the graphs go to one background thread;
    calls run fn eagerly (exactly as without compile) until the native forward is ready
    and switch to it at the next call (a backward not built yet runs on the interpreter).
    LLGRAD_COMPILE=sync builds before the call instead (benchmarks of steady state, tests
    that inspect kernels); LLGRAD_COMPILE=background is the default. A build that fails
    leaves the graph on the interpreter, with a warning.

The kernel cache (LLGRAD_CACHE_DIR, LLGRAD_KERNEL_CACHE_MB)
    Native code is cached on disk under LLGRAD_CACHE_DIR (default ~/.cache/llgrad;
    LLGRAD_CACHE_DIR=0 turns the disk cache off), so a second process loads the object code
    and skips LLVM. Only entries signed (HMAC-SHA256) with a per-user key kept outside the
    cache (~/.local/share/llgrad/cache-key, mode 0600) are run; others are rebuilt, and a
    directory other users could write is refused with a warning. In memory, kernels live
    as long as the compiled functions using them, plus an LRU of recently used code of at
    most LLGRAD_KERNEL_CACHE_MB MiB (default 64; 0: none).

Threads (LLGRAD_NUM_THREADS)
    Native loops big enough to pay for it split over llgrad.get_num_threads() threads of
    one shared pool: llgrad.set_num_threads(n) (as torch's; it sets OpenBLAS's count too),
    default LLGRAD_NUM_THREADS or the usable CPUs. Changing it never recompiles; results
    are deterministic for a given count. Waiting workers spin LLGRAD_SPIN_US (default
    1000) microseconds before they sleep. Eager products big enough for OpenBLAS to share
    run on the same pool. LLGRAD_POOL=0 uses plain threads per loop.

Logs (LLGRAD_LOG)
    LLGRAD_LOG=recompiles,graph_breaks,guards,compile,perf (or all), or
    llgrad.set_logs("recompiles"), logs through logging.getLogger("llgrad"), like
    TORCH_LOGS: each re-trace with the guard that failed, each eager fallback with its
    reason and line, the guards of each new entry, trace and LLVM times and cache hits, and
    per call the time in guards, launch and kernels. Off, it costs nothing. A compile over
    a second says so on stderr unless LLGRAD_QUIET=1 or LLGRAD_LOG is set. llgrad.profile()
    times each native kernel group (as torch.profiler).

Checking (LLGRAD_CHECK)
    LLGRAD_CHECK=1 runs llgrad.debug.compare before every call of every compiled function:
    the graphs on the eager dispatcher, on the interpreter and as native code group by
    group, warning at the first node that differs (slow; LLGRAD_CHECK=raise raises
    llgrad.debug.MismatchError). llgrad.debug.compare(fn, *args) does it once.

Returns a CompiledFunction (call it as fn; .dump(), .n_traces, .n_llvm_compiles (the LLVM
modules built, cache hits not counted), .graph_breaks), a CompiledModule for a module, or, with fn None, a decorator. See also llgrad.grad,
llgrad.value_and_grad and llgrad.vjp (forward and backward compiled as one graph),
llgrad.trace (the forward graph of one call) and llgrad.explain."""


def documented(fn):
    """fn (llgrad.compile) with COMPILE_DOC as its docstring."""
    fn.__doc__ = COMPILE_DOC
    return fn
