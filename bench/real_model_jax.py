"""The models of bench/real_models.py written in jax by hand (jax.numpy and lax, parameters
named as torch's), their jitted loss + gradients or whole AdamW training step, and a worker
process that serves them to real_models.py.

jax's thread count is fixed when it starts (PJRT_NPROC, XLA_FLAGS), so real_models.py
runs one worker per thread count, started pinned, and drives it over a pipe: the worker's
timing blocks then interleave with the other systems' as if in the same process. A line
on stdin is a JSON command; the worker answers with one line `REPLY {json}` on stdout:

    {"op": "build", "key": "gru", "step": false, "state": "state.npz", "names": [...],
     "checks": 3, "out": "result.npz"}  -> {"per": s per call} or {"error": "..."}; the result of the
                              first `checks` calls (loss and gradients, or parameters after
                              that many steps) is written to `out` (`loss` and names)
    {"op": "block", "n": 40} -> {"t": wall seconds, "c": CPU seconds} of n calls
    {"op": "quit"}

    python bench/real_model_jax.py --worker        # (real_models.py starts it)
"""
import json
import os
import subprocess
import sys
import time
import traceback

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import real_model_defs as defs  # noqa: E402

LR, WEIGHT_DECAY = defs.LR, defs.WEIGHT_DECAY
BETAS, EPS = (0.9, 0.999), 1e-8         # torch's AdamW defaults


