"""The systems bench/workloads.py times: each one turns a Workload and its arrays into a
Runner whose step() computes the loss and every gradient once (jax: until the results
are ready), and whose fetch() turns a step's result into (float loss, [NumPy grads]) for
the check. A library is imported only when a system that needs it is built, so a
subprocess measuring one system (peak memory, start-up time) loads only that one."""
import importlib.util
import types

import numpy as np

NUMPY = "numpy"
LLGRAD_EAGER = "llgrad eager"
LLGRAD_LLVM = "llgrad llvm"
LLGRAD_VG = "llgrad llvm value_and_grad"
TORCH_EAGER = "torch eager"
TORCH_COMPILE = "torch.compile"
JAX = "jax.jit(value_and_grad)"

LLGRAD_SYSTEMS = (LLGRAD_EAGER, LLGRAD_LLVM, LLGRAD_VG)
PEER_SYSTEMS = (TORCH_EAGER, TORCH_COMPILE, JAX)
ALL_SYSTEMS = (NUMPY,) + LLGRAD_SYSTEMS + PEER_SYSTEMS
LIBRARY = {NUMPY: "numpy", TORCH_EAGER: "torch", TORCH_COMPILE: "torch", JAX: "jax",
            **{s: "llgrad" for s in LLGRAD_SYSTEMS}}


def is_llgrad(system):
    return system in LLGRAD_SYSTEMS


def available(system):
    return importlib.util.find_spec(LIBRARY[system]) is not None


def import_system(system, threads=1):
    """Import the system's library (and pin torch's thread pools); -> its version."""
    lib = LIBRARY[system]
    if lib == "torch":
        import torch
        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError:        # already set (a second torch system in this process)
            pass
        return torch.__version__
    if lib == "jax":
        import jax
        return jax.__version__
    mod = importlib.import_module(lib)
    if lib == "llgrad":             # native loops split over this many threads
        mod.set_num_threads(threads)
    return getattr(mod, "__version__", "?")


class Runner:
    def __init__(self, system, step, fetch, note=None):
        self.system, self.step, self.fetch = system, step, fetch
        self._note = note

    def note(self):
        return self._note() if callable(self._note) else (self._note or "")


# ---- the op namespaces the loss bodies are written against --------------------------------
def _torch_like_ops(F):
    return types.SimpleNamespace(
        tanh=lambda t: t.tanh(), sigmoid=lambda t: t.sigmoid(), relu=F.relu,
        cross_entropy=F.cross_entropy,
        layer_norm=lambda t: F.layer_norm(t, (t.shape[-1],), eps=1e-5),
        gelu_tanh=lambda t: F.gelu(t, approximate="tanh"),
        sum=lambda t: t.sum(), mean=lambda t: t.mean())


def _jax_ops():
    import jax
    import jax.numpy as jnp

    def cross_entropy(logits, y):
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def layer_norm(t):
        mu = t.mean(axis=-1, keepdims=True)
        var = ((t - mu) ** 2).mean(axis=-1, keepdims=True)
        return (t - mu) * jax.lax.rsqrt(var + 1e-5)

    return types.SimpleNamespace(
        tanh=jnp.tanh, sigmoid=jax.nn.sigmoid, relu=jax.nn.relu, cross_entropy=cross_entropy,
        layer_norm=layer_norm, gelu_tanh=lambda t: jax.nn.gelu(t, approximate=True),
        sum=jnp.sum, mean=jnp.mean)


def _named(body, K, key):
    def loss_fn(*args):
        return body(K, *args)
    loss_fn.__name__ = loss_fn.__qualname__ = f"{key.lower()}_loss"
    return loss_fn


# ---- builders ------------------------------------------------------------------------------
def _numpy(wl, arrays):
    def fetch(res):
        return float(res[0]), [np.asarray(g) for g in res[1]]
    return Runner(NUMPY, lambda: wl.reference(*arrays), fetch)


_SHORT = {"forward": "fwd", "backward": "bwd"}


def _llgrad_note(cf):
    """Which of the compiled graphs run natively, and anything odd (re-traces)."""
    def note():
        parts = []
        for entry in cf.entries:
            for which, k in getattr(entry, "kernels", {}).items():
                if isinstance(k, str):     # "interpreted: OP (file:line) is not lowered ..."
                    op = k.split(":", 1)[1].split("(")[0].strip() if ":" in k else k
                    parts.append(f"{_SHORT.get(which, which)} interpreted ({op})")
        if not any(getattr(e, "kernels", {}) for e in cf.entries):
            parts.append("no kernel built")
        elif not parts:
            parts.append("native")
        if cf.n_traces > 1:
            parts.append(f"{cf.n_traces} traces")
        return ", ".join(dict.fromkeys(parts))
    return note


def _llgrad(system, wl, arrays):
    import llgrad
    import llgrad.nn.functional as F
    fn = _named(wl.body, _torch_like_ops(F), wl.key)
    diff = set(wl.diff)

    def fetch(res):
        return float(res[0].item()), [g.numpy() for g in res[1]]

    if system == LLGRAD_VG:
        vg = llgrad.value_and_grad(fn, argnums=tuple(wl.diff), backend="llvm")
        args = [llgrad.tensor(a) for a in arrays]
        return Runner(system, lambda: vg(*args), fetch, _llgrad_note(vg))
    args = [llgrad.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
    params = [args[i] for i in wl.diff]
    f = fn if system == LLGRAD_EAGER else llgrad.compile(fn, backend="llvm")

    def step():
        loss = f(*args)
        return loss, llgrad.autograd.grad(loss, params)
    return Runner(system, step, fetch, None if system == LLGRAD_EAGER else _llgrad_note(f))


def _torch(system, wl, arrays):
    import torch
    import torch.nn.functional as F
    fn = _named(wl.body, _torch_like_ops(F), wl.key)
    diff = set(wl.diff)
    args = [torch.from_numpy(a.copy()).requires_grad_(i in diff) for i, a in enumerate(arrays)]
    params = [args[i] for i in wl.diff]
    f = fn if system == TORCH_EAGER else torch.compile(fn, dynamic=False)

    def step():
        loss = f(*args)
        return loss, torch.autograd.grad(loss, params)

    def fetch(res):
        return float(res[0].item()), [g.numpy() for g in res[1]]
    return Runner(system, step, fetch)


def _jax(wl, arrays):
    import jax
    import jax.numpy as jnp
    fn = _named(wl.body, _jax_ops(), wl.key)
    f = jax.jit(jax.value_and_grad(fn, argnums=tuple(wl.diff)))
    args = [jax.device_put(jnp.asarray(a.astype(np.int32) if a.dtype == np.int64 else a))
            for a in arrays]

    def step():
        return jax.block_until_ready(f(*args))

    def fetch(res):
        return float(res[0]), [np.asarray(g) for g in res[1]]
    return Runner(JAX, step, fetch)


def build(system, wl, arrays):
    if system == NUMPY:
        return _numpy(wl, arrays)
    if is_llgrad(system):
        return _llgrad(system, wl, arrays)
    if system in (TORCH_EAGER, TORCH_COMPILE):
        return _torch(system, wl, arrays)
    if system == JAX:
        return _jax(wl, arrays)
    raise ValueError(f"unknown system {system!r}")
