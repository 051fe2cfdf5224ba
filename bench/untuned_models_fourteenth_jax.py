"""untuned_models_fourteenth.py's steps written in jax (jax.numpy, a jitted loss, gradients,
clipping and optimiser step), started from the torch model's initial parameters and data:
build(name, torch_model, data) -> step() returning the loss (ready). The runner sets
PJRT_NPROC=1 and XLA_FLAGS before jax's first import. Convolution, batch and layer norm and
Nesterov-free SGD's neighbours are the thirteenth set's; Adam the eleventh's. The FNet's
dropout draws from jax.random (its losses differ from torch's by the draws); the Performer's
causal linear attention is one cumsum over the sequence (what the 128-chunk loop computes
when every chunk is one token); no Tacotron (its packed bidirectional LSTM and decoder loop
are not written here)."""
import math

from untuned_models_eleventh_jax import _adam
from untuned_models_thirteenth_jax import _bn, _conv, _ln
from untuned_models_twelfth_jax import _clip, _cross_entropy

NAMES = ("performer", "fnet", "mobilenetv2", "egnn")


def _gelu(x):
    import jax
    return jax.nn.gelu(x, approximate=False)


def _performer_loss(model):
    import jax.numpy as jnp
    layers = model.performer.layers
    projs = [jnp.asarray(f.fn.fast_attention.projection_matrix.numpy()) for f, _ in layers]
    heads = layers[0][0].fn.to_q.weight.shape[0] // layers[0][0].fn.fast_attention.dim_heads

    def kernel(data, proj, is_query, eps=1e-4):
        norm = data.shape[-1] ** -0.25
        dash = jnp.einsum("bhid,jd->bhij", norm * data, proj)
        diag = (data ** 2).sum(-1, keepdims=True) / 2.0 * norm ** 2
        axes = (-1,) if is_query else (-1, -2)
        stab = jax_stop(dash.max(axis=axes, keepdims=True))
        return proj.shape[0] ** -0.5 * (jnp.exp(dash - diag - stab) + eps)

    def jax_stop(x):
        import jax
        return jax.lax.stop_gradient(x)

    def attention(p, x, proj):
        b, n, _ = x.shape
        split = lambda t: t.reshape(b, n, heads, -1).transpose(0, 2, 1, 3)
        q, k, v = (split(x @ p(f"to_{c}.weight").T) for c in "qkv")
        q, k = kernel(q, proj, True), kernel(k, proj, False)
        k_cumsum = k.cumsum(-2)
        d_inv = 1.0 / jnp.einsum("bhnd,bhnd->bhn", q, k_cumsum + 1e-6)
        context = jnp.einsum("bhnd,bhne->bhnde", k, v).cumsum(-3)
        out = jnp.einsum("bhnde,bhnd,bhn->bhne", context, q, d_inv)
        out = out.transpose(0, 2, 1, 3).reshape(b, n, -1)
        return out @ p("to_out.weight").T + p("to_out.bias")

    def loss(params, inp, target):
        x = params["token_emb.weight"][inp] + params["pos_emb.weight"][:inp.shape[1]]
        for i, proj in enumerate(projs):
            p = lambda k: params[f"performer.layers.{i}.0.fn.{k}"]
            x = x + attention(p, _ln(x, params, f"performer.layers.{i}.0.norm"), proj)
            f = lambda k: params[f"performer.layers.{i}.1.fn.{k}"]
            h = _ln(x, params, f"performer.layers.{i}.1.norm")
            h = _gelu(h @ f("0.weight").T + f("0.bias"))
            x = x + h @ f("3.weight").T + f("3.bias")
        logits = _ln(x, params, "norm") @ params["to_out.weight"].T + params["to_out.bias"]
        return _cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    return loss


def _fnet_loss(model):
    import jax
    import jax.numpy as jnp
    depth = len(model.fnet.layers)

    def dropout(key, x, p=0.1):
        return jnp.where(jax.random.bernoulli(key, 1 - p, x.shape), x / (1 - p), 0.0)

    def loss(params, key, tokens, labels):
        keys = jax.random.split(key, 1 + 2 * depth)
        x = dropout(keys[0], params["emb.weight"][tokens] + params["pos"])
        for i in range(depth):
            p = lambda k: params[f"fnet.layers.{i}.{k}"]
            h = _ln(x, params, f"fnet.layers.{i}.0.norm")
            x = x + jnp.fft.fft(jnp.fft.fft(h, axis=-1), axis=-2).real
            h = _ln(x, params, f"fnet.layers.{i}.1.norm")
            h = dropout(keys[1 + 2 * i], _gelu(h @ p("1.fn.net.0.weight").T + p("1.fn.net.0.bias")))
            x = x + dropout(keys[2 + 2 * i], h @ p("1.fn.net.3.weight").T + p("1.fn.net.3.bias"))
        h = _ln(x.mean(1), params, "head.0")
        return _cross_entropy(h @ params["head.1.weight"].T + params["head.1.bias"], labels)
    return loss


