"""untuned_models_twelfth.py's five steps written in jax (jax.numpy, a jitted loss, gradients,
clipping and optimiser step), started from the torch model's initial parameters and data:
build(name, torch_model, data) -> step() returning the loss (ready). The runner sets
PJRT_NPROC=1 and XLA_FLAGS before jax's first import. Adam is untuned_models_eleventh_jax's."""
import math

import numpy as np

from untuned_models_eleventh_jax import _adam

NAMES = ("llama", "convlstm", "siren", "memn2n", "hwlstm")


def _sgd(lr):
    import jax

    def update(params, grads, state):
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), state
    return (lambda params: ()), update


def _rmsprop(lr, alpha=0.99, eps=1e-8):
    import jax
    import jax.numpy as jnp

    def update(params, grads, sq):
        sq = jax.tree_util.tree_map(lambda s, g: alpha * s + (1 - alpha) * g * g, sq, grads)
        params = jax.tree_util.tree_map(lambda p, g, s: p - lr * g / (jnp.sqrt(s) + eps),
                                        params, grads, sq)
        return params, sq
    return (lambda params: jax.tree_util.tree_map(jnp.zeros_like, params)), update


def _clip(grads, max_norm):
    """torch.nn.utils.clip_grad_norm_."""
    import jax
    import jax.numpy as jnp
    total = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grads)))
    coef = jnp.minimum(max_norm / (total + 1e-6), 1.0)
    return jax.tree_util.tree_map(lambda g: g * coef, grads)


def _cross_entropy(logits, target):
    import jax
    import jax.numpy as jnp
    lse = jax.scipy.special.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, target.reshape(-1, 1), axis=1)[:, 0]
    return (lse - picked).mean()


def _rms(x, w):
    import jax
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w


