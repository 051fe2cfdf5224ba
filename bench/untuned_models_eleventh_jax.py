"""untuned_models_eleventh.py's MADE and gMLP steps written in jax (jax.numpy, a jitted loss,
gradients and optimiser step), started from the torch model's initial parameters and data:
build(name, torch_model, data) -> step() returning the loss (ready). jax's thread count is
fixed when it starts: the runner sets PJRT_NPROC=1 and XLA_FLAGS before the first import."""
import numpy as np

NAMES = ("made", "gmlp")


def _adam(lr, b1, b2, eps, wd, decoupled):
    import jax
    import jax.numpy as jnp

    def update(params, grads, state):
        m, v, t = state
        t = t + 1
        if decoupled:       # AdamW: the decay first, on the parameter
            params = jax.tree_util.tree_map(lambda p: p * (1 - lr * wd), params)
        else:               # Adam's weight_decay: an L2 term in the gradient
            grads = jax.tree_util.tree_map(lambda g, p: g + wd * p, grads, params)
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), params, m, v)
        return params, (m, v, t)

    def init(params):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return (zeros, zeros, jnp.zeros((), jnp.float32))
    return init, update


def _made_loss(masks):
    import jax
    import jax.numpy as jnp

    def loss(params, x, which):
        h = x
        n = len(masks[0])
        for i in range(n):
            mask = jnp.where(which == 0, masks[0][i], masks[1][i])
            h = h @ (mask * params[f"net.{2 * i}.weight"]).T + params[f"net.{2 * i}.bias"]
            if i < n - 1:
                h = jax.nn.relu(h)
        # binary_cross_entropy_with_logits, summed, over the batch
        bce = jnp.maximum(h, 0) - h * x + jnp.log1p(jnp.exp(-jnp.abs(h)))
        return bce.sum() / x.shape[0]
    return loss


def _gmlp_loss(n_layers, vocab):
    import jax
    import jax.numpy as jnp

    def ln(x, w, b, eps=1e-5):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + eps) * w + b

    def loss(params, inp, target):
        x = params["embed.weight"][inp]
        for i in range(n_layers):
            p = lambda k: params[f"gmlp.model.{i}.{k}"]
            h = ln(x, p("norm.weight"), p("norm.bias"))
            h = jax.nn.gelu(h @ p("channel_proj1.weight").T + p("channel_proj1.bias"), approximate=False)
            u, v = jnp.split(h, 2, axis=-1)
            v = ln(v, p("sgu.norm.weight"), p("sgu.norm.bias"))
            v = jnp.einsum("st,btd->bsd", p("sgu.spatial_proj.weight")[:, :, 0], v) + \
                p("sgu.spatial_proj.bias")[None, :, None]
            x = (u * v) @ p("channel_proj2.weight").T + p("channel_proj2.bias") + x
        x = ln(x, params["to_logits.0.weight"], params["to_logits.0.bias"])
        logits = (x @ params["to_logits.1.weight"].T + params["to_logits.1.bias"]).reshape(-1, vocab)
        lse = jax.scipy.special.logsumexp(logits, axis=-1)
        picked = jnp.take_along_axis(logits, target.reshape(-1, 1), axis=1)[:, 0]
        return (lse - picked).mean()
    return loss


def build(name, model, data):
    import jax
    import jax.numpy as jnp
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in model.named_parameters()}
    if name == "made":
        layers = [m for m in model.net if hasattr(m, "mask")]
        masks0 = [jnp.asarray(m.mask.numpy()) for m in layers]
        model.update_masks()            # (the other ordering; the steps alternate from it)
        masks1 = [jnp.asarray(m.mask.numpy()) for m in layers]
        loss, args = _made_loss((masks0, masks1)), (jnp.asarray(data[0].numpy()),)
        opt_init, opt_update = _adam(1e-3, 0.9, 0.999, 1e-8, 1e-4, decoupled=False)
    else:
        loss = _gmlp_loss(len(model.gmlp.model), model.embed.weight.shape[0])
        args = tuple(jnp.asarray(d.numpy()) for d in data)
        opt_init, opt_update = _adam(1e-3, 0.9, 0.999, 1e-8, 1e-2, decoupled=True)

    @jax.jit
    def step(params, opt_state, *args):
        value, grads = jax.value_and_grad(loss)(params, *args)
        params, opt_state = opt_update(params, grads, opt_state)
        return value, params, opt_state

    state = {"params": params, "opt": opt_init(params), "n": 0}

    def run():
        extra = (np.int32((state["n"] + 1) % 2),) if name == "made" else ()
        value, state["params"], state["opt"] = step(state["params"], state["opt"], *args, *extra)
        state["n"] += 1
        return value.block_until_ready()
    return run