def loss_fn(key):
    """The workload's loss(params, *arrays) in jax, the same function as torch's."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def linear(p, name, x):
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def layer_norm(p, name, x):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def ce(logits, y):
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def block(p, pre, x, mask):
        b, n, c = x.shape
        heads = defs.HEADS
        d = c // heads
        q, k, v = linear(p, pre + "qkv", layer_norm(p, pre + "ln1", x)).reshape(
            b, n, 3, heads, d).transpose(2, 0, 3, 1, 4)
        s = (q @ k.swapaxes(-2, -1)) * (1.0 / d ** 0.5)
        a = jax.nn.softmax(jnp.where(mask, -jnp.inf, s), axis=-1)
        h = x + linear(p, pre + "proj", (a @ v).transpose(0, 2, 1, 3).reshape(b, n, c))
        return h + linear(p, pre + "fc2", jax.nn.gelu(
            linear(p, pre + "fc1", layer_norm(p, pre + "ln2", h)), approximate=False))

    def conv(p, name, x):
        y = lax.conv_general_dilated(x, p[name + ".weight"], (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + p[name + ".bias"][None, :, None, None] if name + ".bias" in p else y

    def batch_norm(p, name, x):
        # training mode: normalised by the batch's statistics (biased variance, as torch);
        # the running statistics torch and llgrad also update are left out here: they
        # change nothing a training step computes, only what eval mode would
        mu = x.mean((0, 2, 3), keepdims=True)
        var = ((x - mu) ** 2).mean((0, 2, 3), keepdims=True)
        return ((x - mu) * lax.rsqrt(var + 1e-5) * p[name + ".weight"][None, :, None, None]
                + p[name + ".bias"][None, :, None, None])

    def max_pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def avg_pool(x):
        n, c, h, w = x.shape
        return x.reshape(n, c, h // 2, 2, w // 2, 2).mean((3, 5))

    def lstm_cell(p, h, c, g):
        g = g + h @ p["lstm.weight_hh_l0"].T
        i, f, gg, o = jnp.split(g, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
        return jax.nn.sigmoid(o) * jnp.tanh(c), c

    def gru_cell(p, h, gx):            # torch's gate order r, z, n; b_hn inside r * (.)
        gh = h @ p["gru.weight_hh_l0"].T + p["gru.bias_hh_l0"]
        xr, xz, xn = jnp.split(gx, 3, axis=-1)
        hr, hz, hn = jnp.split(gh, 3, axis=-1)
        r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
        n = jnp.tanh(xn + r * hn)
        return (1 - z) * n + z * h

    if key in ("block", "stack4"):
        pres = [f"blocks.{i}." for i in range(4)] if key == "stack4" else [""]

        def loss(p, x, mask, t):
            for pre in pres:
                x = block(p, pre, x, mask)
            return ((x - t) ** 2).mean()
        return loss
    if key == "cnn":
        def loss(p, x, y):
            h = max_pool(jax.nn.relu(conv(p, "c1", x)))
            h = max_pool(jax.nn.relu(conv(p, "c2", h)))
            return ce(linear(p, "fc", h.reshape(h.shape[0], -1)), y)
        return loss
    if key == "cnn_bn":
        def loss(p, x, y):
            h = jax.nn.relu(batch_norm(p, "bn1", conv(p, "c1", x)))
            h = avg_pool(jax.nn.relu(batch_norm(p, "bn2", conv(p, "c2", h))))
            return ce(linear(p, "fc", h.reshape(h.shape[0], -1)), y)
        return loss

    def loss(p, x, y):                  # lstm, gru: the input projection of all steps first
        kind = key
        hid = p[f"{kind}.weight_hh_l0"].shape[1]
        gx = x @ p[f"{kind}.weight_ih_l0"].T + p[f"{kind}.bias_ih_l0"]
        z = jnp.zeros((x.shape[0], hid), x.dtype)
        if kind == "lstm":
            gx = gx + p["lstm.bias_hh_l0"]

            def cell(carry, g):
                h, c = lstm_cell(p, *carry, g)
                return (h, c), h
            _, hs = lax.scan(cell, (z, z), gx.swapaxes(0, 1))
        else:
            def cell(h, g):
                h = gru_cell(p, h, g)
                return h, h
            _, hs = lax.scan(cell, z, gx.swapaxes(0, 1))
        return ce(linear(p, "head", hs.swapaxes(0, 1)).reshape(-1, 10), y)
    return loss


def build(key, state, names, arrays, step):
    """-> (call, fetch): call() runs the jitted loss and gradients (or a whole AdamW step)
    once and waits for it; fetch(result) -> (loss, {name: NumPy gradient or parameter})."""
    import jax
    import jax.numpy as jnp
    p = {n: jnp.asarray(state[n]) for n in names}
    args = [jnp.asarray(a.astype(np.int32) if a.dtype == np.int64 else a) for a in arrays]
    value_and_grad = jax.value_and_grad(loss_fn(key))
    if not step:
        f = jax.jit(value_and_grad)

        def call():
            return jax.block_until_ready(f(p, *args))

        def fetch(res):
            return float(res[0]), {n: np.asarray(g) for n, g in res[1].items()}
        return call, fetch
    b1, b2 = BETAS

    # torch's single-tensor AdamW, written out; the old parameters and moments are donated,
    # so the update is in place as torch's and llgrad's are
    def update(p, m, v, t, *args):
        value, g = value_and_grad(p, *args)
        t = t + 1
        c1, c2 = 1 - b1 ** t, jnp.sqrt(1 - b2 ** t)
        m = {n: m[n] + (1 - b1) * (g[n] - m[n]) for n in p}
        v = {n: b2 * v[n] + (1 - b2) * g[n] * g[n] for n in p}
        p = {n: p[n] * (1 - LR * WEIGHT_DECAY) - (LR / c1) * m[n] / (jnp.sqrt(v[n]) / c2 + EPS)
             for n in p}
        return p, m, v, t, value
    update = jax.jit(update, donate_argnums=(0, 1, 2))
    st = [p, {n: jnp.zeros_like(a) for n, a in p.items()},
          {n: jnp.zeros_like(a) for n, a in p.items()}, jnp.float32(0.0)]

    def call():
        *st[:4], value = jax.block_until_ready(update(*st, *args))
        return value

    def fetch(value):
        return float(value), {n: np.asarray(a) for n, a in st[0].items()}
    return call, fetch


# ---- the worker's two ends ----------------------------------------------------------------------
class Worker:
    """The client: a worker process started with `env` (real_models.py pins it to
    `threads`), its stderr kept in `tmp` for the error messages."""
    def __init__(self, env, tmp, threads):
        self.tmp, self.threads = tmp, threads
        self.log = open(os.path.join(tmp, f"jax{threads}.log"), "w+")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)

    def ask(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("REPLY "):
                reply = json.loads(line[len("REPLY "):])
                if "error" in reply:
                    raise RuntimeError(reply["error"] + "\n" + self._log_tail())
                return reply
        raise RuntimeError(f"the jax worker died\n{self._log_tail()}")

    def build(self, key, state_path, names, step, checks):
        """-> ((loss, {name: gradient or parameter}) after `checks` calls, s per call)."""
        out = os.path.join(self.tmp, f"jax_{key}_{self.threads}.npz")
        per = self.ask(op="build", key=key, step=step, state=state_path, names=names,
                       checks=checks, out=out)["per"]
        with np.load(out) as z:
            return (float(z["loss"]), {n: z[n] for n in names}), per

    def block(self, n):
        """-> (wall s, CPU s) of n calls, in the worker."""
        reply = self.ask(op="block", n=n)
        return reply["t"], reply["c"]

    def _log_tail(self):
        self.log.flush()
        self.log.seek(0)
        return "".join(self.log.readlines()[-8:])

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write('{"op": "quit"}\n')
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        self.log.close()


def worker():
    sys.path.insert(0, BENCH)
    import measure

    class _R:
        pass
    r = None
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["op"] == "quit":
                break
            if cmd["op"] == "build":
                with np.load(cmd["state"]) as z:
                    state = {k: z[k] for k in z.files}
                key, names = cmd["key"], cmd["names"]
                r = _R()
                r.step, fetch = build(key, state, names, defs.data(key), cmd["step"])
                res = [r.step() for _ in range(cmd["checks"])][-1]
                loss, arrays = fetch(res)
                np.savez(cmd["out"], loss=np.float64(loss), **arrays)
                reply = {"per": measure.warm_up(r, 2, 0.3)[2]}
            else:
                step, n = r.step, cmd["n"]
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(n):
                    step()
                reply = {"t": time.perf_counter() - t0, "c": time.process_time() - c0}
        except Exception as e:      # noqa: BLE001 (the table shows it)
            traceback.print_exc()
            reply = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:90]}"}
        print("REPLY " + json.dumps(reply), flush=True)


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    worker()