def _mobilenetv2_loss(model):
    import jax.numpy as jnp
    plan = []       # (prefix, stride, padding, groups, bn prefix, relu6) per conv, per feature
    for i, f in enumerate(model.features):
        seq = f.conv if hasattr(f, "conv") else f
        pre = f"features.{i}.conv." if hasattr(f, "conv") else f"features.{i}."
        convs = []
        for j, m in enumerate(seq):
            if type(m).__name__ == "Conv2d":
                relu = j + 2 < len(seq) and type(seq[j + 2]).__name__ == "ReLU6"
                convs.append((f"{pre}{j}.weight", m.stride[0], m.padding[0], m.groups, f"{pre}{j + 1}", relu))
        plan.append((convs, getattr(f, "use_res_connect", False)))

    def loss(params, images, labels):
        x = images
        for convs, res in plan:
            h = x
            for w, stride, pad, groups, bn, relu in convs:
                h = _bn(_conv(h, params[w], stride, pad, groups), params[bn + ".weight"], params[bn + ".bias"])
                h = jnp.clip(h, 0.0, 6.0) if relu else h
            x = x + h if res else h
        logits = x.mean((2, 3)) @ params["classifier.weight"].T + params["classifier.bias"]
        return _cross_entropy(logits, labels)
    return loss


def _egnn_loss(model):
    import jax
    import jax.numpy as jnp
    n_layers = model.n_layers
    silu = jax.nn.silu

    def lin(params, name, x, bias=True):
        y = x @ params[name + ".weight"].T
        return y + params[name + ".bias"] if bias else y

    def loss(params, nodes, loc, rows, cols, edge_attr, loc_end):
        n = nodes.shape[0]
        h, x = lin(params, "embedding_in", nodes), loc
        count = jax.ops.segment_sum(jnp.ones((rows.shape[0], 3)), rows, n)
        for i in range(n_layers):
            p = lambda k, b=True, v=None: lin(params, f"gcl_{i}.{k}", v, b)
            diff = x[rows] - x[cols]
            radial = (diff ** 2).sum(1, keepdims=True)
            diff = diff / (jax.lax.stop_gradient(jnp.sqrt(radial)) + 1e-8)
            e = jnp.concatenate([h[rows], h[cols], radial, edge_attr], 1)
            e = silu(p("edge_mlp.2", v=silu(p("edge_mlp.0", v=e))))
            e = e * jax.nn.sigmoid(p("att_mlp.0", v=e))
            trans = diff * p("coord_mlp.2", False, silu(p("coord_mlp.0", v=e)))
            x = x + jax.ops.segment_sum(trans, rows, n) / jnp.maximum(count, 1)
            agg = jnp.concatenate([h, jax.ops.segment_sum(e, rows, n)], 1)
            h = h + p("node_mlp.2", v=silu(p("node_mlp.0", v=agg)))
        return ((x - loc_end) ** 2).mean()
    return loss


def _sgd_momentum(lr, momentum, wd):
    import jax
    import jax.numpy as jnp
    tm = jax.tree_util.tree_map

    def update(params, grads, buf):
        grads = tm(lambda g, p: g + wd * p, grads, params)
        buf = tm(lambda b, g: momentum * b + g, buf, grads)
        return tm(lambda p, b: p - lr * b, params, buf), buf
    return (lambda params: tm(jnp.zeros_like, params)), update


# name -> (loss maker, optimiser, clip norm or None, whether the loss takes a dropout key)
_SETUP = {
    "performer": (_performer_loss, lambda: _adam(1e-4, 0.9, 0.999, 1e-8, 0.0, decoupled=False), 0.5, False),
    "fnet": (_fnet_loss, lambda: _adam(1e-3, 0.9, 0.999, 1e-8, 1e-2, decoupled=True), None, True),
    "mobilenetv2": (_mobilenetv2_loss, lambda: _sgd_momentum(0.045, 0.9, 4e-5), None, False),
    "egnn": (_egnn_loss, lambda: _adam(5e-4, 0.9, 0.999, 1e-8, 1e-12, decoupled=False), None, False),
}


def build(name, model, data):
    import jax
    import jax.numpy as jnp
    make_loss, make_opt, clip, keyed = _SETUP[name]
    loss = make_loss(model)
    opt_init, opt_update = make_opt()
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in model.named_parameters()}
    args = tuple(jnp.asarray(d.numpy()) for d in data)

    @jax.jit
    def step(params, opt_state, key, *args):
        key, sub = jax.random.split(key)
        value, grads = jax.value_and_grad(loss)(params, *((sub,) if keyed else ()), *args)
        if clip is not None:
            grads = _clip(grads, clip)
        params, opt_state = opt_update(params, grads, opt_state)
        return value, params, opt_state, key

    state = {"params": params, "opt": opt_init(params), "key": jax.random.PRNGKey(0)}

    def run():
        value, state["params"], state["opt"], state["key"] = step(
            state["params"], state["opt"], state["key"], *args)
        return value.block_until_ready()
    return run