def _llama_loss(model):
    import jax
    import jax.numpy as jnp
    cos, sin = (jnp.asarray(b.numpy()) for b in (model.cos_cached, model.sin_cached))
    n_layers, d = len(model.layers), cos.shape[-1]

    def loss(params, inp, target):
        h = params["tok_embeddings.weight"][inp]
        B, T, C = h.shape
        heads = lambda t: t.reshape(B, T, C // d, d).transpose(0, 2, 1, 3)
        rope = lambda t: t * cos + jnp.concatenate([-t[..., d // 2:], t[..., :d // 2]], -1) * sin
        for i in range(n_layers):
            p = lambda k: params[f"layers.{i}.{k}"]
            x = _rms(h, p("attention_norm.weight"))
            q, k, v = (heads(x @ p(f"attention.{w}.weight").T) for w in ("wq", "wk", "wv"))
            s = rope(q) @ rope(k).swapaxes(-1, -2) / math.sqrt(d)
            s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -jnp.inf)
            a = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
            h = h + a @ p("attention.wo.weight").T
            x = _rms(h, p("ffn_norm.weight"))
            ff = jax.nn.silu(x @ p("feed_forward.w1.weight").T) * (x @ p("feed_forward.w3.weight").T)
            h = h + ff @ p("feed_forward.w2.weight").T
        logits = _rms(h, params["norm.weight"]) @ params["output.weight"].T
        return _cross_entropy(logits.reshape(B * T, -1), target.reshape(-1))
    return loss


def _convlstm_loss(model):
    import jax
    import jax.numpy as jnp
    n_layers = len(model.convlstm.cell_list)

    def conv(x, w, b):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + b[None, :, None, None]

    def loss(params, inputs, targets):
        B, T, _, H, W = inputs.shape
        layer_in = [inputs[:, t] for t in range(T)]
        for i in range(n_layers):
            w, b = params[f"convlstm.cell_list.{i}.conv.weight"], params[f"convlstm.cell_list.{i}.conv.bias"]
            hid = w.shape[0] // 4
            h = c = jnp.zeros((B, hid, H, W), inputs.dtype)
            outs = []
            for x in layer_in:
                g = conv(jnp.concatenate([x, h], 1), w, b)
                i_, f, o, gg = jnp.split(g, 4, axis=1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i_) * jnp.tanh(gg)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
                outs.append(h)
            layer_in = outs
        z = conv(jnp.stack(layer_in, 1).reshape(B * T, -1, H, W), params["head.weight"],
                 params["head.bias"]).reshape(targets.shape)
        return (jnp.maximum(z, 0) - z * targets + jnp.log1p(jnp.exp(-jnp.abs(z)))).mean()
    return loss


def _siren_loss(model):
    import jax
    import jax.numpy as jnp
    n_sine = len(model.net) - 1

    def net(params, c):
        h = c
        for i in range(n_sine):
            h = jnp.sin(30 * (h @ params[f"net.{i}.linear.weight"].T + params[f"net.{i}.linear.bias"]))
        return (h @ params[f"net.{n_sine}.weight"].T + params[f"net.{n_sine}.bias"])[0]

    def loss(params, coords, gt_grads):
        g = jax.vmap(jax.grad(net, argnums=1), (None, 0))(params, coords[0])
        return ((g - gt_grads[0]) ** 2).sum(-1).mean()
    return loss


def _memn2n_loss(model):
    import jax
    import jax.numpy as jnp
    enc = jnp.asarray(model.encoding.numpy())
    hops = len(model.C) - 1

    def loss(params, story, query, answer):
        # (padding_idx=0: no gradient through a lookup of row 0)
        look = lambda k, idx: params[f"C.{k}.weight"].at[0].set(
            jax.lax.stop_gradient(params[f"C.{k}.weight"][0]))[idx]
        u = (look(0, query) * enc).sum(1)
        for hop in range(hops):
            m_a = (look(hop, story) * enc).sum(2) + params["TA"]
            m_c = (look(hop + 1, story) * enc).sum(2) + params["TC"]
            prob = jax.nn.softmax(jnp.einsum("bme,be->bm", m_a, u), -1)
            u = u + jnp.einsum("bm,bme->be", prob, m_c)
        return _cross_entropy(u @ params[f"C.{hops}.weight"].T, answer)
    return loss


def _hwlstm_loss(model):
    import jax
    import jax.numpy as jnp
    n_highway = model.highway.num_layers

    def loss(params, inp, target):
        p = params
        e = p["embed.weight"][inp]
        B, T, _ = e.shape
        hid = p["cell.U.weight"].shape[1]

        def cell(state, x):
            h, c = state
            g = x @ p["cell.W.weight"].T + p["cell.W.bias"] + h @ p["cell.U.weight"].T
            i, f, gg, o = jnp.split(g, 4, axis=1)
            i = jax.nn.sigmoid(i + p["cell.w_ci"] * c)
            f = jax.nn.sigmoid(f + p["cell.w_cf"] * c)
            c = f * c + i * jnp.tanh(gg)
            h = jax.nn.sigmoid(o + p["cell.w_co"] * c) * jnp.tanh(c)
            return (h, c), h
        zeros = jnp.zeros((B, hid), e.dtype)
        _, hs = jax.lax.scan(cell, (zeros, zeros), e.transpose(1, 0, 2))
        x = hs.transpose(1, 0, 2)
        for i in range(n_highway):
            lin = lambda k: x @ p[f"highway.{k}.{i}.weight"].T + p[f"highway.{k}.{i}.bias"]
            gate = jax.nn.sigmoid(lin("gate"))
            x = gate * jax.nn.relu(lin("nonlinear")) + (1 - gate) * lin("linear")
        logits = x @ p["out.weight"].T + p["out.bias"]
        return _cross_entropy(logits.reshape(B * T, -1), target.reshape(-1))
    return loss


# name -> (loss maker, optimiser, clip norm or None): as the torch step's
_SETUP = {
    "llama": (_llama_loss, lambda: _adam(3e-4, 0.9, 0.95, 1e-8, 0.1, decoupled=True), 1.0),
    "convlstm": (_convlstm_loss, lambda: _adam(1e-3, 0.9, 0.999, 1e-8, 0.0, decoupled=False), None),
    "siren": (_siren_loss, lambda: _adam(1e-4, 0.9, 0.999, 1e-8, 0.0, decoupled=False), None),
    "memn2n": (_memn2n_loss, lambda: _sgd(0.01), 40.0),
    "hwlstm": (_hwlstm_loss, lambda: _rmsprop(2e-3), 5.0),
}


def build(name, model, data):
    import jax
    import jax.numpy as jnp
    make_loss, make_opt, clip = _SETUP[name]
    loss = make_loss(model)
    opt_init, opt_update = make_opt()
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in model.named_parameters()}
    args = tuple(jnp.asarray(d.numpy()) for d in data)

    @jax.jit
    def step(params, opt_state, *args):
        value, grads = jax.value_and_grad(loss)(params, *args)
        if clip is not None:
            grads = _clip(grads, clip)
        params, opt_state = opt_update(params, grads, opt_state)
        return value, params, opt_state

    state = {"params": params, "opt": opt_init(params)}

    def run():
        value, state["params"], state["opt"] = step(state["params"], state["opt"], *args)
        return value.block_until_ready()
    return run
